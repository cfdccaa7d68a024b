package main

import (
	"context"
	"testing"
	"time"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/schedulers"
)

// TestPlugsIntoSim: the custom scheduler, registered, takes the workload's
// batch jobs in a simulation and places them, with the store's invariants
// checked after every commit.
func TestPlugsIntoSim(t *testing.T) {
	schedulers.Register("leastloaded", func(p schedulers.Params) (schedulers.Scheduler, error) {
		return &LeastLoaded{Choices: 2}, p.Only("leastloaded")
	})
	cfg := sim.DefaultConfig()
	cfg.Workload.Machines = 100
	cfg.Workload.Days = 0.01
	cfg.Workload.MapReduceShare = 0
	cfg.Schedulers = []sim.SchedulerSpec{
		{Kind: "leastloaded", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond},
		{Kind: "service", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond},
	}
	cfg.Route = map[string]string{"batch": "leastloaded"}
	cfg.CheckInvariants = true
	s, err := sim.Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum := s.Summarize(cfg.Workload.Seed, cfg.Workload.Machines)
	var ll *sim.SchedulerSummary
	for i := range sum.Schedulers {
		if sum.Schedulers[i].Kind == "leastloaded" {
			ll = &sum.Schedulers[i]
		}
	}
	if ll == nil || ll.JobsScheduled == 0 || ll.TasksPlaced == 0 {
		t.Fatalf("the custom scheduler placed nothing: %+v", sum.Schedulers)
	}
}
