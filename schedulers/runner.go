package schedulers

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// JobRecord is what a Runner knows of a job, for the reports.
type JobRecord struct {
	UID          uuid.UUID
	Submitted    time.Time
	FirstAttempt time.Time // zero until attempted
	Placed       time.Time // when its last pending task was placed; zero if not (yet)
	Attempts     int
	TasksPlaced  int
	Requested    int // the job's Spec.Replicas (a mapreduce job's requested workers)
	Lost         int // tasks lost with their machines
	Replaced     int // replacements created for them
	Abandoned    bool
	// AbandonedNoPlacement: abandoned at the bound of attempts without a
	// placement (RunnerConfig.MaxAttemptsNoPlacement, the paper's 100),
	// not at the bound of attempts in all (MaxAttempts, 1,000).
	AbandonedNoPlacement bool
	// Kind is the job's kind (batch, service), as the intake or an attempt
	// saw it; unspecified for a job of which the runner only knows the uid.
	Kind       omegav1.JobKind
	Conflicted int // attempts with at least one conflicting operation
}

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

// Runner owns one scheduler's loop through the client library: a queue of
// pending jobs; for each, a fresh view, the scheduler's decision, a commit,
// and the retry decision. It is a state machine driven from outside — Begin
// and Finish, with the time passed in — so the simulation engine runs it in
// virtual time and a live loop under the real clock. It starts no goroutine
// and reads no clock. One goroutine drives a Runner.
type Runner struct {
	cfg   RunnerConfig
	sched Scheduler
	c     *client.Client
	rng   *rand.Rand
	queue jobQueue
	jobs  map[uuid.UUID]*jobState
	seq   uint64
	busy  time.Duration
	// verdicts counts the transactions that wrote abandoned jobs' verdicts
	// (not scheduling attempts: the reports leave them out).
	verdicts client.Counters
	// retire, if set, takes the record of a job that left the cell, and
	// the runner keeps nothing of it (SetRetire).
	retire func(JobRecord)
	// rejected counts the operations the store's policy refused, by reason.
	rejected map[omegav1.RejectReason]int64
}

type jobState struct {
	JobRecord
	readyAt time.Time
	seq     uint64
	queued  bool
	done    bool
	// seen is the newest revision the intake routed something of the job
	// from: Begin decides on a view at least as new.
	seen uint64
	// inFlight: attempts for the job between Begin and Finish (more than
	// one only after RequeueEarly); moved: Release gave the job up
	// meanwhile; recheck: Reconcile came meanwhile, so the job is attempted
	// again when the attempt lands.
	inFlight       int
	moved, recheck bool
	// claiming are the tasks that attempts in flight claim, left out of
	// the job's next attempt (RequeueEarly).
	claiming map[uuid.UUID]int
	// shadow: a job the intake routed to another runner, which this one's
	// Shadower scheduler takes too (a fault): not the runner's to report.
	shadow bool
	// loop is the job's retry state in the client library's one optimistic
	// loop: progress is a placement, tasks no machine took are work left.
	loop   *client.Loop
	placed map[uuid.UUID]struct{} // nil once the job left the cell
	// sorted is placed's uids in order, made when an attempt first needs
	// them after placed changed (nil then): a job retried while it waits
	// for room is not sorted again every attempt.
	sorted     []uuid.UUID
	queueIndex int
	// gone: the job left the cell while an attempt was in flight; what the
	// runner kept to schedule it goes when the attempt lands.
	gone bool
	// lost holds tasks of the job lost with their machine, waiting for a
	// replacement (created by the job's next attempt).
	lost []*txn.Task
}

// NewRunner makes a Runner for sched committing through c. rng is the
// scheduler's seeded source.
func NewRunner(sched Scheduler, c *client.Client, rng *rand.Rand, cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, sched: sched, c: c, rng: rng, jobs: map[uuid.UUID]*jobState{}}, nil
}

// Name is the runner's component name (its client's).
func (r *Runner) Name() string { return r.c.Component() }

// Scheduler returns the policy the runner drives.
func (r *Runner) Scheduler() Scheduler { return r.sched }

// Client returns the runner's client.
func (r *Runner) Client() *client.Client { return r.c }

// Busy is the total decision time spent so far.
func (r *Runner) Busy() time.Duration { return r.busy }

// Submit queues a job, ready at once. Submitting a job already known
// re-queues it if it is not queued (its tasks became pending again: evicted
// or lost).
func (r *Runner) Submit(job uuid.UUID, now time.Time) {
	j, ok := r.jobs[job]
	if !ok {
		j = r.newJob(job, now)
	}
	if j.queued || j.moved {
		return
	}
	// Submitted again (its tasks need placing again): a fresh start for the
	// bound without placements, even if it was abandoned before (the total
	// stays).
	j.done, j.Abandoned = false, false
	j.loop.Restart()
	r.push(j, now)
}

// submitShadow queues a job routed to another runner, for a Shadower: it
// is attempted like the runner's own but left out of its records.
func (r *Runner) submitShadow(job uuid.UUID, now time.Time) {
	_, known := r.jobs[job]
	r.Submit(job, now)
	if j, ok := r.jobs[job]; ok && !known {
		j.shadow = true
	}
}

// Adopt makes a job the runner did not submit its own, with those of its
// tasks that are placed and the LOST ones that still want a replacement: a
// scheduler that restarted on a running cell, or to which the job moved
// from another instance, learns it this way (Intake.Recover, SetMembers),
// so that its lost and evicted tasks reach it and a Grower counts the
// workers the job has. With queue the job is queued (it has work);
// otherwise it is recorded as placed at now. A job already known is left
// as it is — unless it was released meanwhile (moved away and back while
// an attempt was in flight): then it is the runner's again, with what the
// view says.
func (r *Runner) Adopt(job uuid.UUID, placed []uuid.UUID, lost []*txn.Task, queue bool, now time.Time) {
	j, known := r.jobs[job]
	switch {
	case known && !j.moved:
		return
	case known:
		j.moved = false
	default:
		j = r.newJob(job, now)
	}
	for _, t := range placed {
		j.place(t)
	}
	if j.inFlight == 0 { // an attempt in flight may be replacing j.lost: its Finish trims them
		j.lost = slices.Clone(lost)
	}
	if !queue {
		r.markPlaced(j, now)
		return
	}
	if !j.queued && j.inFlight == 0 {
		j.done = false
		r.push(j, now)
	}
}

// Reconcile brings what the runner knows of a job it owns in line with a
// fresh view of the cell, after its watch fell behind (Intake.Recover): lost
// are the job's LOST tasks that still want a replacement (as many as the job
// is short), pending says it has PENDING tasks. The replacements it had
// queued that the view still wants are kept, others dropped, new ones
// added; the job is queued if it has work. It reports whether it queued
// the job. A job with an attempt in flight is only marked to be attempted
// again when that attempt lands (the live driver never re-lists during an
// attempt; the simulation's engine, polling after every step, does not
// fall behind).
func (r *Runner) Reconcile(job uuid.UUID, lost []*txn.Task, pending bool, now time.Time) bool {
	j, ok := r.jobs[job]
	if !ok || j.moved || j.Abandoned {
		return false
	}
	if j.inFlight > 0 {
		j.recheck = true
		return false
	}
	want := make(map[uuid.UUID]bool, len(lost))
	for _, t := range lost {
		want[t.UID] = true
	}
	kept := j.lost[:0:0]
	for _, t := range j.lost {
		if want[t.UID] {
			kept = append(kept, t)
			delete(want, t.UID)
		}
	}
	for _, t := range lost {
		if want[t.UID] && len(kept) < len(lost) {
			kept = append(kept, t)
		}
	}
	j.lost = kept
	if (len(j.lost) == 0 && !pending) || j.queued {
		return false
	}
	j.done = false
	r.push(j, now)
	return true
}

// saw notes that the intake routed something of job from revision rev.
func (r *Runner) saw(job uuid.UUID, rev uint64, kind omegav1.JobKind) {
	if j, ok := r.jobs[job]; ok {
		j.seen = max(j.seen, rev)
		if kind != omegav1.JobKind_JOB_KIND_UNSPECIFIED {
			j.Kind = kind
		}
	}
}

// Release gives up a job that moved to another instance (the members of
// its kind changed, Intake.SetMembers): it leaves the queue and the
// records at once, or, with an attempt in flight, when Finish drops that
// attempt (OutcomeMoved). Lost, Submit and Resubmit ignore it meanwhile;
// Adopt makes it the runner's again.
func (r *Runner) Release(job uuid.UUID) {
	j, ok := r.jobs[job]
	if !ok {
		return
	}
	if j.queued {
		heap.Remove(&r.queue, j.queueIndex)
		j.queued = false
	}
	if j.inFlight > 0 {
		j.moved = true
		return
	}
	delete(r.jobs, job)
}

func (j *jobState) place(task uuid.UUID) {
	if j.placed == nil {
		j.placed = map[uuid.UUID]struct{}{}
	}
	if _, ok := j.placed[task]; !ok {
		j.placed[task] = struct{}{}
		j.sorted = nil
	}
}

// placedUIDs returns the uids of the tasks the job placed, in order.
func (j *jobState) placedUIDs() []uuid.UUID {
	if j.sorted == nil && len(j.placed) > 0 {
		j.sorted = sortedUIDs(j.placed)
	}
	return j.sorted
}

// forget drops what the runner kept to schedule a job that left the cell:
// its record stays, for the report.
func (j *jobState) forget() { j.placed, j.sorted, j.lost, j.gone = nil, nil, nil, false }

// Gone tells the runner that a job left the cell (deleted: after it
// finished, when the store's retention window passed). Its record stays for
// Records; the set of the tasks it placed and the lost ones it would
// replace go, so a long run keeps per task only what the live cell holds
// (the sets of every job it ever placed were 80 MB after three simulated
// days of a 10,000-machine cell, and growing).
func (r *Runner) Gone(job uuid.UUID) {
	j, ok := r.jobs[job]
	if !ok {
		return
	}
	if j.inFlight > 0 {
		j.gone = true
		return
	}
	r.left(j)
}

// SetRetire makes the runner hand the record of each job that leaves the
// cell to retire and keep nothing of it: Records then holds only the jobs
// still in the cell, and memory follows the live cell, not every job the
// runner ever saw (omega replay streams the records to jobs.csv). Without
// it a job's record stays for Records.
func (r *Runner) SetRetire(retire func(JobRecord)) { r.retire = retire }

// left is a job that left the cell: what the runner kept to schedule it
// goes, and with SetRetire its record too, handed over.
func (r *Runner) left(j *jobState) {
	j.forget()
	if r.retire == nil {
		return
	}
	if j.queued {
		heap.Remove(&r.queue, j.queueIndex)
		j.queued = false
	}
	delete(r.jobs, j.UID)
	if !j.shadow && !j.moved { // a job that moved meanwhile is its new owner's to report
		r.retire(j.JobRecord)
	}
}

// Lost tells the runner that task t of job was lost with its machine
// (LOST is final: the task's resources are freed). The job's next attempt
// creates a replacement — same spec, owner and labels, a new uid — and
// places it; the job is queued now. Tasks of jobs the runner does not know,
// and jobs it abandoned, are ignored; it reports whether it queued the job.
func (r *Runner) Lost(job uuid.UUID, t *txn.Task, now time.Time) bool {
	j, ok := r.jobs[job]
	if !ok || j.Abandoned || j.moved {
		return false
	}
	if _, ok := j.placed[t.UID]; ok {
		delete(j.placed, t.UID)
		j.sorted = nil
	}
	if slices.ContainsFunc(j.lost, func(x *txn.Task) bool { return x.UID == t.UID }) {
		return false // known already (a re-list)
	}
	j.lost = append(j.lost, t)
	j.Lost++
	if j.queued {
		return false
	}
	j.done = false
	r.push(j, now)
	return true
}

type replaced struct {
	proto *omegav1.Task
	task  *txn.Task
}

// replacement builds a new PENDING task like lost: its spec, labels and
// owner, a new uid and a name marking it a replacement.
func replacement(lost *txn.Task, uid uuid.UUID) replaced {
	p := lost.SpecProto() // the wire form: the spec, shared
	p.Meta = &omegav1.ObjectMeta{
		Uid:             uid.String(),
		Name:            lost.Name() + "-r",
		Labels:          lost.Labels(),
		OwnerReferences: lost.OwnerReferences(),
	}
	return replaced{p, txn.PlannedTask(uid, lost.Job, p, lost.Request())}
}

// Resubmit queues again a job the runner placed earlier whose tasks became
// pending again (lost with a machine, evicted), and reports whether it did.
// Jobs queued, unknown or abandoned are left alone.
func (r *Runner) Resubmit(job uuid.UUID, now time.Time) bool {
	j, ok := r.jobs[job]
	if !ok || j.queued || j.Abandoned || j.moved || !j.done {
		return false
	}
	j.done = false
	r.push(j, now)
	return true
}

func (r *Runner) push(j *jobState, at time.Time) {
	r.seq++
	j.readyAt, j.seq, j.queued = at, r.seq, true
	heap.Push(&r.queue, j)
}

// NextReady returns when the earliest queued job is ready.
func (r *Runner) NextReady() (time.Time, bool) {
	if len(r.queue) == 0 {
		return time.Time{}, false
	}
	return r.queue[0].readyAt, true
}

// Queued is the number of queued jobs.
func (r *Runner) Queued() int { return len(r.queue) }

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
	after := r.c.Counters()
	r.verdicts.Attempts += after.Attempts - before.Attempts
	r.verdicts.Conflicted += after.Conflicted - before.Conflicted
	r.verdicts.Partial += after.Partial - before.Partial
	r.verdicts.GaveUp += after.GaveUp - before.GaveUp
	if err != nil {
		return fmt.Errorf("%s: abandon job %s: %w", r.c.Component(), j.UID, err)
	}
	return nil
}

// VerdictCounters counts, out of the client's counters, the transactions
// that wrote abandoned jobs' verdicts: a report of scheduling attempts
// subtracts them.
func (r *Runner) VerdictCounters() client.Counters { return r.verdicts }

// newJob records a job first seen at now.
func (r *Runner) newJob(job uuid.UUID, now time.Time) *jobState {
	j := &jobState{JobRecord: JobRecord{UID: job, Submitted: now}, placed: map[uuid.UUID]struct{}{}, loop: client.NewLoop(r.cfg.retryPolicy(), nil)}
	r.jobs[job] = j
	return j
}

func (r *Runner) markPlaced(j *jobState, now time.Time) {
	j.done = true
	if j.Placed.IsZero() {
		j.Placed = now
	}
}

// Rejected returns how many of the runner's operations the store's policy
// refused, by reason (nil when none were).
func (r *Runner) Rejected() map[omegav1.RejectReason]int64 { return maps.Clone(r.rejected) }

// Records returns every job the runner has seen, ordered by submission
// time, then uid.
func (r *Runner) Records() []JobRecord {
	out := make([]JobRecord, 0, len(r.jobs))
	for _, j := range r.jobs {
		if !j.shadow {
			out = append(out, j.JobRecord)
		}
	}
	slices.SortFunc(out, func(a, b JobRecord) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return bytes.Compare(a.UID[:], b.UID[:])
	})
	return out
}
