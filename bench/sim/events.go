package sim

import (
	"container/heap"
	"time"
)

// eventKind orders simultaneous events: at one instant, arrivals are queued
// before commits land, commits before the fleet reports, and wakes last, so
// a scheduler freed at t sees everything else that happened at t.
type eventKind int

const (
	evArrival eventKind = iota
	evCommit
	evFleetTick
	evExpire
	evSample
	evWake
)

type event struct {
	at     time.Time
	kind   eventKind
	seq    uint64 // insertion order breaks remaining ties: deterministic
	runner int
	data   any
}

// queue is the engine's single event queue, ordered by (time, kind, seq).
type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

var _ heap.Interface = (*queue)(nil)
