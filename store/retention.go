package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// expiryQueue lists terminal tasks and finished jobs in the order they
// finished (committers' clocks may disagree a little; an entry out of order
// waits for the ones before it, which only delays its expiry).
type expiryQueue struct {
	items []expiring
	head  int
}

type expiring struct {
	at   int64 // finish time, Unix nanoseconds
	kind omegav1.ObjectKind
	uid  uuid.UUID
}

func (q *expiryQueue) push(e expiring) { q.items = append(q.items, e) }

// note records what ws finished.
func (q *expiryQueue) note(ws *txn.WriteSet) {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Deleted {
			continue
		}
		switch {
		case c.Task != nil && c.Task.Terminal():
			q.push(expiring{at: c.Task.Finished, kind: omegav1.ObjectKind_OBJECT_KIND_TASK, uid: c.Task.UID})
		case c.Job != nil && c.Job.Finished():
			q.push(expiring{at: c.Job.Status.GetFinishUnixNanos(), kind: omegav1.ObjectKind_OBJECT_KIND_JOB, uid: c.Job.UID})
		}
	}
}

// rebuild fills the queue from a reopened state, oldest first.
func (q *expiryQueue) rebuild(s *txn.State) {
	s.RangeTasks(func(t *txn.Task) bool {
		if t.Terminal() {
			q.push(expiring{at: t.Finished, kind: omegav1.ObjectKind_OBJECT_KIND_TASK, uid: t.UID})
		}
		return true
	})
	s.RangeJobs(func(j *txn.Job) bool {
		if j.Finished() {
			q.push(expiring{at: j.Status.GetFinishUnixNanos(), kind: omegav1.ObjectKind_OBJECT_KIND_JOB, uid: j.UID})
		}
		return true
	})
	sortExpiring(q.items)
}

// due pops the entries finished at or before cutoff that are still there
// and still finished in s.
func (q *expiryQueue) due(s *txn.State, cutoff int64, max int) []txn.Op {
	var ops []txn.Op
	for q.head < len(q.items) && len(ops) < max {
		e := q.items[q.head]
		if e.at > cutoff {
			break
		}
		if ops == nil {
			// Room for what is due: count it first (the queue is ordered).
			n := 0
			for k := q.head; k < len(q.items) && n < max && q.items[k].at <= cutoff; k++ {
				n++
			}
			ops = make([]txn.Op, 0, n)
		}
		q.items[q.head] = expiring{}
		q.head++
		switch e.kind {
		case omegav1.ObjectKind_OBJECT_KIND_TASK:
			if t, ok := s.Task(e.uid); ok && t.Terminal() {
				ops = append(ops, txn.Delete(e.kind, e.uid, t.Version))
			}
		case omegav1.ObjectKind_OBJECT_KIND_JOB:
			if j, ok := s.Job(e.uid); ok && j.Finished() {
				ops = append(ops, txn.Delete(e.kind, e.uid, j.Version))
			}
		}
	}
	if q.head > 4096 && q.head*2 > len(q.items) {
		q.items = append([]expiring(nil), q.items[q.head:]...)
		q.head = 0
	}
	return ops
}

// RetentionComponent is the component name of the store's own expiry
// transactions.
const RetentionComponent = "store/retention"

// Expire deletes the terminal tasks and finished jobs that finished more
// than Options.Retention before now, in transactions through the normal
// commit path (so they are durable and watched like any change). It returns
// how many objects it deleted. The caller owns the schedule: a server calls
// it from a ticker, the simulation at virtual times.
func (s *Store) Expire(ctx context.Context, now time.Time) (int, error) {
	// Small transactions: each holds the commit lock while it is evaluated,
	// so a large expiry must not stall the committers behind it.
	perTxn := 1_000
	if m := s.opts.Limits.MaxOps; m > 0 && m < perTxn {
		perTxn = m // due pops what it returns: a transaction over the limit would lose them
	}
	cutoff := now.Add(-s.opts.Retention).UnixNano()
	deleted := 0
	for {
		res, err := s.commit(ctx, func(head *txn.State) *txn.Txn {
			ops := s.expiry.due(head, cutoff, perTxn)
			if len(ops) == 0 {
				return nil
			}
			return &txn.Txn{ViewRevision: head.Revision(), Component: RetentionComponent, UnixNanos: now.UnixNano(), Ops: ops}
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
