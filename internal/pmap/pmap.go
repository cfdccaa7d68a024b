// Package pmap is a persistent (immutable, structurally shared) map keyed by
// uuid.UUID: a hash array mapped trie in the CHAMP layout, with Clojure-style
// transients for cheap batches of edits.
//
// # Concurrency
//
// A *Map never changes after it has been returned (by New, Set, Delete or
// Builder.Persistent), so any number of goroutines may read it at the same
// time, forever, without locks. Every edit makes a new Map that shares all
// untouched structure with the old one.
//
// A *Builder is a mutable, single-owner view: it belongs to one goroutine at a
// time and must not be used concurrently (not even Get alongside Set). Its
// edits never affect the Map it came from, nor any other Map.
//
// # Layout
//
// The hash of a key is a bijective mix (murmur3 fmix64) of the first 8 bytes of
// the key, so two keys have the same hash exactly when their first 8 bytes
// are equal. Each trie level consumes 5 bits of the hash (32-way branching);
// the last bitmap level (shift 60) consumes the remaining 4. Keys whose 64-bit
// hashes are equal end up in a collision node below that, which holds them
// sorted by the full 16-byte key.
//
// A node has two 32-bit bitmaps, one for slots holding an entry inline and one
// for slots holding a child node, and two compact slices indexed by popcount:
// entries (key and value, inline, so there is no heap object per entry) and
// child pointers. An edit copies the nodes on its path; a Builder copies each
// node once, marks the copy with its edit token, and mutates it in place on
// later edits.
//
// The trie is kept canonical: a child node exists for a hash prefix exactly
// when at least two keys share that prefix, and deletion collapses nodes
// accordingly. The shape therefore depends only on the set of keys, never on
// the history of edits, and Len and memory use stay honest after deletes.
package pmap

import (
	"encoding/binary"
	"math/bits"

	"github.com/google/uuid"
)

const (
	bitsPerLevel = 5
	levelMask    = 1<<bitsPerLevel - 1
	// A node reached with shift >= hashBits is a collision node: all of its
	// keys have the same 64-bit hash.
	hashBits = 64
)

// editToken identifies one Builder. A node's edit field points at one of the
// token's fields when the node struct was made by that builder and is
// reachable only from it; which field says which of the node's slices are
// private to the builder too. The builder may mutate those in place; any
// other slice it copies first. No other builder ever has the same token, and
// after Persistent no builder has it, so the nodes are then frozen.
type editToken struct {
	children byte // the children slice is private, the entries slice shared
	entries  byte // the entries slice is private, the children slice shared
	all      byte // both slices are private
}

// owns reports whether the node with edit field p belongs to e.
func (e *editToken) owns(p *byte) bool {
	return e != nil && (p == &e.all || p == &e.children || p == &e.entries)
}

type entry[V any] struct {
	key uuid.UUID
	val V
}

// node is one trie node. The root is held by value in its Map or Builder, the
// others by pointer from their parent's children slice.
//
// For a bitmap node (shift < hashBits), bit i of datamap is set when slot i
// holds an entry and bit i of nodemap when it holds a child; entries and
// children are ordered by slot. For a collision node (shift >= hashBits) the
// bitmaps are zero, children is empty, and entries holds at least two entries
// with the same hash, sorted by key.
type node[V any] struct {
	datamap  uint32
	nodemap  uint32
	edit     *byte // into the editToken of the builder that owns the node, if any
	entries  []entry[V]
	children []*node[V]
}

// Map is an immutable map from uuid.UUID to V. Use New to get an empty one.
// A *Map is safe for concurrent readers forever; it never changes after it is
// returned.
type Map[V any] struct {
	root node[V]
	size int
}

// New returns an empty map.
func New[V any]() *Map[V] { return &Map[V]{} }

// Len returns the number of entries.
func (m *Map[V]) Len() int { return m.size }

// Get returns the value stored under k and whether it is present.
func (m *Map[V]) Get(k uuid.UUID) (V, bool) { return m.root.get(hashKey(k), k) }

// warmBatch is how many keys Warm walks side by side.
const warmBatch = 32

// Warm walks the trie for many keys side by side, one level at a time for
// all of them, and returns the sum of touch over the values found (but for
// those of collision nodes, whose keys share a whole hash: it stops above
// them). It changes nothing and its result means nothing: it is for its
// side effect on the cache. (Keep the result where the call is: Warm
// inlines, and a sum nobody uses lets the compiler drop touch's loads.) A lookup is a chain of dependent loads, each a cache miss in
// a large map, so lookups one after another wait for one miss at a time;
// the walks of different keys do not depend on each other, and taken a
// level at a time the processor has the misses of many keys in flight at
// once. Lookups of the same keys right after it (an evaluation of the
// transaction that names them) find their nodes in the cache. touch (nil:
// none) reads what a caller will read of a value, to bring that in too.
func (m *Map[V]) Warm(keys []uuid.UUID, touch func(V) uint64) uint64 {
	var sum uint64
	var cur [warmBatch]*node[V]
	var hs [warmBatch]uint64
	for len(keys) > 0 {
		k := keys[:min(warmBatch, len(keys))]
		keys = keys[len(k):]
		for i := range k {
			hs[i], cur[i] = hashKey(k[i]), &m.root
		}
		for shift := uint(0); shift < hashBits; shift += bitsPerLevel {
			deeper := false
			for i := range k {
				n := cur[i]
				if n == nil {
					continue
				}
				cur[i] = nil
				bit := bitpos(hs[i], shift)
				switch {
				case n.nodemap&bit != 0:
					cur[i] = n.children[index(n.nodemap, bit)]
					deeper = true
				case n.datamap&bit != 0:
					if e := &n.entries[index(n.datamap, bit)]; e.key == k[i] && touch != nil {
						sum += touch(e.val)
					}
				}
			}
			if !deeper {
				break
			}
		}
	}
	return sum
}

// Range calls f for every entry in a deterministic order (depends only on the
// set of keys, never on insertion history or Go map order) until f returns
// false. The order is that of the keys' hashes (digit by digit from the low
// bits), then of the full keys among equal hashes.
func (m *Map[V]) Range(f func(k uuid.UUID, v V) bool) { m.root.rangeNode(0, f) }

// Set returns a new map with k set to v. m is not changed.
func (m *Map[V]) Set(k uuid.UUID, v V) *Map[V] {
	nm := &Map[V]{root: m.root, size: m.size}
	if _, replaced := nm.root.set(nil, 0, hashKey(k), k, v); !replaced {
		nm.size++
	}
	return nm
}

// Delete returns a map without k. m is not changed; if k is absent, m itself
// is returned.
func (m *Map[V]) Delete(k uuid.UUID) *Map[V] {
	h := hashKey(k)
	if _, ok := m.root.get(h, k); !ok {
		return m
	}
	nm := &Map[V]{root: m.root, size: m.size - 1}
	nm.root.remove(nil, 0, h, k)
	return nm
}

// Transient returns a mutable builder that starts with m's contents and shares
// m's structure. Its edits copy a node the first time they touch it and then
// mutate that copy in place, so a batch of edits allocates about one path per
// distinct touched node, not one per edit. m is never affected.
func (m *Map[V]) Transient() *Builder[V] {
	return &Builder[V]{root: m.root, size: m.size, edit: new(editToken)}
}

// Builder is a mutable map made by Map.Transient and frozen by Persistent.
// It belongs to one goroutine; it is not safe for concurrent use.
type Builder[V any] struct {
	root node[V]
	size int
	edit *editToken // nil once Persistent has been called
}

func (b *Builder[V]) live() {
	if b.edit == nil {
		panic("pmap: Builder used after Persistent")
	}
}

// Get returns the value stored under k and whether it is present.
func (b *Builder[V]) Get(k uuid.UUID) (V, bool) {
	b.live()
	return b.root.get(hashKey(k), k)
}

// Set sets k to v and reports whether k was absent before.
func (b *Builder[V]) Set(k uuid.UUID, v V) (added bool) {
	_, had := b.Swap(k, v)
	return !had
}

// Swap sets k to v and returns the value it replaced, if any, in one walk.
func (b *Builder[V]) Swap(k uuid.UUID, v V) (old V, had bool) {
	b.live()
	old, had = b.root.set(b.edit, 0, hashKey(k), k, v)
	if !had {
		b.size++
	}
	return old, had
}

// Delete removes k and reports whether it was present.
func (b *Builder[V]) Delete(k uuid.UUID) bool {
	_, had := b.Remove(k)
	return had
}

// Remove removes k and returns the value it held, if any.
func (b *Builder[V]) Remove(k uuid.UUID) (old V, had bool) {
	b.live()
	h := hashKey(k)
	if old, had = b.root.get(h, k); !had {
		return old, false
	}
	b.root.remove(b.edit, 0, h, k)
	b.size--
	return old, true
}

// Len returns the number of entries.
func (b *Builder[V]) Len() int {
	b.live()
	return b.size
}

// Persistent freezes the builder and returns the new immutable map. The
// builder must not be used afterwards: every method panics. Maps returned
// earlier, and the map the builder came from, are unaffected by anything the
// builder did.
func (b *Builder[V]) Persistent() *Map[V] {
	b.live()
	m := &Map[V]{root: b.root, size: b.size}
	// The nodes keep pointing at the old token, but no builder will ever
	// hold it again, so they are frozen from now on.
	b.edit = nil
	b.root = node[V]{}
	b.size = 0
	return m
}

// Hash is the hash a map places k by (internal/vmap's tables use it too,
// so that their Range gives this package's order).
func Hash(k uuid.UUID) uint64 { return hashKey(k) }

// hashKey mixes the first 8 bytes of k (little-endian) with the murmur3
// 64-bit finalizer. The mix is a bijection on uint64, so keys collide exactly
// when their first 8 bytes are equal; it only spreads structured keys (time
// ordered or counter-like) over the trie.
func hashKey(k uuid.UUID) uint64 {
	// Both halves count, so keys that differ only in their last 8 bytes
	// (sequential or hand-made uids a client may choose) do not all land in
	// one collision node. The mix stays a bijection of the first half for a
	// fixed second half, so tests can still make keys of any hash.
	x := binary.LittleEndian.Uint64(k[:8]) ^ binary.LittleEndian.Uint64(k[8:])*tailMul
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// tailMul spreads the second half of a key (odd, so multiplying by it is a
// bijection): the golden-ratio constant.
const tailMul = 0x9e3779b97f4a7c15

func bitpos(h uint64, shift uint) uint32 { return 1 << ((h >> shift) & levelMask) }

// index returns the position in the compact slice of the slot bit in bitmap.
func index(bitmap, bit uint32) int { return bits.OnesCount32(bitmap & (bit - 1)) }

func (n *node[V]) get(h uint64, k uuid.UUID) (V, bool) {
	for shift := uint(0); ; shift += bitsPerLevel {
		if shift >= hashBits {
			for i := range n.entries {
				if n.entries[i].key == k {
					return n.entries[i].val, true
				}
			}
			break
		}
		bit := bitpos(h, shift)
		if n.datamap&bit != 0 {
			e := &n.entries[index(n.datamap, bit)]
			if e.key == k {
				return e.val, true
			}
			break
		}
		if n.nodemap&bit == 0 {
			break
		}
		n = n.children[index(n.nodemap, bit)]
	}
	var zero V
	return zero, false
}

func (n *node[V]) rangeNode(shift uint, f func(uuid.UUID, V) bool) bool {
	if shift >= hashBits {
		for i := range n.entries {
			if !f(n.entries[i].key, n.entries[i].val) {
				return false
			}
		}
		return true
	}
	ei, ci := 0, 0
	for bm := n.datamap | n.nodemap; bm != 0; bm &= bm - 1 {
		if n.datamap&(bm&-bm) != 0 {
			e := &n.entries[ei]
			ei++
			if !f(e.key, e.val) {
				return false
			}
		} else {
			if !n.children[ci].rangeNode(shift+bitsPerLevel, f) {
				return false
			}
			ci++
		}
	}
	return true
}

// ownChildren prepares n's children slice for an edit by e and reports
// whether it may be mutated in place; n itself must be writable by the
// caller. For a builder (e != nil) it copies the slice the first time, with
// room for extra more children, and records that the builder owns it. For a
// single persistent edit (e == nil) it returns false: the caller copies the
// slice if it changes it.
func (n *node[V]) ownChildren(e *editToken, extra int) bool {
	switch {
	case e == nil:
		n.edit = nil
		return false
	case n.edit == &e.children || n.edit == &e.all:
		return true
	case n.edit == &e.entries:
		n.edit = &e.all
	default:
		n.edit = &e.children
	}
	n.children = cloneExtra(n.children, extra)
	return true
}

// ownEntries is ownChildren for the entries slice.
func (n *node[V]) ownEntries(e *editToken, extra int) bool {
	switch {
	case e == nil:
		n.edit = nil
		return false
	case n.edit == &e.entries || n.edit == &e.all:
		return true
	case n.edit == &e.children:
		n.edit = &e.all
	default:
		n.edit = &e.entries
	}
	n.entries = cloneExtra(n.entries, extra)
	return true
}

// set stores k=v below n, which sits at the given shift, and reports whether
// k was added (rather than updated). n itself must be writable by the caller.
func (n *node[V]) set(e *editToken, shift uint, h uint64, k uuid.UUID, v V) (old V, replaced bool) {
	if shift >= hashBits {
		i, found := searchKey(n.entries, k)
		if found {
			if !n.ownEntries(e, 0) {
				n.entries = cloneExtra(n.entries, 0)
			}
			old = n.entries[i].val
			n.entries[i].val = v
			return old, true
		}
		inPlace := n.ownEntries(e, 1)
		n.entries = insertAt(n.entries, i, entry[V]{k, v}, inPlace)
		return old, false
	}
	bit := bitpos(h, shift)
	switch {
	case n.nodemap&bit != 0:
		if !n.ownChildren(e, 0) {
			n.children = cloneExtra(n.children, 0)
		}
		return n.editChild(e, index(n.nodemap, bit)).set(e, shift+bitsPerLevel, h, k, v)
	case n.datamap&bit != 0:
		ei := index(n.datamap, bit)
		if n.entries[ei].key == k {
			if !n.ownEntries(e, 0) {
				n.entries = cloneExtra(n.entries, 0)
			}
			old = n.entries[ei].val
			n.entries[ei].val = v
			return old, true
		}
		other := n.entries[ei]
		child := merge(e, shift+bitsPerLevel, other, hashKey(other.key), entry[V]{k, v}, h)
		// (The own calls replace the slices, so they go before the reads.)
		inPlace := n.ownEntries(e, 0)
		n.entries = removeAt(n.entries, ei, inPlace)
		inPlace = n.ownChildren(e, 1)
		n.datamap ^= bit
		n.nodemap |= bit
		n.children = insertAt(n.children, index(n.nodemap, bit), child, inPlace)
		return old, false
	default:
		inPlace := n.ownEntries(e, 1)
		n.datamap |= bit
		n.entries = insertAt(n.entries, index(n.datamap, bit), entry[V]{k, v}, inPlace)
		return old, false
	}
}

// merge makes the node at shift holding the two distinct entries a and b.
func merge[V any](e *editToken, shift uint, a entry[V], ha uint64, b entry[V], hb uint64) *node[V] {
	var edit *byte // a new node is entirely the builder's
	if e != nil {
		edit = &e.all
	}
	if shift >= hashBits {
		if keyLess(b.key, a.key) {
			a, b = b, a
		}
		return &node[V]{edit: edit, entries: []entry[V]{a, b}}
	}
	ba, bb := bitpos(ha, shift), bitpos(hb, shift)
	if ba == bb {
		return &node[V]{
			edit:     edit,
			nodemap:  ba,
			children: []*node[V]{merge(e, shift+bitsPerLevel, a, ha, b, hb)},
		}
	}
	if bb < ba {
		a, b = b, a
	}
	return &node[V]{edit: edit, datamap: ba | bb, entries: []entry[V]{a, b}}
}

// editChild returns child ci of n in a form the caller may write: the child
// itself if e owns it, else a shallow copy put in its place. n's children
// slice must already be writable.
func (n *node[V]) editChild(e *editToken, ci int) *node[V] {
	c := n.children[ci]
	if e.owns(c.edit) {
		return c
	}
	var cp *node[V]
	if e != nil && len(c.children) >= wideChildren {
		// A node of many children (the upper levels of a large map): its
		// copy and its children's array in one allocation, the array
		// right after the node. The children are private now; the entries
		// stay shared until an edit needs them (ownEntries).
		w := new(wideNode[V])
		cp = &w.n
		*cp = *c
		cp.children = w.kids[:copy(w.kids[:], c.children)]
		cp.edit = &e.children
	} else {
		cp = new(node[V])
		*cp = *c
	}
	n.children[ci] = cp
	return cp
}

// wideChildren is the number of children from which a builder's copy of a
// node is a wideNode.
const wideChildren = 16

// wideNode is a node and room for all 32 of its children, allocated
// together: one allocation instead of two for each such node an edit
// copies, and a lookup finds the children array beside the node.
type wideNode[V any] struct {
	n    node[V]
	kids [1 << bitsPerLevel]*node[V]
}

// remove deletes k, which must be present, from below n, which sits at the
// given shift. n itself must be writable by the caller. A non-root node is
// left with at least one child or two entries; a child left holding a single
// entry and nothing else is inlined into n.
func (n *node[V]) remove(e *editToken, shift uint, h uint64, k uuid.UUID) {
	if shift >= hashBits {
		i, _ := searchKey(n.entries, k)
		inPlace := n.ownEntries(e, 0)
		n.entries = removeAt(n.entries, i, inPlace)
		return
	}
	bit := bitpos(h, shift)
	if n.datamap&bit != 0 {
		inPlace := n.ownEntries(e, 0)
		n.entries = removeAt(n.entries, index(n.datamap, bit), inPlace)
		n.datamap ^= bit
		return
	}
	if !n.ownChildren(e, 0) {
		n.children = cloneExtra(n.children, 0)
	}
	ci := index(n.nodemap, bit)
	child := n.editChild(e, ci)
	child.remove(e, shift+bitsPerLevel, h, k)
	if len(child.children) == 0 && len(child.entries) == 1 {
		ent := child.entries[0]
		// n.children is a fresh copy or owned, so it can shrink in place.
		n.children = removeAt(n.children, ci, true)
		n.nodemap ^= bit
		n.datamap |= bit
		inPlace := n.ownEntries(e, 1)
		n.entries = insertAt(n.entries, index(n.datamap, bit), ent, inPlace)
	}
}

// searchKey finds k in entries sorted by key (a collision node's): its index
// if present, else where it would be inserted.
func searchKey[V any](entries []entry[V], k uuid.UUID) (int, bool) {
	for i := range entries {
		if entries[i].key == k {
			return i, true
		}
		if keyLess(k, entries[i].key) {
			return i, false
		}
	}
	return len(entries), false
}

func keyLess(a, b uuid.UUID) bool {
	a0, b0 := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if a0 != b0 {
		return a0 < b0
	}
	return binary.BigEndian.Uint64(a[8:]) < binary.BigEndian.Uint64(b[8:])
}

// cloneExtra copies s into a new slice with room for extra more elements.
func cloneExtra[T any](s []T, extra int) []T {
	if len(s)+extra == 0 {
		return nil
	}
	c := make([]T, len(s), len(s)+extra)
	copy(c, s)
	return c
}

// insertAt inserts x at i, in s's own array if inPlace and it has room, else
// in a new array of exactly the needed length.
func insertAt[T any](s []T, i int, x T, inPlace bool) []T {
	if inPlace && len(s) < cap(s) {
		s = s[:len(s)+1]
		copy(s[i+1:], s[i:])
		s[i] = x
		return s
	}
	c := make([]T, len(s)+1)
	copy(c, s[:i])
	c[i] = x
	copy(c[i+1:], s[i:])
	return c
}

// removeAt removes the element at i, in place if inPlace (clearing the freed
// slot so it keeps nothing alive), else into a new array.
func removeAt[T any](s []T, i int, inPlace bool) []T {
	if inPlace {
		copy(s[i:], s[i+1:])
		var zero T
		s[len(s)-1] = zero
		return s[:len(s)-1]
	}
	if len(s) == 1 {
		return nil
	}
	c := make([]T, len(s)-1)
	copy(c, s[:i])
	copy(c[i:], s[i+1:])
	return c
}

// Changed calls f for each key of m whose value is not same as its value in
// old, when m and old hold the same set of keys, and reports true; it
// reports false, having called f for some keys or none, when their sets of
// keys differ. Its time is in proportion to the nodes the two maps do not
// share: a map made from old by a few edits is compared in the time of
// those edits' paths, not of its size. A reader that keeps something per
// key brings it from old to m this way (schedulers.MachineIndex).
func (m *Map[V]) Changed(old *Map[V], same func(a, b V) bool, f func(k uuid.UUID, v V)) bool {
	if m == old {
		return true
	}
	if m.size != old.size {
		return false
	}
	return m.root.changed(&old.root, same, f)
}

// changed compares n with o, a node at the same place in a map with the
// same keys (the trie is canonical: the same keys give the same shape).
func (n *node[V]) changed(o *node[V], same func(a, b V) bool, f func(uuid.UUID, V)) bool {
	if n.datamap != o.datamap || n.nodemap != o.nodemap || len(n.entries) != len(o.entries) || len(n.children) != len(o.children) {
		return false
	}
	if len(n.entries) > 0 && &n.entries[0] != &o.entries[0] {
		for i := range n.entries {
			e, p := &n.entries[i], &o.entries[i]
			if e.key != p.key {
				return false
			}
			if !same(e.val, p.val) {
				f(e.key, e.val)
			}
		}
	}
	for i, c := range n.children {
		if d := o.children[i]; c != d && !c.changed(d, same, f) {
			return false
		}
	}
	return true
}

// Diff calls f for each key whose value in m is not same as in old, or
// that only one of the two maps holds: with m's value and true when m holds
// the key, with the zero value and false when only old does. Unlike
// Changed it takes maps of any keys. Its time is in proportion to the nodes
// the two maps do not share, as Changed's: a map made from old by a few
// edits, keys added and removed among them, is compared in the time of
// those edits' paths (and of the subtrees they split or merge). Keys are
// reported in an order that depends only on the two maps.
func (m *Map[V]) Diff(old *Map[V], same func(a, b V) bool, f func(k uuid.UUID, v V, ok bool)) {
	if m == old {
		return
	}
	diffNodes(&m.root, &old.root, 0, same, f)
}

func diffNodes[V any](n, o *node[V], shift uint, same func(a, b V) bool, f func(uuid.UUID, V, bool)) {
	if n == o {
		return
	}
	if shift >= hashBits {
		diffSlot(n.entries, nil, o.entries, nil, shift, same, f)
		return
	}
	if n.datamap == o.datamap && n.nodemap == o.nodemap {
		// The same shape (most nodes of a map made from the other by a few
		// edits): entries side by side, unless the slice is shared, and
		// children side by side, each unless it is shared.
		if len(n.entries) > 0 && &n.entries[0] != &o.entries[0] {
			for i := range n.entries {
				e, p := &n.entries[i], &o.entries[i]
				switch {
				case e.key != p.key:
					var zero V
					f(p.key, zero, false)
					f(e.key, e.val, true)
				case !same(e.val, p.val):
					f(e.key, e.val, true)
				}
			}
		}
		for i, c := range n.children {
			if d := o.children[i]; c != d {
				diffNodes(c, d, shift+bitsPerLevel, same, f)
			}
		}
		return
	}
	for bm := n.datamap | n.nodemap | o.datamap | o.nodemap; bm != 0; bm &= bm - 1 {
		bit := bm & -bm
		ne, nc := n.slot(bit)
		oe, oc := o.slot(bit)
		if nc != nil && oc != nil {
			diffNodes(nc, oc, shift+bitsPerLevel, same, f)
			continue
		}
		diffSlot(ne, nc, oe, oc, shift+bitsPerLevel, same, f)
	}
}

// slot returns what n holds in the slot of bit: an entry (a slice of one),
// a child, or neither.
func (n *node[V]) slot(bit uint32) ([]entry[V], *node[V]) {
	switch {
	case n.datamap&bit != 0:
		i := index(n.datamap, bit)
		return n.entries[i : i+1], nil
	case n.nodemap&bit != 0:
		return nil, n.children[index(n.nodemap, bit)]
	}
	return nil, nil
}

// diffSlot compares one slot of two nodes (or two collision nodes' entries)
// where at most one side is a subtree: each side's entries (ne, or those
// under nc, at shift) against the other's.
func diffSlot[V any](ne []entry[V], nc *node[V], oe []entry[V], oc *node[V], shift uint, same func(a, b V) bool, f func(uuid.UUID, V, bool)) {
	var zero V
	if nc == nil && oc == nil {
		for i := range ne {
			if j := findEntry(oe, ne[i].key); j < 0 || !same(ne[i].val, oe[j].val) {
				f(ne[i].key, ne[i].val, true)
			}
		}
		for i := range oe {
			if findEntry(ne, oe[i].key) < 0 {
				f(oe[i].key, zero, false)
			}
		}
		return
	}
	// One side is a subtree, the other a few entries at most (one, or a
	// collision node's): range the subtree, marking the entries it holds.
	sub, few, fewIsNew := nc, oe, false
	if oc != nil {
		sub, few, fewIsNew = oc, ne, true
	}
	var buf [4]bool
	seen := buf[:0]
	if len(few) > len(buf) {
		seen = make([]bool, 0, len(few))
	}
	seen = seen[:len(few)]
	sub.rangeNode(shift, func(k uuid.UUID, v V) bool {
		i := findEntry(few, k)
		switch {
		case i < 0 && fewIsNew:
			f(k, zero, false) // only old holds it
		case i < 0:
			f(k, v, true) // only m holds it
		default:
			seen[i] = true
			if fewIsNew && !same(few[i].val, v) {
				f(k, few[i].val, true)
			} else if !fewIsNew && !same(v, few[i].val) {
				f(k, v, true)
			}
		}
		return true
	})
	for i := range few {
		if seen[i] {
			continue
		}
		if fewIsNew {
			f(few[i].key, few[i].val, true)
		} else {
			f(few[i].key, zero, false)
		}
	}
}

// findEntry returns the index of k among es (a few entries), or -1.
func findEntry[V any](es []entry[V], k uuid.UUID) int {
	for i := range es {
		if es[i].key == k {
			return i
		}
	}
	return -1
}
