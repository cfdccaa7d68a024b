package agents

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/txn"
)

// TestMachineDown: the dead machine's transaction, built from a view, puts
// the machine DOWN and its placed tasks LOST in uid order — not its
// terminal ones, not another machine's — and committing it frees the
// machine's whole allocation; skip leaves out what was already reported.
func TestMachineDown(t *testing.T) {
	st := openStoreCheck(t, 0, true)
	g := newIDs(1)
	m1, m2 := g.next(), g.next()
	var on1 []uuid.UUID
	ops := []txn.Op{txn.CreateMachine(machineProto(m1, "m1", 4000, 4000)), txn.CreateMachine(machineProto(m2, "m2", 4000, 4000))}
	for i := range 4 {
		u := g.next()
		ops = append(ops, txn.CreateTask(taskProto(u, "t", 100, 100, 0)))
		m := m1
		if i == 3 {
			m = m2
		} else {
			on1 = append(on1, u)
		}
		ops = append(ops, txn.Claim(u, m, res(100, 100), 0))
	}
	ctx := context.Background()
	if _, err := st.Commit(ctx, &txn.Txn{Ops: ops}); err != nil {
		t.Fatal(err)
	}
	done := on1[0]
	if _, err := st.Commit(ctx, &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.SetStatus(done, taskSucceeded, 0, "")}}); err != nil {
		t.Fatal(err)
	}
	v := st.Snapshot()
	down, ok := MachineDownFromView(v, m1, MessageMachineFailed)
	if !ok || len(down) != 3 || down[0].Kind != txn.OpPut || down[0].NewMachine.GetStatus().GetState() != stateDown {
		t.Fatalf("ops %+v", down)
	}
	if bytes.Compare(down[1].Task[:], down[2].Task[:]) >= 0 {
		t.Fatal("the lost tasks are not in uid order")
	}
	for _, op := range down[1:] {
		if op.Kind != txn.OpSetStatus || op.State != taskLost || op.Task == done {
			t.Fatalf("op %+v", op)
		}
	}
	res, err := st.Commit(ctx, &txn.Txn{ViewRevision: v.Revision(), Ops: down})
	if err != nil || res.Committed != len(down) {
		t.Fatalf("%+v %v", res, err)
	}
	after := st.Snapshot()
	if m, _ := after.Machine(m1); m.State != stateDown || !m.Allocated.IsZero() || m.Tasks != 0 {
		t.Fatalf("machine %s, allocated %v, %d tasks", m.State, m.Allocated, m.Tasks)
	}
	if m, _ := after.Machine(m2); m.Tasks != 1 {
		t.Fatal("the other machine lost its task")
	}
	if _, ok := MachineDownFromView(after, g.next(), ""); ok {
		t.Fatal("a machine the view does not hold")
	}
	mm, _ := v.Machine(m1)
	// Only the tasks given, in uid order, whatever the map's order.
	for range 10 {
		ops := MachineDown(mm, map[uuid.UUID]uint64{on1[2]: 3, on1[0]: 1}, "x")
		lo, hi := on1[0], on1[2]
		if compareUIDs(lo, hi) > 0 {
			lo, hi = hi, lo
		}
		if len(ops) != 3 || ops[1].Task != lo || ops[2].Task != hi {
			t.Fatalf("two of the machine's tasks: %+v", ops)
		}
	}
}
