package cli

import (
	"github.com/google/uuid"
	"strings"
	"testing"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestFindMachine: a machine by name or uid; two of one name (a ghost's)
// refused by name, listing their uids, and each found by its uid.
func TestFindMachine(t *testing.T) {
	a, b, c := testkit.UID('m', 1, 0), testkit.UID('m', 2, 0), testkit.UID('m', 3, 0)
	ops := []txn.Op{
		txn.CreateMachine(testkit.Machine(a, "m1", testkit.Res(1000, 1<<30))),
		txn.CreateMachine(testkit.Machine(b, "m2", testkit.Res(1000, 1<<30))),
		txn.CreateMachine(testkit.Machine(c, "m2", testkit.Res(1000, 1<<30))),
	}
	_, ws, err := txn.Evaluate(txn.NewState(), &txn.Txn{Ops: ops}, 1, txn.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	v := client.View{State: txn.NewState().Apply(ws)}
	if m, err := findMachine(v, "m1"); err != nil || m.UID != a {
		t.Fatalf("m1: %v %v", m, err)
	}
	_, err = findMachine(v, "m2")
	if err == nil || !strings.Contains(err.Error(), `machine "m2": 2 machines carry that name: `) || !strings.Contains(err.Error(), b.String()) || !strings.Contains(err.Error(), c.String()) {
		t.Fatalf("m2: %v", err)
	}
	for _, u := range []string{b.String(), c.String()} {
		if m, err := findMachine(v, u); err != nil || m.UID.String() != u {
			t.Fatalf("%s: %v %v", u, m, err)
		}
	}
	if _, err := findMachine(v, strings.Repeat("x", 100)); err == nil || !strings.Contains(err.Error(), "(100 bytes): no machine of that name or uid") {
		t.Fatalf("a long name: %v", err)
	}
}

// TestMachineNamesForPeople: a watched task's line and a task's table row
// name its machine; one the cell no longer has reads as deleted (the
// table) or as its uid's prefix (the watch, which may not have seen it).
func TestMachineNamesForPeople(t *testing.T) {
	m := testkit.UID('m', 1, 0)
	gone := testkit.UID('m', 2, 0)
	task := &txn.Task{UID: testkit.UID('t', 1, 0), Machine: m, State: 3}
	line := describeChange(7, &txn.Change{Task: task}, map[uuid.UUID]string{m: "m1"})
	if !strings.Contains(line, " on m1") {
		t.Fatalf("watch line %q does not name m1", line)
	}
	task.Machine = gone
	if line := describeChange(7, &txn.Change{Task: task}, map[uuid.UUID]string{m: "m1"}); !strings.Contains(line, " on "+gone.String()[:8]) {
		t.Fatalf("watch line %q, want the uid's prefix", line)
	}
	names := map[string]string{m.String(): "m1"}
	if got := machineName(names, m.String()); got != "m1" {
		t.Fatalf("machineName = %q", got)
	}
	if got := machineName(names, gone.String()); got != "<deleted "+gone.String()[:8]+"…>" {
		t.Fatalf("a deleted machine: %q", got)
	}
	if got := machineName(names, ""); got != "" {
		t.Fatalf("no machine: %q", got)
	}
}
