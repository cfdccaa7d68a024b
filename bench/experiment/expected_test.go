package experiment

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// Every experiment has its expected results, in the form the update
// writes them (so an update's diff is only what moved), naming cells its
// grids have; the arch file holds issue 28's reference table, row by row,
// at two seeds.
func TestExpectedFiles(t *testing.T) {
	for _, e := range All() {
		x, err := ExpectedFor(e.Name)
		if err != nil || x == nil {
			t.Fatalf("%s: %v (no %s/%s.yaml?)", e.Name, err, ExpectedDir, e.Name)
		}
		b, _ := expectedFiles.ReadFile("expected/" + e.Name + ".yaml")
		if again, err := MarshalExpected(x); err != nil || !bytes.Equal(again, b) {
			t.Errorf("%s.yaml is not as yaml.Marshal writes it (%v): write it so, or an update rewrites all of it", e.Name, err)
		}
		cellIDs := func(sz Size) []string {
			user := []Param(nil)
			if e.NeedsTrace() {
				user = []Param{{"format", "google2011"}, {"trace", "/t"}}
			}
			cells, err := e.Cells(sz, user)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range cells {
				ids = append(ids, c.ID)
			}
			return ids
		}
		quick, full := cellIDs(Size{Quick: true}), cellIDs(Size{})
		for _, f := range x.Findings {
			for _, b := range []struct {
				band  Band
				cells []string
			}{{f.Quick, quick}, {f.Full, full}} {
				if b.band.Why == "" {
					t.Errorf("%s: a band without its reason", f.Finding)
				}
				for _, m := range b.band.Metrics {
					if !slices.Contains(b.cells, m.Cell) || m.Range[0] > m.Range[1] {
						t.Errorf("%s: band on %s in %s, range %v: no such cell, or an empty range", f.Finding, m.Metric, m.Cell, m.Range)
					}
				}
				for _, v := range b.band.Verdicts {
					if !slices.Contains([]string{Reproduced, Partly, NotReproduced, NotMeasured}, v) {
						t.Errorf("%s: verdict %q", f.Finding, v)
					}
				}
			}
			if len(f.Reference.Points) == 0 && f.Reference.Text == "" {
				t.Errorf("%s: no reference, not even \"no reference run\"", f.Finding)
			}
		}
		for _, r := range x.ReferenceTable {
			if !slices.Contains(full, r.Cell) {
				t.Errorf("%s: reference point %s: no cell %s in the full grid", e.Name, r.Point, r.Cell)
			}
			for _, v := range r.Values {
				if len(v.Seeds) != 2 {
					t.Errorf("%s: %s %s: %d seeds", e.Name, r.Point, v.Measure, len(v.Seeds))
				}
			}
		}
	}
	x, _ := ExpectedFor("arch")
	if len(x.ReferenceTable) != 8 || x.row("two-level, 100 s") == nil || x.row("shared, 10 s").Values[1].Seeds[1] != 0.33 {
		t.Errorf("arch's reference table: %d rows", len(x.ReferenceTable))
	}
}

// A run is held to its band: a verdict or a metric out of it is a problem
// naming the finding, the band and the value; a quick band is rewritten
// within its tolerance.
func TestCheckExpected(t *testing.T) {
	rep := Report{Experiment: "mapreduce", Quick: true,
		Findings: []Finding{{ID: "mapreduce/baseline", Verdict: NotReproduced}, {ID: "mapreduce/new", Verdict: Reproduced}},
		Cells:    []CellReport{{ID: "mapreduce_policy=none_map_tasks_per_worker=16", Metrics: map[string]Spread{"mapreduce_speedup_p80": {Median: 2}}}}}
	checks, err := CheckExpected(rep)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]BandCheck{}
	for _, c := range checks {
		byID[c.ID] = c
	}
	base := byID["mapreduce/baseline"]
	if base.OK() || !strings.Contains(base.Problem(), `verdict "does not reproduce", expected "reproduces"`) || !strings.Contains(base.Problem(), "mapreduce_speedup_p80 in mapreduce_policy=none_map_tasks_per_worker=16 = 2, expected 0.9–1.1") {
		t.Errorf("baseline: %s", base.Problem())
	}
	if c := byID["mapreduce/new"]; c.OK() || !strings.Contains(c.Problem(), "no expected results") {
		t.Errorf("a finding without expected results: %s", c.Problem())
	}
	if c := byID["mapreduce/speedup-p80"]; !c.Missing || c.OK() {
		t.Errorf("an expected finding the run lacks: %+v", c)
	}
	for _, tc := range []struct {
		v      float64
		lo, hi float64
	}{{0, 0, 0}, {1, 0.9, 1.1}, {16, 14.4, 17.6}, {0.00425, 0.00382, 0.00468}, {2384, 2140, 2630}, {-2, -2.2, -1.8}} {
		if r := around(tc.v, quickTolerance); r != [2]float64{tc.lo, tc.hi} {
			t.Errorf("around(%v) = %v, want [%v %v]", tc.v, r, tc.lo, tc.hi)
		}
	}
	if !referenceWithin(14000, []float64{14178, 14351}) || referenceWithin(12000, []float64{14178, 14351}) || !referenceWithin(1, []float64{2, 0}) || referenceWithin(1, []float64{0, 0}) {
		t.Error("referenceWithin: the seeds' spread or 10%, whichever is larger")
	}
}
