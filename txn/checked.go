package txn

import (
	"fmt"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// ApplyChecked is Apply for a write set that did not come from this
// process's own evaluation — a revision received from a remote store —
// checked, in time proportional to the write set, to keep every invariant
// CheckInvariants holds the state to: each machine's allocation and task
// count move by exactly what the write set's tasks claim and release on it
// (so a machine's change must come with its tasks' and the other way
// round), no machine is over capacity or below zero, a placed task's
// machine exists, a PENDING task names no machine, and a machine leaves
// only empty; an offer is only made (under a uid not outstanding) or
// answered (with the locks it holds). A write set that breaks one is an
// ErrInvalid error naming the object, and nothing is applied. If s
// satisfies the invariants, so does the result.
func (s *State) ApplyChecked(ws *WriteSet) (*State, error) {
	if ws.Revision <= s.rev {
		return nil, fmt.Errorf("%w: revision %d applied to a state at %d", ErrInvalid, ws.Revision, s.rev)
	}
	type move struct {
		alloc total
		tasks int64
	}
	moves := map[uuid.UUID]*move{}
	at := func(m uuid.UUID) *move {
		if mv := moves[m]; mv != nil {
			return mv
		}
		mv := &move{}
		moves[m] = mv
		return mv
	}
	seen := make(map[objKey]bool, len(ws.Changes))
	var placedOn []*Task // tasks placed by the write set, whose machines must exist after it
	for i := range ws.Changes {
		c := &ws.Changes[i]
		var key objKey
		switch {
		case c.Task != nil:
			key = objKey{omegav1.ObjectKind_OBJECT_KIND_TASK, c.Task.UID}
		case c.Job != nil:
			key = objKey{omegav1.ObjectKind_OBJECT_KIND_JOB, c.Job.UID}
		case c.Machine != nil:
			key = objKey{omegav1.ObjectKind_OBJECT_KIND_MACHINE, c.Machine.UID}
		case c.Offer != nil:
			key = objKey{omegav1.ObjectKind_OBJECT_KIND_OFFER, c.Offer.UID}
		case c.Quota != nil:
			key = objKey{omegav1.ObjectKind_OBJECT_KIND_QUOTA, c.Quota.UID}
		case c.Lease != nil:
			key = objKey{omegav1.ObjectKind_OBJECT_KIND_LEASE, c.Lease.UID}
		default:
			return nil, fmt.Errorf("%w: revision %d, change %d has no object", ErrInvalid, ws.Revision, i)
		}
		if seen[key] {
			return nil, fmt.Errorf("%w: revision %d changes %s %s twice", ErrInvalid, ws.Revision, key.kind, key.uid)
		}
		seen[key] = true
		if c.Offer != nil {
			if err := s.checkOfferChange(ws.Revision, c); err != nil {
				return nil, err
			}
		}
		t := c.Task
		if t == nil {
			continue
		}
		if old, ok := s.tasks.Get(t.UID); ok && old.Placed() {
			mv := at(old.Machine)
			mv.alloc = mv.alloc.sub(old.Claimed)
			mv.tasks--
		}
		if c.Deleted {
			continue
		}
		if t.State == omegav1.TaskState_TASK_STATE_PENDING && t.Machine != uuid.Nil {
			return nil, fmt.Errorf("%w: revision %d: task %s is PENDING on machine %s", ErrInvalid, ws.Revision, t.UID, t.Machine)
		}
		if t.Placed() {
			mv := at(t.Machine)
			mv.alloc = mv.alloc.add(t.Claimed)
			mv.tasks++
			placedOn = append(placedOn, t)
		}
	}
	// Every machine whose tasks moved must change by exactly that much, and
	// every machine that changed must be explained by its tasks.
	for i := range ws.Changes {
		m := ws.Changes[i].Machine
		if m == nil {
			continue
		}
		var was total
		var wasTasks int64
		if old, ok := s.machines.Get(m.UID); ok {
			was, wasTasks = total{}.add(old.Allocated), int64(old.Tasks)
		}
		mv := moves[m.UID]
		if mv == nil {
			mv = &move{}
		}
		delete(moves, m.UID)
		now, nowTasks := was.plus(mv.alloc), wasTasks+mv.tasks
		if ws.Changes[i].Deleted {
			if !now.equal(total{}) || nowTasks != 0 {
				return nil, fmt.Errorf("%w: revision %d deletes machine %s with tasks placed on it", ErrInvalid, ws.Revision, m.UID)
			}
			continue
		}
		if !now.equalResources(m.Allocated) || nowTasks != int64(m.Tasks) {
			return nil, fmt.Errorf("%w: revision %d: machine %s allocated %v over %d tasks, but its tasks moved it to %v over %d",
				ErrInvalid, ws.Revision, m.UID, m.Allocated, m.Tasks, now.resources(), nowTasks)
		}
		if err := m.Allocated.Validate(); err != nil || m.Tasks < 0 || !m.Allocated.LessEq(m.Capacity) {
			return nil, fmt.Errorf("%w: revision %d: machine %s allocated %v over %d tasks, capacity %v", ErrInvalid, ws.Revision, m.UID, m.Allocated, m.Tasks, m.Capacity)
		}
	}
	for m, mv := range moves {
		if !mv.alloc.equal(total{}) || mv.tasks != 0 {
			return nil, fmt.Errorf("%w: revision %d moves tasks on machine %s without changing it", ErrInvalid, ws.Revision, m)
		}
	}
	next := s.Apply(ws)
	for _, t := range placedOn {
		if _, ok := next.machines.Get(t.Machine); !ok {
			return nil, fmt.Errorf("%w: revision %d places task %s on machine %s, which does not exist", ErrInvalid, ws.Revision, t.UID, t.Machine)
		}
	}
	if next.offers.Len() > 0 {
		// What the offers lock is free: every machine the write set changed
		// or a new offer locks holds its allocation and its offers.
		check := func(uid uuid.UUID) error {
			m, ok := next.machines.Get(uid)
			if !ok {
				return nil // gone: its locks lock nothing
			}
			if offered := next.Offered(m); !m.Allocated.Add(offered).LessEq(m.Capacity) {
				return fmt.Errorf("%w: revision %d: machine %s allocated %v and offered %v, capacity %v", ErrInvalid, ws.Revision, uid, m.Allocated, offered, m.Capacity)
			}
			return nil
		}
		for i := range ws.Changes {
			c := &ws.Changes[i]
			var err error
			switch {
			case c.Deleted:
			case c.Machine != nil:
				err = check(c.Machine.UID)
			case c.Offer != nil && c.Created:
				c.Offer.RangeLocks(func(m uuid.UUID, _ Resources) bool { err = check(m); return err == nil })
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return next, nil
}

// checkOfferChange holds a change of an offer to what an evaluation makes:
// an offer made under a uid that is not outstanding, or an answer carrying
// the locks the outstanding offer holds (Apply releases the change's, so
// other locks would leave the index apart from the offers). An offer is
// never changed in place.
func (s *State) checkOfferChange(rev uint64, c *Change) error {
	o := c.Offer
	stored, ok := s.offers.Get(o.UID)
	switch {
	case c.Deleted:
		if ok && !stored.sameLocks(o) {
			return fmt.Errorf("%w: revision %d answers offer %s with locks other than those it holds", ErrInvalid, rev, o.UID)
		}
	case !c.Created:
		return fmt.Errorf("%w: revision %d changes offer %s in place: an offer is only made or answered", ErrInvalid, rev, o.UID)
	case ok:
		return fmt.Errorf("%w: revision %d makes offer %s, which is outstanding", ErrInvalid, rev, o.UID)
	}
	return nil
}
