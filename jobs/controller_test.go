package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

const (
	pending   = omegav1.TaskState_TASK_STATE_PENDING
	succeeded = omegav1.TaskState_TASK_STATE_SUCCEEDED
	failed    = omegav1.TaskState_TASK_STATE_FAILED
	lost      = omegav1.TaskState_TASK_STATE_LOST
	abandoned = omegav1.TaskState_TASK_STATE_ABANDONED

	phPending   = omegav1.JobPhase_JOB_PHASE_PENDING
	phRunning   = omegav1.JobPhase_JOB_PHASE_RUNNING
	phSucceeded = omegav1.JobPhase_JOB_PHASE_SUCCEEDED
	phFailed    = omegav1.JobPhase_JOB_PHASE_FAILED
	phAbandoned = omegav1.JobPhase_JOB_PHASE_ABANDONED
)

type cell struct {
	t   *testing.T
	st  *store.Store
	ids *testkit.IDs
	m   uuid.UUID
	jc  *Controller
	cl  *client.Client
}

func newCell(t *testing.T, o store.Options) *cell {
	t.Helper()
	o.JobsManaged = true // the cell runs a job controller
	c := &cell{t: t, st: storekit.Open(t, o), ids: testkit.NewIDs(1, 0x70b)}
	c.m = c.ids.Next()
	c.commit(t0, txn.CreateMachine(testkit.Machine(c.m, "m0", testkit.Res(1_000_000, 1<<40))))
	cl, err := client.New(context.Background(), inproc.New(c.st), client.Config{
		Component: Component, Clock: testkit.NewClock(t0), Rand: rand.New(rand.NewPCG(2, 2)),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	jc, err := New(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(jc.Close)
	c.jc = jc
	return c
}

func (c *cell) commit(at time.Time, ops ...txn.Op) txn.Result {
	c.t.Helper()
	r, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.st.Revision(), Component: "test", UnixNanos: at.UnixNano(), Ops: ops})
	if err != nil || r.Conflicted() {
		c.t.Fatalf("commit: %+v %v", r.Outcomes, err)
	}
	return r
}

// job creates a job of replicas tasks; it returns the job and task uids.
func (c *cell) job(replicas int) (uuid.UUID, []uuid.UUID) {
	c.t.Helper()
	j := c.ids.Next()
	pj := testkit.Job(j, "job-"+j.String()[:6], "batch")
	pj.Spec.Replicas = int32(replicas)
	ops := []txn.Op{txn.CreateJob(pj)}
	var ts []uuid.UUID
	for range replicas {
		ts = append(ts, c.task(j, &ops))
	}
	c.commit(t0, ops...)
	return j, ts
}

func (c *cell) task(j uuid.UUID, ops *[]txn.Op) uuid.UUID {
	u := c.ids.Next()
	*ops = append(*ops, txn.CreateTask(testkit.Task(u, j, "t-"+u.String()[:6], testkit.Res(100, 100))))
	return u
}

func (c *cell) ver(u uuid.UUID) uint64 {
	tk, ok := c.st.Snapshot().Task(u)
	if !ok {
		c.t.Fatalf("task %s missing", u)
	}
	return tk.Version
}

func (c *cell) claim(at time.Time, us ...uuid.UUID) {
	c.t.Helper()
	var ops []txn.Op
	for _, u := range us {
		ops = append(ops, txn.Claim(u, c.m, testkit.Res(100, 100), c.ver(u)))
	}
	c.commit(at, ops...)
}

func (c *cell) end(at time.Time, s omegav1.TaskState, us ...uuid.UUID) {
	c.t.Helper()
	var ops []txn.Op
	for _, u := range us {
		ops = append(ops, txn.SetStatus(u, s, c.ver(u), ""))
	}
	c.commit(at, ops...)
}

func (c *cell) tick(at time.Time) txn.Result {
	c.t.Helper()
	r, err := c.jc.Tick(context.Background(), at.UnixNano())
	if err != nil {
		c.t.Fatalf("tick: %v", err)
	}
	return r
}

func (c *cell) status(j uuid.UUID) *omegav1.JobStatus {
	c.t.Helper()
	job, ok := c.st.Snapshot().Job(j)
	if !ok {
		c.t.Fatalf("job %s missing", j)
	}
	return job.Status
}

func (c *cell) want(step string, j uuid.UUID, phase omegav1.JobPhase, pend, run, succ, fail int32, finish time.Time) {
	c.t.Helper()
	s := c.status(j)
	var fin int64
	if !finish.IsZero() {
		fin = finish.UnixNano()
	}
	if s.GetPhase() != phase || s.GetPending() != pend || s.GetRunning() != run || s.GetSucceeded() != succ || s.GetFailed() != fail || s.GetFinishUnixNanos() != fin {
		c.t.Fatalf("%s: job status %v, want %s pending %d running %d succeeded %d failed %d finish %d", step, s, phase, pend, run, succ, fail, fin)
	}
}

// A job's life, tick by tick: PENDING with its counts, RUNNING once a task
// is placed, SUCCEEDED when the last ends (at that time, not the tick's);
// a tick with nothing new writes nothing; the finished job then leaves the
// cell after the retention window.
func TestJobLife(t *testing.T) {
	o := storekit.Options(t, store.DurabilityNone)
	o.Retention = time.Minute
	c := newCell(t, o)
	j, ts := c.job(3)
	if r := c.tick(t0); r.Committed != 1 {
		t.Fatalf("first tick: %+v", r)
	}
	c.want("created", j, phPending, 3, 0, 0, 0, time.Time{})
	if r := c.tick(t0.Add(time.Second)); r.Revision != 0 {
		t.Fatalf("a tick with nothing new wrote: %+v", r)
	}
	c.claim(t0.Add(2*time.Second), ts[0], ts[1])
	c.tick(t0.Add(2 * time.Second))
	c.want("two placed", j, phRunning, 1, 2, 0, 0, time.Time{})
	c.claim(t0.Add(3*time.Second), ts[2])
	c.end(t0.Add(3500*time.Millisecond), succeeded, ts[0])
	c.tick(t0.Add(4 * time.Second))
	c.want("one done", j, phRunning, 0, 2, 1, 0, time.Time{})
	c.end(t0.Add(5*time.Second), succeeded, ts[1])
	c.end(t0.Add(5500*time.Millisecond), succeeded, ts[2])
	c.tick(t0.Add(6 * time.Second))
	c.want("all done", j, phSucceeded, 0, 0, 3, 0, t0.Add(5500*time.Millisecond))
	if cc := c.jc.Counters(); cc.Finished != 1 || cc.Conflicts != 0 || cc.Writes != 4 {
		t.Fatalf("counters %+v", cc)
	}
	// Retention: seen finished at the first Expire, gone one window later.
	ctx := context.Background()
	for _, at := range []time.Duration{10 * time.Second, 80 * time.Second} {
		if _, err := c.st.Expire(ctx, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.st.Snapshot().Job(j); ok {
		t.Fatal("the finished job is still in the cell after the retention window")
	}
	c.tick(t0.Add(90 * time.Second)) // the deletions reach the controller: nothing to write
	if len(c.jc.Jobs()) != 0 {
		t.Fatalf("the controller still follows %d jobs", len(c.jc.Jobs()))
	}
}

// A lost task does not count towards the job's end; its replacement does.
// A failed task makes the job FAILED, with a message.
func TestLostAndFailed(t *testing.T) {
	c := newCell(t, storekit.Options(t, store.DurabilityNone))
	j, ts := c.job(2)
	c.claim(t0, ts...)
	c.end(t0.Add(time.Second), lost, ts[0])
	c.end(t0.Add(2*time.Second), succeeded, ts[1])
	c.tick(t0.Add(2 * time.Second))
	c.want("one lost, one done", j, phRunning, 0, 0, 1, 0, time.Time{})
	var ops []txn.Op
	r := c.task(j, &ops)
	c.commit(t0.Add(3*time.Second), ops...)
	c.tick(t0.Add(3 * time.Second))
	c.want("replacement pending", j, phRunning, 1, 0, 1, 0, time.Time{})
	c.claim(t0.Add(4*time.Second), r)
	c.end(t0.Add(5*time.Second), succeeded, r)
	c.tick(t0.Add(5 * time.Second))
	c.want("replacement done", j, phSucceeded, 0, 0, 2, 0, t0.Add(5*time.Second))

	k, ks := c.job(2)
	c.claim(t0.Add(6*time.Second), ks...)
	c.end(t0.Add(7*time.Second), succeeded, ks[0])
	c.end(t0.Add(8*time.Second), failed, ks[1])
	c.tick(t0.Add(8 * time.Second))
	c.want("one failed", k, phFailed, 0, 0, 1, 1, t0.Add(8*time.Second))
	if m := c.status(k).GetMessage(); m != "1 of 2 tasks failed" {
		t.Fatalf("message %q", m)
	}
}

// A scheduler's verdict ends the controller's part: a job written
// ABANDONED is never written again, though its placed task ends later.
func TestVerdictIsLeftAlone(t *testing.T) {
	c := newCell(t, storekit.Options(t, store.DurabilityNone))
	j, ts := c.job(2)
	c.claim(t0, ts[0])
	c.tick(t0)
	c.want("one placed", j, phRunning, 1, 1, 0, 0, time.Time{})
	job, _ := c.st.Snapshot().Job(j)
	pj := job.Proto()
	pj.Status = &omegav1.JobStatus{Phase: phAbandoned, Message: "gave up", Running: 1, FinishUnixNanos: t0.Add(time.Second).UnixNano()}
	c.commit(t0.Add(time.Second), txn.PutJob(pj, job.Version), txn.SetStatus(ts[1], abandoned, c.ver(ts[1]), "gave up"))
	c.end(t0.Add(2*time.Second), succeeded, ts[0])
	before := c.st.Revision()
	if r := c.tick(t0.Add(2 * time.Second)); r.Revision != 0 || c.st.Revision() != before {
		t.Fatalf("the controller wrote an abandoned job: %+v", r)
	}
	if s := c.status(j); s.GetPhase() != phAbandoned || s.GetMessage() != "gave up" {
		t.Fatalf("status %v", s)
	}
}

// transport lets a test commit between the controller's poll and its
// commit, so its write races another.
type racing struct {
	client.Transport
	before func()
}

func (r *racing) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	if r.before != nil {
		f := r.before
		r.before = nil
		f()
	}
	return r.Transport.Commit(ctx, tx)
}

// A write that races another writer of the job conflicts, is dropped and
// counted; the next tick, from the watched job, writes the status again.
func TestConflictIsDroppedAndHealed(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	c := &cell{t: t, st: st, ids: testkit.NewIDs(3, 0x70b)}
	c.m = c.ids.Next()
	c.commit(t0, txn.CreateMachine(testkit.Machine(c.m, "m0", testkit.Res(1_000_000, 1<<40))))
	tr := &racing{Transport: inproc.New(st, inproc.WithoutSharing())}
	cl, err := client.New(context.Background(), tr, client.Config{Component: Component, Clock: testkit.NewClock(t0), Rand: rand.New(rand.NewPCG(2, 2))})
	if err != nil {
		t.Fatal(err)
	}
	if c.jc, err = New(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.jc.Close)
	j, ts := c.job(1)
	tr.before = func() { // someone relabels the job meanwhile
		job, _ := st.Snapshot().Job(j)
		pj := job.Proto()
		pj.Meta.Labels = map[string]string{"team": "x"}
		c.commit(t0, txn.PutJob(pj, job.Version))
	}
	if r := c.tick(t0); !r.Conflicted() || r.Committed != 0 {
		t.Fatalf("racing write: %+v", r)
	}
	if cc := c.jc.Counters(); cc.Conflicts != 1 || cc.Writes != 0 {
		t.Fatalf("counters %+v", cc)
	}
	c.tick(t0.Add(time.Second))
	c.want("healed", j, phPending, 1, 0, 0, 0, time.Time{})
	_ = ts
}

// modelJob is what the test itself knows of a job: its tasks' states and
// end times as it wrote them (the store forgets them once they expire).
type modelJob struct {
	replicas int
	tasks    []uuid.UUID
	state    map[uuid.UUID]omegav1.TaskState
	ended    map[uuid.UUID]int64
}

// status is the job's status by DESIGN.md's rules, written out again here
// rather than taken from the controller's code: done once nothing is
// pending or placed and at least max(replicas, 1) tasks succeeded or
// failed (LOST ones not counted), FAILED if one failed or was killed, at
// the last end; RUNNING while placed or once some ended; PENDING before.
func (m *modelJob) status() (phase omegav1.JobPhase, pend, run, succ, fail int32, finish int64) {
	for _, u := range m.tasks {
		switch m.state[u] {
		case pending:
			pend++
		case omegav1.TaskState_TASK_STATE_ASSIGNED, omegav1.TaskState_TASK_STATE_RUNNING:
			run++
		case succeeded:
			succ++
		case failed, omegav1.TaskState_TASK_STATE_KILLED:
			fail++
		}
		if m.state[u] != lost {
			finish = max(finish, m.ended[u])
		}
	}
	switch ended := int(succ + fail); {
	case pend == 0 && run == 0 && ended > 0 && ended >= max(m.replicas, 1):
		phase = phSucceeded
		if fail > 0 {
			phase = phFailed
		}
		return phase, pend, run, succ, fail, finish
	case run > 0 || ended > 0:
		return phRunning, pend, run, succ, fail, 0
	}
	return phPending, pend, run, succ, fail, 0
}

func (m *modelJob) done() bool {
	p, _, _, _, _, _ := m.status()
	return p == phSucceeded || p == phFailed
}

// Random histories — tasks created, claimed, evicted, ended in every
// terminal way, replacements for the lost, ticks in between, finished
// tasks and jobs expiring, the watch falling behind, the controller
// restarting — end with every job's status what the test's own record of
// its tasks gives (an independent model of the rules), though the store
// forgot most of those tasks; a job that left the cell had finished.
func TestRandomHistoriesMatchTheModel(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_JOBS_SEED")
	rng := rand.New(rand.NewPCG(seed, 1))
	o := storekit.Options(t, store.DurabilityNone)
	o.HistoryChanges = 16 // small: the controller re-lists now and then
	o.Retention = 5 * time.Second
	c := newCell(t, o)
	models := map[uuid.UUID]*modelJob{}
	var jobs []uuid.UUID
	now := t0
	restarts, relists := 0, int64(0)
	ctx := context.Background()
	for step := range 800 {
		now = now.Add(time.Duration(rng.IntN(900)+100) * time.Millisecond)
		s := c.st.Snapshot()
		switch k := rng.IntN(12); {
		case k == 0 || len(jobs) == 0:
			n := 1 + rng.IntN(4)
			j, ts := c.job(n)
			m := &modelJob{replicas: n, tasks: ts, state: map[uuid.UUID]omegav1.TaskState{}, ended: map[uuid.UUID]int64{}}
			for _, u := range ts {
				m.state[u] = pending
			}
			models[j] = m
			jobs = append(jobs, j)
		case k < 8:
			j := jobs[rng.IntN(len(jobs))]
			m := models[j]
			u := m.tasks[rng.IntN(len(m.tasks))]
			tk, ok := s.Task(u)
			switch {
			case !ok:
				// expired
			case tk.State == pending:
				c.claim(now, u)
				m.state[u] = omegav1.TaskState_TASK_STATE_ASSIGNED
			case tk.Placed() && rng.IntN(4) == 0:
				c.commit(now, txn.ForceEvict(u, tk.Version, "test"))
				m.state[u] = pending
			case tk.Placed():
				ends := []omegav1.TaskState{succeeded, succeeded, succeeded, failed, lost, omegav1.TaskState_TASK_STATE_KILLED}
				e := ends[rng.IntN(len(ends))]
				c.end(now, e, u)
				m.state[u], m.ended[u] = e, now.UnixNano()
			case tk.State == lost && !m.done():
				var ops []txn.Op
				r := c.task(j, &ops)
				c.commit(now, ops...)
				m.tasks = append(m.tasks, r)
				m.state[r] = pending
			}
		case k == 8:
			if _, err := c.st.Expire(ctx, now); err != nil {
				t.Fatal(err)
			}
		case k == 9 && rng.IntN(4) == 0:
			// The controller restarts: a new one lists the cell.
			relists += c.jc.Counters().Relists
			c.jc.Close()
			jc, err := New(ctx, c.cl)
			if err != nil {
				t.Fatal(err)
			}
			c.jc = jc
			restarts++
		default:
			c.tick(now)
		}
		if step%97 == 0 {
			c.commit(now, txn.CreateMachine(testkit.Machine(c.ids.Next(), fmt.Sprintf("filler-%d", step), testkit.Res(1, 1)))) // history moves on
		}
		if step%211 == 210 {
			// More changes than the history keeps, with no tick between:
			// the controller's watch falls behind and it re-lists, however
			// often the draws tick.
			for i := range o.HistoryChanges + 1 {
				c.commit(now, txn.CreateMachine(testkit.Machine(c.ids.Next(), fmt.Sprintf("burst-%d-%d", step, i), testkit.Res(1, 1))))
			}
		}
	}
	c.tick(now.Add(time.Second))
	s := c.st.Snapshot()
	expired, finished := 0, 0 // finished: the jobs finished and still in the cell
	for _, j := range jobs {
		m := models[j]
		phase, pend, run, succ, fail, finish := m.status()
		job, ok := s.Job(j)
		if !ok {
			if !m.done() {
				t.Fatalf("seed %d: job %s left the cell unfinished (%s)", seed, j, phase)
			}
			expired++
			continue
		}
		st := job.StatusProto()
		if st.GetPhase() != phase || st.GetPending() != pend || st.GetRunning() != run || st.GetSucceeded() != succ || st.GetFailed() != fail || st.GetFinishUnixNanos() != finish {
			t.Fatalf("seed %d: job %s status %v, the test's record gives %s pending %d running %d succeeded %d failed %d finish %d",
				seed, j, st, phase, pend, run, succ, fail, finish)
		}
		if m.done() {
			finished++
		}
	}
	relists += c.jc.Counters().Relists
	if restarts == 0 || relists == 0 || expired == 0 {
		t.Fatalf("seed %d: %d restarts, %d re-lists, %d jobs expired, %d finished in the cell: the history showed too little", seed, restarts, relists, expired, finished)
	}
}

// A task ended and deleted in one transaction reaches the controller as one
// change, a deletion carrying the ended version: its placement must still
// leave the counts, though the end was never delivered alone.
func TestEndedAndDeletedInOneTransaction(t *testing.T) {
	c := newCell(t, storekit.Options(t, store.DurabilityNone))
	j, ts := c.job(2)
	c.claim(t0.Add(time.Second), ts[0], ts[1])
	c.tick(t0.Add(time.Second))
	c.want("both placed", j, phRunning, 0, 2, 0, 0, time.Time{})
	v := c.ver(ts[0])
	c.commit(t0.Add(2*time.Second),
		txn.SetStatus(ts[0], omegav1.TaskState_TASK_STATE_KILLED, v, "killed"),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, ts[0], 0))
	c.tick(t0.Add(3 * time.Second))
	c.want("one killed and deleted", j, phRunning, 0, 1, 0, 0, time.Time{})
}

// A raw store takes tasks that name a job not created yet. The controller
// counts such a task from its first change once the job is known (not at
// its creation, when it had no job to count it in), and then follows it
// like any other: the previous state its later changes carry is the one it
// was counted in. A controller that lists the cell after the job exists
// counts them all at once.
func TestTasksCreatedBeforeTheirJob(t *testing.T) {
	for _, relist := range []bool{false, true} {
		t.Run(fmt.Sprintf("relist=%v", relist), func(t *testing.T) {
			c := newCell(t, storekit.Options(t, store.DurabilityNone))
			j := c.ids.Next()
			var ops []txn.Op
			early := []uuid.UUID{c.task(j, &ops), c.task(j, &ops)}
			c.commit(t0, ops...)
			c.tick(t0)
			pj := testkit.Job(j, "late", "batch")
			pj.Spec.Replicas = 2
			c.commit(t0.Add(time.Second), txn.CreateJob(pj))
			if relist {
				c.jc.Close()
				jc, err := New(context.Background(), c.cl)
				if err != nil {
					t.Fatal(err)
				}
				c.jc = jc
				c.tick(t0.Add(time.Second))
				c.want("listed with the job", j, phPending, 2, 0, 0, 0, time.Time{})
			} else {
				c.tick(t0.Add(time.Second))
				c.want("the job is known, its tasks not yet counted", j, phPending, 0, 0, 0, 0, time.Time{})
			}
			c.claim(t0.Add(2*time.Second), early[0])
			c.tick(t0.Add(2 * time.Second))
			if relist {
				c.want("one placed", j, phRunning, 1, 1, 0, 0, time.Time{})
			} else {
				c.want("one placed, counted at its first change", j, phRunning, 0, 1, 0, 0, time.Time{})
			}
			c.claim(t0.Add(3*time.Second), early[1])
			c.end(t0.Add(4*time.Second), succeeded, early[0])
			c.tick(t0.Add(4 * time.Second))
			c.want("one placed, one ended", j, phRunning, 0, 1, 1, 0, time.Time{})
			c.end(t0.Add(5*time.Second), succeeded, early[1])
			c.tick(t0.Add(6 * time.Second))
			c.want("both ended", j, phSucceeded, 0, 0, 2, 0, t0.Add(5*time.Second))
		})
	}
}

// Why a job waits (JobStatus.waiting) is its scheduler's to write: the
// controller's writes of the counts keep it while a task waits and drop it
// once none does.
func TestWaitingKeptWhilePendingThenCleared(t *testing.T) {
	c := newCell(t, storekit.Options(t, store.DurabilityNone))
	j, ts := c.job(2)
	c.tick(t0)
	job, _ := c.st.Snapshot().Job(j)
	pj := job.Proto()
	pj.Status = proto.Clone(job.Status).(*omegav1.JobStatus)
	w := &omegav1.JobWaiting{Reason: omegav1.WaitReason_WAIT_REASON_RESOURCES, Resource: "cpu", Message: "0 of 1 UP machines", Reporter: "batch-0", Tasks: 2}
	pj.Status.Waiting = w
	c.commit(t0.Add(time.Second), txn.PutJob(pj, job.Version))
	c.claim(t0.Add(2*time.Second), ts[0])
	c.tick(t0.Add(2 * time.Second))
	c.want("one placed", j, phRunning, 1, 1, 0, 0, time.Time{})
	if got := c.status(j).GetWaiting(); !proto.Equal(got, w) {
		t.Fatalf("one task still waits: waiting %v, want %v", got, w)
	}
	c.claim(t0.Add(3*time.Second), ts[1])
	c.tick(t0.Add(3 * time.Second))
	c.want("both placed", j, phRunning, 0, 2, 0, 0, time.Time{})
	if got := c.status(j).GetWaiting(); got != nil {
		t.Fatalf("nothing waits: waiting %v, want none", got)
	}
}

// leaseOp makes or renews a scheduler's lease of kind, held for 10 s.
func leaseOp(name, kind string, create bool) txn.Op {
	l := &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID(name).String(), Name: name},
		Spec: &omegav1.LeaseSpec{Holder: "h-" + name, Role: "scheduler", SchedulerKind: kind, DurationMillis: 10_000}}
	if create {
		return txn.CreateLease(l)
	}
	return txn.PutLease(l, 0)
}

// With the scheduler leases' duty, a job whose kind no live lease names is
// said to wait for a scheduler (after the grace from the first tick); a
// lease of its kind clears that; a lease not renewed for its duration, by
// the controller's clock, counts no more; one left expired past the
// retention is deleted. Another kind's lease does not count.
func TestNoSchedulerOfTheKind(t *testing.T) {
	c := newCell(t, storekit.Options(t, store.DurabilityNone))
	jc, err := NewWith(context.Background(), c.cl, Options{SchedulerLeases: true, Grace: 5 * time.Second, Retention: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(jc.Close)
	c.jc = jc
	reason := func(j uuid.UUID) omegav1.WaitReason { return c.status(j).GetWaiting().GetReason() }
	j, _ := c.job(2)
	c.commit(t0, leaseOp("service-0", "service", true))
	c.tick(t0)
	if r := reason(j); r != omegav1.WaitReason_WAIT_REASON_UNSPECIFIED {
		t.Fatalf("within the grace: %s", r)
	}
	c.tick(t0.Add(5 * time.Second))
	w := c.status(j).GetWaiting()
	if w.GetReason() != omegav1.WaitReason_WAIT_REASON_NO_SCHEDULER || w.GetReporter() != Component || w.GetTasks() != 2 ||
		!strings.Contains(w.GetMessage(), `no scheduler of kind "batch" runs in the cell`) {
		t.Fatalf("after the grace: %v", w)
	}
	// Written once: a tick with nothing new writes nothing.
	rev := c.st.Revision()
	c.tick(t0.Add(6 * time.Second))
	if c.st.Revision() != rev {
		t.Fatal("the reason was written again")
	}
	c.commit(t0.Add(7*time.Second), leaseOp("batch-0", "batch", true))
	c.tick(t0.Add(7 * time.Second))
	if r := reason(j); r != omegav1.WaitReason_WAIT_REASON_UNSPECIFIED {
		t.Fatalf("a batch scheduler's lease came: %s", r)
	}
	// Renewed within its duration: still live at 7+10 s.
	c.commit(t0.Add(12*time.Second), leaseOp("batch-0", "batch", false))
	c.tick(t0.Add(17 * time.Second))
	if r := reason(j); r != omegav1.WaitReason_WAIT_REASON_UNSPECIFIED {
		t.Fatalf("the lease was renewed: %s", r)
	}
	// Not renewed for its duration since the controller saw it at 17 s.
	c.tick(t0.Add(27*time.Second + time.Millisecond))
	if r := reason(j); r != omegav1.WaitReason_WAIT_REASON_NO_SCHEDULER {
		t.Fatalf("the lease expired: %s", r)
	}
	// Expired past the retention: deleted (the service one too, which was
	// never renewed).
	c.tick(t0.Add(27*time.Second + time.Minute + time.Second))
	if n := c.st.Snapshot().NumLeases(); n != 0 || jc.Counters().LeasesDeleted != 2 {
		t.Fatalf("%d leases left, %d deleted", n, jc.Counters().LeasesDeleted)
	}
}
