package txn_test

import (
	"errors"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestGoneAfterView: an object deleted after the view's revision is the
// state moving under the view — a NOT_FOUND conflict that leaves the rest
// of an incremental transaction standing (an agent's batch of reports must
// survive one task that retention already removed). With a view that saw
// every deletion, the same name is bad input.
func TestGoneAfterView(t *testing.T) {
	c := std(t)
	view := c.s.Revision() // sees t1..t5
	c.commit(c.tx(txn.Delete(kindTask, t1, 0)))

	stale := &txn.Txn{ViewRevision: view, Component: "agent", UnixNanos: 9_000, Ops: []txn.Op{
		txn.SetStatus(t1, omegav1.TaskState_TASK_STATE_KILLED, 0, "stale report"),
		txn.Claim(t2, m1, res(1, 1), c.ver(t2)),
	}}
	r := c.commit(stale)
	wantCodes(t, r, omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND, omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED)
	if c.task(t2).State != omegav1.TaskState_TASK_STATE_ASSIGNED {
		t.Fatalf("the rest of the transaction did not commit")
	}

	// A view that includes the deletion: the name is wrong, not stale.
	if _, _, err := c.eval(c.tx(txn.SetStatus(t1, omegav1.TaskState_TASK_STATE_KILLED, 0, ""))); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("fresh view naming a deleted task: err %v, want ErrNotFound", err)
	}
	// A machine deleted after the view: the claim conflicts, like a machine
	// that went down.
	view = c.s.Revision()
	c.commit(c.tx(txn.Delete(kindMachine, m2, 0)))
	r = c.commit(&txn.Txn{ViewRevision: view, Component: "s", UnixNanos: 10_000, Ops: []txn.Op{txn.Claim(t3, m2, res(1, 1), c.ver(t3))}})
	wantCodes(t, r, omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND)
	if r.ClaimsConflicted != 1 {
		t.Fatalf("claims conflicted %d, want 1", r.ClaimsConflicted)
	}
}

// TestClaimOfATaskGoneAfterView replays the case TestEvaluateMatchesModel's
// rapid run found on 2026-11-30 (its fail file, now removed): a claim, made
// on a view from before the task's deletion, of the deleted task with its old
// version and nothing claimed. It is a NOT_FOUND conflict (the state moved
// under the view), not an error and not a commit, and it changes nothing.
func TestClaimOfATaskGoneAfterView(t *testing.T) {
	c := std(t)
	view := c.s.Revision()
	old := c.ver(t1)
	c.commit(c.tx(txn.Delete(kindTask, t1, 0)))
	before := c.s

	r, ws, err := c.eval(&txn.Txn{ViewRevision: view, Component: "s", UnixNanos: 9_000,
		Ops: []txn.Op{txn.Claim(t1, m1, res(0, 0), old)}})
	if err != nil {
		t.Fatalf("claim of a task deleted after the view: err %v, want a NOT_FOUND conflict", err)
	}
	wantCodes(t, r, omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND)
	if r.Committed != 0 || r.Revision != 0 || ws != nil {
		t.Fatalf("committed %d at revision %d (write set %v), want nothing", r.Committed, r.Revision, ws)
	}
	if r.ClaimsConflicted != 1 {
		t.Fatalf("claims conflicted %d, want 1", r.ClaimsConflicted)
	}
	if m := c.machine(m1); !m.Allocated.Equal(txn.Resources{}) || c.s != before {
		t.Fatalf("the conflict changed the state: machine allocated %v", m.Allocated)
	}
}
