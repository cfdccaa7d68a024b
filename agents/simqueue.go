package agents

import (
	"bytes"

	"github.com/google/uuid"
)

// minHeap is a binary min-heap ordered by less. Entries with equal keys
// must not exist (every key used here ends in a uid), so the order in which
// entries leave is fixed by the keys alone, whatever the order they came in.
type minHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *minHeap[T]) Len() int { return len(h.items) }

// Peek returns the least entry; the heap must not be empty.
func (h *minHeap[T]) Peek() T { return h.items[0] }

func (h *minHeap[T]) Push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// Pop removes and returns the least entry; the heap must not be empty.
func (h *minHeap[T]) Pop() T {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	return top
}

// Filter keeps the entries keep accepts and restores the heap order.
func (h *minHeap[T]) Filter(keep func(T) bool) {
	kept := h.items[:0]
	for _, x := range h.items {
		if keep(x) {
			kept = append(kept, x)
		}
	}
	var zero T
	for i := len(kept); i < len(h.items); i++ {
		h.items[i] = zero
	}
	h.items = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *minHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *minHeap[T]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			m = r
		}
		if !h.less(h.items[m], h.items[i]) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// finishEntry is a tracked task's finish time in the finish queue. gen
// names the placement it was queued for: an entry whose task is no longer
// tracked at that placement is stale and skipped.
type finishEntry struct {
	at  int64 // Unix nanoseconds
	uid uuid.UUID
	gen uint64
}

func finishLess(a, b finishEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if c := bytes.Compare(a.uid[:], b.uid[:]); c != 0 {
		return c < 0
	}
	return a.gen < b.gen
}

// repairEntry is a failed machine's repair in the repair queue. version is
// the machine version the fleet's DOWN write gave it: if the machine moved
// on since, the repair is no longer the fleet's to make.
type repairEntry struct {
	at      int64 // Unix nanoseconds
	machine uuid.UUID
	version uint64
}

func repairLess(a, b repairEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if c := bytes.Compare(a.machine[:], b.machine[:]); c != 0 {
		return c < 0
	}
	return a.version < b.version
}

// uidSet is a set of uids with O(1) add, remove and pick-by-index. The
// order of its slice depends only on the sequence of adds and removes, so a
// seeded pick is reproducible from the same history.
type uidSet struct {
	items []uuid.UUID
	index map[uuid.UUID]int
}

func newUIDSet() uidSet { return uidSet{index: map[uuid.UUID]int{}} }

func (s *uidSet) Len() int { return len(s.items) }

func (s *uidSet) Has(u uuid.UUID) bool {
	_, ok := s.index[u]
	return ok
}

func (s *uidSet) Add(u uuid.UUID) {
	if _, ok := s.index[u]; ok {
		return
	}
	s.index[u] = len(s.items)
	s.items = append(s.items, u)
}

func (s *uidSet) Remove(u uuid.UUID) {
	i, ok := s.index[u]
	if !ok {
		return
	}
	last := len(s.items) - 1
	if i != last {
		s.items[i] = s.items[last]
		s.index[s.items[i]] = i
	}
	s.items = s.items[:last]
	delete(s.index, u)
}

func (s *uidSet) At(i int) uuid.UUID { return s.items[i] }

func compareUIDs(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }
