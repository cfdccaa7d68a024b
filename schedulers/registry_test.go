package schedulers

import (
	"strings"
	"testing"
)

// TestFactoriesTakeTheirParameters: a kind's factory takes the parameters
// it knows (mapreduce's policy) and refuses any other by name, and the
// MapReduce special case of the runner is an interface its scheduler
// implements (Grower), not a check of the job's kind.
func TestFactoriesTakeTheirParameters(t *testing.T) {
	s, err := New("mapreduce", Params{"policy": GlobalCap.String()})
	if err != nil {
		t.Fatal(err)
	}
	if mr := s.(*MapReduce); mr.Policy != GlobalCap {
		t.Fatalf("policy %v, want %v", mr.Policy, GlobalCap)
	}
	if s, err := New("mapreduce", nil); err != nil || s.(*MapReduce).Policy != MaxParallelism {
		t.Fatalf("default policy: %v %v", s, err)
	}
	for _, c := range []struct {
		kind string
		p    Params
		want string
	}{
		{"mapreduce", Params{"polcy": "global-cap"}, `"polcy"`},
		{"mapreduce", Params{"policy": "fastest"}, `"fastest"`},
		{"batch", Params{"tries": "8"}, `"tries"`},
		{"nosuch", nil, `"nosuch"`},
	} {
		if _, err := New(c.kind, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s, %v): %v, want an error naming %s", c.kind, c.p, err, c.want)
		}
	}
	if _, ok := Scheduler(NewMapReduce(MaxParallelism)).(Grower); !ok {
		t.Error("MapReduce is not a Grower")
	}
	if _, ok := Scheduler(NewBatch()).(Grower); ok {
		t.Error("Batch grows jobs")
	}
}

// TestRegistryHasOnlyRealSchedulers: the production registry, which
// `omega scheduler --kind` asks, lists no faulty scheduler and refuses
// one by name with an error listing the real kinds; the simulation's
// registry (bench/sim) is where the faulty ones run.
func TestRegistryHasOnlyRealSchedulers(t *testing.T) {
	for _, k := range Kinds() {
		if strings.HasPrefix(k, "faulty-") {
			t.Errorf("the production registry lists %s", k)
		}
	}
	for _, kind := range []string{"faulty-thief", "faulty-units", "faulty-outdated"} {
		_, err := New(kind, nil)
		if err == nil {
			t.Fatalf("New(%s): a faulty scheduler from the production registry", kind)
		}
		for _, real := range []string{"batch", "mapreduce", "monolithic", "service"} {
			if !strings.Contains(err.Error(), real) {
				t.Errorf("New(%s): %v, want an error listing %s", kind, err, real)
			}
		}
		if strings.Contains(strings.ReplaceAll(err.Error(), `"`+kind+`"`, ""), "faulty") {
			t.Errorf("New(%s): %v lists a faulty kind", kind, err)
		}
	}
}
