package sim

import (
	"bytes"
	"context"
	"github.com/omega-cell/omega/bench/workload"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func smallConfig(seed uint64) Config {
	cfg := DefaultConfig()
	cfg.Workload.Machines = 200
	// A busy cell: the trace cell's whole arrival rate on 200 machines, so
	// a fiftieth of a day still sees hundreds of jobs.
	cfg.Workload.Load = workload.TraceCellMachines / 200.0
	cfg.Workload.Days = 0.02
	cfg.Workload.Seed = seed
	cfg.Workload.MapReduceShare = 0.2
	cfg.Schedulers = append(cfg.Schedulers, SchedulerSpec{Kind: "mapreduce", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond})
	cfg.CheckInvariants = true
	return cfg
}

// buildRun builds and runs a simulation; the store closes when t ends.
func buildRun(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func runConfig(t *testing.T, cfg Config) (Summary, []byte) {
	t.Helper()
	s := buildRun(t, cfg)
	// The simulation's store keeps fewer changes for its watchers than a
	// live store (simHistory): enough for what a fleet tick brings, even in
	// a cell loaded as the small one is, 60 times over, so the fleet and the
	// job controller never fall behind it and re-list.
	if n := s.Fleet.Counters().Relists; n != 0 {
		t.Errorf("the fleet re-listed %d times", n)
	}
	if n := s.o.Jobs.Counters().Relists; n != 0 {
		t.Errorf("the job controller re-listed %d times", n)
	}
	sum := s.Summarize(cfg.Workload.Seed, cfg.Workload.Machines)
	var b bytes.Buffer
	if err := s.WriteJobsCSV(&b); err != nil {
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

// TestLostTasksPlacedAgain: machines fail, their tasks become LOST (freeing
// their resources in the fleet's commit), and every lost task of a job the
// schedulers placed gets a replacement that is placed again.
func TestLostTasksPlacedAgain(t *testing.T) {
	const seed = 5
	cfg := smallConfig(seed)
	cfg.FailuresPerDay = 2000 // on 200 machines over 0.02 days: ~40 failures
	s, err := Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	fc := s.Fleet.Counters()
	if fc.MachinesFailed == 0 || fc.TasksLost == 0 {
		t.Fatalf("seed %d: no failures or losses: %+v", seed, fc)
	}
	lost, replaced := 0, 0
	for _, r := range s.o.Runners {
		for _, j := range r.Records() {
			lost += j.Lost
			replaced += j.Replaced
		}
	}
	if lost == 0 {
		t.Fatalf("seed %d: the fleet lost %d tasks, the schedulers heard of none", seed, fc.TasksLost)
	}
	if replaced < lost*9/10 {
		t.Fatalf("seed %d: %d tasks of scheduled jobs lost, only %d replaced", seed, lost, replaced)
	}
	// Every replacement is in the store, and placed (or finished) unless the
	// cell was full at the end.
	v := s.Store.Snapshot()
	pendingReplacements := 0
	v.RangeTasks(func(tk *txn.Task) bool {
		if strings.HasSuffix(tk.Meta.GetName(), "-r") && tk.State == omegav1.TaskState_TASK_STATE_PENDING {
			pendingReplacements++
		}
		return true
	})
	if pendingReplacements > replaced/10 {
		t.Fatalf("seed %d: %d of %d replacements still pending", seed, pendingReplacements, replaced)
	}
	t.Logf("seed %d: %d machines failed, %d tasks lost (%d of scheduled jobs), %d replaced, %d still pending", seed, fc.MachinesFailed, fc.TasksLost, lost, replaced, pendingReplacements)
}

// TestSaturationWarnings: a summary says where its run saturated — the
// cell full, a scheduler busy past the threshold, jobs left pending — and
// says nothing of a healthy run (the field is then absent from
// summary.json).
func TestSaturationWarnings(t *testing.T) {
	healthy := Summary{JobsSubmitted: 100, JobsScheduled: 99, JobsPending: 1, UtilizationMean: 0.6,
		Schedulers: []SchedulerSummary{{Name: "batch-0", BusynessMedian: 0.3}}}
	if w := saturation(healthy, ""); len(w) != 0 {
		t.Fatalf("a healthy run warns: %v", w)
	}
	sick := healthy
	sick.UtilizationMean, sick.JobsPending = 0.95, 20
	sick.Schedulers = []SchedulerSummary{{Name: "batch-0", BusynessMedian: 0.3}, {Name: "service-0", BusynessMedian: 0.85}}
	w := saturation(sick, "")
	want := []string{"the cell is saturated: mean CPU utilisation 95%", "scheduler service-0 is saturated: busy 85%", "20 of 100 submitted jobs (20%) were still pending"}
	if len(w) != len(want) {
		t.Fatalf("warnings %q, want %d", w, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(w[i], want[i]) {
			t.Errorf("warning %d: %q, want it to start %q", i, w[i], want[i])
		}
	}
}

// TestJobsFinishInTheCell: a job's status follows its tasks in the cell,
// written by the job controller, and a scheduler's verdict is there too: at
// the end every job the runners abandoned is ABANDONED in the cell (or
// expired), every SUCCEEDED or FAILED job has only terminal tasks, the jobs
// no longer in the cell are exactly finished ones that expired after the
// store's retention window (15 minutes, inside this 36-minute run), and the
// summary's jobs_finished counts them all.
func TestJobsFinishInTheCell(t *testing.T) {
	const seed = 5
	cfg := smallConfig(seed)
	cfg.Workload.Machines = 50
	cfg.Workload.Days = 0.025
	cfg.Workload.Load = 100 // a saturated cell: some jobs cannot be placed and are abandoned
	s := buildRun(t, cfg)
	sum := s.Summarize(seed, cfg.Workload.Machines)
	st := s.Store.Snapshot()
	live := map[[16]byte]int{} // job → its tasks not terminal
	st.RangeTasks(func(tk *txn.Task) bool {
		if !tk.Terminal() {
			live[tk.Job]++
		}
		return true
	})
	var inCellFinished, expired, abandoned, expiredAbandoned int64
	for _, r := range s.o.Runners {
		for _, rec := range r.Records() {
			j, ok := st.Job(rec.UID)
			if !ok {
				// Only finished jobs expire: abandoned ones or those the
				// controller finished.
				if rec.Abandoned {
					expiredAbandoned++
				} else {
					expired++
				}
				continue
			}
			switch p := j.Status.GetPhase(); {
			case rec.Abandoned:
				abandoned++
				if p != omegav1.JobPhase_JOB_PHASE_ABANDONED {
					t.Fatalf("seed %d: job %s abandoned by %s is %s in the cell", seed, rec.UID, r.Name(), p)
				}
			case p == omegav1.JobPhase_JOB_PHASE_ABANDONED:
				t.Fatalf("seed %d: job %s is ABANDONED in the cell but not by its runner", seed, rec.UID)
			case p == omegav1.JobPhase_JOB_PHASE_SUCCEEDED || p == omegav1.JobPhase_JOB_PHASE_FAILED:
				inCellFinished++
				if live[j.UID] != 0 || j.Status.GetFinishUnixNanos() == 0 {
					t.Fatalf("seed %d: job %s is %s with %d tasks not terminal, finished at %d", seed, rec.UID, p, live[j.UID], j.Status.GetFinishUnixNanos())
				}
			case live[j.UID] == 0 && j.Status.GetSucceeded()+j.Status.GetFailed() >= max(j.Replicas(), 1):
				t.Fatalf("seed %d: job %s is stuck %s: no task left and %d of %d ended", seed, rec.UID, p, j.Status.GetSucceeded()+j.Status.GetFailed(), j.Replicas())
			}
		}
	}
	if sum.JobsAbandoned == 0 || expired == 0 || inCellFinished == 0 {
		t.Fatalf("seed %d: abandoned %d, expired %d, finished in the cell %d: the run shows too little", seed, sum.JobsAbandoned, expired, inCellFinished)
	}
	if sum.JobsFinished != inCellFinished+expired {
		t.Fatalf("seed %d: summary says %d jobs finished; %d in the cell and %d expired", seed, sum.JobsFinished, inCellFinished, expired)
	}
	if int64(sum.JobsAbandoned) != abandoned+expiredAbandoned {
		t.Fatalf("seed %d: %d abandoned in the cell and %d expired, the summary says %d", seed, abandoned, expiredAbandoned, sum.JobsAbandoned)
	}
}

// Workload.MapTasksPerWorker (omega sim --map-tasks-per-worker) bounds how
// far max-parallelism grows a MapReduce job: at 2 no job gets more than
// twice the workers it asked for, at 16 some get more.
func TestMapTasksPerWorkerBoundsSpeedup(t *testing.T) {
	run := func(mt int) SchedulerSummary {
		cfg := DefaultConfig()
		cfg.Workload.Machines, cfg.Workload.Days, cfg.Workload.Seed = 200, 0.1, 3
		cfg.Workload.MapTasksPerWorker = mt
		cfg.Schedulers = append(cfg.Schedulers, SchedulerSpec{Kind: "mapreduce", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond})
		sum, _ := runConfig(t, cfg)
		for _, s := range sum.Schedulers {
			if s.Kind == "mapreduce" {
				return s
			}
		}
		t.Fatal("no mapreduce scheduler")
		return SchedulerSummary{}
	}
	two, sixteen := run(2), run(16)
	if two.SpeedupP90 > 2 || two.SpeedupMean == 0 || sixteen.SpeedupP90 <= 2 {
		t.Fatalf("speedup p90 %v at 2 map tasks per worker, %v at 16", two.SpeedupP90, sixteen.SpeedupP90)
	}
}
