package alibaba2018

import (
	"github.com/omega-cell/omega/bench/trace"
	"github.com/omega-cell/omega/internal/minheap"
)

// ends holds the ends still to come, earliest first, then in the order
// they were queued. The trace's times are whole seconds and many ends
// share one, so it is a calendar: a FIFO of events per time, and a min-heap
// of the times that have one (a heap of every end was a fifth of the
// reader's time; a heap of whole events, boxed, a third).
type ends struct {
	times  minheap.Heap[int64] // each once
	byTime map[int64]*endBucket
	spare  []*endBucket
	n      int
}

type endBucket struct {
	evs  []trace.Event
	head int
}

func (h *ends) len() int { return h.n }

// first is the time of the earliest end (len must be above 0).
func (h *ends) first() int64 { return h.times.Peek() }

// push queues e after the ends queued before it.
func (h *ends) push(e trace.Event) {
	if h.byTime == nil {
		h.byTime, h.times = map[int64]*endBucket{}, minheap.New(func(a, b int64) bool { return a < b })
	}
	b := h.byTime[e.Time]
	if b == nil {
		if n := len(h.spare); n > 0 {
			b, h.spare = h.spare[n-1], h.spare[:n-1]
		} else {
			b = &endBucket{}
		}
		h.byTime[e.Time] = b
		h.times.Push(e.Time)
	}
	b.evs = append(b.evs, e)
	h.n++
}

// pop takes the earliest end (len must be above 0).
func (h *ends) pop() trace.Event {
	t := h.times.Peek()
	b := h.byTime[t]
	e := b.evs[b.head]
	b.evs[b.head] = trace.Event{}
	b.head++
	h.n--
	if b.head == len(b.evs) {
		b.evs, b.head = b.evs[:0], 0
		h.spare = append(h.spare, b)
		delete(h.byTime, t)
		h.times.Pop()
	}
	return e
}
