package schedulers

import (
	"bytes"
	"slices"

	"github.com/google/uuid"
)

// Pick chooses which of the named instances of one kind takes a job:
// rendezvous (highest random weight) hashing of the job id with each name
// — the paper shares a kind's load by hashing job ids — so the choice
// needs no coordination, depends only on the set of names, and when an
// instance joins or leaves only the jobs it gains or loses move. names
// must not be empty.
func Pick(job uuid.UUID, names []string) int {
	best, bestW := 0, uint64(0)
	for i, n := range names {
		// FNV-1a over the job id and the name, then a 64-bit finaliser
		// (splitmix64's) so that near names weigh independently.
		h := uint64(14695981039346656037)
		for _, b := range job {
			h = (h ^ uint64(b)) * 1099511628211
		}
		for k := 0; k < len(n); k++ {
			h = (h ^ uint64(n[k])) * 1099511628211
		}
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
		if i == 0 || h > bestW {
			best, bestW = i, h
		}
	}
	return best
}

func sortedUIDs(m map[uuid.UUID]struct{}) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// jobQueue orders queued jobs by ready time, then submission order.
type jobQueue []*jobState

func (q jobQueue) Len() int { return len(q) }
func (q jobQueue) Less(i, k int) bool {
	if !q[i].readyAt.Equal(q[k].readyAt) {
		return q[i].readyAt.Before(q[k].readyAt)
	}
	return q[i].seq < q[k].seq
}
func (q jobQueue) Swap(i, k int) {
	q[i], q[k] = q[k], q[i]
	q[i].queueIndex, q[k].queueIndex = i, k
}
func (q *jobQueue) Push(x any) {
	j := x.(*jobState)
	j.queueIndex = len(*q)
	*q = append(*q, j)
}
func (q *jobQueue) Pop() any {
	old := *q
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return j
}
