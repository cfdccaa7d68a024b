package pmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
)

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
