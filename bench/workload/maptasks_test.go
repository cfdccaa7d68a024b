package workload

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// mapTasksStream draws a short stream with MapTasksPerWorker set to mt.
func mapTasksStream(t rapid.TB, seed uint64, mt int) []JobArrival {
	t.Helper()
	c := testConfig(0.25)
	c.Machines, c.Seed, c.MapTasksPerWorker = 1000, seed, mt
	g, err := New(c)
	if err != nil {
		t.Fatalf("MapTasksPerWorker %d: %v", mt, err)
	}
	var js []JobArrival
	for j, ok := g.Next(); ok; j, ok = g.Next() {
		js = append(js, j)
	}
	return js
}

// TestMapTasksFollowTheKnob: every MapReduce job has exactly
// MapTasksPerWorker map tasks per worker it requests, at the bounds and
// between them, and the knob moves nothing else in the stream (the same
// jobs, sizes and times as the default's, only their map tasks differ).
func TestMapTasksFollowTheKnob(t *testing.T) {
	strip := func(js []JobArrival) []JobArrival {
		out := make([]JobArrival, len(js))
		for i, j := range js {
			j.MapTasks = 0
			out[i] = j
		}
		return out
	}
	check := func(t rapid.TB, seed uint64, mt int, def []JobArrival) {
		js := mapTasksStream(t, seed, mt)
		mr := 0
		for i, j := range js {
			switch {
			case j.Kind != KindMapReduce && j.MapTasks != 0:
				t.Fatalf("mt %d: arrival %d, a %v job, has %d map tasks", mt, i, j.Kind, j.MapTasks)
			case j.Kind == KindMapReduce && (j.Workers != j.Tasks || j.MapTasks != mt*j.Workers):
				t.Fatalf("mt %d: arrival %d requests %d workers and has %d map tasks, want %d", mt, i, j.Workers, j.MapTasks, mt*j.Workers)
			case j.Kind == KindMapReduce:
				mr++
			}
		}
		if mr == 0 {
			t.Fatalf("mt %d, seed %d: no MapReduce job in %d arrivals", mt, seed, len(js))
		}
		if !reflect.DeepEqual(strip(js), strip(def)) {
			t.Fatalf("mt %d, seed %d: the stream differs from the default's beyond the map tasks", mt, seed)
		}
	}
	for _, mt := range []int{1, 2, 16, MaxMapTasksPerWorker} {
		check(t, 1, mt, mapTasksStream(t, 1, Default().MapTasksPerWorker))
	}
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64Range(1, 1<<20).Draw(rt, "seed")
		mt := rapid.IntRange(1, MaxMapTasksPerWorker).Draw(rt, "mt")
		check(rt, seed, mt, mapTasksStream(rt, seed, Default().MapTasksPerWorker))
	})
}
