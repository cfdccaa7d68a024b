package agents

import (
	"context"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// ReporterCounters are what a Reporter counts.
type ReporterCounters struct {
	// Txns counts the status transactions the store evaluated.
	Txns int64
	// ConflictedTxns counts those with at least one conflicting operation;
	// Conflicts counts the operations that did not commit. A conflicting report means its
	// task or machine moved on meanwhile: the owner drops it and follows the
	// change through the watch.
	ConflictedTxns, Conflicts int64
}

// Reporter batches an agent's status reports into one transaction: each
// operation with a role of the owner's type R that says what it stands for,
// committed incrementally with fine-grained conflicts (a report that lost
// its race is dropped, the others commit), so the owner reads each
// operation's outcome beside its role. The batch is the owner's until the
// next Reset: after a commit error nothing changed in the store and the
// owner puts back what it had taken to report. It reads no clock: the
// transaction is stamped with the time given.
type Reporter[R any] struct {
	c        *client.Client
	ops      []txn.Op
	roles    []R
	counters ReporterCounters
}

// NewReporter makes a reporter that commits through c, under c's component
// name.
func NewReporter[R any](c *client.Client) *Reporter[R] { return &Reporter[R]{c: c} }

// Reset starts a new batch.
func (r *Reporter[R]) Reset() { r.ops, r.roles = r.ops[:0], r.roles[:0] }

// Add puts a report in the batch.
func (r *Reporter[R]) Add(op txn.Op, role R) {
	r.ops = append(r.ops, op)
	r.roles = append(r.roles, role)
}

// Len is how many reports the batch holds.
func (r *Reporter[R]) Len() int { return len(r.ops) }

// Roles are the batch's roles, in the order of its operations and of a
// result's outcomes.
func (r *Reporter[R]) Roles() []R { return r.roles }

// Counters returns the counts so far.
func (r *Reporter[R]) Counters() ReporterCounters { return r.counters }

// Commit sends the batch as one transaction viewed at revision view (every
// version the reports expect was watched at or before it) and stamped at
// (Unix nanoseconds). An empty batch sends nothing and returns the zero
// Result.
func (r *Reporter[R]) Commit(ctx context.Context, view uint64, at int64) (txn.Result, error) {
	if len(r.ops) == 0 {
		return txn.Result{}, nil
	}
	res, err := r.c.Commit(ctx, &txn.Txn{
		ViewRevision: view,
		Conflict:     omegav1.ConflictMode_CONFLICT_MODE_FINE,
		Commit:       omegav1.CommitMode_COMMIT_MODE_INCREMENTAL,
		Component:    r.c.Component(),
		UnixNanos:    at,
		Ops:          r.ops,
	})
	if err != nil {
		return res, err
	}
	r.counters.Txns++
	if res.Conflicted() {
		r.counters.ConflictedTxns++
	}
	r.counters.Conflicts += int64(len(res.Outcomes) - res.Committed)
	return res, nil
}
