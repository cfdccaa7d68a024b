package txnfuzz

import (
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func taskVersion(view *txn.State, u uuid.UUID) uint64 {
	if t, ok := view.Task(u); ok {
		return t.Version
	}
	return 0
}

// Op kinds of the layout.
const (
	OpCreate = iota
	OpClaim
	OpEvict
	OpSetStatus
	OpPut
	OpDelete
	OpCreateClaim // a task created and claimed in one transaction
	OpOffer       // an offer created (a two-level allocator's)
	OpAnswer      // an offer answered
	OpQuota       // a quota created, put or deleted
	OpLease       // a lease created, put or deleted
	OpUnknown     // an operation of no known kind
	numOps
)

// State selectors of a SetStatus: the states a report may set, then at the
// edge those it may not (and one that is no state at all).
const (
	SetRunning = iota
	SetSucceeded
	SetFailed
	SetLost
	SetKilled
)

var setStates = []omegav1.TaskState{
	omegav1.TaskState_TASK_STATE_RUNNING, omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED,
	omegav1.TaskState_TASK_STATE_LOST, omegav1.TaskState_TASK_STATE_KILLED, omegav1.TaskState_TASK_STATE_ABANDONED,
	omegav1.TaskState_TASK_STATE_UNSPECIFIED, omegav1.TaskState_TASK_STATE_PENDING, omegav1.TaskState_TASK_STATE_ASSIGNED, 42,
}

// Object selectors of a Create.
const (
	ObjTask = iota
	ObjJob
	ObjMachine
	ObjNone
	ObjTwo
	numObjs
)

func (d *Decoder) op(view *txn.State, ops []txn.Op) []txn.Op {
	switch d.pick(numOps-1, 1) {
	case OpCreate:
		switch d.pick(ObjNone, numObjs-ObjNone) {
		case ObjTask:
			return append(ops, txn.CreateTask(d.TaskObj()))
		case ObjJob:
			return append(ops, txn.CreateJob(d.JobObj()))
		case ObjMachine:
			return append(ops, txn.CreateMachine(d.MachineObj()))
		case ObjNone:
			return append(ops, txn.Op{Kind: txn.OpCreate})
		default:
			return append(ops, txn.Op{Kind: txn.OpCreate, NewTask: d.TaskObj(), NewJob: d.JobObj()})
		}
	case OpClaim:
		task, machine := d.taskWhere(view, pendingTask), d.uid('M', NumMachines-1)
		r := d.claimResources(view, task)
		return append(ops, txn.Claim(task, machine, r, d.version(taskVersion(view, task))))
	case OpEvict:
		task := d.taskWhere(view, placedTask)
		v := d.version(taskVersion(view, task))
		if d.choice(2) == 1 {
			return append(ops, txn.ForceEvict(task, v, d.Str()))
		}
		return append(ops, txn.Evict(task, v, d.int32(), d.Str()))
	case OpSetStatus:
		task := d.taskWhere(view, liveTask)
		st := setStates[d.pick(SetKilled+1, len(setStates)-SetKilled-1)]
		return append(ops, txn.SetStatus(task, st, d.version(taskVersion(view, task)), d.Str()))
	case OpPut:
		switch d.pick(2, 1) {
		case 0:
			j := d.JobObj()
			var cur uint64
			if u, err := uuid.Parse(j.GetMeta().GetUid()); err == nil {
				if old, ok := view.Job(u); ok {
					cur = old.Version
				}
			}
			return append(ops, txn.PutJob(j, d.version(cur)))
		case 1:
			m := d.MachineObj()
			var cur uint64
			if u, err := uuid.Parse(m.GetMeta().GetUid()); err == nil {
				if old, ok := view.Machine(u); ok {
					cur = old.Version
				}
			}
			return append(ops, txn.PutMachine(m, d.version(cur)))
		}
		return append(ops, txn.Op{Kind: txn.OpPut, NewTask: d.TaskObj()})
	case OpDelete:
		var kind omegav1.ObjectKind
		var u uuid.UUID
		var cur uint64
		switch d.pick(3, 2) {
		case 0:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_TASK, d.uid('T', NumTasks)
			cur = taskVersion(view, u)
		case 1:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_JOB, d.uid('J', NumJobs)
			if j, ok := view.Job(u); ok {
				cur = j.Version
			}
		case 2:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_MACHINE, d.uid('M', NumMachines)
			if m, ok := view.Machine(u); ok {
				cur = m.Version
			}
		case 3:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_UNSPECIFIED, d.uid('T', NumTasks)
		default:
			kind, u = 77, d.uid('T', NumTasks)
		}
		return append(ops, txn.Delete(kind, u, d.version(cur)))
	case OpCreateClaim:
		t := d.TaskObj()
		u, err := uuid.Parse(t.GetMeta().GetUid())
		if err != nil {
			u = uuid.Nil
		}
		ops = append(ops, txn.CreateTask(t))
		return append(ops, txn.Claim(u, d.uid('M', NumMachines-1), txn.ResourcesFromProto(t.GetSpec().GetResources()), 0))
	case OpOffer:
		return append(ops, txn.CreateOffer(d.OfferObj()))
	case OpAnswer:
		return append(ops, txn.Answer(d.uid('O', NumOffers)))
	case OpQuota:
		switch d.pick(3, 0) {
		case 0:
			return append(ops, txn.CreateQuota(d.QuotaObj()))
		case 1:
			return append(ops, txn.PutQuota(d.QuotaObj(), 0))
		default:
			return append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_QUOTA, d.uid('Q', NumQuotas), 0))
		}
	case OpLease:
		switch d.pick(3, 0) {
		case 0:
			return append(ops, txn.CreateLease(d.LeaseObj()))
		case 1:
			return append(ops, txn.PutLease(d.LeaseObj(), 0))
		default:
			return append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, txn.LeaseUID(LeaseName(d.choice(NumLeases))), 0))
		}
	}
	return append(ops, txn.Op{Kind: txn.OpKind(d.Byte() | 0x80)})
}

// View selectors of a transaction.
const (
	ViewHead = iota
	ViewHead2
	ViewZero
	ViewBehind
	ViewAhead // an edge: a view ahead of the store
)

// Txn reads a transaction built against view.
func (d *Decoder) Txn(view *txn.State) *txn.Txn {
	tx := &txn.Txn{}
	switch d.pick(ViewAhead, 1) {
	case ViewZero:
	case ViewBehind:
		if r := view.Revision(); r > 0 {
			tx.ViewRevision = r - 1
		}
	case ViewAhead:
		tx.ViewRevision = view.Revision() + 1
	default:
		tx.ViewRevision = view.Revision()
	}
	// Fine or coarse, incremental or all-or-nothing; at the edge, a mode
	// that does not exist.
	modes := []int32{0, 1, 5}
	tx.Conflict = omegav1.ConflictMode(modes[d.pick(2, 1)])
	tx.Commit = omegav1.CommitMode(modes[d.pick(2, 1)])
	tx.Component = d.Str()
	tx.UnixNanos = d.Int()
	maxOps := d.lim.MaxOps
	if maxOps <= 0 {
		maxOps = 16
	}
	// The count: below 128, one to four operations (one bad operation is
	// bad input for the whole transaction, so short ones commit more);
	// from 128, none to two more than the limit.
	n := int(d.Byte())
	if n < 128 {
		n = max(n%5, 1)
	} else {
		n = (n - 128) % (maxOps + 2)
	}
	for len(tx.Ops) < n {
		tx.Ops = d.op(view, tx.Ops)
	}
	return tx
}

// Action kinds of a program.
const (
	ActTxn = iota
	ActTxn2
	ActTxn3
	ActExpire // an Expire at the time Int() after SetupNanos (store targets)
	numActs
)

// Action reads what to do next: ActTxn (or ActTxn2, ActTxn3) or ActExpire.
func (d *Decoder) Action() int { return d.choice(numActs) }
