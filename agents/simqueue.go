package agents

import (
	"bytes"

	"github.com/google/uuid"
)

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
