package pmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// ---- crafted keys ----

const (
	fmixC1 = 0xff51afd7ed558ccd
	fmixC2 = 0xc4ceb9fe1a85ec53
)

// mulInverse returns the inverse of the odd c modulo 2^64 (Newton iteration).
func mulInverse(c uint64) uint64 {
	inv := c // correct to 3 bits for odd c
	for range 6 {
		inv *= 2 - c*inv
	}
	return inv
}

// unmix inverts the mix in hashKey.
func unmix(h uint64) uint64 {
	h ^= h >> 33
	h *= mulInverse(fmixC2)
	h ^= h >> 33
	h *= mulInverse(fmixC1)
	h ^= h >> 33
	return h
}

// keyWithHash returns a key whose hash is h; tail fills its last 8 bytes.
func keyWithHash(h, tail uint64) uuid.UUID {
	var k uuid.UUID
	binary.LittleEndian.PutUint64(k[:8], unmix(h)^tail*tailMul)
	binary.LittleEndian.PutUint64(k[8:], tail)
	return k
}

func randomKey(r *rand.Rand) uuid.UUID {
	var k uuid.UUID
	binary.LittleEndian.PutUint64(k[:8], r.Uint64())
	binary.LittleEndian.PutUint64(k[8:], r.Uint64())
	k[6] = k[6]&0x0f | 0x40 // version 4
	k[8] = k[8]&0x3f | 0x80 // variant 10
	return k
}

func TestUnmix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		h := r.Uint64()
		if got := hashKey(keyWithHash(h, r.Uint64())); got != h {
			t.Fatalf("hashKey(keyWithHash(%#x)) = %#x", h, got)
		}
	}
}

// ---- structural invariants ----

// tb is what the checkers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkStructure verifies the trie's invariants (bitmaps match slices, every
// key sits on its hash path, canonical shape, sorted collision nodes) and
// returns the number of entries.
func checkStructure[V any](t tb, root *node[V]) int {
	t.Helper()
	var walk func(n *node[V], shift uint, prefix uint64, isRoot bool) int
	walk = func(n *node[V], shift uint, prefix uint64, isRoot bool) int {
		if shift >= hashBits {
			if n.datamap != 0 || n.nodemap != 0 || len(n.children) != 0 {
				t.Fatalf("collision node with bitmaps %#x/%#x, %d children", n.datamap, n.nodemap, len(n.children))
			}
			if len(n.entries) < 2 {
				t.Fatalf("collision node with %d entries", len(n.entries))
			}
			for i, e := range n.entries {
				if hashKey(e.key) != prefix {
					t.Fatalf("collision node for %#x holds key with hash %#x", prefix, hashKey(e.key))
				}
				if i > 0 && !keyLess(n.entries[i-1].key, e.key) {
					t.Fatalf("collision node not strictly sorted at %d", i)
				}
			}
			return len(n.entries)
		}
		if n.datamap&n.nodemap != 0 {
			t.Fatalf("slot both entry and child: %#x/%#x", n.datamap, n.nodemap)
		}
		if bits.OnesCount32(n.datamap) != len(n.entries) || bits.OnesCount32(n.nodemap) != len(n.children) {
			t.Fatalf("bitmaps %#x/%#x vs %d entries, %d children", n.datamap, n.nodemap, len(n.entries), len(n.children))
		}
		mask := uint64(1)<<shift - 1
		count := 0
		ei, ci := 0, 0
		for bm := n.datamap | n.nodemap; bm != 0; bm &= bm - 1 {
			slot := uint64(bits.TrailingZeros32(bm))
			if n.datamap&(bm&-bm) != 0 {
				h := hashKey(n.entries[ei].key)
				if h&mask != prefix || (h>>shift)&levelMask != slot {
					t.Fatalf("entry with hash %#x in slot %d at shift %d, prefix %#x", h, slot, shift, prefix)
				}
				ei++
				count++
			} else {
				count += walk(n.children[ci], shift+bitsPerLevel, prefix|slot<<shift, false)
				ci++
			}
		}
		if !isRoot && (count < 2 || len(n.entries) == 1 && len(n.children) == 0) {
			t.Fatalf("non-canonical node at shift %d: %d entries below, %d inline, %d children", shift, count, len(n.entries), len(n.children))
		}
		return count
	}
	return walk(root, 0, 0, true)
}

// checkMap verifies m against model completely.
func checkMap(t tb, m *Map[int], model map[uuid.UUID]int, absent []uuid.UUID) {
	t.Helper()
	if m.Len() != len(model) {
		t.Fatalf("Len = %d, model has %d", m.Len(), len(model))
	}
	if n := checkStructure(t, &m.root); n != len(model) {
		t.Fatalf("trie holds %d entries, model has %d", n, len(model))
	}
	for k, want := range model {
		if got, ok := m.Get(k); !ok || got != want {
			t.Fatalf("Get(%v) = %d, %v; want %d", k, got, ok, want)
		}
	}
	for _, k := range absent {
		if _, inModel := model[k]; inModel {
			continue
		}
		if got, ok := m.Get(k); ok {
			t.Fatalf("Get(%v) = %d, true for an absent key", k, got)
		}
	}
	seen := make(map[uuid.UUID]bool, len(model))
	m.Range(func(k uuid.UUID, v int) bool {
		if seen[k] {
			t.Fatalf("Range visited %v twice", k)
		}
		seen[k] = true
		if want, ok := model[k]; !ok || v != want {
			t.Fatalf("Range gave %v=%d, model has %d, %v", k, v, want, ok)
		}
		return true
	})
	if len(seen) != len(model) {
		t.Fatalf("Range visited %d entries, model has %d", len(seen), len(model))
	}
}

func rangeKeys[V any](m *Map[V]) []uuid.UUID {
	var ks []uuid.UUID
	m.Range(func(k uuid.UUID, _ V) bool {
		ks = append(ks, k)
		return true
	})
	return ks
}

// ---- rapid state machine ----

type snapshot struct {
	m     *Map[int]
	model map[uuid.UUID]int
}

const (
	baseHashA = 0x0123456789abcdef
	baseHashB = 0xfedcba9876543210
)

// keyGen draws keys of four kinds: from a small fixed pool (to hit updates
// and deletes), fully colliding (one hash, small tails), sharing
// a hash prefix of a random number of levels with a base hash, and fresh.
func keyGen(pool []uuid.UUID) *rapid.Generator[uuid.UUID] {
	return rapid.Custom(func(t *rapid.T) uuid.UUID {
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			return rapid.SampledFrom(pool).Draw(t, "pooled")
		case 1:
			base := rapid.SampledFrom([]uint64{baseHashA, baseHashB}).Draw(t, "base")
			return keyWithHash(base, rapid.Uint64Range(0, 5).Draw(t, "tail"))
		case 2:
			base := rapid.SampledFrom([]uint64{baseHashA, baseHashB}).Draw(t, "base")
			levels := rapid.UintRange(1, 12).Draw(t, "levels")
			high := rapid.Uint64Range(0, 7).Draw(t, "high")
			h := base ^ high<<(levels*bitsPerLevel)
			return keyWithHash(h, rapid.Uint64Range(0, 2).Draw(t, "tail"))
		default:
			var k uuid.UUID
			binary.LittleEndian.PutUint64(k[:8], rapid.Uint64().Draw(t, "lo"))
			binary.LittleEndian.PutUint64(k[8:], rapid.Uint64().Draw(t, "hi"))
			return k
		}
	})
}

func TestMapStateMachine(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	pool := make([]uuid.UUID, 24)
	for i := range pool {
		pool[i] = randomKey(r)
	}
	rapid.Check(t, func(t *rapid.T) {
		keys := keyGen(pool)
		vals := rapid.IntRange(-1000, 1000)

		cur := New[int]()
		model := map[uuid.UUID]int{}
		var b *Builder[int]
		var bModel map[uuid.UUID]int
		var snaps []snapshot
		var touched []uuid.UUID // every key ever used, to probe absences

		keep := func(m *Map[int], mod map[uuid.UUID]int) {
			snaps = append(snaps, snapshot{m, maps.Clone(mod)})
			if len(snaps) > 8 {
				i := rapid.IntRange(0, len(snaps)-1).Draw(t, "evict")
				snaps = slices.Delete(snaps, i, i+1)
			}
		}
		key := func() uuid.UUID {
			k := keys.Draw(t, "key")
			touched = append(touched, k)
			return k
		}

		t.Repeat(map[string]func(*rapid.T){
			"MapSet": func(t *rapid.T) {
				k, v := key(), vals.Draw(t, "v")
				if rapid.Bool().Draw(t, "snapshot") {
					keep(cur, model)
				}
				cur = cur.Set(k, v)
				model = maps.Clone(model)
				model[k] = v
			},
			"MapDelete": func(t *rapid.T) {
				k := key()
				if rapid.Bool().Draw(t, "snapshot") {
					keep(cur, model)
				}
				_, had := model[k]
				next := cur.Delete(k)
				if !had && next != cur {
					t.Fatalf("Delete of absent key made a new map")
				}
				cur = next
				model = maps.Clone(model)
				delete(model, k)
			},
			"MapGet": func(t *rapid.T) {
				k := key()
				want, wantOK := model[k]
				if got, ok := cur.Get(k); got != want || ok != wantOK {
					t.Fatalf("Get = %d, %v; want %d, %v", got, ok, want, wantOK)
				}
			},
			"Transient": func(t *rapid.T) {
				if b != nil {
					t.Skip("builder active")
				}
				base, baseModel := cur, model
				if len(snaps) > 0 && rapid.Bool().Draw(t, "fromSnapshot") {
					s := snaps[rapid.IntRange(0, len(snaps)-1).Draw(t, "snap")]
					base, baseModel = s.m, s.model
				}
				b = base.Transient()
				bModel = maps.Clone(baseModel)
			},
			"BuilderSet": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				k, v := key(), vals.Draw(t, "v")
				b.Set(k, v)
				bModel[k] = v
			},
			"BuilderDelete": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				k := key()
				_, had := bModel[k]
				if got := b.Delete(k); got != had {
					t.Fatalf("Builder.Delete = %v, want %v", got, had)
				}
				delete(bModel, k)
			},
			"BuilderGet": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				k := key()
				want, wantOK := bModel[k]
				if got, ok := b.Get(k); got != want || ok != wantOK {
					t.Fatalf("Builder.Get = %d, %v; want %d, %v", got, ok, want, wantOK)
				}
			},
			"BuilderBulk": func(t *rapid.T) {
				// Many edits in one builder, so tries get a few levels deep
				// and nodes are edited repeatedly once owned.
				if b == nil {
					t.Skip("no builder")
				}
				n := rapid.IntRange(1, 150).Draw(t, "n")
				seed := rapid.Uint64().Draw(t, "seed")
				r := rand.New(rand.NewPCG(seed, 3))
				var ks []uuid.UUID
				for i := range n {
					k := randomKey(r)
					if i%5 == 0 {
						k = keyWithHash(baseHashA, uint64(i))
					}
					ks = append(ks, k)
					b.Set(k, i)
					bModel[k] = i
				}
				// Delete some of them again, plus some of the existing keys.
				for i, k := range ks {
					if i%3 == 0 {
						b.Delete(k)
						delete(bModel, k)
					}
				}
				touched = append(touched, ks...)
			},
			"Persistent": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				m := b.Persistent()
				if rapid.Bool().Draw(t, "checkPanic") {
					func() {
						defer func() {
							if recover() == nil {
								t.Fatalf("Builder.Set after Persistent did not panic")
							}
						}()
						b.Set(uuid.UUID{}, 1)
					}()
				}
				keep(cur, model)
				cur, model = m, bModel
				b, bModel = nil, nil
			},
			"Abandon": func(t *rapid.T) {
				if b == nil {
					t.Skip("no builder")
				}
				b, bModel = nil, nil
			},
			"OrderIndependence": func(t *rapid.T) {
				// Rebuild cur's key set in another order, with a different
				// history (extra keys added and removed, a mix of builder and
				// persistent edits), and compare Range orders.
				// Sorted first so that the draw replays deterministically.
				sorted := slices.SortedFunc(maps.Keys(model), func(a, b uuid.UUID) int {
					return bytes.Compare(a[:], b[:])
				})
				ks := rapid.Permutation(sorted).Draw(t, "order")
				extra := pool[:rapid.IntRange(0, len(pool)).Draw(t, "extra")]
				bb := New[int]().Transient()
				for _, k := range extra {
					bb.Set(k, 0)
				}
				half := len(ks) / 2
				for _, k := range ks[:half] {
					bb.Set(k, model[k])
				}
				for _, k := range extra {
					if _, ok := model[k]; !ok {
						bb.Delete(k)
					}
				}
				m := bb.Persistent()
				for _, k := range ks[half:] {
					m = m.Set(k, model[k])
				}
				checkMap(t, m, model, touched)
				if got, want := rangeKeys(m), rangeKeys(cur); !slices.Equal(got, want) {
					t.Fatalf("Range order depends on history:\n%v\n%v", got, want)
				}
			},
			"": func(t *rapid.T) {
				checkMap(t, cur, model, touched)
				for _, s := range snaps {
					checkMap(t, s.m, s.model, touched)
				}
				if b != nil {
					if b.Len() != len(bModel) {
						t.Fatalf("Builder.Len = %d, want %d", b.Len(), len(bModel))
					}
					if n := checkStructure(t, &b.root); n != len(bModel) {
						t.Fatalf("builder trie holds %d entries, model %d", n, len(bModel))
					}
					for k, want := range bModel {
						if got, ok := b.Get(k); !ok || got != want {
							t.Fatalf("Builder.Get(%v) = %d, %v; want %d", k, got, ok, want)
						}
					}
				}
			},
		})
	})
}

// ---- targeted tests ----

func TestCollisions(t *testing.T) {
	// Keys made for one 64-bit hash, differing in their other bits.
	collide := func(tail uint64) uuid.UUID { return keyWithHash(0xdeadbeefcafef00d, tail) }
	model := map[uuid.UUID]int{}
	m := New[int]()
	var snaps []snapshot
	tails := []uint64{9, 3, 7, 1, 5, 3, 0, 8}
	for i, tail := range tails {
		k := collide(tail)
		snaps = append(snaps, snapshot{m, maps.Clone(model)})
		m = m.Set(k, i)
		model[k] = i
		checkMap(t, m, model, []uuid.UUID{collide(2), collide(4)})
	}
	// A neighbour whose hash shares 40 bits (8 levels) with theirs.
	other := keyWithHash(hashKey(collide(0))^1<<40, 0)
	m = m.Set(other, -1)
	model[other] = -1
	checkMap(t, m, model, nil)
	// The seven colliding keys sit in one collision node below the 13
	// bitmap levels.
	h, n := hashKey(collide(0)), &m.root
	for shift := uint(0); shift < hashBits; shift += bitsPerLevel {
		bit := bitpos(h, shift)
		if n.nodemap&bit == 0 {
			t.Fatalf("no child at shift %d", shift)
		}
		n = n.children[index(n.nodemap, bit)]
	}
	if len(n.entries) != 7 {
		t.Fatalf("collision node holds %d entries, want 7", len(n.entries))
	}
	// Range over a collision node is ordered by key.
	var seen []uuid.UUID
	m.Range(func(k uuid.UUID, _ int) bool {
		if k != other {
			seen = append(seen, k)
		}
		return true
	})
	if !slices.IsSortedFunc(seen, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
		t.Fatalf("collision entries out of key order: %v", seen)
	}
	// Delete down to one colliding key: the collision node and the chain of
	// single-child nodes above it must collapse.
	b := m.Transient()
	for _, tail := range []uint64{9, 3, 7, 1, 5, 0} {
		if !b.Delete(collide(tail)) {
			t.Fatalf("Delete(%d) = false", tail)
		}
		delete(model, collide(tail))
		if b.Delete(collide(tail)) {
			t.Fatalf("second Delete(%d) = true", tail)
		}
	}
	m2 := b.Persistent()
	checkMap(t, m2, model, []uuid.UUID{collide(9)})
	// The two keys left share 40 bits of hash, so they sit together in a
	// node 8 levels down, and the collision node below it is gone.
	depth := 0
	for n := &m2.root; len(n.children) > 0; n = n.children[0] {
		if len(n.children) != 1 || len(n.entries) != 0 {
			t.Fatalf("unexpected node at depth %d: %d entries, %d children", depth, len(n.entries), len(n.children))
		}
		depth++
	}
	if depth != 8 {
		t.Fatalf("two keys sharing 8 levels sit at depth %d", depth)
	}
	for _, s := range snaps {
		checkMap(t, s.m, s.model, nil)
	}
}

func TestBuilderAfterPersistentPanics(t *testing.T) {
	b := New[int]().Transient()
	b.Set(uuid.New(), 1)
	b.Persistent()
	for name, f := range map[string]func(){
		"Set":        func() { b.Set(uuid.New(), 1) },
		"Get":        func() { b.Get(uuid.New()) },
		"Delete":     func() { b.Delete(uuid.New()) },
		"Len":        func() { b.Len() },
		"Persistent": func() { b.Persistent() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s after Persistent did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestStress runs a long random sequence against a model with a fixed seed,
// with a few thousand keys so the trie is several levels deep.
func TestStress(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	pool := make([]uuid.UUID, 4000)
	for i := range pool {
		switch {
		case i%50 == 0:
			pool[i] = keyWithHash(baseHashA, uint64(i))
		case i%50 == 1:
			pool[i] = keyWithHash(baseHashB^uint64(r.IntN(8))<<(5*uint(r.IntN(12)+1)), uint64(i%3))
		default:
			pool[i] = randomKey(r)
		}
	}
	m := New[int]()
	model := map[uuid.UUID]int{}
	var snaps []snapshot
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for round := range rounds {
		snaps = append(snaps, snapshot{m, maps.Clone(model)})
		if r.IntN(3) == 0 {
			for range r.IntN(20) {
				k := pool[r.IntN(len(pool))]
				if r.IntN(3) == 0 {
					m = m.Delete(k)
					delete(model, k)
				} else {
					m = m.Set(k, round)
					model[k] = round
				}
			}
		} else {
			b := m.Transient()
			// Mostly grow early on, mostly shrink late, always churn.
			pDelete := 0.2 + 0.6*float64(round)/float64(rounds)
			for range r.IntN(400) {
				k := pool[r.IntN(len(pool))]
				if r.Float64() < pDelete {
					_, had := model[k]
					if b.Delete(k) != had {
						t.Fatalf("Delete reported wrongly")
					}
					delete(model, k)
				} else {
					v := r.Int()
					b.Set(k, v)
					model[k] = v
				}
			}
			m = b.Persistent()
		}
		if round%10 == 0 {
			checkMap(t, m, model, pool[:200])
		}
	}
	checkMap(t, m, model, pool)
	for _, s := range snaps {
		checkMap(t, s.m, s.model, pool[:100])
	}
}

// TestTransientAllocs checks that a builder copies a node only the first time
// it touches it: editing the same keys again allocates nothing.
func TestTransientAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	b := New[int]().Transient()
	keys := make([]uuid.UUID, 20000)
	for i := range keys {
		keys[i] = randomKey(r)
		b.Set(keys[i], i)
	}
	m := b.Persistent()
	batch := keys[:300]

	b = m.Transient()
	first := mallocs(func() {
		for i, k := range batch {
			b.Set(k, i)
		}
	})
	// Every node on these paths is now owned by b.
	again := testing.AllocsPerRun(5, func() {
		for i, k := range batch {
			b.Set(k, -i)
			b.Get(k)
		}
	})
	if again != 0 {
		t.Errorf("re-editing owned paths allocated %v times per batch", again)
	}
	t.Logf("300 updates in a fresh builder over %d entries: %v allocs", len(keys), first)
	if got := testing.AllocsPerRun(100, func() { m.Get(keys[7]) }); got != 0 {
		t.Errorf("Get allocated %v", got)
	}
	m2 := b.Persistent()
	for i, k := range batch {
		if v, _ := m.Get(k); v != i {
			t.Fatalf("old map changed: %v = %d, want %d", k, v, i)
		}
		if v, _ := m2.Get(k); v != -i {
			t.Fatalf("new map: %v = %d, want %d", k, v, -i)
		}
	}
}

// mallocs returns the number of heap allocations f makes.
func mallocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

func TestRangeStops(t *testing.T) {
	m := New[int]()
	for i := range 100 {
		m = m.Set(uuid.New(), i)
	}
	n := 0
	m.Range(func(uuid.UUID, int) bool {
		n++
		return n < 10
	})
	if n != 10 {
		t.Fatalf("Range went on after false: %d calls", n)
	}
}

func TestEmpty(t *testing.T) {
	m := New[string]()
	if m.Len() != 0 {
		t.Fatal("Len of New")
	}
	if _, ok := m.Get(uuid.New()); ok {
		t.Fatal("Get on empty")
	}
	if m.Delete(uuid.New()) != m {
		t.Fatal("Delete on empty made a new map")
	}
	m.Range(func(uuid.UUID, string) bool { t.Fatal("Range on empty"); return false })
	k := uuid.New()
	m2 := m.Set(k, "x").Delete(k)
	if m2.Len() != 0 || len(m2.root.entries) != 0 || len(m2.root.children) != 0 {
		t.Fatalf("set+delete left %d / %+v", m2.Len(), m2.root)
	}
}

func Example() {
	a := uuid.MustParse("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
	m0 := New[string]()
	m1 := m0.Set(a, "pending")

	b := m1.Transient()
	b.Set(a, "running")
	m2 := b.Persistent()

	v1, _ := m1.Get(a)
	v2, _ := m2.Get(a)
	fmt.Println(m0.Len(), v1, v2)
	// Output: 0 pending running
}

// TestConcurrentReaders reads a map from several goroutines while another
// edits it through builders and persistent edits; under -race this checks
// that no edit writes memory the map can reach.
func TestConcurrentReaders(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	keys := make([]uuid.UUID, 5000)
	b := New[int]().Transient()
	for i := range keys {
		keys[i] = randomKey(r)
		if i%40 == 0 {
			keys[i] = keyWithHash(baseHashA, uint64(i))
		}
		b.Set(keys[i], i)
	}
	m := b.Persistent()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				n := 0
				m.Range(func(k uuid.UUID, v int) bool {
					if keys[v] != k {
						t.Errorf("Range gave %v=%d", k, v)
					}
					n++
					return true
				})
				if n != len(keys) {
					t.Errorf("Range saw %d entries", n)
				}
			}
		})
	}
	cur := m
	for round := range 50 {
		b := cur.Transient()
		for range 200 {
			k := keys[r.IntN(len(keys))]
			if r.IntN(2) == 0 {
				b.Delete(k)
			} else {
				b.Set(k, -round)
			}
		}
		cur = b.Persistent().Set(keys[round], round).Delete(keys[round+1])
	}
	close(done)
	wg.Wait()
	checkMap(t, m, func() map[uuid.UUID]int {
		model := map[uuid.UUID]int{}
		for i, k := range keys {
			model[k] = i
		}
		return model
	}(), nil)
}

// TestTailsSpread: keys that share their first 8 bytes and differ only in
// the last (hand-made or sequential uids a client may choose) get distinct
// hashes, so they never pile into one collision node and make inserts
// quadratic.
func TestTailsSpread(t *testing.T) {
	seen := map[uint64]bool{}
	for i := range uint64(10_000) {
		var k uuid.UUID
		binary.BigEndian.PutUint64(k[8:], i)
		seen[hashKey(k)] = true
	}
	if len(seen) != 10_000 {
		t.Fatalf("10,000 keys differing in their tails have %d distinct hashes", len(seen))
	}
}

// TestWarmTouchesWhatGetFinds: Warm, over any keys, touches the value of
// every key present that a bitmap node holds (a collision node's keys, whose
// full hashes are equal, it leaves alone), once per time the key is named,
// and nothing else; and it changes nothing. Batches longer than warmBatch
// are covered by the longer draws.
func TestWarmTouchesWhatGetFinds(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	pool := make([]uuid.UUID, 24)
	for i := range pool {
		pool[i] = randomKey(r)
	}
	rapid.Check(t, func(t *rapid.T) {
		gen := keyGen(pool)
		b := New[int]().Transient()
		for _, k := range rapid.SliceOfN(gen, 0, 200).Draw(t, "stored") {
			b.Set(k, rapid.IntRange(1, 1000).Draw(t, "val"))
		}
		m := b.Persistent()
		hashes := map[uint64]int{}
		m.Range(func(k uuid.UUID, _ int) bool { hashes[hashKey(k)]++; return true })
		asked := rapid.SliceOfN(gen, 0, 3*warmBatch).Draw(t, "asked")
		var want uint64
		for _, k := range asked {
			if v, ok := m.Get(k); ok && hashes[hashKey(k)] == 1 {
				want += uint64(v)
			}
		}
		entries := func() (kv []entry[int]) {
			m.Range(func(k uuid.UUID, v int) bool { kv = append(kv, entry[int]{k, v}); return true })
			return kv
		}
		before := entries()
		if got := m.Warm(asked, func(v int) uint64 { return uint64(v) }); got != want {
			t.Fatalf("Warm touched values summing to %d, want %d", got, want)
		}
		if m.Warm(asked, nil) != 0 {
			t.Fatal("Warm without touch returned a sum")
		}
		if after := entries(); !slices.Equal(before, after) || m.Len() != len(before) {
			t.Fatal("Warm changed the map")
		}
	})
}
