// Package vmap is a multi-version map keyed by uuid.UUID: one hash table per
// line of history, written in place by one writer at a time, read at any
// revision still held by any number of goroutines at once, without locks.
//
// It does what a persistent map does for a state that changes by a chain of
// revisions, each of which readers keep as an immutable snapshot, at a
// fraction of the cost: an edit adds one small version record to its key's
// chain instead of copying the path of trie nodes above it, and a lookup
// probes one slot instead of walking the trie's levels. It gives up what a
// persistent map has and a chain of revisions does not need: editing a
// snapshot other than the newest one (that copies the whole map, see
// Map.Edit).
//
// # Layout
//
// The table is an open-addressing array of slots, linear probing, indexed
// by the same hash as internal/pmap's. A slot holds a key and the head of
// its version chain, newest first; a version holds the revision that wrote
// it and the value (nil: deleted at that revision). A snapshot (Map) is the
// table, a revision and the number of live keys at it; Get walks the key's
// chain to the newest version at or below the snapshot's revision. A slot
// once claimed keeps its key until the table is rebuilt.
//
// # Concurrency
//
// A Map never changes what it reads and is safe for concurrent readers
// forever. The Builder
// edits the newest revision in place, while readers of older snapshots (and
// of the one it started from) go on reading: a version it writes carries a
// revision no snapshot can see until Finish stamps it with the new revision,
// and it is linked in with an atomic store after it is complete; a slot's
// key is written before its chain head is published, and never again. A
// rebuilt table is new memory; the old one stays with the snapshots that
// hold it.
//
// # What is kept
//
// A version is needed while some live snapshot's revision is at or above
// it and below the next version of its key. Every snapshot Finish makes is
// tracked (a cleanup tells the line when the collector frees it), and each
// Finish cuts the chains below the oldest revision still held: a version's
// older versions are dropped once that revision reaches it. So superseded
// and deleted values live a collection or two longer than a persistent
// map's garbage. A snapshot that stays reachable while the line moves on (an
// idle client's last view) would keep every version written after it;
// once more than detachAfter versions wait for their cut, the line moves
// the snapshots that hold them back, and have outlived two collections, to
// copies of their own (detachOld), and their readers read the same map.
package vmap

import (
	"encoding/binary"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/pmap"
)

// unstamped is the revision of a version a Builder wrote and has not
// finished: above every snapshot's.
const unstamped = math.MaxUint64

type version[T any] struct {
	rev  atomic.Uint64
	val  *T // nil: deleted
	prev atomic.Pointer[version[T]]
}

type slot[T any] struct {
	key  uuid.UUID
	head atomic.Pointer[version[T]] // nil: the slot is empty
}

type table[T any] struct {
	slots []slot[T]
	mask  uint64
	used  int // slots claimed, live or not
}

// line is one line of history: the newest table, the revision it is at, and
// what it keeps for the cuts.
type line[T any] struct {
	mu       sync.Mutex // guards rev, editing and the holders
	rev      uint64     // the newest finished revision
	editing  bool
	tab      *table[T]
	holders  []holder[T] // by revision, oldest first
	hfront   int
	cuts     []*version[T] // versions whose older versions go once the oldest held revision reaches them, oldest first
	cutFront int
	finishes int
}

// ref is what a snapshot reads: a line and one of its tables. Holders are
// tracked by their ref: every reader keeps the ref it loaded alive until
// it is done (runtime.KeepAlive: the compiler would otherwise let it go
// after its last use, before the chain walk), so its versions are kept
// even after the snapshot is moved to a copy (detach) or dropped.
type ref[T any] struct {
	ln  *line[T]
	tab *table[T]
}

type holder[T any] struct {
	rev uint64
	// gone is set by a cleanup once the ref is collected. (Liveness is not
	// asked of the weak pointer: Value during a collection's marking keeps
	// the object for that collection, and the line asks at every commit.)
	gone     *atomic.Bool
	ref      weak.Pointer[ref[T]] // for detachOld only
	m        weak.Pointer[Map[T]]
	gc       uint64 // collections completed when it was tracked
	detached bool
}

// Map is a snapshot: the map at one revision. New returns an empty one;
// Builder.Finish the others. A *Map never changes what it reads.
type Map[T any] struct {
	r    atomic.Pointer[ref[T]] // nil: empty, of no line
	rev  uint64
	size int
}

// New returns an empty map at revision 0, of no line (its first edit
// starts one).
func New[T any]() *Map[T] { return &Map[T]{} }

// Hash is the hash the table places a key by: internal/pmap's, so that
// Range can give pmap's order.
func Hash(k uuid.UUID) uint64 { return pmap.Hash(k) }

// Len is the number of keys at the snapshot's revision.
func (m *Map[T]) Len() int { return m.size }

// Revision is the revision the snapshot reads at.
func (m *Map[T]) Revision() uint64 { return m.rev }

// find returns k's slot in t, or nil.
func (t *table[T]) find(k uuid.UUID) *slot[T] {
	for i := Hash(k) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.head.Load() == nil {
			return nil
		}
		if s.key == k {
			return s
		}
	}
}

// at returns the newest version of s's chain at or below rev, or nil.
func at[T any](s *slot[T], rev uint64) *version[T] {
	for v := s.head.Load(); v != nil; v = v.prev.Load() {
		if v.rev.Load() <= rev {
			return v
		}
	}
	return nil
}

// Get returns k's value at the snapshot's revision.
func (m *Map[T]) Get(k uuid.UUID) (*T, bool) {
	r := m.r.Load()
	if r == nil {
		return nil, false
	}
	defer runtime.KeepAlive(r) // until the walk is done: see ref
	s := r.tab.find(k)
	if s == nil {
		return nil, false
	}
	if v := at(s, m.rev); v != nil && v.val != nil {
		return v.val, true
	}
	return nil, false
}

// warmBatch is how many keys Warm takes side by side.
const warmBatch = 32

// Warm brings into the cache what lookups of keys will read — each key's
// first probed slot, its chain's head and, through touch, the value — a
// stage at a time for a batch of keys, so the processor has the misses of
// many keys in flight at once instead of one after another. It changes
// nothing; the sum it returns means nothing (keep it: a sum nobody uses
// lets the compiler drop the loads).
func (m *Map[T]) Warm(keys []uuid.UUID, touch func(*T) uint64) uint64 {
	r := m.r.Load()
	if r == nil {
		return 0
	}
	t := r.tab
	var sum uint64
	var heads [warmBatch]*version[T]
	for len(keys) > 0 {
		k := keys[:min(warmBatch, len(keys))]
		keys = keys[len(k):]
		for i := range k {
			heads[i] = t.slots[Hash(k[i])&t.mask].head.Load()
		}
		for i := range k {
			if v := heads[i]; v != nil {
				if r := v.rev.Load(); r > m.rev {
					heads[i] = nil // newer than the snapshot (maybe a Builder's, edited in place): not read here
				} else {
					sum += r
				}
			}
		}
		if touch != nil {
			for i := range k {
				if v := heads[i]; v != nil && v.val != nil {
					sum += touch(v.val)
				}
			}
		}
	}
	return sum
}

// Range calls f for every key at the snapshot's revision until f returns
// false, in internal/pmap's order (which depends only on the set of keys):
// by the hash's 5-bit digits from the low bits, then by key. It sorts the
// keys to do it, in memory proportional to the table.
func (m *Map[T]) Range(f func(k uuid.UUID, v *T) bool) {
	r := m.r.Load()
	if r == nil {
		return
	}
	defer runtime.KeepAlive(r) // see ref
	type kv struct {
		order uint64
		key   uuid.UUID
		val   *T
	}
	all := make([]kv, 0, m.size)
	for i := range r.tab.slots {
		s := &r.tab.slots[i]
		if s.head.Load() == nil {
			continue
		}
		if v := at(s, m.rev); v != nil && v.val != nil {
			all = append(all, kv{digitOrder(Hash(s.key)), s.key, v.val})
		}
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.order != b.order {
			if a.order < b.order {
				return -1
			}
			return 1
		}
		return compareKeys(a.key, b.key)
	})
	for i := range all {
		if !f(all[i].key, all[i].val) {
			return
		}
	}
}

// digitOrder reverses the order of h's 5-bit digits (the last one has 4
// bits), so that comparing the results compares the digit sequences from
// the low bits, as pmap's trie orders its keys.
func digitOrder(h uint64) uint64 {
	var r uint64
	for i := range 12 {
		r = r<<5 | (h>>(5*i))&31
	}
	return r<<4 | h>>60
}

func compareKeys(a, b uuid.UUID) int {
	x, y := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if x == y {
		x, y = binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:])
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Builder edits a map into its next revision. One goroutine owns it.
type Builder[T any] struct {
	ln      *line[T]
	base    uint64
	size    int
	written []*version[T] // unstamped, for Finish
	done    bool
	fresh   bool // the line is the Builder's own copy: no snapshot reads it yet, so Finish may keep the base's revision
}

// Edit starts the next revision of m. When m is its line's newest revision
// and no other Builder is editing the line, the Builder edits the line's
// table in place (readers of m and of older snapshots are unaffected);
// otherwise (m is older, or a Builder is at work or was dropped) it copies
// m into a line of its own first, in time proportional to m.
func (m *Map[T]) Edit() *Builder[T] {
	r := m.r.Load()
	if r != nil {
		ln := r.ln
		ln.mu.Lock()
		if ln.rev == m.rev && !ln.editing {
			ln.editing = true
			ln.mu.Unlock()
			return &Builder[T]{ln: ln, base: m.rev, size: m.size}
		}
		ln.mu.Unlock()
	}
	return &Builder[T]{ln: m.copyLine(r), base: m.rev, size: m.size, fresh: true}
}

// copyLine makes a line of m's own, at m's revision, from r (m's ref), and
// claims it for editing.
func (m *Map[T]) copyLine(r *ref[T]) *line[T] {
	defer runtime.KeepAlive(r) // see ref
	ln := &line[T]{rev: m.rev, editing: true}
	ln.tab = newTable[T](m.size)
	if r != nil {
		for i := range r.tab.slots {
			s := &r.tab.slots[i]
			if s.head.Load() == nil {
				continue
			}
			if v := at(s, m.rev); v != nil && v.val != nil {
				nv := &version[T]{val: v.val}
				nv.rev.Store(m.rev)
				ln.tab.insert(s.key, nv)
			}
		}
	}
	return ln
}

// newTable makes a table with room for n keys at a load of at most a half.
func newTable[T any](n int) *table[T] {
	c := 16
	for c < 2*n {
		c *= 2
	}
	return &table[T]{slots: make([]slot[T], c), mask: uint64(c - 1)}
}

// insert puts a key that t does not hold into its first free slot.
func (t *table[T]) insert(k uuid.UUID, v *version[T]) {
	i := Hash(k) & t.mask
	for t.slots[i].head.Load() != nil {
		i = (i + 1) & t.mask
	}
	t.slots[i].key = k
	t.slots[i].head.Store(v)
	t.used++
}

func (b *Builder[T]) live() {
	if b.done {
		panic("vmap: Builder used after Finish")
	}
}

// Get returns k's newest value, the Builder's own edits included.
func (b *Builder[T]) Get(k uuid.UUID) (*T, bool) {
	b.live()
	if s := b.ln.tab.find(k); s != nil {
		if v := s.head.Load(); v.val != nil {
			return v.val, true
		}
	}
	return nil, false
}

// Len is the number of keys with the Builder's edits.
func (b *Builder[T]) Len() int { return b.size }

// Swap sets k to v (not nil) and returns what it replaced.
func (b *Builder[T]) Swap(k uuid.UUID, v *T) (old *T, had bool) {
	if v == nil {
		panic("vmap: Swap of a nil value")
	}
	return b.put(k, v)
}

// Remove deletes k and returns what it held.
func (b *Builder[T]) Remove(k uuid.UUID) (old *T, had bool) { return b.put(k, nil) }

func (b *Builder[T]) put(k uuid.UUID, val *T) (old *T, had bool) {
	b.live()
	t := b.ln.tab
	for i := Hash(k) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		h := s.head.Load()
		if h == nil {
			if val == nil {
				return nil, false
			}
			if (t.used+1)*4 > len(t.slots)*3 {
				b.grow()
				return b.put(k, val)
			}
			nv := &version[T]{val: val}
			nv.rev.Store(unstamped)
			s.key = k
			s.head.Store(nv)
			t.used++
			b.written = append(b.written, nv)
			b.size++
			return nil, false
		}
		if s.key != k {
			continue
		}
		old, had = h.val, h.val != nil
		switch {
		case !had && val == nil:
			return nil, false
		case had && val == nil:
			b.size--
		case !had && val != nil:
			b.size++
		}
		if h.rev.Load() == unstamped {
			h.val = val // this Builder's own, seen by no snapshot: edited in place
			return old, had
		}
		nv := &version[T]{val: val}
		nv.rev.Store(unstamped)
		nv.prev.Store(h)
		s.head.Store(nv)
		b.written = append(b.written, nv)
		return old, had
	}
}

// grow rebuilds the table at twice the live keys: a new array, so that
// snapshots holding the old one are unaffected; slots whose key is deleted
// at a finished revision are dropped.
func (b *Builder[T]) grow() {
	ln := b.ln
	old := ln.tab
	// A key deleted at a finished revision is gone for every reader of the
	// new table: only this Builder and the snapshots it and later ones make
	// read it, all after that revision (older snapshots read their own).
	gone := func(h *version[T]) bool { return h.val == nil && h.rev.Load() != unstamped }
	n := 0
	for i := range old.slots {
		if h := old.slots[i].head.Load(); h != nil && !gone(h) {
			n++
		}
	}
	t := newTable[T](n + 1)
	for i := range old.slots {
		s := &old.slots[i]
		if h := s.head.Load(); h != nil && !gone(h) {
			t.insert(s.key, h)
		}
	}
	ln.tab = t
}

// oldestHeld is the oldest revision a live snapshot may read: the line's
// newest when no holder of an older one is left. It drops the holders the
// collector has freed from the front of the queue.
func (ln *line[T]) oldestHeld() uint64 {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for ln.hfront < len(ln.holders) && ln.holders[ln.hfront].gone.Load() {
		ln.holders[ln.hfront] = holder[T]{}
		ln.hfront++
	}
	if ln.hfront > 1024 && ln.hfront*2 > len(ln.holders) {
		ln.holders = append(ln.holders[:0], ln.holders[ln.hfront:]...)
		ln.hfront = 0
	}
	if ln.hfront < len(ln.holders) {
		return min(ln.holders[ln.hfront].rev, ln.rev)
	}
	return ln.rev
}

// track registers m, which reads r, as a holder of its revision.
func (ln *line[T]) track(m *Map[T], r *ref[T]) {
	h := holder[T]{rev: m.rev, gone: new(atomic.Bool), ref: weak.Make(r), m: weak.Make(m), gc: gcCycles.Load()}
	runtime.AddCleanup(r, func(g *atomic.Bool) { g.Store(true) }, h.gone)
	ln.mu.Lock()
	ln.holders = append(ln.holders, h)
	ln.mu.Unlock()
}

// detachAfter is how many versions may wait for their cut (or holders for
// the collector) before the line moves its oldest live holders to copies of
// their own; it is checked every detachEvery finishes.
const (
	detachAfter = 1 << 16
	detachEvery = 256
)

// detachOld moves the snapshots that hold back the cuts, and have been live
// for two collections (so they are not merely uncollected), to lines of
// their own: a snapshot that a reader keeps but no longer follows (an idle
// client's last view) would otherwise keep every version written after it,
// forever. Their readers see the same map; the copy costs time
// proportional to its size, once per snapshot.
func (ln *line[T]) detachOld() {
	now := gcCycles.Load()
	ln.mu.Lock()
	var move []holder[T]
	for i := ln.hfront; i < len(ln.holders) && len(move) < 16; i++ {
		h := &ln.holders[i]
		if h.gc+2 > now || h.rev >= ln.rev {
			break // younger (maybe only not yet collected), or the line's newest
		}
		if !h.detached {
			h.detached = true
			move = append(move, *h)
		}
	}
	ln.mu.Unlock()
	for _, h := range move {
		r, m := h.ref.Value(), h.m.Value()
		if r == nil || m == nil || m.r.Load() != r {
			continue
		}
		cp := m.copyLine(r)
		cp.editing = false
		nr := &ref[T]{ln: cp, tab: cp.tab}
		cp.track(m, nr)
		m.r.Store(nr)
	}
}

// Finish stamps the Builder's edits with rev (above the revision it
// started from) and returns the snapshot at rev. The Builder must not be
// used afterwards.
func (b *Builder[T]) Finish(rev uint64) *Map[T] {
	b.live()
	if rev < b.base || (rev == b.base && !b.fresh) {
		panic("vmap: Finish at a revision not above the base")
	}
	b.done = true
	ln := b.ln
	for _, v := range b.written {
		v.rev.Store(rev)
	}
	// Cut what no holder can read any more, then queue this revision's
	// versions for their own cut.
	keep := ln.oldestHeld()
	for ln.cutFront < len(ln.cuts) {
		v := ln.cuts[ln.cutFront]
		if v.rev.Load() > keep {
			break
		}
		v.prev.Store(nil)
		ln.cuts[ln.cutFront] = nil
		ln.cutFront++
	}
	if ln.cutFront > 1024 && ln.cutFront*2 > len(ln.cuts) {
		ln.cuts = append(ln.cuts[:0], ln.cuts[ln.cutFront:]...)
		ln.cutFront = 0
	}
	for _, v := range b.written {
		if v.prev.Load() != nil {
			ln.cuts = append(ln.cuts, v)
		}
	}
	b.written = nil
	ln.finishes++
	if ln.finishes%detachEvery == 0 && (len(ln.cuts)-ln.cutFront > max(detachAfter, b.size/2) || len(ln.holders)-ln.hfront > detachAfter) {
		ln.detachOld()
	}
	m := &Map[T]{rev: rev, size: b.size}
	r := &ref[T]{ln: ln, tab: ln.tab}
	m.r.Store(r)
	ln.track(m, r)
	ln.mu.Lock()
	ln.rev, ln.editing = rev, false
	ln.mu.Unlock()
	return m
}

// gcCycles counts the collections completed (about: a cleanup on a
// sentinel counts each and arms the next), so that a holder still live two
// collections after it was tracked is known to be reachable.
var gcCycles atomic.Uint64

func init() { armGCCounter() }

func armGCCounter() {
	runtime.AddCleanup(new([32]byte), func(struct{}) {
		gcCycles.Add(1)
		armGCCounter()
	}, struct{}{})
}
