package store

import (
	"context"
	"fmt"
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
// A terminal task of a job whose status a job controller writes waits,
// beyond the window, until that status was written from a view that held
// the task's end (counted): a controller that starts again counts what
// ended after its last write from the cell. With Options.JobsManaged, a
// job whose status was never written waits the same way.
//
// An entry names its object's version: if the object changed since (a job
// put again, a task deleted and created anew under the same uid), the entry
// does nothing, and the change that made the new version terminal has an
// entry of its own. A reopened store has no entry stamped: it sees every
// terminal object at its first Expire and expires it one window later.
//
// The store's clock only moves forward, by the time that passed between two
// Expires (time.Time.Sub: by the monotonic clock when both times carry a
// reading of it, as time.Now()'s do, so a live server's retention does not
// see the wall clock stepped at all). Between times without one (the
// simulation's virtual times, a caller's own), a step back stops the clock
// until time moves on again, and it then runs on from where it was, so no
// step back holds retention up for the size of the step; a step forward
// ages everything by the step, as a store that slept would. A time that
// int64 nanoseconds cannot hold (before 1678, after 2262; the zero
// time.Time) is refused.

// expiryQueue lists terminal tasks and finished jobs in the order the store
// saw them: items[head:stamped] carry the time of the Expire that first saw
// them, in non-decreasing order; items[stamped:] were noted since.
type expiryQueue struct {
	items   []expiring
	keys    []uuid.UUID // warmDue's, reused
	warmed  uint64      // what warmDue's walks returned: kept so they are computed
	head    int
	stamped int
	clock   int64     // the store's clock: Unix nanoseconds, monotone
	prev    time.Time // the time the last Expire was given
	started bool      // an Expire has run
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
func (q *expiryQueue) tick(now time.Time) int64 {
	switch {
	case !q.started:
		q.clock, q.started = now.UnixNano(), true
	default:
		if d := now.Sub(q.prev); d > 0 {
			if room := math.MaxInt64 - q.clock; int64(d) > room && q.clock >= 0 {
				q.clock = math.MaxInt64
			} else {
				q.clock += int64(d)
			}
		}
	}
	q.prev = now
	return q.clock
}

// stamp advances the store's clock to now (tick) and gives every entry
// noted since the last Expire that time, which it returns.
func (q *expiryQueue) stamp(now time.Time) int64 {
	at := q.tick(now)
	for i := q.stamped; i < len(q.items); i++ {
		q.items[i].at = at
	}
	q.stamped = len(q.items)
	return at
}

// due appends to ops (emptied first: the caller's buffer, reused from one
// expiry transaction to the next) the deletions of up to max stamped
// entries seen at or before cutoff that still match their object, and
// returns the position in the queue after the entries it looked at. It
// pops nothing: popTo does, once the deletions are committed, so a commit
// that fails loses no entry.
func (q *expiryQueue) due(s *txn.State, cutoff int64, max int, managed bool, ops []txn.Op) (_ []txn.Op, later []expiring, next int) {
	ops = ops[:0]
	q.warmDue(s, cutoff, max)
	next = q.head
	for next < q.stamped && len(ops) < max {
		e := &q.items[next]
		if e.at > cutoff {
			break
		}
		next++
		switch e.kind {
		case omegav1.ObjectKind_OBJECT_KIND_TASK:
			t, ok := s.Task(e.uid)
			if !ok || !t.Terminal() || t.Version != e.version {
				break
			}
			if !counted(s, t, managed) {
				later = append(later, *e) // seen again at the next Expire, one window on
				break
			}
			ops = append(ops, txn.Delete(e.kind, e.uid, t.Version))
		case omegav1.ObjectKind_OBJECT_KIND_JOB:
			if j, ok := s.Job(e.uid); ok && j.Finished() && j.Version == e.version {
				ops = append(ops, txn.Delete(e.kind, e.uid, j.Version))
			}
		}
	}
	return ops, later, next
}

// warmDue brings the tasks of the entries due into the cache side by
// side, before due looks them up one by one: up to max of them, about as
// many as due looks at (due counts the deletions it makes, and passes over
// stale entries, so it may look at a few more or stop sooner).
func (q *expiryQueue) warmDue(s *txn.State, cutoff int64, max int) {
	keys := q.keys[:0]
	for i := q.head; i < q.stamped && len(keys) < max && q.items[i].at <= cutoff; i++ {
		if q.items[i].kind == omegav1.ObjectKind_OBJECT_KIND_TASK {
			keys = append(keys, q.items[i].uid)
		}
	}
	q.warmed += s.WarmTasks(keys)
	q.keys = keys
}

// counted reports whether a terminal task may leave the cell as far as its
// job's status goes: its job is gone or finished, no job controller writes
// the job's status (its observed revision is 0, and the cell's jobs are not
// managed: Options.JobsManaged), or the status was written from a view
// that already held the task's end. Otherwise the task waits:
// a job controller that starts again counts the tasks that ended after its
// last write from the cell, and must find them there (DESIGN.md "Jobs
// finish").
func counted(s *txn.State, t *txn.Task, managed bool) bool {
	if t.Job == uuid.Nil {
		return true
	}
	j, ok := s.Job(t.Job)
	if !ok || j.Finished() {
		return true
	}
	obs := j.StatusProto().GetObservedRevision()
	if obs == 0 {
		return !managed // never written: no controller, or one yet to count it
	}
	return obs >= t.Version
}

// popTo drops the entries before next (a position due returned). Once
// the dropped part is the larger half, the rest moves down in place: the
// queue's array is allocated as it grows, never as it turns over.
func (q *expiryQueue) popTo(next int) {
	q.head = next
	if q.head > 4096 && q.head*2 > len(q.items) {
		q.items = q.items[:copy(q.items, q.items[q.head:])] // no pointers to clear
		q.stamped -= q.head
		q.head = 0
	}
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
	return s.expire(ctx, now)
}

// Stamp notes, at now, what became terminal since the last Expire or
// Stamp, and deletes nothing: a replicated cell's follower, whose leader
// expires, keeps its retention clock so that, leading one day, it deletes
// on the same window instead of starting it again.
func (s *Store) Stamp(now time.Time) {
	s.expireMu.Lock()
	defer s.expireMu.Unlock()
	s.mu.Lock()
	s.expiry.stamp(now)
	s.mu.Unlock()
}

func (s *Store) expire(ctx context.Context, now time.Time) (int, error) {
	if !time.Unix(0, now.UnixNano()).Equal(now) {
		return 0, fmt.Errorf("%w: expire at %v: outside the times int64 nanoseconds hold (1678 to 2262)", txn.ErrInvalid, now)
	}
	s.expireMu.Lock() // one Expire at a time: due and popTo pair up
	defer s.expireMu.Unlock()
	// Transactions within the limits: at most 1,000 deletions (each holds
	// the commit lock while it is evaluated, so a large expiry must not
	// stall the committers behind it), MaxOps, and MaxTxnBytes at the most
	// a deletion takes on the wire.
	perTxn := 1_000
	if m := s.opts.Limits.MaxOps; m > 0 && m < perTxn {
		perTxn = m
	}
	if m := s.opts.Limits.MaxTxnBytes; m > 0 {
		perTxn = max(1, min(perTxn, (m-retentionHeaderBytes)/maxDeleteBytes))
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return 0, err
	}
	at := s.expiry.stamp(now)
	s.mu.Unlock()
	cutoff := at - int64(s.opts.Retention)
	if cutoff > at { // the window reaches back before the start of int64 time
		return 0, nil
	}
	deleted := 0
	for {
		next := -1
		var later []expiring
		res, err := s.commit(ctx, func(head *txn.State) *txn.Txn {
			var ops []txn.Op
			ops, later, next = s.expiry.due(head, cutoff, perTxn, s.opts.JobsManaged, s.expireOps)
			s.expireOps = ops
			if len(ops) == 0 {
				return nil
			}
			return &txn.Txn{ViewRevision: head.Revision(), Component: RetentionComponent, UnixNanos: at, Ops: ops}
		})
		if err != nil {
			return deleted, fmt.Errorf("expire: %w", err) // the entries stay queued
		}
		s.mu.Lock()
		advanced := next > s.expiry.head
		if advanced {
			s.expiry.popTo(next)
			for _, e := range later { // waiting for their job's status: noted again
				s.expiry.push(e.kind, e.uid, e.version)
			}
		}
		s.mu.Unlock()
		deleted += res.Committed
		if !advanced {
			return deleted, nil
		}
	}
}

// The wire size of a retention transaction's header (its component and
// clock) and, at the most, of one of its deletions.
const (
	retentionHeaderBytes = 64
	maxDeleteBytes       = 64
)
