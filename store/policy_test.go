package store

import (
	"context"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// reservedRules is a RulesPolicy: claims on machines labelled reserved are
// refused unless they come from "ops".
type reservedRules struct{}

func (reservedRules) Name() string                     { return "reserved" }
func (reservedRules) Admit(*txn.State, *txn.Txn) error { return nil }
func (reservedRules) Rules() txn.Rules                 { return reservedRules{} }
func (reservedRules) Check(o txn.Overlay, _ int, op *txn.Op) *txn.Rejection {
	if op.Kind != txn.OpClaim {
		return nil
	}
	if m, ok := o.Machine(op.Machine); ok && m.Meta.GetLabels()["reserved"] == "yes" && o.Txn().Component != "ops" {
		return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_NOT_OWNER, Detail: "reserved for ops"}
	}
	return nil
}

// TestRulesPolicy: a store whose policy has per-operation rules refuses an
// operation with a REJECTED outcome and its reason while the rest of the
// transaction commits, durably; a reopened store holds exactly what was
// committed.
func TestRulesPolicy(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.Policy = reservedRules{} }
	s := openTest(t, dir, mod)
	m0, m1 := testUID(uidMachine, 0, 0), testUID(uidMachine, 0, 1)
	a, b := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1)
	reserved := machineProto(m0, 1000, 1000)
	reserved.Meta.Labels = map[string]string{"reserved": "yes"}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(reserved), txn.CreateMachine(machineProto(m1, 1000, 1000)),
		txn.CreateTask(taskProto(a, uuid.Nil, 10, 10)), txn.CreateTask(taskProto(b, uuid.Nil, 10, 10)),
	}})
	st := s.Snapshot()
	va, _ := st.Task(a)
	vb, _ := st.Task(b)
	res, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "batch", Ops: []txn.Op{
		txn.Claim(a, m0, res(10, 10), va.Version),
		txn.Claim(b, m1, res(10, 10), vb.Version),
	}})
	if err != nil || res.Rejected != 1 || res.Committed != 1 || res.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_REJECTED ||
		res.Outcomes[0].Reason != omegav1.RejectReason_REJECT_REASON_NOT_OWNER {
		t.Fatalf("%+v %v", res, err)
	}
	before := s.Snapshot()
	if x, _ := before.Task(a); x.Placed() {
		t.Fatal("the rejected claim placed its task")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	if d := diffStates(before, s.Snapshot(), true); d != "" {
		t.Fatalf("after reopen: %s", d)
	}
}
