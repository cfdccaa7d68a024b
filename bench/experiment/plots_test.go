package experiment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/omega-cell/omega/bench/sim"
)

// fakeResults are results for every run of a quick sweep of e, with
// figures that vary by run (some zero), as a real sweep's would.
func fakeResults(t *testing.T, e *Experiment) *Results {
	t.Helper()
	s, err := NewSweep(e, Size{Quick: true}, nil, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	res := &Results{Sweep: s}
	for i, r := range s.Runs {
		v := func(k int) float64 { return float64((i*7+k*3)%5) / 4 } // 0 .. 1, a zero in five
		sum := sim.Summary{Seed: r.Seed, JobsAbandoned: i % 3}
		for k, kind := range []string{"batch", "service", "mapreduce", "monolithic"} {
			sum.Schedulers = append(sum.Schedulers, sim.SchedulerSummary{Kind: kind, BusynessMedian: v(k), Transactions: int64(10 + i), Conflicts: int64(i % (k + 2))})
			sum.JobKinds = append(sum.JobKinds, sim.JobKindSummary{Kind: kind, JobsSubmitted: 100, JobsPending: i % 4, WaitMeanS: 100 * v(k+1)})
		}
		row := Row{Run: r, Summary: sum, Speedups: []float64{1, 1 + v(1), 2 + v(2), 4}}
		for h := 0; h < 50; h++ {
			row.Utilization = append(row.Utilization, [2]float64{float64(h * 600), 0.5 + v(h)/4})
		}
		row.Metrics = metrics(row)
		res.Rows = append(res.Rows, row)
	}
	return res
}

// Every series of every figure an experiment draws is visible: no two
// share both marker shape and dash pattern (so none hides under another),
// and a figure renders to the same bytes twice.
func TestFigureStyles(t *testing.T) {
	for _, e := range All() {
		if e.NeedsTrace() {
			continue
		}
		an := e.analyze(fakeResults(t, e))
		if len(an.Figures) == 0 {
			t.Errorf("%s draws no figure", e.Name)
		}
		for _, f := range an.Figures {
			p, err := f.make()
			if err != nil {
				t.Fatalf("%s: %v", f.File, err)
			}
			seen := map[string]string{}
			for _, st := range legendStyles(p) {
				key := fmt.Sprintf("shape %d, dashes %v, reference %v, hollow %v", st.shape, st.dashes(), st.ref, st.hollow)
				if other, ok := seen[key]; ok {
					t.Errorf("%s: %q and %q share %s", f.File, other, st.label, key)
				}
				seen[key] = st.label
			}
			a, err := f.Render()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := f.Render(); !bytes.Equal(a, b) {
				t.Errorf("%s: two renderings differ", f.File)
			}
		}
	}
	// However many series, and with or without a second kind dashed.
	for _, n := range []int{1, 8, 9, 20} {
		for _, kinds := range []bool{false, true} {
			ss := make([]series, n)
			for i := range ss {
				ss[i] = series{label: fmt.Sprint(i), dashed: kinds && i%2 == 1}
			}
			seen := map[[2]int]int{}
			for i, st := range styleSeries(ss) {
				k := [2]int{int(st.shape), st.dash}
				if j, ok := seen[k]; ok {
					t.Errorf("%d series (kinds %v): %d and %d share shape and dashes", n, kinds, j, i)
				}
				seen[k] = i
			}
		}
	}
}

// An axis comes from its data: an all-zero series of a quantity that
// cannot be negative gets a small range from 0 up, not -1..1; a log axis
// draws zeros hollow at a floor below the smallest positive value, and
// says so in the legend.
func TestAxesFromData(t *testing.T) {
	zero := series{label: "none", x: []float64{0.1, 1, 10}, y: []float64{0, 0, 0}, lo: []float64{0, 0, 0}, hi: []float64{0, 0, 0}}
	for _, c := range []lineChart{{series: []series{zero}}, {logX: true, series: []series{zero, zero}}} {
		p, err := c.plot()
		if err != nil {
			t.Fatal(err)
		}
		if p.Y.Min != 0 || !(p.Y.Max > 0) || p.Y.Max > 1 {
			t.Errorf("an all-zero series (log x %v): y axis %v..%v, want 0..(0, 1]", c.logX, p.Y.Min, p.Y.Max)
		}
	}
	b, err := barChart{categories: []string{"a", "b"}, series: []series{{label: "none", y: []float64{0, 0}}}}.plot()
	if err != nil {
		t.Fatal(err)
	}
	if b.Y.Min != 0 || !(b.Y.Max > 0) {
		t.Errorf("all-zero bars: y axis %v..%v", b.Y.Min, b.Y.Max)
	}
	// A constant positive series starts at 0 too.
	if r := rangeOf([]float64{0.5, 0.5}, false); r.min != 0 || !(r.max > 0.5) {
		t.Errorf("a constant series: %v..%v", r.min, r.max)
	}
	// Values well away from 0 keep their own range, never below 0.
	if r := rangeOf([]float64{0.6, 0.74}, false); !(r.min > 0.5) || r.max < 0.74 {
		t.Errorf("0.6..0.74: %v..%v", r.min, r.max)
	}
	waits := series{label: "waits", x: []float64{1, 10, 100}, y: []float64{0, 0.035, 2500}}
	p, err := lineChart{logX: true, logY: true, series: []series{waits}}.plot()
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0.01 || p.Y.Max != 2500 {
		t.Errorf("log y with a zero: %v..%v, want 0.01..2500", p.Y.Min, p.Y.Max)
	}
	st := legendStyles(p)
	if len(st) != 2 || !st[1].hollow {
		t.Errorf("log y with a zero: legend %+v, want the series and the hollow zeros' entry", st)
	}
	if p, _ := (lineChart{logY: true, series: []series{{x: []float64{1}, y: []float64{3}}}}).plot(); len(legendStyles(p)) != 1 {
		t.Error("no zeros, yet a zeros' legend entry")
	}
}
