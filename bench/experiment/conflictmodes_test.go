package experiment

import (
	"slices"
	"testing"
)

// conflict-modes reads a mode's ratios only where conflicts happen: not
// at the points where both it and the baseline are below minConflicts,
// and not as a ratio where the baseline had none.
func TestConflictRatios(t *testing.T) {
	xs := []float64{0.1, 1, 10, 100}
	s := func(ys ...float64) series { return series{x: xs, y: ys} }
	r := conflictRatios(s(0, 0.005, 0.05, 0.2), s(1, 1, 1, 2), s(0, 0.002, 0.1, 0.5), s(1, 1, 1.5, 2))
	if !slices.Equal(r.at, []string{"10", "100"}) || !slices.Equal(r.skipped, []string{"0.1", "1"}) {
		t.Errorf("read at %v, skipped %v; want 10, 100 and 0.1, 1", r.at, r.skipped)
	}
	if !slices.Equal(r.conf, []float64{2, 2.5}) || r.medConf != 2.25 || r.medBusy != 1.25 {
		t.Errorf("ratios %v (median %v), busyness median %v", r.conf, r.medConf, r.medBusy)
	}
	r = conflictRatios(s(0, 0, 0, 0), s(1, 1, 1, 1), s(0, 0, 0.03, 0.06), s(1, 1, 1, 1))
	if len(r.at) != 0 || !slices.Equal(r.onlyMode, []string{"10", "100"}) {
		t.Errorf("a baseline without conflicts: read at %v, only the mode at %v", r.at, r.onlyMode)
	}
}
