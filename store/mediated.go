package store

import (
	"fmt"
	"slices"
	"strings"

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
//
//   - a task may be reported SUCCEEDED, FAILED or LOST only while it is
//     placed (ASSIGNED or RUNNING): a report of what did not happen, a
//     PENDING task SUCCEEDED, is rejected (REJECT_REASON_ILLEGAL_TRANSITION).
//     (The transitions every policy refuses — from a terminal state, to
//     RUNNING unplaced — stay errors of the transaction.)
//
//   - ownership: a component is who its transactions say (in a served cell
//     its token binds the name, server/access.go). A scheduler may claim
//     only tasks of jobs routed to it: the job's scheduler field names the
//     component, or its kind when the component is an instance of it
//     ("batch" or "batch-<anything>" for a job of "batch"). An agent
//     ("agent/<machine>") may report only on tasks placed on its own
//     machine, and claims nothing; an operator ("admin", "submitter", or
//     either followed by "/<name>") may claim anything (the pre-fill, a
//     placement by hand). Refused: REJECT_REASON_NOT_OWNER.
//
//   - quota: a claim that would take its scheduler past a quota covering
//     it (txn.Quota: the quota's scheduler, or an instance of that kind)
//     in a capped dimension is refused (REJECT_REASON_QUOTA). What the
//     scheduler holds is the state's count of its placed tasks' claims,
//     plus the transaction's own earlier claims.
func Mediated() Policy { return MediatedFor(Identities{}) }

// Identities says, for the mediated policy, which components speak for
// more than their name.
type Identities struct {
	// Fleets report for every machine: the simulated fleet, which commits
	// the reports of all its machines in one transaction (one component
	// for ten thousand agents, declared here rather than split into a
	// transaction per machine). They claim nothing.
	Fleets []string
}

// MediatedFor is Mediated with the components ids declares.
func MediatedFor(ids Identities) Policy {
	return mediatedPolicy{fleets: slices.Clone(ids.Fleets)}
}

// WithFleets returns p with fleets declared (Identities.Fleets) if p is
// the mediated policy, and p itself otherwise.
func WithFleets(p Policy, fleets ...string) Policy {
	if m, ok := p.(mediatedPolicy); ok {
		return mediatedPolicy{fleets: append(slices.Clone(m.fleets), fleets...)}
	}
	return p
}

// ParsePolicy reads raw or mediated.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "raw":
		return Raw(), nil
	case "mediated":
		return Mediated(), nil
	}
	return nil, fmt.Errorf("policy %s: want raw or mediated", txn.Quote(s))
}

type mediatedPolicy struct{ fleets []string }

func (mediatedPolicy) Name() string                     { return "mediated" }
func (mediatedPolicy) Admit(*txn.State, *txn.Txn) error { return nil }
func (p mediatedPolicy) Rules() txn.Rules               { return mediatedRules{p.fleets} }

type mediatedRules struct{ fleets []string }

// principal is what a component may do.
type principal int

const (
	scheduler principal = iota
	operator
	agent
	fleet
)

func (r mediatedRules) principal(component string) (principal, string) {
	if slices.Contains(r.fleets, component) {
		return fleet, ""
	}
	if m, ok := strings.CutPrefix(component, "agent/"); ok {
		return agent, m
	}
	for _, op := range []string{"admin", "submitter"} {
		if component == op || strings.HasPrefix(component, op+"/") {
			return operator, ""
		}
	}
	return scheduler, ""
}

func notOwner(format string, args ...any) *txn.Rejection {
	return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_NOT_OWNER, Detail: fmt.Sprintf(format, args...)}
}

func (r mediatedRules) Check(o txn.Overlay, _ int, op *txn.Op) *txn.Rejection {
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
		comp := o.Txn().Component
		switch who, _ := r.principal(comp); who {
		case agent, fleet:
			return notOwner("%s is an agent: it places no task (task %s)", txn.Quote(comp), t.UID)
		case scheduler:
			j, _, ok := o.Job(t.Job)
			if !ok {
				return nil // a task without its job: the evaluation's to refuse
			}
			if s := j.Scheduler(); comp != s && !strings.HasPrefix(comp, s+"-") {
				return notOwner("task %s belongs to job %s, routed to scheduler %s: %s does not own it", t.UID, txn.Quote(j.Name()), txn.Quote(s), txn.Quote(comp))
			}
		}
		var over *txn.Rejection
		o.QuotasOf(comp, func(q *txn.Quota, used txn.Resources) bool {
			if past, dim := q.Exceeds(used, op.Resources); past {
				over = &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_QUOTA,
					Detail: fmt.Sprintf("the claim of task %s would take %s past quota %s of %s: %s", t.UID, txn.Quote(comp), txn.Quote(q.Name()), txn.Quote(q.Scheduler()), dim)}
				return false
			}
			return true
		})
		if over != nil {
			return over
		}
	case txn.OpSetStatus:
		t, _, ok := o.Task(op.Task)
		if !ok {
			return nil
		}
		if who, machine := r.principal(o.Txn().Component); who == agent {
			m, ok := o.Machine(t.Machine)
			if !t.Placed() || !ok || m.Meta.GetName() != machine {
				return notOwner("%s reports on task %s, which is not placed on its machine", txn.Quote(o.Txn().Component), t.UID)
			}
		}
		switch op.State {
		case omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_LOST:
			if !t.Placed() && !t.Terminal() {
				return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_ILLEGAL_TRANSITION,
					Detail: fmt.Sprintf("task %s is %s, never placed: it cannot have become %s", t.UID, t.State, op.State)}
			}
		}
	}
	return nil
}
