package schedulers

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// An attempt, from Begin to Finish: the decision made on a view, its
// commit after the decision time, and what becomes of the job (placed,
// retried, abandoned); RequeueEarly for the two-level framework that tries
// a job again before its answer lands.

// Attempt is one decision waiting for its commit: the Runner made it at
// Begin's time, and commits it when its decision time has passed.
type Attempt struct {
	Job          uuid.UUID
	Txn          *txn.Txn
	DecisionTime time.Duration
	Decision     Decision
	// Result is the commit's result, once Finish committed the attempt.
	Result   txn.Result
	started  time.Time
	claims   map[int]uuid.UUID // op index → task claimed
	replaces int               // leading ops creating replacements for lost tasks
	placed   int               // tasks its commit placed, once it landed
	early    bool              // its job was queued again before it landed (RequeueEarly)
}

// Started is when the attempt began: its decision time runs from then.
func (a *Attempt) Started() time.Time { return a.started }

// TasksPlaced is how many tasks the attempt placed, once it landed (0
// before): a decision that placed none is the time Google's simulator
// leaves out of busyness.
func (a *Attempt) TasksPlaced() int { return a.placed }

// Outcome is what became of a job after an attempt.
type Outcome int

const (
	// OutcomeRetry: the job has pending tasks left and is queued again.
	OutcomeRetry Outcome = iota
	// OutcomePlaced: every task of the job is placed.
	OutcomePlaced
	// OutcomeAbandoned: the job hit the Runner's bounds.
	OutcomeAbandoned
	// OutcomeMoved: the job moved to another instance (Release) while the
	// attempt was in flight; the attempt was dropped, not committed, and
	// the job is no longer this runner's.
	OutcomeMoved
)

// RequeueEarly queues a's job again at at while a is still in flight, as
// the paper's simulator's two-level framework re-adds a job it could not
// place whole a second after deciding it, before its answer lands: the
// job's next attempt leaves out the tasks a claims. It reports whether it
// queued the job: not when a claims every task it was given, when the job
// is queued already, gone, moved or given up, has lost tasks waiting for a
// replacement, or its scheduler grows jobs (Grower).
func (r *Runner) RequeueEarly(a *Attempt, at time.Time) bool {
	j, ok := r.jobs[a.Job]
	if !ok || j.queued || j.moved || j.gone || j.Abandoned || len(j.lost) > 0 || a.replaces > 0 || a.Decision.Unplaceable == 0 {
		return false
	}
	if _, grows := r.sched.(Grower); grows {
		return false
	}
	if j.claiming == nil {
		j.claiming = map[uuid.UUID]int{}
	}
	for _, task := range a.claims {
		j.claiming[task]++
	}
	a.early = true
	j.done = false
	r.push(j, at)
	return true
}

// Begin takes the next job ready at now, brings the view up to date, and
// asks the scheduler. It returns the attempt to Finish after its decision
// time, or ok=false when no job is ready (or the ready job turned out to
// have nothing pending, in which case it is recorded placed). The decision
// time counts as busy time.
func (r *Runner) Begin(ctx context.Context, now time.Time) (a *Attempt, ok bool, err error) {
	return r.BeginOn(ctx, now, nil)
}

// BeginOn is Begin deciding on view(v), where v is the runner's view
// brought up to date, instead of on v itself: a two-level framework
// decides on its offer's private view of the cell (OfferView). nil is
// Begin.
func (r *Runner) BeginOn(ctx context.Context, now time.Time, view func(client.View) client.View) (a *Attempt, ok bool, err error) {
	for len(r.queue) > 0 && !r.queue[0].readyAt.After(now) {
		j := heap.Pop(&r.queue).(*jobState)
		j.queued = false
		if j.Abandoned || j.moved {
			continue // given up (or moved) while an attempt of RequeueEarly's was in flight
		}
		if err := r.c.Sync(ctx); err != nil {
			return nil, false, err
		}
		if j.seen > r.c.View().Revision() {
			// The intake saw the job (or its task's loss, its eviction) in a
			// revision this client's copy has not reached yet (their watches
			// are apart): decide on a view that holds it.
			if err := r.c.SyncTo(ctx, j.seen); err != nil {
				return nil, false, err
			}
		}
		v := r.c.View()
		if view != nil {
			v = view(v)
		}
		job, exists := v.Job(j.UID)
		if !exists {
			j.done = true // deleted: nothing to do
			continue
		}
		j.Requested, j.Kind = int(job.Replicas()), job.Kind()
		req := Request{Job: job, Attempt: j.Attempts}
		v.RangePendingTasks(j.UID, func(t *txn.Task) bool {
			if j.claiming[t.UID] == 0 { // not claimed by an attempt in flight
				req.Pending = append(req.Pending, t)
			}
			return true
		})
		wantNew := false
		if g, ok := r.sched.(Grower); ok {
			wantNew = g.WantsMore(job, len(j.placed))
		}
		// Replacements for lost tasks: created in this attempt's
		// transaction, offered to the scheduler as pending (version 0).
		var creates []txn.Op
		for _, lost := range j.lost {
			nt := replacement(lost, r.c.NewUID())
			creates = append(creates, txn.CreateTask(nt.proto))
			req.Pending = append(req.Pending, nt.task)
		}
		if len(req.Pending) == 0 && !wantNew {
			if j.inFlight == 0 { // else the attempts in flight claim the rest: the last to land says
				r.markPlaced(j, now)
			}
			continue
		}
		slices.SortFunc(req.Pending, func(a, b *txn.Task) int { return bytes.Compare(a.UID[:], b.UID[:]) })
		if pr, ok := r.sched.(placedReader); !ok || pr.readsPlaced(req) {
			for _, uid := range j.placedUIDs() {
				if t, ok := v.Task(uid); ok && t.Placed() {
					req.Placed = append(req.Placed, t)
				}
			}
		}
		req.PlacedTotal = len(j.placed)
		env := Env{Now: now, Rand: r.rng, NewUID: r.c.NewUID, Component: r.c.Component()}
		if view == nil {
			env.Machines = r.cfg.Machines // a private view (an offer's) keeps to the scheduler's own
		}
		var t0 time.Duration
		if r.cfg.Measure != nil {
			t0 = r.cfg.Measure()
		}
		d := r.sched.Decide(v, req, env)
		var measured time.Duration
		if r.cfg.Measure != nil {
			measured = r.cfg.Measure() - t0
		}
		tx := r.c.NewTxn(v)
		tx.UnixNanos = now.UnixNano()
		tx.Ops = d.Ops
		if len(creates) > 0 {
			tx.Ops = append(creates, d.Ops...)
		}
		if d.AllOrNothing {
			tx.Commit = omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING
		}
		a := &Attempt{Job: j.UID, Txn: tx, Decision: d, started: now, claims: map[int]uuid.UUID{}, replaces: len(creates)}
		for i, op := range tx.Ops {
			if op.Kind == txn.OpClaim {
				a.claims[i] = op.Task
			}
		}
		tj, tt := r.cfg.TJob, r.cfg.TTask
		if dt, ok := r.cfg.ByKind[job.Kind()]; ok {
			tj, tt = dt.TJob, dt.TTask
		}
		a.DecisionTime = tj + time.Duration(d.Considered)*tt
		if r.cfg.Measure != nil {
			a.DecisionTime = measured
		}
		r.busy += a.DecisionTime
		j.Attempts++
		if j.FirstAttempt.IsZero() {
			j.FirstAttempt = now
		}
		j.inFlight++
		return a, true, nil
	}
	return nil, false, nil
}

// Finish commits a at now (its decision time after Begin) and decides what
// becomes of the job: placed, queued again (at once after a conflict, after
// RetryDelay when tasks found no machine), or abandoned at the bounds.
func (r *Runner) Finish(ctx context.Context, a *Attempt, now time.Time) (Outcome, error) {
	return r.finish(ctx, a, nil, now)
}

// FinishWith is Finish for an attempt whose operations were committed
// elsewhere, with res their result (as Evaluate would give for the
// attempt's transaction alone): a two-level framework commits the
// attempts of one offer in its answer.
func (r *Runner) FinishWith(ctx context.Context, a *Attempt, res txn.Result, now time.Time) (Outcome, error) {
	return r.finish(ctx, a, &res, now)
}

func (r *Runner) finish(ctx context.Context, a *Attempt, given *txn.Result, now time.Time) (Outcome, error) {
	j, ok := r.jobs[a.Job]
	if !ok {
		return OutcomeMoved, fmt.Errorf("%s: an attempt for job %s, which the runner does not hold", r.c.Component(), a.Job)
	}
	j.inFlight--
	if len(j.claiming) > 0 {
		for _, task := range a.claims {
			if n, ok := j.claiming[task]; ok {
				if n <= 1 {
					delete(j.claiming, task)
				} else {
					j.claiming[task] = n - 1
				}
			}
		}
	}
	if j.gone && j.inFlight == 0 {
		defer r.left(j) // after the attempt's outcome is recorded
	}
	if j.moved && j.inFlight > 0 {
		return OutcomeMoved, nil // the last attempt in flight drops the job
	}
	if j.moved {
		// The job moved to another instance while the attempt was in
		// flight: the decision is dropped, not committed, so the new owner
		// decides alone from its own view.
		delete(r.jobs, j.UID)
		return OutcomeMoved, nil
	}
	defer func() {
		if j.recheck { // a re-list came while the attempt was in flight
			j.recheck = false
			if !j.queued && !j.Abandoned {
				j.done = false
				r.push(j, now)
			}
		}
	}()
	var res txn.Result
	switch {
	case given != nil:
		res = *given
	case len(a.Txn.Ops) > 0:
		a.Txn.UnixNanos = now.UnixNano()
		var err error
		res, err = r.c.Commit(ctx, a.Txn)
		if err != nil {
			// Nothing known committed (the cell unreachable, between
			// leaders): the job is queued again after RetryDelay, as
			// OutcomeRetry says; a claim that did commit shows in the
			// watch, and the next attempt's conflicts say so.
			if !j.queued {
				r.push(j, now.Add(r.cfg.RetryDelay))
			}
			return OutcomeRetry, fmt.Errorf("%s: commit for job %s: %w", r.c.Component(), a.Job, err)
		}
	}
	a.Result = res
	placedNow := 0
	if res.Revision != 0 && a.replaces > 0 {
		// The replacements were created (creates never conflict); they are
		// pending now if their claims did not commit.
		j.lost = j.lost[a.replaces:]
		j.Replaced += a.replaces
	}
	if res.Revision != 0 {
		for i, task := range a.claims {
			if res.Outcomes[i].Committed() {
				j.place(task)
				placedNow++
			}
		}
	}
	j.TasksPlaced += placedNow
	a.placed = placedNow
	if res.Conflicted() {
		j.Conflicted++
	}

	// The client's loop decides: done when nothing conflicted and no task
	// was left without a machine; abandoned at the paper's bounds;
	// otherwise retried — at once after a conflict, after RetryDelay when
	// tasks found no machine — on a view synced to what the attempt saw.
	// A claim the store's policy rejected left its task without a machine
	// too (a scheduler whose every claim is refused gives up at the bound,
	// and its job is not counted placed).
	left := a.Decision.Unplaceable
	for i := range a.claims {
		if i < len(res.Outcomes) && res.Outcomes[i].Code == omegav1.OutcomeCode_OUTCOME_CODE_REJECTED {
			left++
		}
	}
	if res.Rejected > 0 {
		for _, o := range res.Outcomes {
			if o.Code == omegav1.OutcomeCode_OUTCOME_CODE_REJECTED {
				if r.rejected == nil {
					r.rejected = map[omegav1.RejectReason]int64{}
				}
				r.rejected[o.Reason]++
			}
		}
	}
	if a.early && left > 0 && !res.Conflicted() {
		// The tasks this attempt left were handed to a later attempt
		// (RequeueEarly): what is left is what the cell still has pending
		// of the job that no attempt in flight claims.
		if res.Revision != 0 {
			if err := r.c.SyncTo(ctx, res.Revision); err != nil {
				return OutcomeRetry, err
			}
		}
		left = 0
		r.c.View().RangePendingTasks(j.UID, func(t *txn.Task) bool {
			if j.claiming[t.UID] == 0 {
				left++
			}
			return true
		})
	}
	if len(a.Txn.Ops) == 0 && left == 0 {
		left = 1 // the scheduler asked for nothing: try again later
	}
	d := j.loop.ObserveWork(&res, client.Work{Left: left, Progress: placedNow > 0})
	if d.SyncTo != 0 {
		if err := r.c.SyncTo(ctx, d.SyncTo); err != nil {
			return OutcomeRetry, err
		}
	}
	if r.cfg.Reasons && !d.Done && !d.GiveUp && (left > 0 || res.Rejected > 0) {
		if err := r.noteWaiting(ctx, j, a, &res, left, now); err != nil {
			return OutcomeRetry, err
		}
	}
	switch {
	case d.Done && j.inFlight > 0:
		// Another attempt (RequeueEarly's) is in flight with the rest of
		// the job's claims: the job is placed when it lands.
		return OutcomeRetry, nil
	case d.Done:
		if a.early && j.queued { // queued again by RequeueEarly: nothing is left to place
			heap.Remove(&r.queue, j.queueIndex)
			j.queued = false
		}
		r.markPlaced(j, now)
		return OutcomePlaced, nil
	case d.GiveUp:
		j.Abandoned, j.done = true, true
		if err := r.abandon(ctx, j, now); err != nil {
			return OutcomeAbandoned, err
		}
		return OutcomeAbandoned, nil
	}
	if !j.queued { // Submit may have queued it again during the attempt
		r.push(j, now.Add(d.Backoff))
	}
	return OutcomeRetry, nil
}

// abandon writes the runner's verdict on a job it gave up on: the job
// ABANDONED with the reason and the time, and each of its PENDING tasks
// ABANDONED, in one transaction through the client's loop (retried on a
// fresh view if the job or a task moved meanwhile). Its placed tasks run
// on. The job's status is otherwise the job controller's to write
// (DESIGN.md "Jobs finish"); a verdict ends that.
func (r *Runner) abandon(ctx context.Context, j *jobState, now time.Time) error {
	reason := fmt.Sprintf("%s gave up after %d attempts without a placement", r.c.Component(), r.cfg.MaxAttemptsNoPlacement)
	j.AbandonedNoPlacement = j.Attempts < r.cfg.MaxAttempts
	if !j.AbandonedNoPlacement {
		reason = fmt.Sprintf("%s gave up after %d attempts", r.c.Component(), j.Attempts)
	}
	if j.waiting != nil && r.cfg.Reasons {
		reason += ": " + j.waiting.GetMessage()
	}
	before := r.c.Counters()
	_, err := r.c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		tx := r.c.NewTxn(v)
		tx.UnixNanos = now.UnixNano()
		if job, ok := v.Job(j.UID); ok && !job.Finished() {
			pj := job.Proto()
			old := pj.Status // the state's, shared: never written
			pj.Status = &omegav1.JobStatus{
				Phase: omegav1.JobPhase_JOB_PHASE_ABANDONED, Message: reason, FinishUnixNanos: now.UnixNano(),
				Running: old.GetRunning(), Succeeded: old.GetSucceeded(), Failed: old.GetFailed(), // its pending tasks are abandoned below
			}
			tx.Ops = append(tx.Ops, txn.PutJob(pj, job.Version))
		}
		v.RangePendingTasks(j.UID, func(t *txn.Task) bool {
			tx.Ops = append(tx.Ops, txn.SetStatus(t.UID, omegav1.TaskState_TASK_STATE_ABANDONED, t.Version, reason))
			return true
		})
		return tx, nil
	})
	r.countVerdict(before)
	if err != nil {
		return fmt.Errorf("%s: abandon job %s: %w", r.c.Component(), j.UID, err)
	}
	return nil
}

// VerdictCounters counts, out of the client's counters, the transactions
// that wrote abandoned jobs' verdicts: a report of scheduling attempts
// subtracts them.
func (r *Runner) VerdictCounters() client.Counters { return r.verdicts }

// noteWaiting finds why the job's tasks wait after attempt a (the store's
// quota refusal, or the scheduler's Explainer, or Explain on the view) and
// writes it on the job when it differs from the job's own, in one
// transaction of its own expecting the job's version: one that loses a
// race (the job controller wrote the counts) is dropped, and the next
// attempt that leaves tasks waiting writes it. Its transactions count with
// the verdicts' (VerdictCounters), not as scheduling attempts.
func (r *Runner) noteWaiting(ctx context.Context, j *jobState, a *Attempt, res *txn.Result, left int, now time.Time) error {
	v := r.c.View()
	job, ok := v.Job(j.UID)
	if !ok || job.Finished() {
		return nil
	}
	var w *omegav1.JobWaiting
	for _, o := range res.Outcomes {
		if o.Code == omegav1.OutcomeCode_OUTCOME_CODE_REJECTED && o.Reason == omegav1.RejectReason_REJECT_REASON_QUOTA {
			w = &omegav1.JobWaiting{Reason: omegav1.WaitReason_WAIT_REASON_QUOTA, Message: o.Detail}
			break
		}
	}
	if w == nil {
		if ex, ok := r.sched.(Explainer); ok {
			req := Request{Job: job, Attempt: j.Attempts}
			v.RangePendingTasks(j.UID, func(t *txn.Task) bool { req.Pending = append(req.Pending, t); return true })
			w = ex.Explain(v, req)
		} else {
			var first *txn.Task
			v.RangePendingTasks(j.UID, func(t *txn.Task) bool {
				if first == nil || bytes.Compare(t.UID[:], first.UID[:]) < 0 {
					first = t
				}
				return true
			})
			if first == nil && len(a.Decision.Ops) > 0 {
				// A job whose tasks the scheduler creates (MapReduce's
				// workers): explain the task it planned.
				for _, op := range a.Decision.Ops {
					if op.Kind == txn.OpCreate && op.NewTask != nil {
						first = txn.PlannedTask(uuid.Nil, j.UID, op.NewTask, txn.ResourcesFromProto(op.NewTask.GetSpec().GetResources()))
						break
					}
				}
			}
			if first != nil {
				w = Explain(v, first)
			}
		}
	}
	j.waiting = w
	old := job.StatusProto().GetWaiting()
	if w == nil && old == nil || w != nil && old != nil && SameWaiting(w, old) {
		return nil
	}
	if w != nil {
		w.Reporter, w.SinceUnixNanos, w.Tasks = r.c.Component(), now.UnixNano(), int32(left)
	}
	pj := job.Proto()
	st := proto.Clone(pj.GetStatus()).(*omegav1.JobStatus) // the state's status is shared: never written
	if pj.GetStatus() == nil {
		st = &omegav1.JobStatus{}
	}
	st.Waiting = w
	pj.Status = st
	tx := r.c.NewTxn(v)
	tx.UnixNanos = now.UnixNano()
	tx.Ops = []txn.Op{txn.PutJob(pj, job.Version)}
	before := r.c.Counters()
	_, err := r.c.Commit(ctx, tx)
	r.countVerdict(before)
	if err != nil {
		return fmt.Errorf("%s: why job %s waits: %w", r.c.Component(), j.UID, err)
	}
	return nil
}

// countVerdict adds to the verdicts' counters what the client counted
// since before: the transactions that wrote a verdict or a reason to wait,
// which a report of scheduling attempts leaves out.
func (r *Runner) countVerdict(before client.Counters) {
	after := r.c.Counters()
	r.verdicts.Attempts += after.Attempts - before.Attempts
	r.verdicts.Conflicted += after.Conflicted - before.Conflicted
	r.verdicts.Partial += after.Partial - before.Partial
	r.verdicts.GaveUp += after.GaveUp - before.GaveUp
}
