// Package jobs keeps each job's status following its tasks: the job
// controller, the one component that writes a job's phase, counts and
// finish time (DESIGN.md "Jobs finish"). It follows the cell through the
// client library — a view and the watch after it, re-listing when the
// watch falls behind — and writes what changed in one incremental
// transaction per tick, live (the server runs it on a ticker) and in
// virtual time (the simulation steps it). A scheduler's verdict on a job
// it gave up on (ABANDONED, schedulers.Runner) ends the controller's part:
// it never writes a job whose phase is terminal. Finished jobs leave the
// cell after the store's retention window like finished tasks.
//
// It is decision code: no clock (time is the now passed to Tick), no
// goroutine, and the same history gives the same transactions.
package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/uidmap"
	"github.com/omega-cell/omega/txn"
)

// Component is the controller's component name in the cell.
const Component = "jobs"

// Counters are what a Controller counts.
type Counters struct {
	// Txns counts the status transactions the store evaluated; Writes the
	// job status writes that committed; Conflicts those that did not (the
	// job moved meanwhile: a verdict, a deletion; the watch brings it).
	Txns, Writes, Conflicts int64
	// Finished counts the jobs the controller wrote SUCCEEDED or FAILED.
	Finished int64
	// Relists counts the fresh views taken after the watch fell behind.
	Relists int64
	// LeasesDeleted counts the expired scheduler leases the controller
	// deleted (WatchSchedulers).
	LeasesDeleted int64
}

// count is what the controller knows of one job's tasks.
type count struct {
	job *txn.Job // as last watched; nil until the job is seen
	// The tasks by state: those not terminal as they are now, the terminal
	// ones as they ended (deleting a terminal task does not undo its count).
	pending, running, succeeded, failed, lost, abandoned int32
	tasks                                                int32 // tasks seen and not deleted
	lastEnd                                              int64 // when the latest task that counts ended (not a LOST one), Unix nanoseconds
	// endedRev is the revision of the latest task end counted: a status
	// written from an older view has not counted it, and the store keeps
	// the task until one is (store.counted), so it is written even when
	// the counts came out the same (a task lost and its replacement placed
	// within one tick).
	endedRev uint64
	dirty    bool // queued in Controller.dirty
}

// Controller writes every job's status from its tasks. It belongs to one
// goroutine.
type Controller struct {
	c    *client.Client
	inf  *client.Informer
	jobs map[uuid.UUID]*count
	// uncounted are the tasks seen while their job was not (created before
	// it in a raw store, or after it was deleted): they count from their
	// first change once the job is known. Every other task's count moves
	// by its watched change alone, from the state the change carries as
	// the task's previous one (txn.Change.PrevState), so the controller
	// keeps nothing per task.
	uncounted *uidmap.Map[struct{}]
	dirty     []uuid.UUID // jobs whose status may have to change, in the order they changed
	counters  Counters
	sched     *schedulerLeases // nil unless WatchSchedulers
}

// New starts a controller over c: it lists the cell, counts every job's
// tasks and watches from there. c should be the controller's own client
// (its commits count in c's counters, under c's component name).
func New(ctx context.Context, c *client.Client) (*Controller, error) {
	return NewWith(ctx, c, Options{})
}

// NewWith is New with the optional duties o asks for.
func NewWith(ctx context.Context, c *client.Client, o Options) (*Controller, error) {
	if c == nil {
		return nil, errors.New("new job controller: client is nil")
	}
	jc := &Controller{c: c}
	if o.SchedulerLeases {
		jc.sched = &schedulerLeases{grace: o.Grace, retention: o.Retention, leases: map[uuid.UUID]*leaseSeen{}, live: map[string]bool{}}
	}
	inf, err := client.NewInformer(c, feed{jc})
	if err != nil {
		return nil, err
	}
	jc.inf = inf
	if err := inf.List(ctx); err != nil {
		return nil, fmt.Errorf("new job controller (%s): %w", c.Component(), err)
	}
	return jc, nil
}

// feed is the controller as its informer's handler.
type feed struct{ jc *Controller }

func (f feed) Relisted(s *txn.State) error { f.jc.relisted(s); return nil }

func (f feed) Apply(ws *txn.WriteSet) error {
	jc := f.jc
	for i := range ws.Changes {
		ch := &ws.Changes[i]
		switch {
		case ch.Job != nil && ch.Deleted:
			delete(jc.jobs, ch.Job.UID) // its tasks that change later find no job and are not counted
		case ch.Job != nil:
			jc.noteJob(ch.Job)
		case ch.Task != nil:
			jc.noteTask(ch.Task, ch.Deleted, ch.Created, ch.PrevState, ws.UnixNanos, ws.Revision)
		case ch.Lease != nil && jc.sched != nil:
			jc.sched.note(ch.Lease, ch.Deleted)
		}
	}
	return nil
}

// Counters returns the counts so far.
func (jc *Controller) Counters() Counters {
	c := jc.counters
	c.Relists = jc.inf.Relists()
	return c
}

// Close stops watching.
func (jc *Controller) Close() { jc.inf.Close() }

// relisted rebuilds the counts from a fresh view. The tasks that ended
// before a job's status was last written may have expired since: the
// ended counts and the latest end's time start from that status, and only
// the tasks that ended after the revision it was written from
// (JobStatus.observed_revision) are counted on top; the tasks not yet
// terminal are all in the view.
func (jc *Controller) relisted(st *txn.State) {
	jc.jobs = make(map[uuid.UUID]*count, st.NumJobs())
	jc.uncounted = uidmap.New[struct{}](0)
	jc.dirty = jc.dirty[:0]
	observed := map[uuid.UUID]uint64{}
	st.RangeJobs(func(j *txn.Job) bool {
		jc.noteJob(j)
		n := jc.jobs[j.UID]
		n.succeeded, n.failed = j.StatusProto().GetSucceeded(), j.StatusProto().GetFailed()
		n.lastEnd = j.StatusProto().GetLastEndUnixNanos() // the ends counted may have expired
		observed[j.UID] = j.StatusProto().GetObservedRevision()
		return true
	})
	if jc.sched != nil {
		jc.sched.relisted(st)
	}
	st.RangeTasks(func(t *txn.Task) bool {
		if t.Terminal() && t.Version <= observed[t.Job] {
			return true // counted in the job's status
		}
		jc.noteTask(t, false, false, omegav1.TaskState_TASK_STATE_UNSPECIFIED, t.Finished, t.Version)
		return true
	})
}

// Poll takes in what the watch delivered since the last call, without
// blocking; a watch that fell behind the retained history is not an error:
// the controller lists again.
func (jc *Controller) Poll(ctx context.Context) error {
	if err := jc.inf.Poll(ctx); err != nil {
		return fmt.Errorf("job controller: %w", err)
	}
	return nil
}

func (jc *Controller) noteJob(j *txn.Job) {
	n := jc.jobs[j.UID]
	if n == nil {
		n = &count{}
		jc.jobs[j.UID] = n
	}
	n.job = j
	jc.mark(j.UID, n)
}

func (jc *Controller) mark(uid uuid.UUID, n *count) {
	if !n.dirty {
		n.dirty = true
		jc.dirty = append(jc.dirty, uid)
	}
}

// noteTask counts a task's change at revision rev: at is the revision's
// time (the end time of a task that ended then), prev the task's state
// before the change (UNSPECIFIED for one created then, and for a task of a
// fresh view). A task was counted, and in its state before the change,
// when it existed before and its job was known when it was seen (else it
// is among the uncounted); it is counted now if it is not terminal, or if
// it ends now. (A deletion carrying a terminal version, a transaction that
// ends a task and deletes it in one change, counts its end as well.)
func (jc *Controller) noteTask(t *txn.Task, deleted, created bool, prev omegav1.TaskState, at int64, rev uint64) {
	job := t.Job
	if job == uuid.Nil {
		return // a task of no job
	}
	n := jc.jobs[job]
	if n == nil { // its job is not known, or gone
		if deleted {
			jc.uncounted.Delete(t.UID)
		} else {
			jc.uncounted.Set(t.UID, struct{}{})
		}
		return
	}
	had := !created && prev != omegav1.TaskState_TASK_STATE_UNSPECIFIED && !txn.IsTerminal(prev)
	if jc.uncounted.Len() > 0 && jc.uncounted.Delete(t.UID) {
		had = false // seen before its job: its first count is now
	}
	switch {
	case deleted && !had:
		return // a terminal task expiring: its count stays
	case deleted:
		n.add(prev, -1)
		n.tasks--
	case had:
		n.add(prev, -1)
		n.add(t.State, 1)
		if t.Terminal() {
			n.ended(t.State, at, rev)
		}
	default: // first seen
		n.tasks++
		n.add(t.State, 1)
		if t.Terminal() {
			n.ended(t.State, at, rev)
		}
	}
	jc.mark(job, n)
}

// ended notes a task's end in state s at time at, revision rev. A LOST
// task does not count towards the job's end (its replacement does), and
// so neither does its time: the job finishes when the last task that
// counts ended.
func (n *count) ended(s omegav1.TaskState, at int64, rev uint64) {
	if s != omegav1.TaskState_TASK_STATE_LOST {
		n.lastEnd = max(n.lastEnd, at)
	}
	n.endedRev = max(n.endedRev, rev)
}

func (n *count) add(s omegav1.TaskState, d int32) {
	switch s {
	case omegav1.TaskState_TASK_STATE_PENDING:
		n.pending += d
	case omegav1.TaskState_TASK_STATE_ASSIGNED, omegav1.TaskState_TASK_STATE_RUNNING:
		n.running += d
	case omegav1.TaskState_TASK_STATE_SUCCEEDED:
		n.succeeded += d
	case omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_KILLED:
		n.failed += d
	case omegav1.TaskState_TASK_STATE_LOST:
		n.lost += d
	case omegav1.TaskState_TASK_STATE_ABANDONED:
		n.abandoned += d
	}
}

// Status is the status a job's tasks give it (the job not finished):
//   - SUCCEEDED or FAILED once no task is pending or placed and as many
//     tasks ended as the job asked for (Spec.Replicas, at least one) — a
//     lost task does not count, its replacement does — FAILED if any
//     failed or was killed, at the time the last one ended;
//   - RUNNING while a task is placed or some have ended;
//   - PENDING otherwise.
func (n *count) status(j *txn.Job) *omegav1.JobStatus {
	st := &omegav1.JobStatus{Pending: n.pending, Running: n.running, Succeeded: n.succeeded, Failed: n.failed, LastEndUnixNanos: n.lastEnd}
	ended := n.succeeded + n.failed
	switch {
	case n.pending == 0 && n.running == 0 && ended > 0 && ended >= max(j.Replicas(), 1):
		st.Phase, st.FinishUnixNanos = omegav1.JobPhase_JOB_PHASE_SUCCEEDED, n.lastEnd
		if n.failed > 0 {
			st.Phase = omegav1.JobPhase_JOB_PHASE_FAILED
			st.Message = fmt.Sprintf("%d of %d tasks failed", n.failed, ended)
		}
	case n.running > 0 || ended > 0:
		st.Phase = omegav1.JobPhase_JOB_PHASE_RUNNING
	default:
		st.Phase = omegav1.JobPhase_JOB_PHASE_PENDING
	}
	return st
}

// sameStatus compares what the status says of the job (not the revision
// it was observed at).
func sameStatus(a, b *omegav1.JobStatus) bool {
	return a.GetPhase() == b.GetPhase() && a.GetPending() == b.GetPending() && a.GetRunning() == b.GetRunning() &&
		a.GetSucceeded() == b.GetSucceeded() && a.GetFailed() == b.GetFailed() &&
		a.GetFinishUnixNanos() == b.GetFinishUnixNanos() && a.GetMessage() == b.GetMessage() &&
		a.GetLastEndUnixNanos() == b.GetLastEndUnixNanos()
}

// Tick polls the watch and writes, in one incremental transaction stamped
// with now, the status of every job whose tasks moved it since the last
// tick (in the order they moved; one write per job). It returns the
// store's result: Revision 0 and no outcomes when nothing changed (then
// nothing was sent). A write that conflicts is dropped: the job moved (a
// scheduler's verdict, a deletion) and the watch brings it. On a commit
// error nothing changed and the jobs are looked at again next tick.
func (jc *Controller) Tick(ctx context.Context, nowUnixNanos int64) (txn.Result, error) {
	if err := jc.Poll(ctx); err != nil {
		return txn.Result{}, err
	}
	var ops []txn.Op
	var uids []uuid.UUID
	if jc.sched != nil {
		ops = jc.sched.tick(jc, nowUnixNanos)
		uids = make([]uuid.UUID, len(ops)) // lease deletions, no job's
	}
	for _, u := range jc.dirty {
		n := jc.jobs[u]
		if n == nil {
			continue // deleted since
		}
		n.dirty = false
		if n.job == nil || n.job.Finished() {
			continue
		}
		st := n.status(n.job)
		if n.pending > 0 {
			// Why the job waits is its scheduler's to say (JobStatus.waiting):
			// kept while tasks wait, dropped once none does.
			st.Waiting = n.job.StatusProto().GetWaiting()
		}
		if jc.sched != nil && n.pending > 0 {
			st.Waiting = jc.sched.waiting(n.job, st.Waiting, n.pending, nowUnixNanos)
		}
		if sameStatus(st, n.job.StatusProto()) && st.Waiting == n.job.StatusProto().GetWaiting() &&
			n.endedRev <= n.job.StatusProto().GetObservedRevision() {
			continue
		}
		st.ObservedRevision = jc.inf.Revision()
		pj := n.job.Proto()
		pj.Status = st
		ops = append(ops, txn.PutJob(pj, n.job.Version))
		uids = append(uids, u)
	}
	jc.dirty = jc.dirty[:0]
	if len(ops) == 0 {
		return txn.Result{}, nil
	}
	res, err := jc.c.Commit(ctx, &txn.Txn{
		ViewRevision: jc.inf.Revision(),
		Conflict:     omegav1.ConflictMode_CONFLICT_MODE_FINE,
		Commit:       omegav1.CommitMode_COMMIT_MODE_INCREMENTAL,
		Component:    jc.c.Component(),
		UnixNanos:    nowUnixNanos,
		Ops:          ops,
	})
	if err != nil {
		for _, u := range uids { // look again next tick
			if n := jc.jobs[u]; n != nil && u != uuid.Nil {
				jc.mark(u, n)
			}
		}
		return res, fmt.Errorf("job status transaction (%d jobs): %w", len(ops), err)
	}
	jc.counters.Txns++
	for i := range ops {
		if ops[i].Kind == txn.OpDelete {
			if res.Outcomes[i].Committed() {
				jc.counters.LeasesDeleted++
			}
			continue
		}
		if !res.Outcomes[i].Committed() {
			jc.counters.Conflicts++
			continue
		}
		jc.counters.Writes++
		if p := ops[i].NewJob.GetStatus().GetPhase(); p == omegav1.JobPhase_JOB_PHASE_SUCCEEDED || p == omegav1.JobPhase_JOB_PHASE_FAILED {
			jc.counters.Finished++
		}
	}
	return res, nil
}

// Jobs returns the uids of the jobs the controller follows, in uid order
// (tests, reports).
func (jc *Controller) Jobs() []uuid.UUID {
	out := make([]uuid.UUID, 0, len(jc.jobs))
	for u := range jc.jobs {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}
