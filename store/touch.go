package store

import (
	"bytes"
	"slices"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/txn"
)

// The objects changed since the last checkpoint, and their order: what a
// checkpoint writes (encodeCheckpoint, checkpoint.go).

// touch is one object a published revision changed (not only in fields
// the store derives): what the next checkpoint must write.
type touch struct {
	kind    byte   // prefixMachine, prefixJob, prefixLease, prefixOffer, prefixQuota or prefixTask
	created bool   // the change created it
	seq     uint32 // its place in the list: ties sort in revision order
	uid     uuid.UUID
}

// compareTouches orders touches by kind, then uid, then seq: the order a
// checkpoint writes them in (each object's touches together, the last one
// last).
func compareTouches(a, b touch) int {
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	if c := bytes.Compare(a.uid[:], b.uid[:]); c != 0 {
		return c
	}
	return int(a.seq) - int(b.seq)
}

// sortTouches sorts ts by compareTouches, in place: an American flag sort
// (a counting pass, then elements swapped into their buckets) by kind and
// the uid's first byte, the same within each bucket by the second byte (a
// bucket of a checkpoint's millions of touches fits in the cache, so its
// swaps do not miss), then each of those by comparison. The uids are
// random, so that leaves a few dozen touches to sort by comparison at the
// end. counts is scratch, returned for reuse. A list with a kind other
// than the six objects' (there is none) is sorted by comparison.
func sortTouches(ts []touch, counts []int32) []int32 {
	for i := range ts {
		if touchRank(ts[i].kind) < 0 {
			slices.SortFunc(ts, compareTouches)
			return counts
		}
	}
	const first = 6 * 256
	if cap(counts) < 2*(first+1) {
		counts = make([]int32, 2*(first+1))
	}
	counts = counts[:2*(first+1)]
	flagSort(ts, counts[:first+1], counts[first+1:], func(t *touch) int { return touchRank(t.kind)<<8 | int(t.uid[0]) })
	outer := slices.Clone(counts[:first+1])
	for b := range first {
		part := ts[outer[b]:outer[b+1]]
		if len(part) <= 16 {
			insertionSortTouches(part)
			continue
		}
		flagSort(part, counts[:257], counts[257:514], func(t *touch) int { return int(t.uid[1]) })
		for c := range 256 {
			if p := part[counts[c]:counts[c+1]]; len(p) <= 16 {
				insertionSortTouches(p)
			} else {
				slices.SortFunc(p, compareTouches)
			}
		}
	}
	return counts
}

// touchRank orders the kinds as their prefix bytes do (-1: not an object's).
func touchRank(k byte) int {
	switch k {
	case prefixJob:
		return 0
	case prefixLease:
		return 1
	case prefixMachine:
		return 2
	case prefixOffer:
		return 3
	case prefixQuota:
		return 4
	case prefixTask:
		return 5
	}
	return -1
}

// flagSort puts ts in order of bucket (0 to len(start)-2), in place, and
// leaves start[b] the first index of bucket b (start[len-1] = len(ts));
// next is scratch of the same length.
func flagSort(ts []touch, start, next []int32, bucket func(*touch) int) {
	n := len(start) - 1
	clear(start)
	for i := range ts {
		start[bucket(&ts[i])+1]++
	}
	for b := 1; b <= n; b++ {
		start[b] += start[b-1]
	}
	copy(next, start[:n])
	for b := 0; b < n; b++ {
		for next[b] < start[b+1] {
			i := next[b]
			c := bucket(&ts[i])
			if c == b {
				next[b]++
				continue
			}
			j := next[c]
			ts[i], ts[j] = ts[j], ts[i]
			next[c]++
		}
	}
}

func insertionSortTouches(ts []touch) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && compareTouches(ts[j], ts[j-1]) < 0; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// touchList is the touches since the last checkpoint began, in blocks of
// up to touchBlock: it grows by what it holds, with no doubling copy and
// no list presized beside the one a checkpoint is writing.
type touchList struct {
	blocks [][]touch
	n      int
}

const touchBlock = 1 << 16 // 1.5 MiB of touches

// add appends the objects ws changes.
func (l *touchList) add(ws *txn.WriteSet) {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Derived {
			continue
		}
		t := touch{created: c.Created, seq: uint32(l.n), uid: c.UID()}
		switch {
		case c.Task != nil:
			t.kind = prefixTask
		case c.Job != nil:
			t.kind = prefixJob
		case c.Offer != nil:
			t.kind = prefixOffer
		case c.Quota != nil:
			t.kind = prefixQuota
		case c.Lease != nil:
			t.kind = prefixLease
		default:
			t.kind = prefixMachine
		}
		last := len(l.blocks) - 1
		if last < 0 || len(l.blocks[last]) == cap(l.blocks[last]) {
			// The first blocks double from 1,024 (a small store holds
			// little), then each is touchBlock.
			size := 1024
			if last >= 0 {
				size = min(touchBlock, 2*cap(l.blocks[last]))
			}
			l.blocks = append(l.blocks, make([]touch, 0, size))
			last++
		}
		l.blocks[last] = append(l.blocks[last], t)
		l.n++
	}
}

// flat returns the touches in one slice, in order (the caller drops the
// list, whose blocks then go).
func (l *touchList) flat() []touch {
	ts := make([]touch, 0, l.n)
	for _, b := range l.blocks {
		ts = append(ts, b...)
	}
	return ts
}
