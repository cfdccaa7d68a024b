package txn

import (
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Rules is what a store's policy checks beyond the transaction semantics,
// operation by operation, inside the evaluation: each operation is shown to
// the rules, with the state as the transaction has changed it so far
// (after an earlier eviction in it, say), before it is evaluated. The rules
// may rewrite the operation — fill defaults, derive a claim's resources
// from its task's spec — and may refuse it with a typed reason; a refused
// operation changes nothing and is an OUTCOME_CODE_REJECTED outcome (in
// all-or-nothing mode it aborts the transaction, like a conflict).
//
// The raw policy (Omega's) has no rules: a nil Rules costs nothing.
// Rules are called under the store's commit lock, from one goroutine at a
// time; they must be pure (no clock, no I/O) and fast.
type Rules interface {
	// Check is called for operation index of the transaction. op is a copy
	// the rules may change; the original is not touched. A non-nil
	// rejection refuses the operation.
	Check(o Overlay, index int, op *Op) *Rejection
}

// Rejection is a rule's refusal of one operation.
type Rejection struct {
	Reason omegav1.RejectReason
	Detail string // for people
}

// Overlay is the state as the transaction being evaluated sees it: the
// base state with the transaction's earlier operations applied. It is
// valid only during the Check call it is passed to.
type Overlay struct{ e *evaluator }

// Base is the state the transaction is evaluated against.
func (o Overlay) Base() *State { return o.e.base }

// Txn is the transaction being evaluated (read only).
func (o Overlay) Txn() *Txn { return o.e.tx }

// Task returns a task as the transaction sees it, with the version it had
// before the transaction (0 if the transaction created it).
func (o Overlay) Task(uid uuid.UUID) (t *Task, baseVersion uint64, ok bool) { return o.e.task(uid) }

// Machine returns a machine as the transaction sees it.
func (o Overlay) Machine(uid uuid.UUID) (*Machine, bool) {
	m, _, ok := o.e.machine(uid)
	return m, ok
}

// Job returns a job as the transaction sees it, with the version it had
// before the transaction (0 if the transaction created it).
func (o Overlay) Job(uid uuid.UUID) (j *Job, baseVersion uint64, ok bool) { return o.e.job(uid) }

// rejected is the outcome of a refused operation.
func rejected(r *Rejection) Outcome {
	return Outcome{Code: omegav1.OutcomeCode_OUTCOME_CODE_REJECTED, Detail: truncate(r.Detail, MaxDetailBytes), Reason: r.Reason}
}
