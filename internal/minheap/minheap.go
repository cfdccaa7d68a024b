// Package minheap is a typed binary min-heap, for the simulation's queues
// of timed events (the fleet's finishes and repairs, the replay's ends).
package minheap

// New returns an empty heap ordered by less.
func New[T any](less func(a, b T) bool) Heap[T] { return Heap[T]{less: less} }

// Heap is a binary min-heap ordered by less, typed (no boxing: a push or a
// pop allocates nothing once the slice has grown). Entries that neither is
// less than the other leave in no set order: for a deterministic order,
// give every entry a distinct key (or make such entries identical).
type Heap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *Heap[T]) Len() int { return len(h.items) }

// Peek returns the least entry; the heap must not be empty.
func (h *Heap[T]) Peek() T { return h.items[0] }

func (h *Heap[T]) Push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// Pop removes and returns the least entry; the heap must not be empty.
func (h *Heap[T]) Pop() T {
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
func (h *Heap[T]) Filter(keep func(T) bool) {
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

func (h *Heap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *Heap[T]) down(i int) {
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

// Items are the entries in the heap's own order (not sorted), for a look
// over them all; the caller must not change the slice.
func (h *Heap[T]) Items() []T { return h.items }
