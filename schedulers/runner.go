package schedulers

import (
	"bytes"
	"container/heap"
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
	// waiting is the reason the runner last found for the job's tasks to
	// wait (RunnerConfig.Reasons), said again in a verdict.
	waiting *omegav1.JobWaiting
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
