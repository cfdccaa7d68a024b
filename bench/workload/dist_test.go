package workload

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// googleSimulatorQuantile is the sampler of Google's Omega simulator, bug
// included: it interpolates below + f*(below+above). Kept here to show the
// mean test below would catch it.
func googleSimulatorQuantile(e *Empirical, u float64) float64 {
	for i := 0; i+1 < len(e.p); i++ {
		if u < e.p[i+1] {
			below, above := e.v[i], e.v[i+1]
			f := (u - e.p[i]) / (e.p[i+1] - e.p[i])
			return below + f*(below+above)
		}
	}
	return e.v[len(e.v)-1]
}

// TestEmpiricalMeanCatchesSamplerBug: the mean of many samples from a known
// set of points must be the set's mean within 2%. The simulator's sampler
// bug (below + f*(below+above)) fails this by far.
func TestEmpiricalMeanCatchesSamplerBug(t *testing.T) {
	points := []float64{2, 4, 8, 16, 32, 3, 5, 7}
	want := mean(points) // 9.625
	e, err := NewEmpirical(points)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	r := rand.New(rand.NewPCG(1, 2))
	sum, buggy := 0.0, 0.0
	for range n {
		u := r.Float64()
		sum += e.Quantile(u)
		buggy += googleSimulatorQuantile(e, u)
	}
	got, bug := sum/n, buggy/n
	if math.Abs(got-want) > 0.02*want {
		t.Errorf("mean of %d samples = %v, want %v within 2%%", n, got, want)
	}
	if math.Abs(bug-want) <= 0.02*want {
		t.Errorf("the buggy sampler's mean %v passes the 2%% check: the test is too weak", bug)
	}
	if math.Abs(e.Mean()-want) > 1e-12 {
		t.Errorf("Mean() = %v, want exactly the points' mean %v", e.Mean(), want)
	}
	t.Logf("points' mean %.4f, sampled %.4f, with the simulator's bug %.4f (x%.2f)", want, got, bug, bug/want)
}

func TestEmpiricalQuantile(t *testing.T) {
	q := QuantileTable{P: []float64{0, 0.5, 0.75, 1}, V: []float64{10, 20, 20, 100}}
	e, err := q.Empirical()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ u, want float64 }{
		{0, 10}, {0.25, 15}, {0.5, 20}, {0.6, 20}, {0.75, 20}, {0.875, 60}, {1, 100},
		{-1, 10}, {2, 100}, {math.NaN(), 10},
	} {
		if got := e.Quantile(tc.u); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.u, got, tc.want)
		}
	}
	for _, tc := range []struct{ x, want float64 }{{5, 0}, {15, 0.25}, {20, 0.75}, {60, 0.875}, {100, 1}} {
		if got := e.CDF(tc.x); got != tc.want {
			t.Errorf("CDF(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if want := 0.5*15 + 0.25*20 + 0.25*60; e.Mean() != want {
		t.Errorf("Mean = %v, want %v", e.Mean(), want)
	}
}

func TestQuantileTableValidate(t *testing.T) {
	for name, q := range map[string]QuantileTable{
		"one knot":         {P: []float64{0}, V: []float64{1}},
		"lengths":          {P: []float64{0, 1}, V: []float64{1}},
		"not from 0":       {P: []float64{0.1, 1}, V: []float64{1, 2}},
		"not to 1":         {P: []float64{0, 0.9}, V: []float64{1, 2}},
		"p not increasing": {P: []float64{0, 0.5, 0.5, 1}, V: []float64{1, 2, 3, 4}},
		"v decreasing":     {P: []float64{0, 0.5, 1}, V: []float64{1, 3, 2}},
		"v NaN":            {P: []float64{0, 1}, V: []float64{math.NaN(), 1}},
	} {
		if _, err := q.Empirical(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewEmpirical(nil); err == nil {
		t.Error("no points: no error")
	}
	if _, err := NewEmpirical([]float64{1, math.Inf(1)}); err == nil {
		t.Error("infinite point: no error")
	}
}

// TestEmpiricalProperties: for any sample set, Quantile is non-decreasing,
// stays within the points, passes through every knot and inverts CDF.
func TestEmpiricalProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := rapid.SliceOfN(rapid.Float64Range(-1e6, 1e6), 1, 50).Draw(t, "points")
		e, err := NewEmpirical(xs)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := slices.Min(xs), slices.Max(xs)
		us := rapid.SliceOfN(rapid.Float64Range(0, 1), 2, 20).Draw(t, "u")
		slices.Sort(us)
		prev := math.Inf(-1)
		for _, u := range us {
			x := e.Quantile(u)
			if x < prev || x < lo || x > hi {
				t.Fatalf("Quantile(%v) = %v: previous %v, range [%v, %v]", u, x, prev, lo, hi)
			}
			prev = x
			if back := e.Quantile(e.CDF(x)); math.Abs(back-x) > 1e-9*(1+math.Abs(x)) {
				t.Fatalf("Quantile(CDF(%v)) = %v", x, back)
			}
		}
		for i := range e.p {
			if got := e.Quantile(e.p[i]); got != e.v[i] {
				t.Fatalf("Quantile(P[%d]=%v) = %v, want %v", i, e.p[i], got, e.v[i])
			}
		}
		if m, want := e.Mean(), mean(xs); math.Abs(m-want) > 1e-9*(1+math.Abs(want)) {
			t.Fatalf("Mean %v, points' mean %v", m, want)
		}
	})
}

func TestExponential(t *testing.T) {
	d := Exponential{MeanValue: 6}
	r := rand.New(rand.NewPCG(7, 7))
	const n = 200000
	s, s2 := 0.0, 0.0
	for range n {
		x := d.Sample(r)
		if x < 0 || math.IsInf(x, 0) {
			t.Fatalf("sample %v", x)
		}
		s += x
		s2 += x * x
	}
	m := s / n
	cv := math.Sqrt(s2/n-m*m) / m
	if math.Abs(m-6) > 0.06 || math.Abs(cv-1) > 0.02 {
		t.Errorf("mean %v (want 6), cv %v (want 1)", m, cv)
	}
}

func TestLognormalPareto(t *testing.T) {
	for _, d := range []LognormalPareto{DefaultBatchRuntime, DefaultServiceRuntime,
		{Median: 10, Sigma: 0.5, TailFrom: 0.8, Alpha: 1, Min: 2, Max: 1e4},
		{Median: 10, Sigma: 1, TailFrom: 0.5, Alpha: 3, Min: 0, Max: 1e3}} {
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := d.Quantile(0.5); math.Abs(got-d.Median) > 1e-9*d.Median {
			t.Errorf("%+v: median %v", d, got)
		}
		// Continuous at the splice.
		xq := d.splice()
		if below, at := d.Quantile(d.TailFrom-1e-12), d.Quantile(d.TailFrom); math.Abs(below-at) > 1e-6*xq {
			t.Errorf("%+v: jumps at the splice: %v -> %v", d, below, at)
		}
		// Survival inverts Quantile away from the clamps.
		for _, u := range []float64{0.1, 0.3, 0.6, 0.85, 0.95, 0.99, 0.999} {
			x := d.Quantile(u)
			if x <= d.Min || x >= d.Max {
				continue
			}
			if s := d.Survival(x); math.Abs(s-(1-u)) > 1e-9 {
				t.Errorf("%+v: Survival(Quantile(%v)) = %v", d, u, s)
			}
		}
		// Mean: the analytic value against the integral of the quantile
		// function (midpoints on a fine grid, finer near 1).
		num := 0.0
		const n = 1 << 20
		for i := range n {
			u := (float64(i) + 0.5) / n
			num += d.Quantile(u) / n
		}
		if m := d.Mean(); math.Abs(m-num) > 0.005*m {
			t.Errorf("%+v: Mean %v, integral %v", d, m, num)
		}
	}
	bad := DefaultBatchRuntime
	bad.Max = 100 // below the tail's start
	if bad.Validate() == nil {
		t.Error("max below the splice accepted")
	}
	bad = DefaultBatchRuntime
	bad.TailFrom = 1
	if bad.Validate() == nil {
		t.Error("tail_from 1 accepted")
	}
}

func TestLognormalParetoSampleMean(t *testing.T) {
	d := DefaultBatchRuntime
	r := rand.New(rand.NewPCG(3, 4))
	const n = 400000
	s := 0.0
	for range n {
		s += d.Sample(r)
	}
	if m := s / n; math.Abs(m-d.Mean()) > 0.05*d.Mean() {
		t.Errorf("sample mean %v, Mean %v", m, d.Mean())
	}
}

func TestSamplingIsDeterministic(t *testing.T) {
	e := Google2011Fit.Batch.Tasks.MustEmpirical()
	draw := func() []float64 {
		r := rand.New(rand.NewPCG(42, 1))
		out := make([]float64, 100)
		for i := range out {
			out[i] = e.Sample(r) + DefaultServiceRuntime.Sample(r) + Exponential{3}.Sample(r)
		}
		return out
	}
	if a, b := draw(), draw(); !slices.Equal(a, b) {
		t.Error("same seed, different samples")
	}
}
