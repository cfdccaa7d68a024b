package schedulers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// The Runner's hand-stepped sequences (an attempt that places a job, the
// bounds, conflicts and the re-sync, eviction, deletion, Gone and retire)
// are scripts: runner_script_test.go runs testdata/runner/*.txt. What stays
// here holds properties over many seeds, the scheduler kinds the scripts
// do not drive, and tables.

// testConfig is the paper's decision-time model with a 2 s retry delay.
func testConfig() RunnerConfig {
	return RunnerConfig{MaxAttempts: 1000, MaxAttemptsNoPlacement: 100, RetryDelay: 2 * time.Second, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond}
}

// begin calls Begin and fails unless an attempt came back.
func begin(t testing.TB, r *Runner, now time.Time) *Attempt {
	t.Helper()
	a, ok, err := r.Begin(context.Background(), now)
	if err != nil || !ok {
		t.Fatalf("%s: Begin at %v: ok %t, err %v", r.Name(), now.Sub(t0), ok, err)
	}
	return a
}

// finish calls Finish at the end of a's decision time after start and
// returns the outcome and that time.
func finish(t testing.TB, r *Runner, a *Attempt, start time.Time) (Outcome, time.Time) {
	t.Helper()
	end := start.Add(a.DecisionTime)
	o, err := r.Finish(context.Background(), a, end)
	if err != nil {
		t.Fatalf("%s: Finish: %v", r.Name(), err)
	}
	return o, end
}

func noBegin(t testing.TB, r *Runner, now time.Time) {
	t.Helper()
	a, ok, err := r.Begin(context.Background(), now)
	if err != nil || ok {
		t.Fatalf("%s: Begin at %v: ok %t (job %v), err %v; want nothing ready", r.Name(), now.Sub(t0), ok, a, err)
	}
}

func nextReady(t testing.TB, r *Runner) time.Time {
	t.Helper()
	at, ok := r.NextReady()
	if !ok {
		t.Fatalf("%s: nothing queued", r.Name())
	}
	return at
}

func record(t testing.TB, r *Runner, job uuid.UUID) JobRecord {
	t.Helper()
	for _, rec := range r.Records() {
		if rec.UID == job {
			return rec
		}
	}
	t.Fatalf("%s: no record of job %s", r.Name(), job)
	return JobRecord{}
}

// Two schedulers decide on the same view of a cell of three one-task
// machines; the first commits, the second conflicts on the machines the
// first took. Its client counts exactly that, and the job is queued again
// at once.
func TestRunnerConflictBetweenTwoSchedulers(t *testing.T) {
	for _, gang := range []bool{false, true} {
		partial, full := 0, 0
		forSeeds(t, 12, func(t *testing.T, seed uint64) {
			c := newCell(t, seed)
			machines := c.addMachines(uniform(3, 1000, 4*gib, 0)...)
			jobA, _ := c.addJob("a", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 1000, mem: gib})
			jobB, tasksB := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 1000, mem: gib, gang: gang})
			cfg := testConfig()
			var logB txLog
			ra := c.runner(NewBatch(), "batch-0", seed, cfg, nil)
			rb := c.runner(NewBatch(), "batch-1", seed+1000, cfg, recordInto(&logB))
			ra.Submit(jobA, t0)
			rb.Submit(jobB, t0)

			aa := begin(t, ra, t0)
			ab := begin(t, rb, t0)
			if aa.Txn.ViewRevision != ab.Txn.ViewRevision {
				t.Fatalf("the runners decided on views %d and %d", aa.Txn.ViewRevision, ab.Txn.ViewRevision)
			}
			// The model: each machine holds one task, so a claim of B
			// conflicts iff A claimed the same machine.
			taken := map[uuid.UUID]bool{}
			for _, op := range aa.Txn.Ops {
				taken[op.Machine] = true
			}
			conflicts := 0
			for _, op := range ab.Txn.Ops {
				if taken[op.Machine] {
					conflicts++
				}
			}
			if len(taken) != 2 || len(ab.Txn.Ops) != 2 || conflicts == 0 {
				t.Fatalf("A claims %d machines, B %d claims, %d overlap; three one-task machines force an overlap", len(taken), len(ab.Txn.Ops), conflicts)
			}
			committedB := 2 - conflicts
			if gang {
				committedB = 0
			}

			if o, _ := finish(t, ra, aa, t0); o != OutcomePlaced {
				t.Fatalf("first committer: outcome %v", o)
			}
			o, end := finish(t, rb, ab, t0)
			if o != OutcomeRetry || nextReady(t, rb) != end {
				t.Fatalf("second committer: outcome %v, next ready %v; want retry at once (%v)", o, nextReady(t, rb).Sub(t0), end.Sub(t0))
			}
			if got := ra.Client().Counters(); got != (client.Counters{Attempts: 1, ClaimsAttempted: 2, ClaimsCommitted: 2}) {
				t.Fatalf("batch-0 counters %+v", got)
			}
			want := client.Counters{Attempts: 1, Conflicted: 1, ClaimsAttempted: 2, ClaimsConflicted: int64(conflicts), ClaimsCommitted: int64(committedB)}
			if committedB > 0 {
				want.Partial = 1
			}
			if got := rb.Client().Counters(); got != want {
				t.Fatalf("batch-1 counters %+v, want %+v", got, want)
			}
			if rec := record(t, rb, jobB); rec.Conflicted != 1 || rec.TasksPlaced != committedB || rec.Attempts != 1 {
				t.Fatalf("batch-1 record %+v; want 1 conflicted attempt, %d tasks placed", rec, committedB)
			}
			lines := logB.lines()
			if len(lines) != 1 || strings.Contains(lines[0], "COMMIT_MODE_ALL_OR_NOTHING") != gang {
				t.Fatalf("batch-1 sent %q; gang %t", lines, gang)
			}
			pendingB := 0
			for _, u := range tasksB {
				if c.task(u).State == pendingState {
					pendingB++
				}
			}
			if pendingB != 2-committedB {
				t.Fatalf("%d of B's tasks pending, want %d", pendingB, 2-committedB)
			}
			c.checkInvariants()

			// The retry sees the fresh state: B's pending tasks against the
			// machines left.
			free := 0
			for _, m := range machines {
				if c.machine(m).Tasks == 0 {
					free++
				}
			}
			a := begin(t, rb, end)
			if got := len(a.Txn.Ops); got != min(free, pendingB) && !(gang && free < pendingB && got == 0) {
				t.Fatalf("retry: %d claims for %d pending tasks on %d free machines", got, pendingB, free)
			}
			if o, end2 := finish(t, rb, a, end); o != OutcomeRetry || nextReady(t, rb) != end2.Add(cfg.RetryDelay) {
				t.Fatalf("retry on a full cell: outcome %v, next ready %v; want retry after the delay", o, nextReady(t, rb).Sub(t0))
			}
			if conflicts == 1 {
				partial++
			} else {
				full++
			}
			c.checkInvariants()
		})
		if partial == 0 || full == 0 {
			t.Fatalf("gang %t: seeds gave %d partial and %d full conflicts; want both cases covered", gang, partial, full)
		}
	}
}

// A job kept between attempts passes its placed tasks to the scheduler, so
// DIFFERENT_MACHINES holds across attempts.
func TestRunnerPassesPlacedTasksAcrossAttempts(t *testing.T) {
	forSeeds(t, 8, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(3, 8000, 32*gib, 3)...)
		diff := []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}
		job, tasks := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 4, cpu: 1000, mem: gib, constraints: diff})
		cfg := testConfig()
		cfg.TJob, cfg.TTask = 10*time.Second, 0
		r := c.runner(NewService(), "service-0", seed, cfg, nil)
		r.Submit(job, t0)
		a := begin(t, r, t0)
		if a.Decision.Unplaceable != 1 || len(a.Txn.Ops) != 3 {
			t.Fatalf("first attempt: %d claims, %d unplaceable", len(a.Txn.Ops), a.Decision.Unplaceable)
		}
		o, end := finish(t, r, a, t0)
		if o != OutcomeRetry || end != t0.Add(10*time.Second) {
			t.Fatalf("outcome %v at %v", o, end.Sub(t0))
		}
		added := c.addMachines(machineSpec{cpu: 8000, mem: 32 * gib, domain: "d0"})
		at := nextReady(t, r)
		a = begin(t, r, at)
		if len(a.Txn.Ops) != 1 || a.Txn.Ops[0].Machine != added[0] {
			t.Fatalf("second attempt: %s; want the last task on the new machine %s, the only one without a task of the job", opsString(a.Txn.Ops), added[0])
		}
		if o, _ := finish(t, r, a, at); o != OutcomePlaced {
			t.Fatalf("outcome %v", o)
		}
		seen := map[uuid.UUID]bool{}
		for _, u := range tasks {
			m := c.task(u).Machine
			if seen[m] {
				t.Fatalf("two tasks of a DIFFERENT_MACHINES job on %s", m)
			}
			seen[m] = true
		}
	})
}

func TestRunnerPlacesAMapReduceJob(t *testing.T) {
	forSeeds(t, 3, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(2, 2000, 16*gib, 0)...) // room for 4 workers
		job, _ := c.addJob("mr", mrJob(3, 9000, nil))
		cfg := testConfig()
		r := c.runner(NewMapReduce(RelativeSize), "mapreduce-0", seed, cfg, nil)
		r.Submit(job, t0)
		a := begin(t, r, t0)
		if a.DecisionTime != cfg.TJob+4*cfg.TTask { // min(4 x 3, room for 4)
			t.Fatalf("decision time %v (considered %d)", a.DecisionTime, a.Decision.Considered)
		}
		o, end := finish(t, r, a, t0)
		if o != OutcomePlaced {
			t.Fatalf("outcome %v", o)
		}
		workers := 0
		c.state().RangeTasks(func(tk *txn.Task) bool {
			if tk.Job == job {
				workers++
				if tk.State != assignedState || tk.Scheduler != "mapreduce-0" || tk.Spec.GetDurationMillis() != 9000*3/4 {
					t.Errorf("worker %s: %s by %q, %d ms", tk.UID, tk.State, tk.Scheduler, tk.Spec.GetDurationMillis())
				}
			}
			return true
		})
		if rec := record(t, r, job); workers != 4 || rec.TasksPlaced != 4 {
			t.Fatalf("%d workers in the store, %d placed by the record; want 4", workers, rec.TasksPlaced)
		}
		noBegin(t, r, end.Add(time.Hour))

		// Room for 2 of 4 requested: retried after the delay, and placed
		// once the cell grows.
		job2, _ := c.addJob("mr2", mrJob(4, 1000, &omegav1.MapReduceParams{MaxWorkers: 4}))
		c.addMachines(machineSpec{cpu: 2000, mem: 16 * gib})
		r.Submit(job2, end)
		a = begin(t, r, end)
		o, end2 := finish(t, r, a, end)
		if o != OutcomeRetry || nextReady(t, r) != end2.Add(cfg.RetryDelay) || len(a.Txn.Ops) != 4 {
			t.Fatalf("partial: outcome %v, %d ops, next ready %v", o, len(a.Txn.Ops), nextReady(t, r).Sub(t0))
		}
		c.addMachines(machineSpec{cpu: 2000, mem: 16 * gib})
		at := nextReady(t, r)
		a = begin(t, r, at)
		if o, _ := finish(t, r, a, at); o != OutcomePlaced {
			t.Fatalf("after the cell grew: outcome %v\n%s", o, opsString(a.Txn.Ops))
		}
		if rec := record(t, r, job2); rec.TasksPlaced != 4 {
			t.Fatalf("job 2 placed %d workers, want 4", rec.TasksPlaced)
		}
		c.checkInvariants()
	})
}

func TestRunnerConfig(t *testing.T) {
	d := DefaultRunnerConfig()
	if d.MaxAttempts != 1000 || d.MaxAttemptsNoPlacement != 100 || d.TJob != 100*time.Millisecond || d.TTask != 5*time.Millisecond || d.Validate() != nil {
		t.Fatalf("defaults %+v: want the paper's bounds and decision times", d)
	}
	bad := []func(*RunnerConfig){
		func(c *RunnerConfig) { c.MaxAttempts = 0 },
		func(c *RunnerConfig) { c.MaxAttemptsNoPlacement = 0 },
		func(c *RunnerConfig) { c.RetryDelay = -1 },
		func(c *RunnerConfig) { c.TJob = -1 },
		func(c *RunnerConfig) { c.TTask = -1 },
	}
	for i, f := range bad {
		cfg := DefaultRunnerConfig()
		f(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("case %d: %+v validates", i, cfg)
		}
		if _, err := NewRunner(NewBatch(), nil, nil, cfg); err == nil {
			t.Errorf("case %d: NewRunner accepts %+v", i, cfg)
		}
	}
}

func TestPickSpreadsJobsEvenlyAndStably(t *testing.T) {
	const jobs = 10_000
	g := newIDs(42)
	uids := make([]uuid.UUID, jobs)
	for i := range uids {
		uids[i] = g.next()
	}
	names := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("batch-%d", i))
		}
		return out
	}
	for _, n := range []int{1, 2, 3, 5, 32} {
		ns := names(n)
		counts := make([]int, n)
		for _, u := range uids {
			i := Pick(u, ns)
			if i < 0 || i >= n {
				t.Fatalf("Pick(%s, %d names) = %d", u, n, i)
			}
			if Pick(u, ns) != i {
				t.Fatalf("Pick(%s, %d names) is not stable", u, n)
			}
			counts[i]++
		}
		mean := float64(jobs) / float64(n)
		tol := 0.05
		if n == 32 {
			tol = 0.2 // ~312 jobs each: a wider binomial spread
		}
		for i, k := range counts {
			if float64(k) < (1-tol)*mean || float64(k) > (1+tol)*mean {
				t.Fatalf("%d schedulers: scheduler %d gets %d of %d jobs, outside ±%.0f%% of %.0f (%v)", n, i, k, jobs, 100*tol, mean, counts)
			}
		}
	}
	// Stable across processes too: the hash of fixed bytes is fixed.
	u := uuid.MustParse("00000000-0000-4000-8000-000000000000")
	if got := Pick(u, names(3)); got != 1 {
		t.Fatalf("Pick of a fixed job over batch-0..2 = %d, want 1 (the hash changed: every cell's routing moves with it)", got)
	}
}

// Rendezvous: the choice depends only on the set of names, and an instance
// that leaves moves only its own jobs, one that joins takes jobs only from
// the others (none move between the others).
func TestPickMovesOnlyTheJobsOfTheInstanceThatChanged(t *testing.T) {
	g := newIDs(43)
	all := []string{"batch-0", "batch-1", "batch-2", "batch-3"}
	less := []string{"batch-0", "batch-1", "batch-3"} // batch-2 left
	rev := []string{"batch-3", "batch-1", "batch-0"}
	moved := 0
	for range 5000 {
		u := g.next()
		before, after := all[Pick(u, all)], less[Pick(u, less)]
		if got := rev[Pick(u, rev)]; got != after {
			t.Fatalf("job %s: %s over %v, %s over the same names reordered", u, after, less, got)
		}
		if before != "batch-2" && before != after {
			t.Fatalf("job %s moved from %s to %s though %s stayed", u, before, after, before)
		}
		if before == "batch-2" {
			moved++
		}
	}
	if moved < 1000 || moved > 1500 {
		t.Fatalf("%d of 5000 jobs were batch-2's, want about a quarter", moved)
	}
}

// laggingTransport is a remote-like transport whose non-blocking poll has
// not yet received anything (its stream lags the commits): only a blocking
// Next delivers. It hides the in-process transport's snapshot sharing, so
// the client keeps its own copy.
type laggingTransport struct{ client.Transport }

func (t laggingTransport) Watch(ctx context.Context, from uint64) (client.Watch, error) {
	w, err := t.Transport.Watch(ctx, from)
	if err != nil {
		return nil, err
	}
	return laggingWatch{w}, nil
}

type laggingWatch struct{ client.Watch }

func (laggingWatch) Poll(int) ([]*txn.WriteSet, error) { return nil, nil }
