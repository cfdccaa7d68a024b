package store

import (
	"context"
	"math"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Retention runs on the store's clock, never on a committer's: an object
// expires Options.Retention after the first Expire that saw it terminal (a
// task) or finished (a job) at its current version. The finish time a
// committer stamps on an object is its own business; a clock a year ahead
// or behind neither delays nor hastens anyone's expiry, and entries are
// stamped in the order Expire sees them, so the queue is in time order and
// Expire stops at the first entry not yet due without passing anything due.
//
// An entry names its object's version: if the object changed since (a job
// put again, a task deleted and created anew under the same uid), the entry
// does nothing, and the change that made the new version terminal has an
// entry of its own. A reopened store has no entry stamped: it sees every
// terminal object at its first Expire and expires it one window later.
//
// The store's clock only moves forward, by the time that passed between two
// Expires: a clock that jumps back (a wall clock set back, an NTP step)
// stops it until time moves on again, and then it runs on from where it
// was, so no jump back can hold retention up for the size of the jump; a
// jump forward ages everything by the jump, as a store that slept would.

// expiryQueue lists terminal tasks and finished jobs in the order the store
// saw them: items[head:stamped] carry the time of the Expire that first saw
// them, in non-decreasing order; items[stamped:] were noted since.
type expiryQueue struct {
	items   []expiring
	head    int
	stamped int
	clock   int64 // the store's clock: Unix nanoseconds, monotone
	prev    int64 // the time the last Expire was given
	started bool  // an Expire has run
}

type expiring struct {
	at      int64 // the store's time at the first Expire that saw it
	version uint64
	kind    omegav1.ObjectKind
	uid     uuid.UUID
}

func (q *expiryQueue) push(kind omegav1.ObjectKind, uid uuid.UUID, version uint64) {
	q.items = append(q.items, expiring{kind: kind, uid: uid, version: version})
}

// note records what ws finished.
func (q *expiryQueue) note(ws *txn.WriteSet) {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Deleted {
			continue
		}
		switch {
		case c.Task != nil && c.Task.Terminal():
			q.push(omegav1.ObjectKind_OBJECT_KIND_TASK, c.Task.UID, c.Task.Version)
		case c.Job != nil && c.Job.Finished():
			q.push(omegav1.ObjectKind_OBJECT_KIND_JOB, c.Job.UID, c.Job.Version)
		}
	}
}

// rebuild fills the queue from a reopened state (nothing stamped).
func (q *expiryQueue) rebuild(s *txn.State) {
	s.RangeTasks(func(t *txn.Task) bool {
		if t.Terminal() {
			q.push(omegav1.ObjectKind_OBJECT_KIND_TASK, t.UID, t.Version)
		}
		return true
	})
	s.RangeJobs(func(j *txn.Job) bool {
		if j.Finished() {
			q.push(omegav1.ObjectKind_OBJECT_KIND_JOB, j.UID, j.Version)
		}
		return true
	})
}

// tick advances the store's clock to an Expire given now: by the time that
// passed since the last one, if any did.
func (q *expiryQueue) tick(now int64) int64 {
	switch {
	case !q.started:
		q.clock, q.started = now, true
	case now > q.prev:
		// In uint64, exactly (two's complement): the time passed, and the
		// room left before the clock would pass math.MaxInt64.
		d := uint64(now) - uint64(q.prev)
		if room := uint64(math.MaxInt64) - uint64(q.clock); d > room {
			q.clock = math.MaxInt64
		} else {
			q.clock = int64(uint64(q.clock) + d)
		}
	}
	q.prev = now
	return q.clock
}

// stamp advances the store's clock to now (tick) and gives every entry
// noted since the last Expire that time, which it returns.
func (q *expiryQueue) stamp(now int64) int64 {
	at := q.tick(now)
	for i := q.stamped; i < len(q.items); i++ {
		q.items[i].at = at
	}
	q.stamped = len(q.items)
	return at
}

// due pops up to max stamped entries seen at or before cutoff and returns
// the deletions of those that still match their object.
func (q *expiryQueue) due(s *txn.State, cutoff int64, max int) []txn.Op {
	var ops []txn.Op
	for q.head < q.stamped && len(ops) < max {
		e := q.items[q.head]
		if e.at > cutoff {
			break
		}
		if ops == nil {
			// Room for what is due: count it first (the stamped part is in
			// time order).
			n := 0
			for k := q.head; k < q.stamped && n < max && q.items[k].at <= cutoff; k++ {
				n++
			}
			ops = make([]txn.Op, 0, n)
		}
		q.items[q.head] = expiring{}
		q.head++
		switch e.kind {
		case omegav1.ObjectKind_OBJECT_KIND_TASK:
			if t, ok := s.Task(e.uid); ok && t.Terminal() && t.Version == e.version {
				ops = append(ops, txn.Delete(e.kind, e.uid, t.Version))
			}
		case omegav1.ObjectKind_OBJECT_KIND_JOB:
			if j, ok := s.Job(e.uid); ok && j.Finished() && j.Version == e.version {
				ops = append(ops, txn.Delete(e.kind, e.uid, j.Version))
			}
		}
	}
	if q.head > 4096 && q.head*2 > len(q.items) {
		q.items = append([]expiring(nil), q.items[q.head:]...)
		q.stamped -= q.head
		q.head = 0
	}
	return ops
}

// len returns the number of entries queued (for tests).
func (q *expiryQueue) len() int { return len(q.items) - q.head }

// RetentionComponent is the component name of the store's own expiry
// transactions.
const RetentionComponent = "store/retention"

// Expire deletes the terminal tasks and finished jobs that an earlier
// Expire, at least Options.Retention before now, already saw terminal at
// their current version; it stamps what it sees for the first time with
// now. The deletions go through the normal commit path in transactions of
// at most 1,000 operations (so they are durable and watched like any change,
// and committers are not stalled behind one large expiry). It returns how
// many objects it deleted. The caller owns the schedule and the clock: a
// server calls it from a ticker with the wall clock, the simulation at
// virtual times. The store's clock advances by the time that passed between
// calls and never goes back (see the top of retention.go).
func (s *Store) Expire(ctx context.Context, now time.Time) (int, error) {
	perTxn := 1_000
	if m := s.opts.Limits.MaxOps; m > 0 && m < perTxn {
		perTxn = m // due pops what it returns: a transaction over the limit would lose them
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return 0, err
	}
	at := s.expiry.stamp(now.UnixNano())
	s.mu.Unlock()
	cutoff := at - int64(s.opts.Retention)
	if cutoff > at { // the window reaches back before the start of int64 time
		return 0, nil
	}
	deleted := 0
	for {
		res, err := s.commit(ctx, func(head *txn.State) *txn.Txn {
			ops := s.expiry.due(head, cutoff, perTxn)
			if len(ops) == 0 {
				return nil
			}
			return &txn.Txn{ViewRevision: head.Revision(), Component: RetentionComponent, UnixNanos: at, Ops: ops}
		})
		if err != nil {
			return deleted, err
		}
		if res.Committed == 0 {
			return deleted, nil
		}
		deleted += res.Committed
	}
}
