package sim

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/omega-cell/omega/schedulers"
)

// TestSimulationRegistryBuildsFaultySchedulers: the simulation's registry
// builds the faulty schedulers the production registry refuses, and every
// production kind as schedulers.New does; it lists both; it refuses an
// unknown kind listing both, and a faulty kind's unknown parameter.
func TestSimulationRegistryBuildsFaultySchedulers(t *testing.T) {
	for kind, want := range map[string]schedulers.Scheduler{
		"faulty-thief":    schedulers.NewThief(),
		"faulty-units":    schedulers.NewUnitBug(),
		"faulty-outdated": schedulers.NewOutdated(),
	} {
		if _, err := schedulers.New(kind, nil); err == nil {
			t.Errorf("the production registry builds %s", kind)
		}
		s, err := NewScheduler(kind, nil)
		if err != nil {
			t.Fatalf("NewScheduler(%s): %v", kind, err)
		}
		if reflect.TypeOf(s) != reflect.TypeOf(want) {
			t.Fatalf("NewScheduler(%s) = %T, want a %T", kind, s, want)
		}
		if _, err := NewScheduler(kind, schedulers.Params{"speed": "11"}); err == nil || !strings.Contains(err.Error(), `"speed"`) {
			t.Errorf("NewScheduler(%s, speed=11): %v, want the parameter refused", kind, err)
		}
	}
	kinds := SchedulerKinds()
	for _, k := range append(schedulers.Kinds(), "faulty-thief", "faulty-units", "faulty-outdated") {
		if !slices.Contains(kinds, k) {
			t.Errorf("SchedulerKinds() = %v, missing %s", kinds, k)
		}
	}
	if !slices.IsSorted(kinds) || len(slices.Compact(slices.Clone(kinds))) != len(kinds) {
		t.Errorf("SchedulerKinds() = %v: not sorted, or a kind twice", kinds)
	}
	for _, k := range schedulers.Kinds() {
		s, err := NewScheduler(k, nil)
		p, perr := schedulers.New(k, nil)
		if (err == nil) != (perr == nil) || (err == nil && (s == nil || p == nil)) {
			t.Errorf("NewScheduler(%s): %v; schedulers.New: %v", k, err, perr)
		}
	}
	_, err := NewScheduler("nosuch", nil)
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) || !strings.Contains(err.Error(), "faulty-thief") || !strings.Contains(err.Error(), "batch") {
		t.Errorf("NewScheduler(nosuch): %v, want an error naming it and listing the kinds", err)
	}
}
