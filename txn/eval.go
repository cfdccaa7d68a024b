package txn

import (
	"fmt"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

type objKey struct {
	kind omegav1.ObjectKind
	uid  uuid.UUID
}

type evaluator struct {
	base    *State
	tx      *Txn
	rev     uint64
	changes []Change
	touched map[objKey]int // → index in changes
	res     Result
	metas   metaShare // the transaction's created tasks share equal metas
	// offerMode: offers are outstanding or this transaction made or
	// answered one, so claims are checked against their locks (offer.go).
	offerMode bool
	newOffers []*Offer // created by this transaction
	// answering is the offer this transaction answered; offerUsed what its
	// claims took of it, per machine.
	answering *Offer
	offerUsed map[uuid.UUID]Resources
	// quotaMode: the base has quotas, so claimedSoFar sums what the
	// transaction's committed claims declare (Overlay.QuotasOf).
	quotaMode    bool
	claimedSoFar total
}

// Evaluate decides what tx does to base if committed as revision rev (which
// must be greater than base.Revision()). It returns the result and, if
// anything committed, the write set to make durable and apply; ws is nil when
// nothing committed. On bad input it returns an error (an *OpError wrapping
// one of the Err* sentinels, or ErrTooLarge / ErrFutureRevision) and nothing
// else. base is not modified; tx is only read, but the messages in its Create
// and Put operations become part of the write set.
func Evaluate(base *State, tx *Txn, rev uint64, lim Limits) (Result, *WriteSet, error) {
	var s Scratch
	return s.Evaluate(base, tx, rev, lim)
}

// Scratch holds what Evaluate needs only while it runs, so that a caller
// evaluating many transactions in turn (the store, under its commit lock)
// reuses it instead of allocating it each time. The zero value is ready; a
// Scratch belongs to one goroutine at a time. Its results are the same as
// Evaluate's and share nothing with it.
type Scratch struct {
	touched map[objKey]int
	// big is the map of touched objects kept for large transactions, made
	// for bigSize of them.
	big     map[objKey]int
	bigSize int
	// The uids warm collects, reused.
	warmTasks, warmMachines []uuid.UUID
	warmed                  uint64 // what Warm returned, kept: Warm inlines, and a dropped sum would let the compiler drop touch's loads
}

// warmOps is the number of operations from which an evaluation first warms
// the cache with the objects they name (Scratch.warm).
const warmOps = 4

// warm walks base's tries for the tasks and machines ops name, side by side
// (pmap.Map.Warm), before the operations are evaluated one by one: their
// lookups then find the trie's nodes and the objects' first lines in the
// cache instead of waiting for each miss in turn.
//
// A created task's uid is looked up too (it must be absent: the walk ends
// at an empty slot, as cold as any), and the machines that the tasks named
// are placed on (a status that ends a task releases its machine) are found
// from the tasks once those are warm.
func (s *Scratch) warm(base *State, ops []Op) {
	tasks, machines := s.warmTasks[:0], s.warmMachines[:0]
	for i := range ops {
		switch op := &ops[i]; op.Kind {
		case OpCreate:
			if op.NewTask != nil {
				if u, err := ParseUID(op.NewTask.GetMeta().GetUid(), "task uid"); err == nil { // else create reports it
					tasks = append(tasks, u)
				}
			}
		case OpClaim:
			if op.ExpectVersion != 0 { // else a task this transaction creates: not in base
				tasks = append(tasks, op.Task)
			}
			machines = append(machines, op.Machine)
		case OpEvict, OpSetStatus:
			tasks = append(tasks, op.Task)
		case OpDelete:
			if op.DeleteKind == omegav1.ObjectKind_OBJECT_KIND_TASK {
				tasks = append(tasks, op.DeleteUID)
			}
		}
	}
	s.warmed += base.tasks.Warm(tasks, touchTask)
	for i := range ops {
		if op := &ops[i]; op.Kind == OpSetStatus || op.Kind == OpEvict {
			if t, ok := base.tasks.Get(op.Task); ok && t.Placed() {
				machines = append(machines, t.Machine)
			}
		}
	}
	s.warmed += base.machines.Warm(machines, touchMachine)
	s.warmTasks, s.warmMachines = tasks, machines
}

// WarmTasks brings the tasks named into the cache, side by side
// (pmap.Map.Warm), for a caller about to look them up one by one; what it
// returns means nothing (keep it, so it is computed).
func (s *State) WarmTasks(uids []uuid.UUID) uint64 { return s.tasks.Warm(uids, touchTask) }

// touchTask and touchMachine read a field in each of the cache lines an
// evaluation reads of the object.
func touchTask(t *Task) uint64 { return t.Version + uint64(t.State) + uint64(t.Claimed.CPU) }

func touchMachine(m *Machine) uint64 { return m.Version + uint64(m.Allocated.CPU) + m.Seq }

// changesFor is how many changes ops make at most: one for a create or a
// put, two for the others (a task and the machine it is claimed on or
// released from). The write set keeps the slice, so it is made at that
// size, not at twice the operations (a job's creation is one change a
// task).
func changesFor(ops []Op) int {
	n := 0
	for i := range ops {
		switch ops[i].Kind {
		case OpCreate, OpPut:
			n++
		default:
			n += 2
		}
	}
	return n
}

// keepTouched is the size of the touched-objects map a Scratch keeps.
const keepTouched = 1024

// Evaluate is the package's Evaluate, reusing s.
func (s *Scratch) Evaluate(base *State, tx *Txn, rev uint64, lim Limits) (Result, *WriteSet, error) {
	return s.EvaluateRules(base, tx, rev, lim, nil)
}

// EvaluateRules is Evaluate with a store policy's rules checking each
// operation (nil: none, at no cost).
func (s *Scratch) EvaluateRules(base *State, tx *Txn, rev uint64, lim Limits, rules Rules) (Result, *WriteSet, error) {
	if tx == nil {
		return Result{}, nil, fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	if rev <= base.rev {
		panic(fmt.Sprintf("txn: evaluate at revision %d on state at %d", rev, base.rev))
	}
	if lim.MaxOps > 0 && len(tx.Ops) > lim.MaxOps {
		return Result{}, nil, fmt.Errorf("%w: %d operations, the limit is %d", ErrTooLarge, len(tx.Ops), lim.MaxOps)
	}
	if err := validate(tx, lim); err != nil {
		return Result{}, nil, err
	}
	if tx.ViewRevision > base.rev {
		return Result{}, nil, fmt.Errorf("%w: view revision %d, store at %d", ErrFutureRevision, tx.ViewRevision, base.rev)
	}
	switch tx.Conflict {
	case omegav1.ConflictMode_CONFLICT_MODE_FINE, omegav1.ConflictMode_CONFLICT_MODE_COARSE:
	default:
		return Result{}, nil, fmt.Errorf("%w: conflict mode %d", ErrInvalid, tx.Conflict)
	}
	switch tx.Commit {
	case omegav1.CommitMode_COMMIT_MODE_INCREMENTAL, omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING:
	default:
		return Result{}, nil, fmt.Errorf("%w: commit mode %d", ErrInvalid, tx.Commit)
	}
	most := changesFor(tx.Ops)
	e := &evaluator{
		base:    base,
		tx:      tx,
		rev:     rev,
		changes: make([]Change, 0, most),
		res:     Result{Base: base.rev, Outcomes: make([]Outcome, len(tx.Ops))},
		// offerMode: the base has offers (a pointer and a count: nothing
		// more on the path of a cell without them).
		offerMode: base.offers.Len() > 0,
		quotaMode: base.quotas.Len() > 0,
	}
	// The objects touched, at most one per change (a claim touches two: its
	// task and its machine), so a map made for that many never grows. A
	// small transaction reuses the scratch map. A large one (a job's
	// thousands of tasks) reuses the large map if it was made for up to
	// eight times as many objects (clearing costs its size), and otherwise
	// gets one made at its size, kept if larger: a map made anew for each
	// large transaction was 10% of the simulation's allocated bytes, and one
	// map for all would make every small transaction clear the largest's
	// capacity.
	if want := most; want > keepTouched {
		if s.big != nil && s.bigSize >= want && s.bigSize <= 8*want {
			e.touched = s.big
			defer clear(s.big)
		} else {
			e.touched = make(map[objKey]int, want)
			if want > s.bigSize {
				s.big, s.bigSize = e.touched, want
				defer clear(s.big)
			}
		}
	} else {
		if s.touched == nil {
			s.touched = make(map[objKey]int, keepTouched)
		}
		e.touched = s.touched
		defer func() {
			if len(e.touched) > keepTouched {
				s.touched = nil // it grew past its size (two objects an operation): let it go
			} else {
				clear(e.touched)
			}
		}()
	}
	if len(tx.Ops) >= warmOps {
		s.warm(base, tx.Ops)
	}
	var cp Op // the copy of an operation the rules may rewrite
	for i := range tx.Ops {
		op := &tx.Ops[i]
		if rules != nil {
			cp = *op
			if rej := rules.Check(Overlay{e}, i, &cp); rej != nil {
				e.res.Outcomes[i] = rejected(rej)
				e.res.Rejected++
				continue
			}
			op = &cp
		}
		out, err := e.op(op)
		if err != nil {
			return Result{}, nil, &OpError{Index: i, Kind: op.Kind, Err: err}
		}
		e.res.Outcomes[i] = out
		if out.Committed() {
			e.res.Committed++
		} else {
			e.res.Conflicts++
			if op.Kind == OpClaim {
				e.res.ClaimsConflicted++
			}
		}
	}
	if (e.res.Conflicts > 0 || e.res.Rejected > 0) && tx.Commit == omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING {
		for i := range e.res.Outcomes {
			if e.res.Outcomes[i].Committed() {
				e.res.Outcomes[i] = Outcome{Code: omegav1.OutcomeCode_OUTCOME_CODE_ABORTED, Detail: "another operation conflicted"}
			}
		}
		e.res.Committed = 0
	}
	if e.res.Committed == 0 {
		return e.res, nil, nil
	}
	e.res.Revision = rev
	return e.res, &WriteSet{Revision: rev, UnixNanos: tx.UnixNanos, Changes: e.changes}, nil
}

// conflict builds a conflict outcome. Its detail is bounded (MaxDetailBytes;
// callers pass user strings through short), so a result's size is bounded
// by the transaction's operation count, whatever the state holds.
func conflict(code omegav1.OutcomeCode, format string, args ...any) Outcome {
	return Outcome{Code: code, Detail: truncate(fmt.Sprintf(format, args...), MaxDetailBytes)}
}

var committed = Outcome{}

// --- the overlay: this transaction's view of the state -------------------

// task returns the task as this transaction sees it, the version it had
// before the transaction (0 if the transaction created it), and whether it
// exists.
func (e *evaluator) task(uid uuid.UUID) (cur *Task, baseVersion uint64, ok bool) {
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_TASK, uid}]; hit {
		c := &e.changes[i]
		if c.Deleted {
			return nil, 0, false
		}
		return c.Task, c.baseVersion, true
	}
	t, ok := e.base.tasks.Get(uid)
	if !ok {
		return nil, 0, false
	}
	return t, t.Version, true
}

// mutableTask returns a copy of t this transaction may change: t itself if
// the transaction already made it (nobody else can see it yet), a fresh copy
// otherwise.
func (e *evaluator) mutableTask(t *Task) *Task {
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_TASK, t.UID}]; hit && e.changes[i].Task == t && !e.changes[i].Deleted {
		return t
	}
	nt := *t
	return &nt
}

// mutableMachine is mutableTask for machines.
func (e *evaluator) mutableMachine(m *Machine) *Machine {
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_MACHINE, m.UID}]; hit && e.changes[i].Machine == m && !e.changes[i].Deleted {
		return m
	}
	nm := *m
	return &nm
}

func (e *evaluator) machine(uid uuid.UUID) (cur, base *Machine, ok bool) {
	b, inBase := e.base.machines.Get(uid)
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_MACHINE, uid}]; hit {
		c := &e.changes[i]
		if c.Deleted {
			return nil, nil, false
		}
		return c.Machine, b, true
	}
	return b, b, inBase
}

func (e *evaluator) job(uid uuid.UUID) (cur *Job, baseVersion uint64, ok bool) {
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_JOB, uid}]; hit {
		c := &e.changes[i]
		if c.Deleted {
			return nil, 0, false
		}
		if c.Created {
			return c.Job, 0, true
		}
		b, _ := e.base.jobs.Get(uid)
		return c.Job, b.Version, true
	}
	j, ok := e.base.jobs.Get(uid)
	if !ok {
		return nil, 0, false
	}
	return j, j.Version, true
}

// record sets the overlay value of an object. derived marks a change of
// store-derived fields only; a later non-derived change clears it.
func (e *evaluator) record(c Change) {
	k := objKey{c.Kind, c.UID()}
	if i, hit := e.touched[k]; hit {
		prev := &e.changes[i]
		c.Created = c.Created || prev.Created
		c.Derived = c.Derived && prev.Derived
		c.baseVersion = prev.baseVersion
		c.PrevMachine = prev.PrevMachine // where it was before the transaction: the first change's
		c.PrevState = prev.PrevState
		if c.Deleted && prev.Created {
			// Created and deleted in one transaction: nothing to store, but
			// keep the entry so later operations see it gone.
			c.Derived = true
		}
		*prev = c
		return
	}
	e.touched[k] = len(e.changes)
	e.changes = append(e.changes, c)
}

// setTask records t's new value; baseVersion is the version the task had
// before the transaction (0 if created by it).
func (e *evaluator) setTask(t *Task, created bool, baseVersion uint64, from *Task) {
	e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: t, Created: created, baseVersion: baseVersion, PrevMachine: placedOn(from), PrevState: stateOf(from)})
}

// stateOf is t's state, UNSPECIFIED for no task.
func stateOf(t *Task) omegav1.TaskState {
	if t == nil {
		return omegav1.TaskState_TASK_STATE_UNSPECIFIED
	}
	return t.State
}

// placedOn is the machine t holds resources on, or the zero uid.
func placedOn(t *Task) uuid.UUID {
	if t == nil || !t.Placed() {
		return uuid.Nil
	}
	return t.Machine
}

func (e *evaluator) setMachine(m *Machine, created, derived bool) {
	e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: m, Created: created, Derived: derived})
}

// release frees a placed task's claim on its machine.
func (e *evaluator) release(t *Task) error {
	m, _, ok := e.machine(t.Machine)
	if !ok {
		return fmt.Errorf("%w: task %s is placed on machine %s, which does not exist", ErrNotFound, t.UID, t.Machine)
	}
	nm := e.mutableMachine(m)
	nm.Allocated = m.Allocated.Sub(t.Claimed)
	nm.Tasks--
	nm.Seq = e.rev
	e.setMachine(nm, false, true)
	return nil
}

// missing decides what naming an absent object means. If the transaction
// deleted it itself, or the store deleted nothing since the view, the name
// is bad input (ErrNotFound). Otherwise it may be one of the objects deleted
// after the view — the state moved, as with any conflict — so the operation
// conflicts with NOT_FOUND and the rest of the transaction stands.
func (e *evaluator) missing(kind omegav1.ObjectKind, what string, uid uuid.UUID) (Outcome, error) {
	_, here := e.touched[objKey{kind, uid}]
	if !here && e.tx.ViewRevision < e.base.lastDelete {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND,
			"%s %s is gone (objects were deleted after the view's revision %d)", what, uid, e.tx.ViewRevision), nil
	}
	return Outcome{}, fmt.Errorf("%w: %s %s", ErrNotFound, what, uid)
}
