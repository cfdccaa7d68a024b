package pmap

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/google/uuid"
)

const benchN = 1_000_000

var bench struct {
	once  sync.Once
	keys  []uuid.UUID // in the map
	fresh []uuid.UUID // not in the map
	order []int       // random permutation of the keys' indexes
	m     *Map[int]
}

// benchFixture returns a 1,000,000-entry map of random v4 keys, built once.
func benchFixture(b *testing.B) {
	b.Helper()
	bench.once.Do(func() {
		r := rand.New(rand.NewPCG(11, 13))
		bench.keys = make([]uuid.UUID, benchN)
		for i := range bench.keys {
			bench.keys[i] = randomKey(r)
		}
		bench.fresh = make([]uuid.UUID, 1<<16)
		for i := range bench.fresh {
			bench.fresh[i] = randomKey(r)
		}
		bench.order = r.Perm(benchN)
		bench.m = build(bench.keys)
	})
}

func build(keys []uuid.UUID) *Map[int] {
	tb := New[int]().Transient()
	for i, k := range keys {
		tb.Set(k, i)
	}
	return tb.Persistent()
}

var sinkInt int

func BenchmarkGet(b *testing.B) {
	benchFixture(b)
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		m, keys, order := bench.m, bench.keys, bench.order
		i := 0
		for b.Loop() {
			v, _ := m.Get(keys[order[i%benchN]])
			sinkInt += v
			i++
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		m, fresh := bench.m, bench.fresh
		i := 0
		for b.Loop() {
			v, _ := m.Get(fresh[i%len(fresh)])
			sinkInt += v
			i++
		}
	})
	b.Run("gomap-reference", func(b *testing.B) {
		gm := make(map[uuid.UUID]int, benchN)
		for i, k := range bench.keys {
			gm[k] = i
		}
		keys, order := bench.keys, bench.order
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			sinkInt += gm[keys[order[i%benchN]]]
			i++
		}
	})
}

// BenchmarkBuilderSet100 is one batch: a transient of the 1,000,000-entry
// map, 100 Sets, Persistent.
func BenchmarkBuilderSet100(b *testing.B) {
	benchFixture(b)
	run := func(b *testing.B, keys []uuid.UUID, perm []int) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tb := bench.m.Transient()
			for range 100 {
				j := i % len(keys)
				if perm != nil {
					j = perm[j]
				}
				tb.Set(keys[j], i)
				i++
			}
			if tb.Persistent().Len() < benchN {
				b.Fatal("lost entries")
			}
		}
	}
	b.Run("update", func(b *testing.B) { run(b, bench.keys, bench.order) })
	b.Run("insert", func(b *testing.B) { run(b, bench.fresh, nil) })
}

// BenchmarkSet is one persistent Set on the 1,000,000-entry map.
func BenchmarkSet(b *testing.B) {
	benchFixture(b)
	b.Run("update", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := bench.keys[bench.order[i%benchN]]
			if bench.m.Set(k, i).Len() != benchN {
				b.Fatal("wrong Len")
			}
			i++
		}
	})
	b.Run("insert", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if bench.m.Set(bench.fresh[i%len(bench.fresh)], i).Len() != benchN+1 {
				b.Fatal("wrong Len")
			}
			i++
		}
	})
}

// BenchmarkDelete is one persistent Delete on the 1,000,000-entry map.
func BenchmarkDelete(b *testing.B) {
	benchFixture(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if bench.m.Delete(bench.keys[bench.order[i%benchN]]).Len() != benchN-1 {
			b.Fatal("wrong Len")
		}
		i++
	}
}

func BenchmarkRange(b *testing.B) {
	benchFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		bench.m.Range(func(uuid.UUID, int) bool { n++; return true })
		if n != benchN {
			b.Fatal("wrong count")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchN, "ns/entry")
}

// heapBytes returns the live heap after a full collection.
func heapBytes() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkBytesPerEntry measures the memory of a 1,000,000-entry
// Map[uuid.UUID]int (the keys slice excluded) and reports it as bytes/entry;
// ns/op is the time to build it with one Builder. An entry's key and value
// alone are 24 bytes.
func BenchmarkBytesPerEntry(b *testing.B) {
	benchFixture(b)
	keys := bench.keys
	b.Run("builder", func(b *testing.B) {
		var perEntry float64
		for b.Loop() {
			before := heapBytes()
			m := build(keys)
			perEntry = float64(heapBytes()-before) / benchN
			runtime.KeepAlive(m)
		}
		b.ReportMetric(perEntry, "bytes/entry")
	})
	b.Run("after-churn", func(b *testing.B) {
		// The map after 2,000 batches of 100 edits (half deletes, half
		// inserts of new keys), every old version dropped: what a
		// long-running store holds.
		r := rand.New(rand.NewPCG(3, 4))
		var perEntry float64
		for b.Loop() {
			before := heapBytes()
			m := build(keys)
			live := append([]uuid.UUID(nil), keys...)
			for range 2000 {
				tb := m.Transient()
				for range 50 {
					j := r.IntN(len(live))
					tb.Delete(live[j])
					live[j] = randomKey(r)
					tb.Set(live[j], j)
				}
				m = tb.Persistent()
			}
			if m.Len() != benchN {
				b.Fatalf("Len = %d", m.Len())
			}
			perEntry = float64(heapBytes()-before-uint64(cap(live))*16) / benchN
			runtime.KeepAlive(m)
			runtime.KeepAlive(live)
		}
		b.ReportMetric(perEntry, "bytes/entry")
	})
	b.Run("gomap-reference", func(b *testing.B) {
		var perEntry float64
		for b.Loop() {
			before := heapBytes()
			gm := make(map[uuid.UUID]int)
			for i, k := range keys {
				gm[k] = i
			}
			perEntry = float64(heapBytes()-before) / benchN
			runtime.KeepAlive(gm)
		}
		b.ReportMetric(perEntry, "bytes/entry")
	})
}
