package agents

import (
	"slices"
	"time"

	"github.com/omega-cell/omega/internal/minheap"
)

// finishQueue orders the simulated fleet's task finishes by (time, task,
// placement), as a min-heap would, for a million queued finishes at a
// fraction of a heap's cost. A heap of a million entries takes some twenty
// levels of random memory per push and pop, and every task goes through it
// once; most finishes are near (a batch task runs for minutes), so those in
// the next finishSlots seconds wait in a ring of one-second buckets instead,
// appended to as they come and sorted when their second comes due. The
// others (service tasks that run for hours) wait in a heap and move into
// the ring as it comes within reach of them: each entry goes through the
// heap at most once, and only the far ones do.
//
// The ring's window starts at the first popDue's time: until then every
// entry waits in the heap. An entry due before the window (queued for a
// time already past) goes into its first bucket and leaves at the next
// popDue, first among those due, as a heap would hand it out.
type finishQueue struct {
	ring    [][]finishEntry
	sorted  []bool // whether ring[i] is in finishLess order
	head    int    // ring[head] is the bucket of second base
	off     int    // ring[head][:off] has left
	base    int64  // the second (Unix nanoseconds / finishSlot) of ring[head]
	started bool
	inRing  int // entries in the ring, not counting those that left
	far     minheap.Heap[finishEntry]
}

const (
	finishSlot  = int64(time.Second)
	finishSlots = 4096 // a window of 68 minutes
	// keepBucket is the largest bucket whose array is kept for the second
	// it will hold next: larger ones would each stay at the largest second
	// their slot ever held (28 MB on a day of 10,000 machines).
	keepBucket = 32
)

func newFinishQueue() *finishQueue {
	return &finishQueue{
		ring:   make([][]finishEntry, finishSlots),
		sorted: make([]bool, finishSlots),
		far:    minheap.New(finishLess),
	}
}

func slotOf(at int64) int64 {
	s := at / finishSlot
	if at%finishSlot < 0 {
		s--
	}
	return s
}

func finishCmp(a, b finishEntry) int {
	switch {
	case finishLess(a, b):
		return -1
	case finishLess(b, a):
		return 1
	}
	return 0
}

// Len is how many entries are queued.
func (q *finishQueue) Len() int { return q.inRing + q.far.Len() }

// Push queues e.
func (q *finishQueue) Push(e finishEntry) {
	if !q.started || slotOf(e.at) >= q.base+finishSlots {
		q.far.Push(e)
		return
	}
	q.place(e)
}

// place puts e, which is within the window or before it, in its bucket.
func (q *finishQueue) place(e finishEntry) {
	d := max(slotOf(e.at)-q.base, 0)
	i := (q.head + int(d)) % finishSlots
	q.ring[i] = append(q.ring[i], e)
	q.sorted[i] = false
	q.inRing++
}

// start opens the window at second s.
func (q *finishQueue) start(s int64) {
	q.started, q.base = true, s
	q.pull()
}

// pull moves the heap's entries that the window now reaches into the ring.
func (q *finishQueue) pull() {
	for q.far.Len() > 0 && slotOf(q.far.Peek().at) < q.base+finishSlots {
		q.place(q.far.Pop())
	}
}

// sortBucket puts ring[i] (the part of the head bucket not left) in order.
func (q *finishQueue) sortBucket(i int) {
	if q.sorted[i] {
		return
	}
	b := q.ring[i]
	if i == q.head {
		b = b[q.off:]
	}
	slices.SortFunc(b, finishCmp)
	q.sorted[i] = true
}

// advance moves the window on by one second; the head bucket must be
// empty. With the ring empty it jumps to second to at once.
func (q *finishQueue) advance(to int64) {
	if b := q.ring[q.head]; cap(b) <= keepBucket {
		q.ring[q.head] = b[:0]
	} else {
		q.ring[q.head] = nil // a job's thousand tasks that end in one second: not kept for the next
	}
	q.sorted[q.head], q.off = false, 0
	if q.inRing == 0 {
		q.base = to
	} else {
		q.head = (q.head + 1) % finishSlots
		q.base++
	}
	q.pull()
}

// popDue removes and returns the least entry if it is due at now (at <=
// now).
func (q *finishQueue) popDue(now int64) (finishEntry, bool) {
	ns := slotOf(now)
	if !q.started {
		q.start(ns)
	}
	for {
		if b := q.ring[q.head]; q.off < len(b) {
			q.sortBucket(q.head)
			if e := b[q.off]; e.at <= now {
				q.off++
				q.inRing--
				return e, true
			}
			return finishEntry{}, false // the rest of this second is after now
		}
		if q.base >= ns {
			return finishEntry{}, false
		}
		q.advance(ns)
	}
}

// first returns the least entry that live accepts. The entries it rejects
// on the way may be dropped (those of the heap are: it cannot skip them).
func (q *finishQueue) first(live func(finishEntry) bool) (finishEntry, bool) {
	if q.started && q.inRing > 0 {
		for k := range finishSlots {
			i := (q.head + k) % finishSlots
			b := q.ring[i]
			if i == q.head {
				b = b[q.off:]
			}
			if len(b) == 0 {
				continue
			}
			q.sortBucket(i)
			for _, e := range b {
				if live(e) {
					return e, true
				}
			}
		}
	}
	// The heap's entries are all after the ring's: they wait beyond it.
	for q.far.Len() > 0 {
		if e := q.far.Peek(); live(e) {
			return e, true
		}
		q.far.Pop()
	}
	return finishEntry{}, false
}

// Filter keeps the entries keep accepts.
func (q *finishQueue) Filter(keep func(finishEntry) bool) {
	for i := range q.ring {
		b := q.ring[i]
		if i == q.head {
			b = b[q.off:]
		}
		kept := q.ring[i][:0]
		for _, e := range b {
			if keep(e) {
				kept = append(kept, e)
			}
		}
		clear(q.ring[i][len(kept):])
		q.inRing -= len(b) - len(kept)
		q.ring[i] = kept // order kept: sorted stays as it was
	}
	q.off = 0
	q.far.Filter(keep)
}
