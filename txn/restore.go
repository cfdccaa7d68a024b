package txn

import (
	"fmt"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Restorer rebuilds a State from stored objects (a store reopening, a client
// listing a remote cell). Add every object, then Finish derives what is never
// stored: each machine's allocation and task count from the tasks placed on
// it, and the totals.
type Restorer struct {
	rev      uint64
	b        *Builder
	machines map[uuid.UUID]*Machine
	order    []uuid.UUID // machines in the order added, for determinism
	tasks    []*Task
	metas    metaShare
}

// NewRestorer starts rebuilding the state at revision rev.
func NewRestorer(rev uint64) *Restorer {
	return &Restorer{rev: rev, b: NewState().Builder(), machines: map[uuid.UUID]*Machine{}}
}

func restoreMeta(m *omegav1.ObjectMeta) (version, createRev uint64, created int64) {
	return m.GetVersion(), m.GetCreateRevision(), m.GetCreationUnixNanos()
}

// Machine adds a stored machine (its status allocation is ignored).
func (r *Restorer) Machine(p *omegav1.Machine) error {
	m, err := machineFromWire(p, false)
	if err != nil {
		return err
	}
	if _, dup := r.machines[m.UID]; dup {
		return fmt.Errorf("%w: machine %s", ErrAlreadyExists, m.UID)
	}
	m.Seq, m.LastClaim = r.rev, r.rev
	r.machines[m.UID] = m
	r.order = append(r.order, m.UID)
	return nil
}

// Offer adds a stored outstanding offer, its locks as stored (the store
// derived them when it made the offer).
func (r *Restorer) Offer(p *omegav1.Offer) error {
	o, err := offerFromWire(p)
	if err != nil {
		return err
	}
	if _, dup := r.b.offers.Get(o.UID); dup {
		return fmt.Errorf("%w: offer %s listed twice", ErrAlreadyExists, o.UID)
	}
	r.b.Apply(&Change{Kind: omegav1.ObjectKind_OBJECT_KIND_OFFER, Offer: o})
	return nil
}

// Lease adds a stored lease.
func (r *Restorer) Lease(p *omegav1.Lease) error {
	l, err := leaseFromWire(p)
	if err != nil {
		return err
	}
	if _, dup := r.b.leases.Get(l.UID); dup {
		return fmt.Errorf("%w: lease %s listed twice", ErrAlreadyExists, l.UID)
	}
	r.b.Apply(&Change{Kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, Lease: l})
	return nil
}

// Quota adds a stored quota (its use is counted from the tasks).
func (r *Restorer) Quota(p *omegav1.Quota) error {
	q, err := quotaFromWire(p)
	if err != nil {
		return err
	}
	if _, dup := r.b.quotas.Get(q.UID); dup {
		return fmt.Errorf("%w: quota %s listed twice", ErrAlreadyExists, q.UID)
	}
	r.b.Apply(&Change{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Quota: q})
	return nil
}

// Job adds a stored job.
func (r *Restorer) Job(p *omegav1.Job) error {
	j, err := jobFromWire(p)
	if err != nil {
		return err
	}
	if _, dup := r.b.jobs.Get(j.UID); dup {
		return fmt.Errorf("%w: job %s listed twice", ErrAlreadyExists, j.UID)
	}
	r.b.Apply(&Change{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Job: j})
	return nil
}

// Task adds a stored task with its status, at version.
func (r *Restorer) Task(p *omegav1.Task, version uint64) error {
	t, err := restoreTask(p, version, &r.metas)
	if err != nil {
		return err
	}
	r.tasks = append(r.tasks, t)
	return nil
}

// restoreTask rebuilds a task from its meta, spec and status, at version.
func restoreTask(p *omegav1.Task, version uint64, ms *metaShare) (*Task, error) {
	t, err := newTask(p, ms)
	if err != nil {
		return nil, err
	}
	_, t.CreateRev, t.Created = restoreMeta(p.GetMeta())
	t.Version = version
	if err := restoreTaskStatus(t, p.GetStatus()); err != nil {
		return nil, err
	}
	return t, nil
}

// restoreTaskStatus sets t's status fields from st, checked.
func restoreTaskStatus(t *Task, st *omegav1.TaskStatus) (err error) {
	t.State = st.GetState()
	if _, ok := omegav1.TaskState_name[int32(t.State)]; !ok || t.State == omegav1.TaskState_TASK_STATE_UNSPECIFIED {
		return fmt.Errorf("%w: task %s state %d", ErrInvalid, t.UID, t.State)
	}
	if st.GetMachineUid() != "" {
		if t.State == omegav1.TaskState_TASK_STATE_PENDING {
			return fmt.Errorf("%w: task %s is PENDING on machine %s", ErrInvalid, t.UID, st.GetMachineUid())
		}
		if t.Machine, err = ParseUID(st.GetMachineUid(), "task machine"); err != nil {
			return err
		}
	}
	t.Claimed = ResourcesFromProto(st.GetClaimed())
	if err := t.Claimed.Validate(); err != nil {
		return fmt.Errorf("%w: task %s claimed: %v", ErrInvalid, t.UID, err)
	}
	t.Scheduler = st.GetScheduler()
	t.Assigned, t.Started, t.Finished = st.GetAssignUnixNanos(), st.GetStartUnixNanos(), st.GetFinishUnixNanos()
	t.Evictions = st.GetEvictions()
	if err := validateRun(st.GetRun()); err != nil {
		return fmt.Errorf("%w: task %s run: %v", ErrInvalid, t.UID, err)
	}
	t.setRare(st.GetMessage(), st.GetRun())
	return nil
}

// Finish derives allocations and returns the state. It fails if a placed
// task names an unknown machine or a machine would be over capacity.
func (r *Restorer) Finish() (*State, error) {
	// Allocations are summed in 128 bits: claims that wrap int64 would
	// otherwise "fit" a small machine.
	sums := make(map[uuid.UUID]total, len(r.machines))
	for _, t := range r.tasks {
		if _, dup := r.b.tasks.Get(t.UID); dup {
			return nil, fmt.Errorf("%w: task %s listed twice", ErrAlreadyExists, t.UID)
		}
		if t.Placed() {
			m, ok := r.machines[t.Machine]
			if !ok {
				return nil, fmt.Errorf("%w: task %s is placed on unknown machine %s", ErrNotFound, t.UID, t.Machine)
			}
			sums[m.UID] = sums[m.UID].add(t.Claimed)
			m.Tasks++
		}
		r.b.Apply(&Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: t})
	}
	for _, uid := range r.order {
		m := r.machines[uid]
		sum := sums[uid]
		if !sum.lessEq(m.Capacity) {
			return nil, fmt.Errorf("%w: machine %s: allocation %v over capacity %v", ErrInvalid, uid, sum.resources(), m.Capacity)
		}
		m.Allocated = sum.resources()
		r.b.Apply(&Change{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: m})
	}
	st := r.b.Finish(r.rev)
	// What was deleted before the restore is unknown: treat every older view
	// as possibly naming deleted objects.
	st.lastDelete = r.rev
	return st, nil
}
