package store

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// TestSortTouchesMatchesComparisonSort holds the radix sort to
// slices.SortFunc by compareTouches, on lists with repeated uids (an object
// touched many times), few distinct leading bytes (crowded buckets) and
// every kind of object.
func TestSortTouchesMatchesComparisonSort(t *testing.T) {
	var scratch []int32
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 3000).Draw(rt, "n")
		lead := rapid.IntRange(1, 256).Draw(rt, "distinct leading bytes")
		uids := rapid.IntRange(1, 500).Draw(rt, "distinct uids")
		pool := make([]uuid.UUID, uids)
		for i := range pool {
			for j := range pool[i] {
				pool[i][j] = byte(rapid.IntRange(0, 255).Draw(rt, "byte"))
			}
			pool[i][0] = byte(int(pool[i][0]) % lead)
		}
		kinds := []byte{prefixTask, prefixMachine, prefixJob, prefixOffer, prefixQuota, prefixLease}
		ts := make([]touch, n)
		for i := range ts {
			ts[i] = touch{
				kind: kinds[rapid.IntRange(0, len(kinds)-1).Draw(rt, "kind")],
				seq:  uint32(i),
				uid:  pool[rapid.IntRange(0, uids-1).Draw(rt, "uid")],
			}
		}
		want := slices.Clone(ts)
		slices.SortFunc(want, compareTouches)
		scratch = sortTouches(ts, scratch)
		if !slices.Equal(ts, want) {
			rt.Fatalf("sortTouches of %d touches differs from the comparison sort", n)
		}
	})
}

// BenchmarkSortTouches: a checkpoint's touch list (2,000,000 touches of
// random uids, each object touched about three times), sorted by the radix
// sort and by the comparison sort it replaced.
func BenchmarkSortTouches(b *testing.B) {
	const n = 2_000_000
	src := make([]touch, n)
	var u uuid.UUID
	for i := range src {
		if i%3 == 0 {
			u = uuid.New()
		}
		src[i] = touch{kind: prefixTask, seq: uint32(i), uid: u}
	}
	scatter := func(ts []touch) { // the list is in revision order, an object's touches apart
		for i := len(ts) - 1; i > 0; i-- {
			j := (i * 7919) % (i + 1)
			ts[i], ts[j] = ts[j], ts[i]
		}
	}
	scatter(src)
	ts := make([]touch, n)
	b.Run("radix", func(b *testing.B) {
		var scratch []int32
		for b.Loop() {
			copy(ts, src)
			scratch = sortTouches(ts, scratch)
		}
	})
	b.Run("comparison", func(b *testing.B) {
		for b.Loop() {
			copy(ts, src)
			slices.SortFunc(ts, compareTouches)
		}
	})
}
