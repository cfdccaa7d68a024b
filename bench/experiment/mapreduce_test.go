package experiment

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mapreduceResults is a sweep over map tasks per worker under
// max-parallelism, one seed, with the share benefiting and the p80
// speedup each value gives.
func mapreduceResults(t *testing.T, points map[string][2]float64) *Results {
	t.Helper()
	e, _ := Lookup("mapreduce")
	s, err := NewSweep(e, Size{}, nil, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	res := &Results{Sweep: s}
	for _, r := range s.Runs {
		c := r.Cell
		if c.Axis("mapreduce_policy") != "max-parallelism" {
			continue
		}
		pt, ok := points[c.Axis("map_tasks_per_worker")]
		if !ok {
			continue
		}
		res.Rows = append(res.Rows, Row{Run: r, Metrics: map[string]float64{"mapreduce_benefit_share": pt[0], "mapreduce_speedup_p80": pt[1]}})
	}
	return res
}

// mapreduceGrid is the values of map_tasks_per_worker the grid gives
// max-parallelism, in the grid's order.
func mapreduceGrid(t *testing.T, sz Size) string {
	t.Helper()
	e, _ := Lookup("mapreduce")
	s, err := NewSweep(e, sz, nil, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, c := range s.Cells {
		if c.Axis("mapreduce_policy") == "max-parallelism" {
			values = append(values, c.Axis("map_tasks_per_worker"))
		}
	}
	return strings.Join(values, ",")
}

// The sensitivity finding names the values of the sweep that give both
// published ranges, and says none does when none does, naming where each
// range holds on its own or which values it falls between; with one value
// it measures nothing.
func TestMapTasksSensitivity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		points map[string][2]float64
		want   string
		why    []string
	}{
		{"both at 4", map[string][2]float64{"1": {0.3, 1}, "2": {0.45, 2}, "4": {0.6, 3.5}, "8": {0.8, 6}, "16": {0.9, 11}},
			Reproduced, []string{"hold at 4 map tasks"}},
		{"both at 4 and 8", map[string][2]float64{"1": {0.3, 1}, "2": {0.45, 2}, "4": {0.6, 3}, "8": {0.7, 4}, "16": {0.9, 11}},
			Reproduced, []string{"hold at 4, 8 map tasks"}},
		// omega's own sweep: the speedup follows the value, the share
		// does not (every job can grow from 2 up).
		{"speedup at 4, share nowhere", map[string][2]float64{"1": {0, 1}, "2": {1, 2}, "4": {1, 4}, "8": {1, 8}, "16": {1, 16}},
			Partly, []string{"no value of the sweep", "3–4x at the 80th percentile: at 4 map tasks per worker", "50–70% benefiting: none, between 1 and 2)"}},
		{"share at 2 and 16, speedup between", map[string][2]float64{"2": {0.6, 2}, "16": {0.65, 16}},
			Partly, []string{"3–4x at the 80th percentile: none, between 2 and 16", "50–70% benefiting: at 2, 16 map tasks"}},
		{"neither, no straddle", map[string][2]float64{"8": {1, 8}, "16": {1, 16}},
			Partly, []string{"3–4x at the 80th percentile: none;", "50–70% benefiting: none)"}},
		{"one value", map[string][2]float64{"16": {0.6, 3.5}}, NotMeasured, nil},
	} {
		f := mapTasksFinding(mapreduceResults(t, tc.points))
		if f.Verdict != tc.want {
			t.Errorf("%s: verdict %v, want %v: %+v", tc.name, f.Verdict, tc.want, f)
		}
		for _, w := range tc.why {
			if !strings.Contains(f.Why, w) {
				t.Errorf("%s: why %q, want it to say %q", tc.name, f.Why, w)
			}
		}
	}
	f := mapTasksFinding(mapreduceResults(t, map[string][2]float64{"1": {0.3, 1}, "4": {0.6, 3.5}}))
	if !strings.Contains(f.Measured, "1: 30% benefit, 1x; 4: 60% benefit, 3.5x") {
		t.Errorf("measured %q", f.Measured)
	}
}

// The grid compares the policies at the default and sweeps max-parallelism
// over the map tasks per worker: 1, 2, 4, 8 and 16 in full, 2 and 16 with
// --quick (the default first, in the policies' cells).
func TestMapreduceGridSweepsMapTasks(t *testing.T) {
	if got := mapreduceGrid(t, Size{}); got != "16,1,2,4,8" {
		t.Errorf("the full grid sweeps max-parallelism at %s", got)
	}
	if got := mapreduceGrid(t, Size{Quick: true}); got != "16,2" {
		t.Errorf("the quick grid sweeps max-parallelism at %s", got)
	}
	e, _ := Lookup("mapreduce")
	if !slices.Contains(e.Axes, "map_tasks_per_worker") {
		t.Errorf("axes %v", e.Axes)
	}
	s, _ := NewSweep(e, Size{Quick: true}, nil, 1, 1)
	for _, r := range s.Runs {
		if want := "--map-tasks-per-worker=" + r.Cell.Axis("map_tasks_per_worker"); !strings.Contains(strings.Join(r.Args(), " "), want) {
			t.Errorf("run %s: args %q lack %s", r.Cell.ID, r.Args(), want)
		}
	}
}

// The sensitivity's figures draw each line in order of map tasks per
// worker, not in grid order (which lists the default, 16, first): a line
// from 16 back to 1 would cross the figure.
func TestMapTasksLinesInOrder(t *testing.T) {
	share, p80 := mapTasksLines(mapreduceResults(t, map[string][2]float64{"1": {0, 1}, "2": {1, 2}, "4": {1, 4}, "8": {1, 8}, "16": {0.9, 16}}))
	for _, s := range []series{share, p80} {
		if fmt.Sprint(s.x) != "[1 2 4 8 16]" {
			t.Errorf("%s: x %v", s.label, s.x)
		}
	}
	if fmt.Sprint(share.y, p80.y, p80.lo, p80.hi) != "[0 1 1 1 0.9] [1 2 4 8 16] [1 2 4 8 16] [1 2 4 8 16]" {
		t.Errorf("share %v, p80 %v (%v–%v)", share.y, p80.y, p80.lo, p80.hi)
	}
}
