package txn

import (
	"fmt"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/pmap"
	"github.com/omega-cell/omega/internal/vmap"
)

// State is the cell state at one revision: an immutable snapshot, safe for
// any number of goroutines, structurally shared with the states before and
// after it (taking one is a pointer copy; applying a write set copies only
// the paths it touches). The objects it returns are immutable too.
type State struct {
	rev      uint64
	machines *pmap.Map[*Machine]
	// tasks is a snapshot of a multi-version table (internal/vmap) that
	// the states of one line of revisions share: a commit adds versions in
	// place instead of copying trie paths, and each state reads at its own
	// revision (the table keeps versions while a snapshot that may read them
	// is reachable).
	tasks *vmap.Map[Task]
	jobs  *pmap.Map[*Job]
	// pending indexes the PENDING tasks by owner job (uuid.Nil for tasks
	// without one): job uid → set of task uids. It is what a scheduler walks;
	// a task created and claimed in one transaction never enters it.
	pending *pmap.Map[*pmap.Map[struct{}]]
	// offers holds the outstanding offers (a two-level allocator's; none
	// otherwise).
	offers *pmap.Map[*Offer]
	// unoffered is what each UP machine has free that no offer locks, and
	// unofferedTotal its sum (offer.go; nil before the first offer of this
	// line of states); offeredTotal is what the offers lock.
	unoffered      *pmap.Map[Resources]
	unofferedTotal total
	offeredTotal   total
	// quotas and what each one's tasks hold (quota.go; exact sums, which
	// QuotaUsed saturates).
	quotas   *pmap.Map[*Quota]
	quotaUse *pmap.Map[total]
	// leases: the live components' announcements (lease.go).
	leases   *pmap.Map[*Lease]
	capacity total // sum over machines
	alloc    total // sum of machine allocations
	// lastDelete is the newest revision that deleted an object: a view older
	// than it may name objects that are gone.
	lastDelete uint64
	// machineSet is the newest revision that added or removed a machine.
	machineSet uint64
}

// MachineSetRevision is the revision of the last change to the set of
// machines (one added or removed); a list of machine uids built at or after
// it is still complete.
func (s *State) MachineSetRevision() uint64 { return s.machineSet }

// Machines is a state's table of machines as a value a reader may keep to
// follow the machines from one view to the next (Diff) without
// keeping the state, and so without holding back the versions of its tasks.
type Machines struct{ m *pmap.Map[*Machine] }

// Machines returns the state's table of machines.
func (s *State) Machines() Machines { return Machines{s.machines} }

// Same reports whether t and o are the same table (the same machines, each
// the same version).
func (t Machines) Same(o Machines) bool { return t.m == o.m }

// Diff calls f with each machine of t that is not the object old holds
// under its uid (a new version of it, or a machine old does not hold), and
// with the uid and nil for each machine only old holds. Its time is in
// proportion to what the two tables do not share: a later revision's table
// against an earlier one's, in the time of the machines written, added and
// removed between them.
func (t Machines) Diff(old Machines, f func(uid uuid.UUID, m *Machine)) {
	if t.m == nil || old.m == nil {
		panic("txn: Machines.Diff of a zero table")
	}
	t.m.Diff(old.m, func(a, b *Machine) bool { return a == b }, func(uid uuid.UUID, m *Machine, _ bool) { f(uid, m) })
}

// NewState returns the empty state at revision 0.
func NewState() *State {
	return &State{
		machines: pmap.New[*Machine](),
		tasks:    vmap.New[Task](),
		jobs:     pmap.New[*Job](),
		pending:  pmap.New[*pmap.Map[struct{}]](),
		offers:   pmap.New[*Offer](),
		quotas:   pmap.New[*Quota](),
		quotaUse: pmap.New[total](),
		leases:   pmap.New[*Lease](),
	}
}

// Revision is the revision of the last transaction this state includes.
func (s *State) Revision() uint64 { return s.rev }

// Machine returns a machine by uid.
func (s *State) Machine(uid uuid.UUID) (*Machine, bool) { return s.machines.Get(uid) }

// Task returns a task by uid.
func (s *State) Task(uid uuid.UUID) (*Task, bool) { return s.tasks.Get(uid) }

// Job returns a job by uid.
func (s *State) Job(uid uuid.UUID) (*Job, bool) { return s.jobs.Get(uid) }

// NumMachines, NumTasks and NumJobs count the objects held.
func (s *State) NumMachines() int { return s.machines.Len() }
func (s *State) NumTasks() int    { return s.tasks.Len() }
func (s *State) NumJobs() int     { return s.jobs.Len() }

// Capacity is the total capacity of all machines; Allocated the total of
// their allocations. The sums are exact (128 bits per dimension); a total
// beyond the int64 range reads as math.MaxInt64.
func (s *State) Capacity() Resources  { return s.capacity.resources() }
func (s *State) Allocated() Resources { return s.alloc.resources() }

// RangeMachines calls f for each machine, in an order that depends only on
// the set of uids, until f returns false. RangeTasks and RangeJobs likewise.
func (s *State) RangeMachines(f func(*Machine) bool) {
	s.machines.Range(func(_ uuid.UUID, m *Machine) bool { return f(m) })
}
func (s *State) RangeTasks(f func(*Task) bool) {
	s.tasks.Range(func(_ uuid.UUID, t *Task) bool { return f(t) })
}
func (s *State) RangeJobs(f func(*Job) bool) {
	s.jobs.Range(func(_ uuid.UUID, j *Job) bool { return f(j) })
}

// RangePendingTasks calls f for each PENDING task owned by job (uuid.Nil:
// the tasks without an owner job), in an order that depends only on the
// set of uids, until f returns false.
func (s *State) RangePendingTasks(job uuid.UUID, f func(*Task) bool) {
	set, ok := s.pending.Get(job)
	if !ok {
		return
	}
	set.Range(func(k uuid.UUID, _ struct{}) bool {
		t, ok := s.tasks.Get(k)
		if !ok {
			return true
		}
		return f(t)
	})
}

// RangePendingJobs calls f for each job with PENDING tasks (uuid.Nil for
// ownerless tasks) and how many it has, until f returns false.
func (s *State) RangePendingJobs(f func(job uuid.UUID, pending int) bool) {
	s.pending.Range(func(job uuid.UUID, set *pmap.Map[struct{}]) bool { return f(job, set.Len()) })
}

// Change is one object's new value at a revision, or its deletion. Exactly
// one of Task, Job, Machine, Offer, Quota, Lease is set (on a deletion, the last
// value).
type Change struct {
	Kind omegav1.ObjectKind
	// PrevState is, for a task's change, the task's state before the
	// transaction (UNSPECIFIED if the transaction created it): a watcher
	// that counts transitions needs no copy of every task (omegav1.Change.
	// prev_state).
	PrevState omegav1.TaskState
	Task      *Task
	Job       *Job
	Machine   *Machine
	Offer     *Offer
	Quota     *Quota
	Lease     *Lease
	Deleted   bool
	// Created: the object is new at this revision (its meta and spec must be
	// stored). Derived: only fields the store derives changed (a machine's
	// allocation, task count and sequence number), so nothing is stored.
	Created bool
	Derived bool
	// Partial: a watched change that carried the object's uid, version and
	// status only (omegav1.Change.partial); WriteSet.Complete fills the
	// rest from the previous version before it is applied.
	Partial bool
	// PrevMachine is, for a task's change, the machine it was placed on
	// before the transaction (zero if it was not placed): a machine's
	// watch keeps the change of a task that left the machine (evicted,
	// moved, ended, deleted). The store's own, not on the wire.
	PrevMachine uuid.UUID

	baseVersion uint64 // during evaluation: the version before the transaction
}

// UID returns the changed object's uid.
func (c *Change) UID() uuid.UUID {
	switch {
	case c.Task != nil:
		return c.Task.UID
	case c.Job != nil:
		return c.Job.UID
	case c.Machine != nil:
		return c.Machine.UID
	case c.Offer != nil:
		return c.Offer.UID
	case c.Quota != nil:
		return c.Quota.UID
	case c.Lease != nil:
		return c.Lease.UID
	}
	return uuid.Nil
}

// WriteSet is what one committed transaction changed: every touched object
// once, with its final value, in the order the transaction first touched it.
type WriteSet struct {
	Revision  uint64
	UnixNanos int64
	Changes   []Change
}

// Apply returns the state after ws; s is unchanged. Write sets must be
// applied in revision order, so ws.Revision must be greater than s's.
func (s *State) Apply(ws *WriteSet) *State {
	if ws.Revision <= s.rev {
		panic(fmt.Sprintf("txn: apply revision %d to state at %d", ws.Revision, s.rev))
	}
	b := s.Builder()
	for i := range ws.Changes {
		b.Apply(&ws.Changes[i])
	}
	return b.Finish(ws.Revision)
}

// Builder edits a state in place (transient maps, one owner goroutine) and
// freezes it with Finish. Used to apply write sets and to rebuild a state
// from storage.
type Builder struct {
	base     *State
	machines *pmap.Builder[*Machine]
	tasks    *vmap.Builder[Task]
	jobs     *pmap.Builder[*Job]
	pending  *pmap.Builder[*pmap.Map[struct{}]]
	offers   *pmap.Builder[*Offer]
	ix       offerIndex
	quotas   *pmap.Builder[*Quota]
	qx       quotaIndex
	leases   *pmap.Builder[*Lease]
	// jobSets holds the pending sets this builder edits, as transients, so
	// adding a job's 10,000 tasks copies each path once, not per task.
	jobSets     map[uuid.UUID]*pmap.Builder[struct{}]
	capacity    total
	alloc       total
	deleted     bool // something was deleted
	machineSets bool // a machine was added or removed
}

// Builder starts editing a copy of s; s itself never changes.
func (s *State) Builder() *Builder {
	return &Builder{
		base:     s,
		machines: s.machines.Transient(),
		tasks:    s.tasks.Edit(),
		jobs:     s.jobs.Transient(),
		pending:  s.pending.Transient(),
		offers:   s.offers.Transient(),
		ix:       newOfferIndex(s),
		quotas:   s.quotas.Transient(),
		qx:       quotaIndex{base: s},
		leases:   s.leases.Transient(),
		capacity: s.capacity,
		alloc:    s.alloc,
	}
}

// Apply sets or deletes one object, keeping the indexes and totals.
func (b *Builder) Apply(c *Change) {
	switch {
	case c.Task != nil:
		t := c.Task
		var old *Task
		var had bool
		if c.Deleted {
			if old, had = b.tasks.Remove(t.UID); had {
				b.deleted = true
			}
		} else {
			old, had = b.tasks.Swap(t.UID, t)
		}
		if had || !c.Deleted {
			var now *Task
			if !c.Deleted {
				now = t
			}
			b.qx.task(old, now)
		}
		wasPending := had && old.State == omegav1.TaskState_TASK_STATE_PENDING
		isPending := !c.Deleted && t.State == omegav1.TaskState_TASK_STATE_PENDING
		switch {
		case wasPending && !isPending:
			b.jobSet(old.Job).Delete(old.UID)
		case isPending && !wasPending:
			b.jobSet(t.Job).Set(t.UID, struct{}{})
		case wasPending && isPending && old.Job != t.Job:
			// Never from Evaluate (a task keeps its owner); a change from
			// elsewhere (a restore, a remote revision) keeps the index true.
			b.jobSet(old.Job).Delete(old.UID)
			b.jobSet(t.Job).Set(t.UID, struct{}{})
		}
	case c.Job != nil:
		if c.Deleted {
			b.deleted = b.jobs.Delete(c.Job.UID) || b.deleted
			return
		}
		b.jobs.Set(c.Job.UID, c.Job)
	case c.Lease != nil:
		if c.Deleted {
			b.deleted = b.leases.Delete(c.Lease.UID) || b.deleted
		} else {
			b.leases.Set(c.Lease.UID, c.Lease)
		}
	case c.Quota != nil:
		if c.Deleted {
			b.deleted = b.quotas.Delete(c.Quota.UID) || b.deleted
		} else {
			b.quotas.Set(c.Quota.UID, c.Quota)
		}
		b.qx.quota(c.Quota)
	case c.Offer != nil:
		if c.Deleted {
			if _, had := b.offers.Get(c.Offer.UID); had {
				b.offers.Delete(c.Offer.UID)
				b.deleted = true
				b.ix.release(c.Offer)
			}
			return
		}
		if _, had := b.offers.Get(c.Offer.UID); !had {
			b.ix.lock(c.Offer)
		}
		b.offers.Set(c.Offer.UID, c.Offer)
	case c.Machine != nil:
		m := c.Machine
		b.ix.touch(m.UID)
		if c.Deleted {
			if old, ok := b.machines.Get(m.UID); ok {
				b.capacity = b.capacity.sub(old.Capacity)
				b.alloc = b.alloc.sub(old.Allocated)
				b.machines.Delete(m.UID)
				b.deleted, b.machineSets = true, true
			}
			return
		}
		if old, had := b.machines.Swap(m.UID, m); had {
			b.capacity = b.capacity.replace(old.Capacity, m.Capacity)
			b.alloc = b.alloc.replace(old.Allocated, m.Allocated)
		} else {
			b.machineSets = true
			b.capacity = b.capacity.add(m.Capacity)
			b.alloc = b.alloc.add(m.Allocated)
		}
	}
}

func (b *Builder) jobSet(job uuid.UUID) *pmap.Builder[struct{}] {
	if set, ok := b.jobSets[job]; ok {
		return set
	}
	set, ok := b.pending.Get(job)
	if !ok {
		set = pmap.New[struct{}]()
	}
	if b.jobSets == nil {
		b.jobSets = map[uuid.UUID]*pmap.Builder[struct{}]{}
	}
	tr := set.Transient()
	b.jobSets[job] = tr
	return tr
}

// Finish freezes the builder into the state at rev; the builder must not be
// used afterwards.
func (b *Builder) Finish(rev uint64) *State {
	for job, tr := range b.jobSets { // order-independent: keyed maps
		if tr.Len() == 0 {
			b.pending.Delete(job)
		} else {
			b.pending.Set(job, tr.Persistent())
		}
	}
	lastDelete, machineSet := b.base.lastDelete, b.base.machineSet
	if b.deleted {
		lastDelete = rev
	}
	if b.machineSets {
		machineSet = rev
	}
	st := &State{
		lastDelete: lastDelete,
		machineSet: machineSet,
		rev:        rev,
		machines:   b.machines.Persistent(),
		tasks:      b.tasks.Finish(rev),
		jobs:       b.jobs.Persistent(),
		pending:    b.pending.Persistent(),
		offers:     b.offers.Persistent(),
		quotas:     b.quotas.Persistent(),
		leases:     b.leases.Persistent(),
		capacity:   b.capacity,
		alloc:      b.alloc,
	}
	b.ix.finish(st)
	b.qx.finish(st)
	return st
}

// CheckInvariants verifies what no sequence of transactions may break: every
// machine's allocation equals the sum of what its non-terminal placed tasks
// claimed, its task count matches, and it is within capacity in every
// dimension; every placed task's machine exists; the totals match. It scans
// the whole state: for tests and for the store's optional checking mode.
func CheckInvariants(s *State) error {
	type acc struct {
		alloc total // 128 bits: claims that wrap int64 must not sum to a fit
		n     int32
	}
	sums := map[uuid.UUID]*acc{}
	var err error
	s.RangeTasks(func(t *Task) bool {
		if !t.Placed() {
			if t.State == omegav1.TaskState_TASK_STATE_PENDING && t.Machine != uuid.Nil {
				err = fmt.Errorf("pending task %s has machine %s", t.UID, t.Machine)
				return false
			}
			return true
		}
		if _, ok := s.Machine(t.Machine); !ok {
			err = fmt.Errorf("task %s placed on unknown machine %s", t.UID, t.Machine)
			return false
		}
		a := sums[t.Machine]
		if a == nil {
			a = &acc{}
			sums[t.Machine] = a
		}
		a.alloc = a.alloc.add(t.Claimed)
		a.n++
		return true
	})
	if err != nil {
		return err
	}
	var capacity, alloc total
	s.RangeMachines(func(m *Machine) bool {
		capacity = capacity.add(m.Capacity)
		alloc = alloc.add(m.Allocated)
		want := acc{}
		if a := sums[m.UID]; a != nil {
			want = *a
		}
		if !want.alloc.equalResources(m.Allocated) || m.Tasks != want.n {
			err = fmt.Errorf("machine %s: allocated %v over %d tasks, but its tasks claim %v over %d", m.UID, m.Allocated, m.Tasks, want.alloc.resources(), want.n)
			return false
		}
		if !m.Allocated.LessEq(m.Capacity) {
			err = fmt.Errorf("machine %s over capacity: allocated %v, capacity %v", m.UID, m.Allocated, m.Capacity)
			return false
		}
		if offered := s.Offered(m); !m.Allocated.Add(offered).LessEq(m.Capacity) {
			err = fmt.Errorf("machine %s over capacity with its offers: allocated %v and offered %v, capacity %v", m.UID, m.Allocated, offered, m.Capacity)
			return false
		}
		if err = s.checkOfferIndex(m); err != nil {
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if err := s.checkOffers(); err != nil {
		return err
	}
	if err := s.checkQuotaUse(); err != nil {
		return err
	}
	if err := s.checkLeases(); err != nil {
		return err
	}
	if !capacity.equal(s.capacity) || !alloc.equal(s.alloc) {
		return fmt.Errorf("totals: capacity %v allocated %v, state says %v and %v", capacity.resources(), alloc.resources(), s.Capacity(), s.Allocated())
	}
	return nil
}
