package txn

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestTotalReplace holds total.replace to its definition: taking old out
// and putting now in, for amounts near the int64 bounds and with extended
// resources on either side; and minus to plus's inverse.
func TestTotalReplace(t *testing.T) {
	amount := rapid.OneOf(rapid.Int64Range(-5, 5), rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, 1 << 62}))
	res := rapid.Custom(func(t *rapid.T) Resources {
		r := Resources{CPU: amount.Draw(t, "cpu"), Memory: amount.Draw(t, "mem")}
		if rapid.Bool().Draw(t, "ext") {
			r.Ext = map[string]int64{"gpu": amount.Draw(t, "gpu")}
		}
		return r
	})
	rapid.Check(t, func(t *rapid.T) {
		var start total
		for _, r := range rapid.SliceOfN(res, 0, 4).Draw(t, "start") {
			start = start.add(r)
		}
		old, now := res.Draw(t, "old"), res.Draw(t, "now")
		if got, want := start.replace(old, now), start.sub(old).add(now); !got.equal(want) {
			t.Fatalf("replace(%v, %v) on %v = %v, want %v", old, now, start.resources(), got.resources(), want.resources())
		}
		o := total{}.add(old).add(now)
		if got := start.plus(o).minus(o); !got.equal(start) {
			t.Fatalf("%v plus and minus %v = %v", start.resources(), o.resources(), got.resources())
		}
	})
}
