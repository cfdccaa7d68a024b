package vmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/omega-cell/omega/internal/pmap"
)

func key(i int) uuid.UUID {
	var k uuid.UUID
	r := rand.New(rand.NewPCG(uint64(i), 99))
	for j := range k {
		k[j] = byte(r.Uint32())
	}
	return k
}

// check compares m with the model (key index → value) over the pool.
func check(t interface{ Fatalf(string, ...any) }, m *Map[int], model map[int]int, pool int, what string) {
	if m.Len() != len(model) {
		t.Fatalf("%s: Len %d, model %d", what, m.Len(), len(model))
	}
	for i := range pool {
		v, ok := m.Get(key(i))
		want, wok := model[i]
		if ok != wok || (ok && *v != want) {
			got := "absent"
			if ok {
				got = fmt.Sprint(*v)
			}
			t.Fatalf("%s: key %d: got %s, model %v (present %v)", what, i, got, want, wok)
		}
	}
	// Range: the model's keys, in pmap's order.
	pb := pmap.New[int]().Transient()
	for i, v := range model {
		pb.Set(key(i), v)
	}
	var want, got []uuid.UUID
	pb.Persistent().Range(func(k uuid.UUID, _ int) bool { want = append(want, k); return true })
	m.Range(func(k uuid.UUID, v *int) bool { got = append(got, k); return true })
	if !slices.Equal(got, want) {
		t.Fatalf("%s: Range gave %d keys %v, pmap's order %d keys %v", what, len(got), got, len(want), want)
	}
}

// TestModel runs random histories — edits of the newest snapshot and now and
// then of an older one or after a dropped Builder, snapshots dropped and
// collected — and checks every snapshot still held against a copy of the
// model taken at its revision.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pool := rapid.IntRange(1, 200).Draw(rt, "pool")
		type held struct {
			h     *Map[int]
			model map[int]int
		}
		cur := held{New[int](), map[int]int{}}
		kept := []held{cur}
		rev := uint64(0)
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for step := range steps {
			base := cur
			switch rapid.IntRange(0, 9).Draw(rt, "base") {
			case 0: // an older snapshot: its edit copies
				base = kept[rapid.IntRange(0, len(kept)-1).Draw(rt, "older")]
			case 1: // a Builder dropped unfinished: the next edit copies
				b := cur.h.Edit()
				b.Swap(key(0), new(int))
			}
			b := base.h.Edit()
			model := maps.Clone(base.model)
			for range rapid.IntRange(0, 3*pool).Draw(rt, "edits") {
				i := rapid.IntRange(0, pool-1).Draw(rt, "key")
				old, had := b.Get(key(i))
				mv, mhad := model[i]
				if had != mhad || (had && *old != mv) {
					rt.Fatalf("step %d: Builder.Get(%d) = %v %v, model %v %v", step, i, old, had, mv, mhad)
				}
				if rapid.IntRange(0, 3).Draw(rt, "remove") == 0 {
					o, h := b.Remove(key(i))
					if h != mhad || (h && *o != mv) {
						rt.Fatalf("step %d: Remove(%d) returned %v %v, model %v %v", step, i, o, h, mv, mhad)
					}
					delete(model, i)
				} else {
					v := rapid.IntRange(0, 1000).Draw(rt, "val")
					o, h := b.Swap(key(i), &v)
					if h != mhad || (h && *o != mv) {
						rt.Fatalf("step %d: Swap(%d) returned %v %v, model %v %v", step, i, o, h, mv, mhad)
					}
					model[i] = v
				}
				if b.Len() != len(model) {
					rt.Fatalf("step %d: Builder.Len %d, model %d", step, b.Len(), len(model))
				}
			}
			rev = max(rev, base.h.Revision()) + 1 + uint64(rapid.IntRange(0, 2).Draw(rt, "gap"))
			cur = held{(b.Finish(rev)), model}
			kept = append(kept, cur)
			// Drop some held snapshots and let the collector free them,
			// so cuts happen while others are still read.
			for i := 0; i < len(kept)-1; i++ {
				if rapid.IntRange(0, 3).Draw(rt, "drop") == 0 {
					kept = slices.Delete(kept, i, i+1)
					i--
				}
			}
			if step%7 == 0 {
				runtime.GC()
			}
			for _, k := range kept {
				check(rt, k.h, k.model, pool, fmt.Sprintf("step %d, snapshot at %d", step, k.h.Revision()))
			}
		}
	})
}

// TestGrowKeepsOldSnapshots: a table rebuilt many times over leaves every
// held snapshot reading its own revision.
func TestGrowKeepsOldSnapshots(t *testing.T) {
	var hs []*Map[int]
	var models []map[int]int
	cur, model := New[int](), map[int]int{}
	for r := 1; r <= 40; r++ {
		b := cur.Edit()
		for i := (r - 1) * 500; i < r*500; i++ {
			v := i * r
			b.Swap(key(i), &v)
			model[i] = v
		}
		for i := 0; i < r*500; i += 7 { // deletions, so that grows drop slots
			if _, ok := b.Remove(key(i)); ok {
				delete(model, i)
			}
		}
		cur = (b.Finish(uint64(r)))
		if r%5 == 0 {
			hs, models = append(hs, cur), append(models, maps.Clone(model))
		}
		runtime.GC()
	}
	for i, h := range hs {
		check(t, h, models[i], 20_000, fmt.Sprintf("snapshot at %d", h.Revision()))
	}
}

// TestCutsFreeOldVersions: once no holder reads the revisions before the
// newest, a key rewritten many times keeps one version, and a deleted key's
// slot goes at the next rebuild.
func TestCutsFreeOldVersions(t *testing.T) {
	cur := New[int]()
	for r := 1; r <= 100; r++ {
		b := cur.Edit()
		v := r
		b.Swap(key(1), &v)
		cur = (b.Finish(uint64(r)))
		runtime.GC()
	}
	s := cur.r.Load().tab.find(key(1))
	n := 0
	for v := s.head.Load(); v != nil; v = v.prev.Load() {
		n++
	}
	// The collector's cleanups run on their own goroutine, a cycle or so
	// late, so a few versions may wait; without cuts there would be 100.
	if n > 10 {
		t.Fatalf("a key rewritten 100 times with no old holder keeps %d versions, want at most 10", n)
	}
	// An old holder keeps its versions.
	old := cur
	for r := 101; r <= 150; r++ {
		b := cur.Edit()
		v := r
		b.Swap(key(1), &v)
		cur = (b.Finish(uint64(r)))
		runtime.GC()
	}
	if v, ok := old.Get(key(1)); !ok || *v != 100 {
		t.Fatalf("held snapshot at 100 reads %v %v, want 100", v, ok)
	}
	runtime.KeepAlive(old)
}

// TestConcurrentReaders: readers on other goroutines read held snapshots
// while the writer edits the line in place, rebuilds its table and cuts its
// chains (run with -race). The value of key i at revision r is known: the
// last revision at or before r that wrote it.
func TestConcurrentReaders(t *testing.T) {
	const keys, revs = 300, 400
	writes := func(r int) []int { // the keys revision r writes
		return []int{r % keys, (r * 7) % keys, (r * 13) % keys}
	}
	deleted := func(i, r int) bool { return (i+r)%11 == 0 }
	want := func(i, r int) (int, bool) {
		for q := r; q >= 1; q-- {
			if slices.Contains(writes(q), i) {
				return q, !deleted(i, q)
			}
		}
		return 0, false
	}
	snaps := make(chan *Map[int], 64)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			all := make([]uuid.UUID, keys)
			for i := range all {
				all[i] = key(i)
			}
			for h := range snaps {
				r := int(h.Revision())
				h.Warm(all, func(v *int) uint64 { return uint64(*v) })
				n := 0
				h.Range(func(uuid.UUID, *int) bool { n++; return true })
				if n != h.Len() {
					errs <- fmt.Errorf("revision %d: Range gave %d keys, Len %d", r, n, h.Len())
					return
				}
				for i := range keys {
					v, ok := h.Get(key(i))
					w, wok := want(i, r)
					if ok != wok || (ok && *v != w) {
						errs <- fmt.Errorf("revision %d, key %d: got %v %v, want %d %v", r, i, v, ok, w, wok)
						return
					}
				}
			}
		}()
	}
	cur := New[int]()
	for r := 1; r <= revs; r++ {
		b := cur.Edit()
		for _, i := range writes(r) {
			junk := -r
			b.Swap(key(i), &junk) // then edited in place, unseen by the readers
			if deleted(i, r) {
				b.Remove(key(i))
			} else {
				v := r
				b.Swap(key(i), &v)
			}
		}
		cur = (b.Finish(uint64(r)))
		snaps <- cur
		if r%50 == 0 {
			runtime.GC()
		}
	}
	close(snaps)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDigitOrderMatchesPmap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pb := pmap.New[int]().Transient()
	var ks []uuid.UUID
	for range 5000 {
		var k uuid.UUID
		for j := range k {
			k[j] = byte(r.Uint32())
		}
		ks = append(ks, k)
		pb.Set(k, 0)
	}
	var want []uuid.UUID
	pb.Persistent().Range(func(k uuid.UUID, _ int) bool { want = append(want, k); return true })
	slices.SortFunc(ks, func(a, b uuid.UUID) int {
		x, y := digitOrder(Hash(a)), digitOrder(Hash(b))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return compareKeys(a, b)
	})
	if !slices.Equal(ks, want) {
		t.Fatal("sorting by digitOrder does not give pmap's Range order")
	}
}

// TestDetachIdleHolder: a snapshot kept but no longer followed is moved to
// a copy of its own, so the line cuts its chains again, and the snapshot
// still reads its revision — also from readers on other goroutines that
// are at it while it moves (run with -race).
func TestDetachIdleHolder(t *testing.T) {
	const keys = 1000
	cur := New[int]()
	b := cur.Edit()
	for i := range keys {
		v := i
		b.Swap(key(i), &v)
	}
	cur = b.Finish(1)
	idle := cur
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range keys {
					if v, ok := idle.Get(key(i)); !ok || *v != i {
						errs <- fmt.Errorf("idle snapshot at 1, key %d: got %v %v, want %d", i, v, ok, i)
						return
					}
				}
			}
		}()
	}
	for r := 2; r <= 400; r++ {
		b := cur.Edit()
		for i := range 300 {
			v := r*keys + i
			b.Swap(key((r*31+i)%keys), &v)
		}
		cur = b.Finish(uint64(r))
		if r%20 == 0 {
			runtime.GC()
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if idle.r.Load().ln == cur.r.Load().ln {
		t.Fatal("the idle snapshot still holds the line after 120,000 versions and many collections")
	}
	// The moved holder's old ref goes at a collection, and its cleanup
	// runs after: a few more collections and commits, bounded.
	ln := cur.r.Load().ln
	pending := 0
	for r := 401; r <= 450; r++ {
		runtime.GC()
		b = cur.Edit()
		cur = b.Finish(uint64(r))
		if pending = len(ln.cuts) - ln.cutFront; pending <= detachAfter {
			break
		}
	}
	if pending > detachAfter {
		t.Fatalf("%d versions wait for their cut after the idle holder moved and 50 collections, want at most %d", pending, detachAfter)
	}
	for i := range keys {
		if v, ok := idle.Get(key(i)); !ok || *v != i {
			t.Fatalf("idle snapshot after it moved, key %d: got %v %v", i, v, ok)
		}
	}
}

// TestChurnWithIdleHolderKeepsTableSmall: unique keys created and deleted
// a commit later (tasks coming and going) while an idle snapshot is held.
// A rebuilt table drops every slot deleted at a finished revision, whoever
// holds older ones, so it stays the size of the live keys; the idle
// snapshot still reads its own. (From a review: grows kept such slots for
// as long as any older snapshot lived.)
func TestChurnWithIdleHolderKeepsTableSmall(t *testing.T) {
	cur := New[int]()
	b := cur.Edit()
	v := -1
	b.Swap(key(-1), &v)
	cur = b.Finish(1)
	idle := cur
	for r := 2; r <= 40_000; r++ {
		b := cur.Edit()
		v := r
		b.Swap(key(r), &v)
		b.Remove(key(r - 1))
		cur = b.Finish(uint64(r))
		if r%5000 == 0 {
			runtime.GC()
		}
	}
	if n := len(cur.r.Load().ln.tab.slots); n > 1024 {
		t.Fatalf("2 live keys after 40,000 created and deleted: the table has %d slots", n)
	}
	if v, ok := idle.Get(key(-1)); !ok || *v != -1 {
		t.Fatalf("the idle snapshot reads %v %v, want -1", v, ok)
	}
	if _, ok := idle.Get(key(2)); ok {
		t.Fatal("the idle snapshot at 1 sees a key created at 2")
	}
}
