package vtime

import "time"

// entry is an actor's place in the queue. Each actor has at most one
// current entry: one with the seq its slot holds; others are stale.
type entry struct {
	at    time.Time
	phase Phase
	seq   uint64 // scheduling order breaks remaining ties: deterministic
	slot  int
}

func (a entry) less(b entry) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	return a.seq < b.seq
}

// queue is the engine's single event queue, a binary min-heap of entries
// by (time, phase, seq).
type queue struct{ items []entry }

func (q *queue) Len() int { return len(q.items) }

func (q *queue) push(x entry) {
	q.items = append(q.items, x)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.items[i].less(q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *queue) pop() entry {
	top := q.items[0]
	n := len(q.items) - 1
	q.items[0] = q.items[n]
	q.items = q.items[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.items[r].less(q.items[l]) {
			m = r
		}
		if !q.items[m].less(q.items[i]) {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}
