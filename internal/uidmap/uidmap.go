// Package uidmap is a hash map keyed by uuid.UUID for the large per-object
// maps of the cell's components (a job controller's live tasks, a tracker's
// placements): open addressing with linear probing, keys and values inline
// in one array, and a hash that is a multiply of the key's two halves.
//
// A lookup in a map of a few hundred thousand uids is a cache miss whatever
// the map; Go's built-in map adds a hash of the 16 bytes, a directory, and a
// group whose control word and slot may sit in different cache lines. Here
// a lookup reads the slot its hash names and, rarely, the next few: usually
// one line. The order of Range depends only on the map's history (New's
// size, the Sets, Deletes and Clears; no random seed), so code that ranges
// is deterministic. The hash has no seed either: a client that chose its
// uids to collide could make the probes long, as it could make the
// persistent trie's collision nodes long.
//
// A Map is not safe for concurrent use. The zero Map is empty and ready.
package uidmap

import (
	"encoding/binary"
	"math/bits"

	"github.com/google/uuid"
)

type slot[V any] struct {
	key uuid.UUID // uuid.Nil: empty (the nil key itself is kept apart)
	val V
}

// Map is a map from uuid.UUID to V.
type Map[V any] struct {
	slots  []slot[V] // len a power of two, or 0
	shift  uint      // 64 - log2(len(slots))
	n      int       // keys in slots
	hasNil bool
	nilVal V
}

// minSlots is the table's smallest size once it has a key.
const minSlots = 16

// New returns a map with room for n keys before it grows.
func New[V any](n int) *Map[V] {
	m := &Map[V]{}
	if n > 0 {
		m.resize(slotsFor(n))
	}
	return m
}

// slotsFor is the table size that holds n keys at a load of at most 3/4.
func slotsFor(n int) int {
	want := n + n/3 + 1
	if want < minSlots {
		return minSlots
	}
	return 1 << bits.Len(uint(want-1))
}

// hash spreads a key over 64 bits: both halves count (a client may make
// uids that differ only in their last bytes), and the top bits, which pick
// the slot, come out of a multiply by an odd constant (Fibonacci hashing).
func hash(k uuid.UUID) uint64 {
	x := binary.LittleEndian.Uint64(k[:8]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(k[8:]), 29)
	return x * 0x9e3779b97f4a7c15
}

// Len returns the number of keys.
func (m *Map[V]) Len() int {
	if m.hasNil {
		return m.n + 1
	}
	return m.n
}

// Get returns the value under k and whether k is present.
func (m *Map[V]) Get(k uuid.UUID) (V, bool) {
	if k == uuid.Nil {
		return m.nilVal, m.hasNil
	}
	if m.n > 0 {
		mask := len(m.slots) - 1
		for i := int(hash(k) >> m.shift); ; i = (i + 1) & mask {
			s := &m.slots[i]
			if s.key == k {
				return s.val, true
			}
			if s.key == uuid.Nil {
				break
			}
		}
	}
	var zero V
	return zero, false
}

// Set puts v under k.
func (m *Map[V]) Set(k uuid.UUID, v V) {
	if k == uuid.Nil {
		m.hasNil, m.nilVal = true, v
		return
	}
	if len(m.slots) == 0 {
		m.resize(minSlots)
	}
	for {
		mask := len(m.slots) - 1
		for i := int(hash(k) >> m.shift); ; i = (i + 1) & mask {
			s := &m.slots[i]
			if s.key == k {
				s.val = v // an update never grows the table
				return
			}
			if s.key != uuid.Nil {
				continue
			}
			if 4*(m.n+1) > 3*len(m.slots) {
				break // a new key past a load of 3/4: grow, then place it
			}
			s.key, s.val = k, v
			m.n++
			return
		}
		m.resize(2 * len(m.slots))
	}
}

// Delete removes k and reports whether it was present. The keys after it
// in its run shift back into the hole, so no tombstone is left and lookups
// stay as short as the map's load.
func (m *Map[V]) Delete(k uuid.UUID) bool {
	var zero V
	if k == uuid.Nil {
		had := m.hasNil
		m.hasNil, m.nilVal = false, zero
		return had
	}
	if m.n == 0 {
		return false
	}
	mask := len(m.slots) - 1
	i := int(hash(k) >> m.shift)
	for ; m.slots[i].key != k; i = (i + 1) & mask {
		if m.slots[i].key == uuid.Nil {
			return false
		}
	}
	// Backward shift: move up every later key of the run whose home slot
	// is not between the hole and it (cyclically).
	for j := (i + 1) & mask; m.slots[j].key != uuid.Nil; j = (j + 1) & mask {
		home := int(hash(m.slots[j].key) >> m.shift)
		if (j-home)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = slot[V]{key: uuid.Nil, val: zero}
	m.n--
	return true
}

// Range calls f for every key and value until f returns false, in an
// order that depends only on the history of Sets and Deletes. f must not
// change the map.
func (m *Map[V]) Range(f func(uuid.UUID, V) bool) {
	if m.hasNil && !f(uuid.Nil, m.nilVal) {
		return
	}
	for i := range m.slots {
		if s := &m.slots[i]; s.key != uuid.Nil && !f(s.key, s.val) {
			return
		}
	}
}

// Clear removes every key, keeping the table's size.
func (m *Map[V]) Clear() {
	clear(m.slots)
	var zero V
	m.n, m.hasNil, m.nilVal = 0, false, zero
}

func (m *Map[V]) resize(size int) {
	old := m.slots
	m.slots = make([]slot[V], size)
	m.shift = uint(64 - bits.TrailingZeros(uint(size)))
	mask := size - 1
	for i := range old {
		s := &old[i]
		if s.key == uuid.Nil {
			continue
		}
		j := int(hash(s.key) >> m.shift)
		for m.slots[j].key != uuid.Nil {
			j = (j + 1) & mask
		}
		m.slots[j] = *s
	}
}
