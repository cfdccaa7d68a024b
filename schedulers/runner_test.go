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

func TestRunnerPlacesAReadyJob(t *testing.T) {
	forSeeds(t, 3, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(4, 4000, 16*gib, 0)...)
		job, tasks := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 7, cpu: 1000, mem: gib})
		cfg := testConfig()
		r := c.runner(NewBatch(), "batch-0", seed, cfg, nil)

		r.Submit(job, t0)
		if r.Queued() != 1 || nextReady(t, r) != t0 {
			t.Fatalf("after Submit: queued %d, next ready %v", r.Queued(), nextReady(t, r))
		}
		noBegin(t, r, t0.Add(-time.Nanosecond)) // not ready yet
		start := t0.Add(3 * time.Second)
		a := begin(t, r, start)
		if want := cfg.TJob + 7*cfg.TTask; a.DecisionTime != want || r.Busy() != want {
			t.Fatalf("decision time %v, busy %v; want TJob + 7 x TTask = %v", a.DecisionTime, r.Busy(), want)
		}
		if a.Job != job || a.Decision.Considered != 7 || a.Txn.Component != "batch-0" || a.Txn.ViewRevision != c.state().Revision() {
			t.Fatalf("attempt: job %s, considered %d, component %q, view %d (store at %d)", a.Job, a.Decision.Considered, a.Txn.Component, a.Txn.ViewRevision, c.state().Revision())
		}
		o, end := finish(t, r, a, start)
		if o != OutcomePlaced {
			t.Fatalf("outcome %v, want placed", o)
		}
		rec := record(t, r, job)
		if rec.Submitted != t0 || rec.FirstAttempt.Sub(rec.Submitted) != 3*time.Second || rec.Placed != end {
			t.Fatalf("record: submitted %v, first attempt %v, placed %v; want wait 3s and placed at %v", rec.Submitted, rec.FirstAttempt, rec.Placed, end)
		}
		if rec.Attempts != 1 || rec.TasksPlaced != 7 || rec.Abandoned || rec.Conflicted != 0 {
			t.Fatalf("record %+v", rec)
		}
		if got := r.Client().Counters(); got != (client.Counters{Attempts: 1, ClaimsAttempted: 7, ClaimsCommitted: 7}) {
			t.Fatalf("counters %+v", got)
		}
		for _, u := range tasks {
			tk := c.task(u)
			if tk.State != assignedState || tk.Scheduler != "batch-0" || tk.Assigned != end.UnixNano() {
				t.Fatalf("task %s: %s by %q at %d; want assigned by batch-0 at the commit time %d", u, tk.State, tk.Scheduler, tk.Assigned, end.UnixNano())
			}
		}
		c.checkInvariants()
		if r.Queued() != 0 {
			t.Fatalf("placed job still queued")
		}
		if _, ok := r.NextReady(); ok {
			t.Fatalf("NextReady with an empty queue")
		}
		noBegin(t, r, end.Add(time.Hour))
	})
}

func TestRunnerRetriesAJobThatDoesNotFitThenAbandonsIt(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(machineSpec{cpu: 500, mem: 16 * gib})
	job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 1000, mem: gib})
	cfg := testConfig()
	cfg.MaxAttemptsNoPlacement = 3
	r := c.runner(NewBatch(), "batch-0", 1, cfg, nil)
	r.Submit(job, t0)
	now := t0
	var lastEnd time.Time
	for i := 1; i <= 3; i++ {
		a := begin(t, r, now)
		if len(a.Txn.Ops) != 0 || a.Decision.Unplaceable != 2 {
			t.Fatalf("attempt %d: %d ops, %d unplaceable", i, len(a.Txn.Ops), a.Decision.Unplaceable)
		}
		o, end := finish(t, r, a, now)
		lastEnd = end
		if i < 3 {
			if o != OutcomeRetry || nextReady(t, r) != end.Add(cfg.RetryDelay) {
				t.Fatalf("attempt %d: outcome %v, next ready %v; want retry at %v", i, o, nextReady(t, r).Sub(t0), end.Add(cfg.RetryDelay).Sub(t0))
			}
			noBegin(t, r, end.Add(cfg.RetryDelay-time.Nanosecond))
			now = end.Add(cfg.RetryDelay)
			continue
		}
		if o != OutcomeAbandoned || r.Queued() != 0 {
			t.Fatalf("attempt %d: outcome %v, queued %d; want abandoned", i, o, r.Queued())
		}
	}
	rec := record(t, r, job)
	if !rec.Abandoned || rec.Attempts != 3 || rec.TasksPlaced != 0 || !rec.Placed.IsZero() || rec.FirstAttempt != t0 {
		t.Fatalf("record %+v", rec)
	}
	if want := 3 * (cfg.TJob + 2*cfg.TTask); r.Busy() != want {
		t.Fatalf("busy %v, want %v: every attempt costs its decision time", r.Busy(), want)
	}
	if n, v := r.Client().Counters().Attempts, r.VerdictCounters().Attempts; n-v != 0 || v != 1 {
		t.Fatalf("%d transactions sent for decisions without operations, %d for the verdict (want 0 and 1)", n-v, v)
	}
	// The verdict is in the cell: the job ABANDONED with the reason, at the
	// time of the last attempt's end, and its pending tasks ABANDONED.
	s := c.state()
	j, _ := s.Job(job)
	if j.Status.GetPhase() != omegav1.JobPhase_JOB_PHASE_ABANDONED || !strings.Contains(j.Status.GetMessage(), "3 attempts without a placement") || j.Status.GetFinishUnixNanos() != lastEnd.UnixNano() {
		t.Fatalf("job status %v, want ABANDONED after 3 attempts without a placement at %v", j.Status, lastEnd.Sub(t0))
	}
	n := 0
	s.RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == job {
			n++
			if tk.State != omegav1.TaskState_TASK_STATE_ABANDONED || tk.Message() != j.Status.GetMessage() {
				t.Fatalf("task %s is %s (%q), want ABANDONED with the job's reason", tk.UID, tk.State, tk.Message())
			}
		}
		return true
	})
	if n != 2 {
		t.Fatalf("%d tasks of the job in the cell, want 2", n)
	}
}

// The no-placement bound counts attempts since the last that placed a
// task; the overall bound counts them all.
func TestRunnerBoundsOnAttempts(t *testing.T) {
	run := func(t *testing.T, cfg RunnerConfig) (JobRecord, []Outcome) {
		c := newCell(t, 2)
		c.addMachines(machineSpec{cpu: 1000, mem: 16 * gib})
		job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 3, cpu: 1000, mem: gib})
		r := c.runner(NewBatch(), "batch-0", 2, cfg, nil)
		r.Submit(job, t0)
		var outs []Outcome
		now := t0
		for i := 1; r.Queued() > 0; i++ {
			if i == 3 {
				c.addMachines(machineSpec{cpu: 1000, mem: 16 * gib}) // room for one more
			}
			a := begin(t, r, now)
			o, end := finish(t, r, a, now)
			outs = append(outs, o)
			if o == OutcomeRetry {
				now = nextReady(t, r)
				if now != end.Add(cfg.RetryDelay) {
					t.Fatalf("attempt %d: next ready %v, want %v", i, now.Sub(t0), end.Add(cfg.RetryDelay).Sub(t0))
				}
			}
			if i > 10 {
				t.Fatalf("no bound reached after %d attempts", i)
			}
		}
		return record(t, r, job), outs
	}
	// Attempts place 1, 0, 1 (a machine was added), 0, 0: abandoned at the
	// fifth, two attempts after the last progress.
	cfg := testConfig()
	cfg.MaxAttemptsNoPlacement = 2
	rec, outs := run(t, cfg)
	if len(outs) != 5 || outs[4] != OutcomeAbandoned || !rec.Abandoned || rec.TasksPlaced != 2 || rec.Attempts != 5 {
		t.Fatalf("no-placement bound 2: outcomes %v, record %+v; want abandoned at attempt 5 with 2 tasks placed", outs, rec)
	}
	cfg = testConfig()
	cfg.MaxAttempts = 2
	rec, outs = run(t, cfg)
	if len(outs) != 2 || outs[1] != OutcomeAbandoned || !rec.Abandoned || rec.TasksPlaced != 1 {
		t.Fatalf("attempt bound 2: outcomes %v, record %+v", outs, rec)
	}
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

// A job whose tasks became pending again after it was placed (evicted) is
// queued again by Submit and placed again; Resubmit does the same for the
// engine's reconcile loop.
func TestRunnerRequeuesAnEvictedJob(t *testing.T) {
	forSeeds(t, 3, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(3, 4000, 16*gib, 0)...)
		job, tasks := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 3, cpu: 1000, mem: gib})
		cfg := testConfig()
		r := c.runner(NewBatch(), "batch-0", seed, cfg, nil)
		r.Submit(job, t0)
		o, placedAt := finish(t, r, begin(t, r, t0), t0)
		if o != OutcomePlaced {
			t.Fatalf("outcome %v", o)
		}
		evict := func(u uuid.UUID) {
			c.commit(txn.ForceEvict(u, c.task(u).Version, "drain"))
			if c.task(u).State != pendingState {
				t.Fatalf("evicted task is %s", c.task(u).State)
			}
		}

		evict(tasks[1])
		t1 := t0.Add(time.Minute)
		r.Submit(job, t1)
		r.Submit(job, t1.Add(time.Second)) // already queued: no second entry
		if r.Queued() != 1 || nextReady(t, r) != t1 {
			t.Fatalf("after Submit of an evicted job: queued %d, next ready %v", r.Queued(), nextReady(t, r).Sub(t0))
		}
		a := begin(t, r, t1)
		if len(a.Txn.Ops) != 1 || a.Txn.Ops[0].Task != tasks[1] || a.DecisionTime != cfg.TJob+cfg.TTask {
			t.Fatalf("attempt after eviction: %s, decision time %v; want the evicted task alone", opsString(a.Txn.Ops), a.DecisionTime)
		}
		if o, _ := finish(t, r, a, t1); o != OutcomePlaced {
			t.Fatalf("outcome after eviction %v", o)
		}
		if c.task(tasks[1]).State != assignedState || c.task(tasks[1]).Evictions != 1 {
			t.Fatalf("evicted task not placed again: %s", c.task(tasks[1]).State)
		}
		rec := record(t, r, job)
		if rec.Attempts != 2 || rec.TasksPlaced != 4 || rec.Placed != placedAt || rec.Submitted != t0 {
			t.Fatalf("record %+v; want 2 attempts, 4 placements, placed time and submission unchanged", rec)
		}

		evict(tasks[2])
		t2 := t1.Add(time.Minute)
		if !r.Resubmit(job, t2) || r.Resubmit(job, t2) || r.Resubmit(c.ids.next(), t2) {
			t.Fatalf("Resubmit: want true for a placed job, false when queued or unknown")
		}
		if o, _ := finish(t, r, begin(t, r, t2), t2); o != OutcomePlaced || c.task(tasks[2]).State != assignedState {
			t.Fatalf("after Resubmit: outcome %v, task %s", o, c.task(tasks[2]).State)
		}
		c.checkInvariants()
	})
}

// A job submitted again while its attempt is in flight (its tasks became
// pending meanwhile) is queued once, not twice.
func TestRunnerSubmitDuringAnAttemptQueuesTheJobOnce(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(machineSpec{cpu: 1000, mem: 16 * gib})
	job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 1000, mem: gib})
	other, _ := c.addJob("o", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
	r := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
	r.Submit(job, t0)
	a := begin(t, r, t0)
	r.Submit(job, t0.Add(time.Millisecond)) // in flight: re-queued
	if o, _ := finish(t, r, a, t0); o != OutcomeRetry {
		t.Fatalf("outcome %v", o)
	}
	if r.Queued() != 1 {
		t.Fatalf("job queued %d times, want once", r.Queued())
	}
	r.Submit(other, t0.Add(time.Hour))
	// The queue stays ordered: the job first, then the other.
	a = begin(t, r, t0.Add(time.Hour))
	if a.Job != job {
		t.Fatalf("first ready: %s, want the job ready earlier", a.Job)
	}
	finish(t, r, a, t0.Add(time.Hour))
	if r.Queued() != 2 {
		t.Fatalf("queued %d after the retry, want 2 (the job again and the other)", r.Queued())
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

func TestRunnerForgetsADeletedJob(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(machineSpec{cpu: 1000, mem: gib})
	job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 0, replicas: 1, cpu: 1000, mem: gib})
	r := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
	r.Submit(job, t0)
	c.commit(txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, job, 0))
	noBegin(t, r, t0)
	if r.Queued() != 0 || r.Client().Counters().Attempts != 0 {
		t.Fatalf("queued %d, attempts %d", r.Queued(), r.Client().Counters().Attempts)
	}
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

// TestRunnerSyncsToWhatItConflictedWith: after an attempt whose every
// claim conflicted, the runner re-syncs to the result's Base before its
// next decision, through the client's loop. With a transport whose
// non-blocking sync lags, the runner used to decide again on the very
// state that conflicted — here, a view without the machine added since —
// until it abandoned the job; now its second attempt places it.
func TestRunnerSyncsToWhatItConflictedWith(t *testing.T) {
	c := newCell(t, 1)
	m1 := c.addMachines(machineSpec{cpu: 1000, mem: gib})[0]
	job, tasks := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 500, mem: gib / 2})
	r := c.runner(NewBatch(), "batch-0", 1, testConfig(), func(tr client.Transport) client.Transport { return laggingTransport{tr} })
	// After the runner listed the cell: a second machine, and m1 filled.
	m2 := c.addMachines(machineSpec{cpu: 1000, mem: gib})[0]
	c.fill(1000, gib, m1)

	r.Submit(job, t0)
	a := begin(t, r, t0)
	if a.Txn.ViewRevision >= c.state().Revision() {
		t.Fatalf("the view is at %d, the store at %d: the transport does not lag", a.Txn.ViewRevision, c.state().Revision())
	}
	o, end := finish(t, r, a, t0)
	if o != OutcomeRetry || !a.Result.Conflicted() || a.Result.Base != c.state().Revision() {
		t.Fatalf("first attempt: %v, result %+v; want a conflict on m1 evaluated at %d", o, a.Result, c.state().Revision())
	}
	if got := r.Client().View().Revision(); got < a.Result.Base {
		t.Fatalf("after the conflict the view is at %d, below the result's base %d", got, a.Result.Base)
	}
	a = begin(t, r, end)
	if o, _ := finish(t, r, a, end); o != OutcomePlaced {
		t.Fatalf("second attempt: %v, result %+v; want placed on the machine the re-sync showed", o, a.Result)
	}
	if tk := c.task(tasks[0]); tk.Machine != m2 {
		t.Fatalf("task on %s, want m2 %s", tk.Machine, m2)
	}
	if rec := record(t, r, job); rec.Attempts != 2 || rec.Abandoned {
		t.Fatalf("record %+v", rec)
	}
}

// A job that left the cell (deleted after its retention window) keeps its
// record, and the runner lets go of the set of its placed tasks, at once or,
// with an attempt in flight, when the attempt lands (whose placements the
// record still counts).
func TestRunnerLetsGoOfAJobThatLeftTheCell(t *testing.T) {
	for _, inFlight := range []bool{false, true} {
		t.Run(fmt.Sprintf("inFlight=%v", inFlight), func(t *testing.T) {
			c := newCell(t, 1)
			c.addMachines(uniform(4, 4000, 16*gib, 0)...)
			job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 3, cpu: 1000, mem: gib})
			r := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
			r.Submit(job, t0)
			a := begin(t, r, t0)
			if !inFlight {
				if o, _ := finish(t, r, a, t0); o != OutcomePlaced {
					t.Fatalf("outcome %v", o)
				}
				if len(r.jobs[job].placed) != 3 {
					t.Fatalf("placed set %v, want the 3 tasks", r.jobs[job].placed)
				}
			}
			r.Gone(job)
			if inFlight {
				if r.jobs[job].placed == nil {
					t.Fatal("let go of the placed set while an attempt was in flight")
				}
				if o, _ := finish(t, r, a, t0); o != OutcomePlaced {
					t.Fatalf("outcome %v", o)
				}
			}
			if j := r.jobs[job]; j.placed != nil || j.lost != nil || j.gone {
				t.Fatalf("after the job left: placed %v, lost %v, gone %v", j.placed, j.lost, j.gone)
			}
			if rec := record(t, r, job); rec.TasksPlaced != 3 || rec.Placed.IsZero() {
				t.Fatalf("record %+v, want its 3 placements kept", rec)
			}
			r.Gone(job) // again: nothing to do
			r.Gone(uuid.New())
		})
	}
}

// With SetRetire, a job that left the cell is handed over, record and all,
// at once or when its attempt in flight lands, and the runner keeps
// nothing of it; a job still in the cell stays in Records.
func TestRunnerRetiresAJobThatLeftTheCell(t *testing.T) {
	for _, inFlight := range []bool{false, true} {
		t.Run(fmt.Sprintf("inFlight=%v", inFlight), func(t *testing.T) {
			c := newCell(t, 1)
			c.addMachines(uniform(4, 4000, 16*gib, 0)...)
			job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 3, cpu: 1000, mem: gib})
			other, _ := c.addJob("c", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 1000, mem: gib})
			r := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
			var retired []JobRecord
			r.SetRetire(func(rec JobRecord) { retired = append(retired, rec) })
			r.Submit(job, t0)
			r.Submit(other, t0)
			a := begin(t, r, t0)
			if a.Job != job {
				a2 := begin(t, r, t0)
				finish(t, r, a, t0)
				a = a2
			}
			if !inFlight {
				if o, _ := finish(t, r, a, t0); o != OutcomePlaced {
					t.Fatalf("outcome %v", o)
				}
			}
			r.Gone(job)
			if inFlight {
				if len(retired) != 0 || r.jobs[job] == nil {
					t.Fatal("retired a job whose attempt is in flight")
				}
				if o, _ := finish(t, r, a, t0); o != OutcomePlaced {
					t.Fatalf("outcome %v", o)
				}
			}
			if len(retired) != 1 || retired[0].UID != job || retired[0].TasksPlaced != 3 || retired[0].Placed.IsZero() {
				t.Fatalf("retired %+v, want the job with its 3 placements", retired)
			}
			if _, kept := r.jobs[job]; kept {
				t.Fatal("the runner still holds the retired job")
			}
			for _, rec := range r.Records() {
				if rec.UID == job {
					t.Fatal("Records still lists the retired job")
				}
			}
			record(t, r, other) // still in the cell
			r.Gone(job)         // again: nothing to do
			if len(retired) != 1 {
				t.Fatalf("retired twice: %+v", retired)
			}
		})
	}
}
