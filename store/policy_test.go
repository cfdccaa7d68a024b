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

// TestMediatedPolicy: the mediated store rejects, each with its reason,
// what the raw store takes at its word — a claim declaring less memory
// than its task requests (a unit bug), a claim reserving no GPU for a task
// that asks for one (an outdated scheduler), a never-placed task reported
// SUCCEEDED (an agent reporting what did not happen) — and commits the
// correct claim and report beside them.
func TestMediatedPolicy(t *testing.T) {
	for _, p := range []Policy{Raw(), Mediated()} {
		t.Run(p.Name(), func(t *testing.T) {
			s := openTest(t, t.TempDir(), func(o *Options) { o.Policy = p })
			defer s.Close()
			m := testUID(uidMachine, 0, 0)
			mp := machineProto(m, 4000, 4<<30)
			mp.Spec.Capacity.Extended = map[string]int64{"gpu": 4}
			short, gpu, lie, good := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1), testUID(uidTask, 0, 2), testUID(uidTask, 0, 3)
			gp := taskProto(gpu, uuid.Nil, 100, 1<<20)
			gp.Spec.Resources.Extended = map[string]int64{"gpu": 1}
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
				txn.CreateMachine(mp), txn.CreateTask(taskProto(short, uuid.Nil, 100, 1<<30)), txn.CreateTask(gp),
				txn.CreateTask(taskProto(lie, uuid.Nil, 100, 1<<20)), txn.CreateTask(taskProto(good, uuid.Nil, 100, 1<<20)),
			}})
			st := s.Snapshot()
			ver := func(u uuid.UUID) uint64 { x, _ := st.Task(u); return x.Version }
			r, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "batch-0", Ops: []txn.Op{
				txn.Claim(short, m, res(100, 1<<10), ver(short)),                         // memory in KiB: less than requested
				txn.Claim(gpu, m, res(100, 1<<20), ver(gpu)),                             // no GPU
				txn.SetStatus(lie, omegav1.TaskState_TASK_STATE_SUCCEEDED, ver(lie), ""), // never placed
				txn.Claim(good, m, res(100, 1<<20), ver(good)),
			}})
			if err != nil {
				t.Fatal(err)
			}
			want := []omegav1.RejectReason{
				omegav1.RejectReason_REJECT_REASON_RESOURCES_MISMATCH,
				omegav1.RejectReason_REJECT_REASON_RESOURCES_MISMATCH,
				omegav1.RejectReason_REJECT_REASON_ILLEGAL_TRANSITION,
			}
			for i, o := range r.Outcomes {
				raw := p.Name() == "raw"
				switch {
				case i == 3 || raw:
					if !o.Committed() {
						t.Errorf("op %d: %v, want committed", i, o)
					}
				case o.Code != omegav1.OutcomeCode_OUTCOME_CODE_REJECTED || o.Reason != want[i] || o.Detail == "":
					t.Errorf("op %d: %+v, want rejected for %s with a reason", i, o, want[i])
				}
			}
			after := s.Snapshot()
			x, _ := after.Task(good)
			y, _ := after.Task(lie)
			if !x.Placed() || (p.Name() == "mediated") != (y.State == omegav1.TaskState_TASK_STATE_PENDING) {
				t.Fatalf("after: the good claim placed %v, the lie left the task %s", x.Placed(), y.State)
			}
		})
	}
}
