package experiment

import (
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

// The sensitivity finding names the values of the sweep that give both
// published ranges, and says none does when none does; with one value it
// measures nothing.
func TestMapTasksSensitivity(t *testing.T) {
	f := mapTasksFinding(mapreduceResults(t, map[string][2]float64{"1": {0.3, 1}, "2": {0.45, 2}, "4": {0.6, 3.5}, "8": {0.8, 6}, "16": {0.9, 11}}))
	if f.Verdict != Reproduced || !strings.Contains(f.Why, "hold at 4 map tasks") || !strings.Contains(f.Measured, "4: 60% benefit, 3.5x") {
		t.Errorf("a matching value: %+v", f)
	}
	f = mapTasksFinding(mapreduceResults(t, map[string][2]float64{"1": {1, 1}, "2": {1, 2}, "4": {1, 4}, "8": {1, 8}, "16": {1, 16}}))
	if f.Verdict != Partly || !strings.Contains(f.Why, "no value of the sweep") {
		t.Errorf("no matching value: %+v", f)
	}
	e, _ := Lookup("mapreduce")
	s, _ := NewSweep(e, Size{}, nil, 1, 1)
	var values []string
	for _, c := range s.Cells {
		if c.Axis("mapreduce_policy") == "max-parallelism" {
			values = append(values, c.Axis("map_tasks_per_worker"))
		}
	}
	if strings.Join(values, ",") != "16,1,2,4,8" {
		t.Errorf("the full grid sweeps max-parallelism at %v", values)
	}
}
