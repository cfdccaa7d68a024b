package sim

import (
	"bytes"
	"context"
	"testing"
	"time"
)

func smallConfig(seed uint64) Config {
	cfg := DefaultConfig()
	cfg.Workload.Machines = 200
	cfg.Workload.Days = 0.02
	cfg.Workload.Seed = seed
	cfg.Workload.MapReduceShare = 0.2
	cfg.Schedulers = append(cfg.Schedulers, SchedulerSpec{Kind: "mapreduce", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond})
	cfg.CheckInvariants = true
	return cfg
}

func runConfig(t *testing.T, cfg Config) (Summary, []byte) {
	t.Helper()
	s, err := Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Engine.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum := s.Engine.Summarize(cfg.Workload.Seed, cfg.Workload.Machines)
	var b bytes.Buffer
	if err := s.Engine.WriteJobsCSV(&b); err != nil {
		t.Fatal(err)
	}
	return sum, b.Bytes()
}

// TestBuildRuns: the assembled simulation (workload, pre-fill, batch,
// service and mapreduce schedulers, the fleet) runs, keeps every invariant
// after every commit, conserves jobs, and is deterministic.
func TestBuildRuns(t *testing.T) {
	const seed = 11
	s1, j1 := runConfig(t, smallConfig(seed))
	if s1.JobsSubmitted == 0 || s1.TasksPlaced == 0 {
		t.Fatalf("seed %d: nothing happened: %+v", seed, s1)
	}
	if s1.JobsScheduled+s1.JobsAbandoned+s1.JobsPending != s1.JobsSubmitted {
		t.Fatalf("seed %d: jobs not conserved: %+v", seed, s1)
	}
	s2, j2 := runConfig(t, smallConfig(seed))
	var a, b bytes.Buffer
	s1.WriteJSON(&a)
	s2.WriteJSON(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.Equal(j1, j2) {
		t.Fatalf("seed %d: two runs differ", seed)
	}
	t.Logf("%s", a.Bytes())
}
