package txn_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// testRules are a mediating policy's kind of rules: machines labelled
// reserved take claims only from the "ops" component; a claim that
// declares nothing is given its task's request; RUNNING is reported only
// for a task assigned in the transaction's own view; and every decision is
// recorded with what the overlay showed.
type testRules struct {
	seen []string
}

func (r *testRules) Check(o txn.Overlay, i int, op *txn.Op) *txn.Rejection {
	switch op.Kind {
	case txn.OpClaim:
		m, ok := o.Machine(op.Machine)
		if ok && m.Meta.GetLabels()["reserved"] == "yes" && o.Txn().Component != "ops" {
			return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_NOT_OWNER, Detail: fmt.Sprintf("machine %s is reserved", m.UID)}
		}
		if ok {
			r.seen = append(r.seen, fmt.Sprintf("op %d: %s free %v", i, m.UID, m.Free()))
		}
		if op.Resources.IsZero() {
			if t, _, ok := o.Task(op.Task); ok {
				op.Resources = t.Request()
			}
		}
	case txn.OpSetStatus:
		if op.State == running {
			if t, _, ok := o.Task(op.Task); ok && t.State != assigned {
				return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_ILLEGAL_TRANSITION, Detail: "not assigned"}
			}
		}
	}
	return nil
}

func reservedMachine(id uuid.UUID, capacity txn.Resources) *omegav1.Machine {
	m := machineP(id, capacity)
	m.Meta.Labels = map[string]string{"reserved": "yes"}
	return m
}

// TestRulesRejectPerOperation: a rule's refusal is an outcome of its own
// (REJECTED, with the rule's reason), counted apart from conflicts; in
// incremental mode the rest commits, in all-or-nothing mode it aborts the
// rest; the refused operation changes nothing.
func TestRulesRejectPerOperation(t *testing.T) {
	c := newCell(t)
	c.commit(c.tx(txn.CreateMachine(reservedMachine(m1, res(4000, 4000))), txn.CreateMachine(machineP(m2, res(4000, 4000)))))
	c.commit(c.tx(txn.CreateTask(taskP(t1, res(100, 100), 0)), txn.CreateTask(taskP(t2, res(100, 100), 0))))
	rules := &testRules{}
	eval := func(tx *txn.Txn) (txn.Result, *txn.WriteSet) {
		t.Helper()
		var s txn.Scratch
		r, ws, err := s.EvaluateRules(c.s, tx, c.s.Revision()+1, c.lim, rules)
		if err != nil {
			t.Fatal(err)
		}
		return r, ws
	}
	tx := c.tx(txn.Claim(t1, m1, res(100, 100), c.ver(t1)), txn.Claim(t2, m2, res(100, 100), c.ver(t2)))
	r, ws := eval(tx)
	if r.Committed != 1 || r.Rejected != 1 || r.Conflicts != 0 || r.Conflicted() {
		t.Fatalf("incremental: %+v", r)
	}
	if o := r.Outcomes[0]; o.Code != omegav1.OutcomeCode_OUTCOME_CODE_REJECTED || o.Reason != omegav1.RejectReason_REJECT_REASON_NOT_OWNER || o.Detail == "" {
		t.Fatalf("outcome %+v", o)
	}
	next := c.s.Apply(ws)
	if tk, _ := next.Task(t1); tk.State != pending {
		t.Fatalf("the rejected claim placed its task: %s", tk.State)
	}
	if m, _ := next.Machine(m1); !m.Allocated.IsZero() {
		t.Fatalf("the rejected claim allocated %v", m.Allocated)
	}
	// All-or-nothing: the rejection aborts the other claim.
	tx = c.tx(txn.Claim(t1, m1, res(100, 100), c.ver(t1)), txn.Claim(t2, m2, res(100, 100), c.ver(t2)))
	tx.Commit = allOrNone
	if r, ws := eval(tx); ws != nil || r.Revision != 0 || r.Outcomes[1].Code != cAborted || r.Rejected != 1 {
		t.Fatalf("all-or-nothing: %+v", r)
	}
	// The component the rule allows.
	tx = c.tx(txn.Claim(t1, m1, res(100, 100), c.ver(t1)))
	tx.Component = "ops"
	if r, _ := eval(tx); r.Committed != 1 || r.Rejected != 0 {
		t.Fatalf("ops: %+v", r)
	}
}

// TestRulesRewriteAndSeeTheTransaction: the rules see the state as the
// transaction changed it so far (a claim after an eviction sees the freed
// room; RUNNING after a claim in the same transaction sees the task
// assigned) and may rewrite an operation (a claim declaring nothing gets
// its task's request) without touching the caller's transaction.
func TestRulesRewriteAndSeeTheTransaction(t *testing.T) {
	c := newCell(t)
	c.commit(c.tx(txn.CreateMachine(machineP(m2, res(1000, 1000)))))
	c.commit(c.tx(txn.CreateTask(taskP(t1, res(1000, 1000), 1)), txn.CreateTask(taskP(t2, res(600, 600), 9))))
	c.place(m2, res(1000, 1000), t1)
	rules := &testRules{}
	tx := c.tx(
		txn.Evict(t1, c.ver(t1), 9, "make room"),
		txn.Claim(t2, m2, txn.Resources{}, c.ver(t2)), // declares nothing
		txn.SetStatus(t2, running, 0, ""),             // assigned by the claim before it
	)
	var s txn.Scratch
	r, ws, err := s.EvaluateRules(c.s, tx, c.s.Revision()+1, c.lim, rules)
	if err != nil || r.Committed != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	if len(rules.seen) != 1 || rules.seen[0] != fmt.Sprintf("op 1: %s free cpu=1000m mem=1000", m2) {
		t.Fatalf("the rule saw %v, want the room the eviction freed", rules.seen)
	}
	next := c.s.Apply(ws)
	if tk, _ := next.Task(t2); !tk.Claimed.Equal(res(600, 600)) || tk.State != running {
		t.Fatalf("task %s claimed %v", tk.State, tk.Claimed)
	}
	if !tx.Ops[1].Resources.IsZero() {
		t.Fatalf("the caller's operation was rewritten: %v", tx.Ops[1].Resources)
	}
	// RUNNING for a task nobody placed is refused by the rule (without it,
	// Evaluate's own check would make it an error).
	r, _, err = s.EvaluateRules(next, c.tx(txn.SetStatus(t1, running, 0, "")), next.Revision()+1, c.lim, rules)
	if err != nil || r.Rejected != 1 || r.Outcomes[0].Reason != omegav1.RejectReason_REJECT_REASON_ILLEGAL_TRANSITION {
		t.Fatalf("%+v %v", r, err)
	}
}
