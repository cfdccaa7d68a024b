package pmap

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestWarmTouchesWhatGetFinds: Warm, over any keys, touches the value of
// every key present that a bitmap node holds (a collision node's keys, whose
// full hashes are equal, it leaves alone), once per time the key is named,
// and nothing else; and it changes nothing. Batches longer than warmBatch
// are covered by the longer draws.
func TestWarmTouchesWhatGetFinds(t *testing.T) {
	pool := keyPool(9, 24)
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
