package txn

import (
	"fmt"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// --- operations ------------------------------------------------------------

func (e *evaluator) op(op *Op) (Outcome, error) {
	if err := namesObjects(op); err != nil {
		return Outcome{}, err
	}
	switch op.Kind {
	case OpCreate:
		return e.create(op)
	case OpClaim:
		return e.claim(op)
	case OpEvict:
		return e.evict(op)
	case OpSetStatus:
		return e.setStatus(op)
	case OpPut:
		return e.put(op)
	case OpDelete:
		return e.delete(op)
	case OpAnswer:
		return e.answer(op)
	}
	return Outcome{}, fmt.Errorf("%w: unknown operation kind %d", ErrInvalid, op.Kind)
}

// namesObjects refuses an operation that names the object it acts on by
// the nil uid (on the wire, an empty field), naming the wire's field: no
// object has it, as a creation with no uid is refused.
func namesObjects(op *Op) error {
	var field string
	switch op.Kind {
	case OpClaim:
		if op.Task == uuid.Nil {
			field = "task_uid"
		} else if op.Machine == uuid.Nil {
			field = "machine_uid"
		}
	case OpEvict, OpSetStatus:
		if op.Task == uuid.Nil {
			field = "task_uid"
		}
	case OpDelete:
		if op.DeleteUID == uuid.Nil {
			field = "uid"
		}
	case OpAnswer:
		if op.DeleteUID == uuid.Nil {
			field = "offer_uid"
		}
	}
	if field != "" {
		return fmt.Errorf("%w: %s %s is the nil uuid: want the uid of an object", ErrInvalid, op.Kind, field)
	}
	return nil
}

func exactlyOne(op *Op) error {
	n := 0
	for _, set := range []bool{op.NewTask != nil, op.NewJob != nil, op.NewMachine != nil, op.NewOffer != nil, op.NewQuota != nil, op.NewLease != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: %s needs exactly one object, got %d", ErrInvalid, op.Kind, n)
	}
	return nil
}

func (e *evaluator) create(op *Op) (Outcome, error) {
	if err := exactlyOne(op); err != nil {
		return Outcome{}, err
	}
	now := e.tx.UnixNanos
	switch {
	case op.NewOffer != nil:
		return e.createOffer(op)
	case op.NewLease != nil:
		l, err := newLease(op.NewLease)
		if err != nil {
			return Outcome{}, err
		}
		if cur, _, exists := e.lease(l.UID); exists {
			return Outcome{}, fmt.Errorf("%w: lease %s (%s), held by %s", ErrAlreadyExists, Quote(l.Name()), l.UID, Quote(cur.Holder()))
		}
		l.Version, l.CreateRev, l.Created = e.rev, e.rev, now
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, Lease: l, Created: true})
	case op.NewQuota != nil:
		q, err := newQuota(op.NewQuota)
		if err != nil {
			return Outcome{}, err
		}
		if _, _, exists := e.quota(q.UID); exists {
			return Outcome{}, fmt.Errorf("%w: quota %s", ErrAlreadyExists, q.UID)
		}
		q.Version, q.CreateRev, q.Created = e.rev, e.rev, now
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Quota: q, Created: true})
	case op.NewTask != nil:
		t, err := newTask(op.NewTask, &e.metas)
		if err != nil {
			return Outcome{}, err
		}
		// A uid is never reused: not even one this transaction deleted (the
		// write set would carry one "created" change over the old task, and
		// the job index would keep the old owner).
		_, exists := e.base.tasks.Get(t.UID)
		if !exists { // then only this transaction can have made it
			i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_TASK, t.UID}]
			exists = hit && !e.changes[i].Deleted
		}
		if exists {
			return Outcome{}, fmt.Errorf("%w: task %s", ErrAlreadyExists, t.UID)
		}
		t.Version, t.CreateRev, t.Created = e.rev, e.rev, now
		e.setTask(t, true, 0, nil)
	case op.NewJob != nil:
		j, err := newJob(op.NewJob)
		if err != nil {
			return Outcome{}, err
		}
		if _, _, exists := e.job(j.UID); exists {
			return Outcome{}, fmt.Errorf("%w: job %s", ErrAlreadyExists, j.UID)
		}
		j.Version, j.CreateRev, j.Created = e.rev, e.rev, now
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Job: j, Created: true})
	case op.NewMachine != nil:
		m, err := newMachine(op.NewMachine)
		if err != nil {
			return Outcome{}, err
		}
		if _, _, exists := e.machine(m.UID); exists {
			return Outcome{}, fmt.Errorf("%w: machine %s", ErrAlreadyExists, m.UID)
		}
		m.Version, m.CreateRev, m.Created, m.Seq = e.rev, e.rev, now, e.rev
		e.setMachine(m, true, false)
	}
	return committed, nil
}

func (e *evaluator) claim(op *Op) (Outcome, error) {
	if err := op.Resources.Validate(); err != nil {
		return Outcome{}, fmt.Errorf("%w: claim of task %s: %v", ErrInvalid, op.Task, err)
	}
	t, baseVer, ok := e.task(op.Task)
	if !ok {
		return e.missing(omegav1.ObjectKind_OBJECT_KIND_TASK, "task", op.Task)
	}
	m, mBase, ok := e.machine(op.Machine)
	if !ok {
		return e.missing(omegav1.ObjectKind_OBJECT_KIND_MACHINE, "machine", op.Machine)
	}
	if op.ExpectVersion != baseVer {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED,
			"task %s is at version %d, the view saw %d", t.UID, baseVer, op.ExpectVersion), nil
	}
	if t.State != omegav1.TaskState_TASK_STATE_PENDING {
		return Outcome{}, fmt.Errorf("%w: task %s is %s at version %d", ErrNotPending, t.UID, t.State, baseVer)
	}
	if m.State != omegav1.MachineState_MACHINE_STATE_UP {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_NOT_UP, "machine %s is %s", m.UID, m.State), nil
	}
	if e.tx.Conflict == omegav1.ConflictMode_CONFLICT_MODE_COARSE && mBase != nil && mBase.Seq > e.tx.ViewRevision {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_CHANGED,
			"machine %s changed at revision %d, after the view's %d", m.UID, mBase.Seq, e.tx.ViewRevision), nil
	}
	if fit, dim := Fits(m.Capacity, m.Allocated, op.Resources); !fit {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES,
			"machine %s cannot hold the claim: %s", m.UID, short(dim)), nil
	}
	if e.offerMode {
		if out, ok := e.offerFit(m, op.Resources); !ok {
			return out, nil
		}
	}
	nm := e.mutableMachine(m)
	claimed := op.Resources.owned()
	if e.quotaMode {
		e.claimedSoFar = e.claimedSoFar.add(claimed)
	}
	nm.Allocated = m.Allocated.Add(claimed)
	nm.Tasks++
	nm.Seq, nm.LastClaim = e.rev, e.rev
	e.setMachine(nm, false, true)
	nt := e.mutableTask(t)
	nt.State = omegav1.TaskState_TASK_STATE_ASSIGNED
	nt.Machine = m.UID
	nt.Claimed = claimed
	nt.Scheduler = e.tx.Component
	nt.Assigned = e.tx.UnixNanos
	nt.SetRun(nil) // a new placement: its agent reports afresh
	nt.Version = e.rev
	e.setTask(nt, false, baseVer, t)
	return committed, nil
}

func (e *evaluator) evict(op *Op) (Outcome, error) {
	t, baseVer, ok := e.task(op.Task)
	if !ok {
		return e.missing(omegav1.ObjectKind_OBJECT_KIND_TASK, "task", op.Task)
	}
	if op.ExpectVersion != baseVer {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED,
			"task %s is at version %d, the view saw %d", t.UID, baseVer, op.ExpectVersion), nil
	}
	if !t.Placed() {
		return Outcome{}, fmt.Errorf("%w: evict of task %s, which is %s", ErrIllegalState, t.UID, t.State)
	}
	if !op.Force && t.Spec.GetPriority() >= op.ForPriority {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_PRIORITY,
			"task %s has priority %d, not below %d", t.UID, t.Spec.GetPriority(), op.ForPriority), nil
	}
	if err := e.release(t); err != nil {
		return Outcome{}, err
	}
	nt := e.mutableTask(t)
	nt.State = omegav1.TaskState_TASK_STATE_PENDING
	nt.Machine = uuid.Nil
	nt.Claimed = Resources{}
	nt.Scheduler = ""
	nt.Assigned, nt.Started = 0, 0
	nt.Evictions++
	nt.SetMessage(op.Message)
	nt.Version = e.rev
	e.setTask(nt, false, baseVer, t)
	return committed, nil
}

func (e *evaluator) setStatus(op *Op) (Outcome, error) {
	target := op.State
	if target != omegav1.TaskState_TASK_STATE_RUNNING && !IsTerminal(target) {
		return Outcome{}, fmt.Errorf("%w: set-status to %s: only RUNNING or a terminal state may be set", ErrInvalid, target)
	}
	t, baseVer, ok := e.task(op.Task)
	if !ok {
		return e.missing(omegav1.ObjectKind_OBJECT_KIND_TASK, "task", op.Task)
	}
	blind := op.ExpectVersion == 0
	if !blind && op.ExpectVersion != baseVer {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED,
			"task %s is at version %d, the caller saw %d", t.UID, baseVer, op.ExpectVersion), nil
	}
	// RUNNING needs a placement; ABANDONED (its scheduler gave up placing
	// it) needs none: it is written only on a PENDING task.
	illegal := t.Terminal() || (target == omegav1.TaskState_TASK_STATE_RUNNING && !t.Placed()) ||
		(target == omegav1.TaskState_TASK_STATE_ABANDONED && t.State != omegav1.TaskState_TASK_STATE_PENDING)
	if illegal {
		if blind {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED, "task %s is %s, cannot become %s", t.UID, t.State, target), nil
		}
		return Outcome{}, fmt.Errorf("%w: task %s is %s at version %d, cannot become %s", ErrIllegalState, t.UID, t.State, baseVer, target)
	}
	nt := e.mutableTask(t)
	if IsTerminal(target) {
		if t.Placed() {
			if err := e.release(t); err != nil {
				return Outcome{}, err
			}
		}
		nt.Finished = e.tx.UnixNanos
	} else if t.State != omegav1.TaskState_TASK_STATE_RUNNING {
		nt.Started = e.tx.UnixNanos
	}
	nt.State = target
	run := nt.Run()
	if op.Run != nil {
		run = op.Run
	}
	nt.setRare(op.Message, run)
	nt.Version = e.rev
	e.setTask(nt, false, baseVer, t)
	return committed, nil
}

func (e *evaluator) put(op *Op) (Outcome, error) {
	if err := exactlyOne(op); err != nil {
		return Outcome{}, err
	}
	switch {
	case op.NewTask != nil:
		return Outcome{}, fmt.Errorf("%w: put of a task: a task changes only by claim, evict, set-status and delete", ErrInvalid)
	case op.NewOffer != nil:
		return Outcome{}, fmt.Errorf("%w: put of an offer: an offer changes only by its answer", ErrInvalid)
	case op.NewLease != nil:
		nl, err := newLease(op.NewLease)
		if err != nil {
			return Outcome{}, err
		}
		l, baseVer, ok := e.lease(nl.UID)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_LEASE, "lease", nl.UID)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH,
				"lease %s is at version %d, expected %d (held by %s)", Quote(l.Name()), baseVer, op.ExpectVersion, Quote(l.Holder())), nil
		}
		nl.Version, nl.CreateRev, nl.Created = e.rev, l.CreateRev, l.Created
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, Lease: nl})
	case op.NewQuota != nil:
		nq, err := newQuota(op.NewQuota)
		if err != nil {
			return Outcome{}, err
		}
		q, baseVer, ok := e.quota(nq.UID)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_QUOTA, "quota", nq.UID)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH,
				"quota %s is at version %d, expected %d", q.UID, baseVer, op.ExpectVersion), nil
		}
		nq.Version, nq.CreateRev, nq.Created = e.rev, q.CreateRev, q.Created
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Quota: nq})
	case op.NewJob != nil:
		nj, err := newJob(op.NewJob)
		if err != nil {
			return Outcome{}, err
		}
		j, baseVer, ok := e.job(nj.UID)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_JOB, "job", nj.UID)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH,
				"job %s is at version %d, expected %d", j.UID, baseVer, op.ExpectVersion), nil
		}
		nj.Version, nj.CreateRev, nj.Created = e.rev, j.CreateRev, j.Created
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Job: nj})
	default:
		nm, err := newMachine(op.NewMachine)
		if err != nil {
			return Outcome{}, err
		}
		m, mBase, ok := e.machine(nm.UID)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_MACHINE, "machine", nm.UID)
		}
		var baseVer uint64
		if mBase != nil {
			baseVer = mBase.Version
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH,
				"machine %s is at version %d, expected %d", m.UID, baseVer, op.ExpectVersion), nil
		}
		if !m.Allocated.LessEq(nm.Capacity) {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES,
				"machine %s: new capacity below its allocation in %s", m.UID, short(exceeds(m.Allocated, nm.Capacity))), nil
		}
		if e.offerMode {
			if held := m.Allocated.Add(e.offeredOn(m)); !held.LessEq(nm.Capacity) {
				return conflict(omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES,
					"machine %s: new capacity below its allocation and what offers lock in %s", m.UID, short(exceeds(held, nm.Capacity))), nil
			}
		}
		nm.Allocated, nm.Tasks, nm.LastClaim = m.Allocated, m.Tasks, m.LastClaim
		nm.Version, nm.CreateRev, nm.Created, nm.Seq = e.rev, m.CreateRev, m.Created, e.rev
		e.setMachine(nm, false, false)
	}
	return committed, nil
}

func (e *evaluator) delete(op *Op) (Outcome, error) {
	uid := op.DeleteUID
	mismatch := func(what string, have uint64) (Outcome, error) {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH,
			"%s %s is at version %d, expected %d", what, uid, have, op.ExpectVersion), nil
	}
	switch op.DeleteKind {
	case omegav1.ObjectKind_OBJECT_KIND_TASK:
		t, baseVer, ok := e.task(uid)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_TASK, "task", uid)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return mismatch("task", baseVer)
		}
		if t.Placed() {
			if err := e.release(t); err != nil {
				return Outcome{}, err
			}
		}
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: t, Deleted: true, baseVersion: baseVer, PrevMachine: placedOn(t), PrevState: t.State})
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		j, baseVer, ok := e.job(uid)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_JOB, "job", uid)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return mismatch("job", baseVer)
		}
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Job: j, Deleted: true})
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		m, mBase, ok := e.machine(uid)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_MACHINE, "machine", uid)
		}
		if mBase != nil && op.ExpectVersion != 0 && op.ExpectVersion != mBase.Version {
			return mismatch("machine", mBase.Version)
		}
		if e.offerMode && !e.offeredOn(m).IsZero() {
			// An outstanding offer locks part of it: the machine goes once
			// the offer is answered (a retry then finds it free of locks).
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_CHANGED, "machine %s is locked by an outstanding offer", uid), nil
		}
		if m.Tasks > 0 {
			// Tasks placed on it after the view (and not by this
			// transaction) make the view stale, not the request wrong: a
			// conflict; the retry sees the tasks and gets ErrInUse.
			if mBase != nil && mBase.LastClaim > e.tx.ViewRevision {
				return conflict(omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_CHANGED,
					"machine %s holds %d tasks; one was placed at revision %d, after the view's %d", uid, m.Tasks, mBase.LastClaim, e.tx.ViewRevision), nil
			}
			return Outcome{}, fmt.Errorf("%w: machine %s holds %d tasks; mark them terminal first", ErrInUse, uid, m.Tasks)
		}
		e.setMachineDeleted(m)
	case omegav1.ObjectKind_OBJECT_KIND_OFFER:
		return Outcome{}, fmt.Errorf("%w: delete of offer %s: an offer goes when its framework answers it", ErrInvalid, uid)
	case omegav1.ObjectKind_OBJECT_KIND_QUOTA:
		q, baseVer, ok := e.quota(uid)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_QUOTA, "quota", uid)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return mismatch("quota", baseVer)
		}
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Quota: q, Deleted: true})
	case omegav1.ObjectKind_OBJECT_KIND_LEASE:
		l, baseVer, ok := e.lease(uid)
		if !ok {
			return e.missing(omegav1.ObjectKind_OBJECT_KIND_LEASE, "lease", uid)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != baseVer {
			return mismatch("lease", baseVer)
		}
		e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, Lease: l, Deleted: true})
	default:
		return Outcome{}, fmt.Errorf("%w: delete of object kind %s", ErrInvalid, op.DeleteKind)
	}
	return committed, nil
}

func (e *evaluator) setMachineDeleted(m *Machine) {
	e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: m, Deleted: true})
}
