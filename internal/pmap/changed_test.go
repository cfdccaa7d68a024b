package pmap

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestChangedModel holds Changed to a model: two maps, the second made
// from the first by edits (sets, replacements, deletes, some through a
// Builder), are compared; with the same keys, Changed reports true and
// exactly the keys whose value differs from the first map's (a value set
// again to itself is not a change: the values are compared, not the
// nodes); with other keys, it reports false.
func TestChangedModel(t *testing.T) {
	pool := keyPool(11, 40)
	rapid.Check(t, func(t *rapid.T) {
		keys := keyGen(pool)
		old := New[int]()
		for _, k := range rapid.SliceOfN(keys, 0, 60).Draw(t, "start") {
			old = old.Set(k, rapid.IntRange(0, 3).Draw(t, "v"))
		}
		cur := old
		var b *Builder[int]
		for range rapid.IntRange(0, 20).Draw(t, "edits") {
			k := keys.Draw(t, "k")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				cur = cur.Set(k, rapid.IntRange(0, 3).Draw(t, "v"))
			case 1:
				cur = cur.Delete(k)
			case 2:
				if b == nil {
					b = cur.Transient()
				}
				b.Set(k, rapid.IntRange(0, 3).Draw(t, "v"))
				cur = b.Persistent()
				b = nil
			default:
				// A replacement of a key old holds, so most runs keep the keys.
				var held []uuid.UUID
				old.Range(func(k uuid.UUID, _ int) bool { held = append(held, k); return true })
				if len(held) > 0 {
					cur = cur.Set(rapid.SampledFrom(held).Draw(t, "held"), rapid.IntRange(0, 3).Draw(t, "v"))
				}
			}
		}
		sameKeys := cur.Len() == old.Len()
		want := map[uuid.UUID]int{}
		cur.Range(func(k uuid.UUID, v int) bool {
			w, ok := old.Get(k)
			if !ok {
				sameKeys = false
			} else if w != v {
				want[k] = v
			}
			return true
		})
		got := map[uuid.UUID]int{}
		ok := cur.Changed(old, func(a, b int) bool { return a == b }, func(k uuid.UUID, v int) {
			if _, dup := got[k]; dup {
				t.Fatalf("key %s reported twice", k)
			}
			got[k] = v
		})
		if ok != sameKeys {
			t.Fatalf("Changed = %v, want %v (same keys)", ok, sameKeys)
		}
		if !ok {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("Changed reported %d keys %v, want %d %v", len(got), got, len(want), want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("key %s: reported %v (%v), want %d", k, g, ok, v)
			}
		}
	})
}

// TestChangedVisitsOnlyWhatDiffers: a map of 10,000 keys and one made from
// it by one edit are compared in a handful of node visits, not 10,000
// value comparisons.
func TestChangedVisitsOnlyWhatDiffers(t *testing.T) {
	m := New[int]()
	b := m.Transient()
	var keys []uuid.UUID
	for i := range 10000 {
		k := uuid.UUID{byte(i), byte(i >> 8), 1, 2, 3, 4, 5, 6, 7, 8, 9, byte(i >> 16)}
		keys = append(keys, k)
		b.Set(k, i)
	}
	m = b.Persistent()
	n := m.Set(keys[1234], -1)
	compared := 0
	var reported []uuid.UUID
	if !n.Changed(m, func(a, b int) bool { compared++; return a == b }, func(k uuid.UUID, _ int) { reported = append(reported, k) }) {
		t.Fatal("Changed = false for maps with the same keys")
	}
	if len(reported) != 1 || reported[0] != keys[1234] {
		t.Fatalf("reported %v, want [%s]", reported, keys[1234])
	}
	if compared > 3*32 {
		t.Fatalf("compared %d values for one edit, want at most the entries of the edit's path (%d)", compared, 3*32)
	}
	if !m.Changed(m, nil, nil) {
		t.Fatal("a map against itself: false")
	}
}

// BenchmarkChanged compares a 10,000-entry map (a cell's machines) with
// one made from it by k edits (the machines written between two views),
// against looking each of the 10,000 keys up (what a decision that
// examines every machine did without it).
func BenchmarkChanged(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 5))
	keys := make([]uuid.UUID, 10000)
	for i := range keys {
		keys[i] = randomKey(r)
	}
	old := build(keys)
	for _, k := range []int{1, 10, 100, 1000, 10000} {
		cur := old.Transient()
		for i := range k {
			cur.Set(keys[(i*7919)%len(keys)], -i-1)
		}
		m := cur.Persistent()
		b.Run(fmt.Sprintf("edits=%d", k), func(b *testing.B) {
			n := 0
			for b.Loop() {
				m.Changed(old, func(a, b int) bool { return a == b }, func(uuid.UUID, int) { n++ })
			}
		})
		b.Run(fmt.Sprintf("diff/edits=%d", k), func(b *testing.B) {
			n := 0
			for b.Loop() {
				m.Diff(old, func(a, b int) bool { return a == b }, func(uuid.UUID, int, bool) { n++ })
			}
		})
		// As many keys removed and added as edited: the sets differ.
		moved := old.Transient()
		for i := range k {
			moved.Delete(keys[(i*7919)%len(keys)])
			moved.Set(randomKey(r), i)
		}
		mm := moved.Persistent()
		b.Run(fmt.Sprintf("diff/moved=%d", k), func(b *testing.B) {
			n := 0
			for b.Loop() {
				mm.Diff(old, func(a, b int) bool { return a == b }, func(uuid.UUID, int, bool) { n++ })
			}
		})
	}
	b.Run("lookups=10000", func(b *testing.B) {
		s := 0
		for b.Loop() {
			for _, k := range keys {
				v, _ := old.Get(k)
				s += v
			}
		}
		_ = s
	})
}

// TestDiffModel holds Diff to a model: two maps, the second made from the
// first by edits of every kind (keys added and removed, values replaced,
// through Set, Delete and a Builder), or made apart from it; Diff reports
// exactly the keys whose value differs or that one map holds, each once,
// with the new map's value and whether it holds the key.
func TestDiffModel(t *testing.T) {
	// Random keys, keys of one hash (a collision node) and keys whose
	// hashes share their low 30 bits (deep paths), so subtrees split and
	// merge at every depth.
	pool := keyPool(11, 30)
	r := rand.New(rand.NewPCG(12, 12))
	for i := range 12 {
		switch {
		case i < 5:
			pool = append(pool, keyWithHash(0xfeedface, r.Uint64()))
		default:
			pool = append(pool, keyWithHash(r.Uint64()<<30|0x2badbeef&(1<<30-1), r.Uint64()))
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		keys := keyGen(pool)
		old := New[int]()
		for _, k := range rapid.SliceOfN(keys, 0, 60).Draw(t, "start") {
			old = old.Set(k, rapid.IntRange(0, 3).Draw(t, "v"))
		}
		cur := old
		if rapid.Bool().Draw(t, "apart") {
			cur = New[int]() // no shared structure
			old.Range(func(k uuid.UUID, v int) bool { cur = cur.Set(k, v); return true })
		}
		for range rapid.IntRange(0, 30).Draw(t, "edits") {
			k := keys.Draw(t, "k")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				cur = cur.Set(k, rapid.IntRange(0, 3).Draw(t, "v"))
			case 1:
				cur = cur.Delete(k)
			default:
				b := cur.Transient()
				b.Set(k, rapid.IntRange(0, 3).Draw(t, "v"))
				b.Delete(keys.Draw(t, "gone"))
				cur = b.Persistent()
			}
		}
		type change struct {
			v  int
			ok bool
		}
		want := map[uuid.UUID]change{}
		cur.Range(func(k uuid.UUID, v int) bool {
			if w, ok := old.Get(k); !ok || w != v {
				want[k] = change{v, true}
			}
			return true
		})
		old.Range(func(k uuid.UUID, _ int) bool {
			if _, ok := cur.Get(k); !ok {
				want[k] = change{0, false}
			}
			return true
		})
		got := map[uuid.UUID]change{}
		cur.Diff(old, func(a, b int) bool { return a == b }, func(k uuid.UUID, v int, ok bool) {
			if _, dup := got[k]; dup {
				t.Fatalf("key %s reported twice", k)
			}
			got[k] = change{v, ok}
		})
		if len(got) != len(want) {
			t.Fatalf("Diff reported %d keys %v, want %d %v", len(got), got, len(want), want)
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Fatalf("key %s: reported %+v (%v), want %+v", k, g, ok, w)
			}
		}
	})
}
