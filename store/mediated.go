package store

import (
	"fmt"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Mediated returns the policy of a store that validates what it is told,
// as Kubernetes' API server does, instead of exposing the raw state as
// Omega's does (Raw). Its rules, operation by operation (txn.Rules):
//
//   - a claim must declare at least what its task's spec requests, in every
//     resource dimension (cpu, memory and each extended one): a claim that
//     declares less is rejected, not corrected (REJECT_REASON_RESOURCES_MISMATCH),
//     so the faulty component learns of its bug at once;
//   - a task may be reported SUCCEEDED, FAILED or LOST only while it is
//     placed (ASSIGNED or RUNNING): a report of what did not happen, a
//     PENDING task SUCCEEDED, is rejected (REJECT_REASON_ILLEGAL_TRANSITION).
//     (The transitions every policy refuses — from a terminal state, to
//     RUNNING unplaced — stay errors of the transaction.)
//
// Ownership (a scheduler claims only its own jobs' tasks, an agent reports
// only on its machine) and per-scheduler quota are still to come (issue
// 10): they need the components' identities bound to their transactions.
func Mediated() Policy { return mediatedPolicy{} }

// ParsePolicy reads raw or mediated.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "raw":
		return Raw(), nil
	case "mediated":
		return Mediated(), nil
	}
	return nil, fmt.Errorf("policy %q: want raw or mediated", s)
}

type mediatedPolicy struct{}

func (mediatedPolicy) Name() string                     { return "mediated" }
func (mediatedPolicy) Admit(*txn.State, *txn.Txn) error { return nil }
func (mediatedPolicy) Rules() txn.Rules                 { return mediatedRules{} }

type mediatedRules struct{}

func (mediatedRules) Check(o txn.Overlay, _ int, op *txn.Op) *txn.Rejection {
	switch op.Kind {
	case txn.OpClaim:
		t, _, ok := o.Task(op.Task)
		if !ok {
			return nil // the evaluation says what a missing task means
		}
		if req := t.Request(); !req.LessEq(op.Resources) {
			return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_RESOURCES_MISMATCH,
				Detail: fmt.Sprintf("the claim of task %s declares %v, its spec requests %v", t.UID, op.Resources, req)}
		}
	case txn.OpSetStatus:
		switch op.State {
		case omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_LOST:
			t, _, ok := o.Task(op.Task)
			if ok && !t.Placed() && !t.Terminal() {
				return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_ILLEGAL_TRANSITION,
					Detail: fmt.Sprintf("task %s is %s, never placed: it cannot have become %s", t.UID, t.State, op.State)}
			}
		}
	}
	return nil
}
