package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// omega audit on a store directory: a clean cell passes; after a claim in
// MiB (the unit bug) it reports the claim-short task by uid and exits with
// an error; -o json carries the same report; a directory that is not there
// is refused without being created.
func TestAuditCommand(t *testing.T) {
	dir := t.TempDir() + "/store"
	opts := store.DefaultOptions(dir)
	st, err := store.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ids := testkit.NewIDs(1, 0xa0)
	m, job, task := ids.Next(), ids.Next(), ids.Next()
	commit := func(ops ...txn.Op) {
		t.Helper()
		if r, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "batch-0", Ops: ops}); err != nil || r.Conflicted() {
			t.Fatalf("%+v %v", r, err)
		}
	}
	commit(txn.CreateMachine(testkit.Machine(m, "m0", testkit.Res(4000, 1<<34))), txn.CreateJob(testkit.Job(job, "j", "batch")),
		txn.CreateTask(testkit.Task(task, job, "t0", testkit.Res(1000, 1<<30))))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "audit", "--data", dir); err != nil || !strings.Contains(out, "0 violations") {
		t.Fatalf("clean cell: %v\n%s", err, out)
	}
	if st, err = store.Open(opts); err != nil {
		t.Fatal(err)
	}
	tk, _ := st.Snapshot().Task(task)
	commit(txn.Claim(task, m, testkit.Res(1000, 1<<10), tk.Version))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "audit", "--data", dir)
	if err == nil || !strings.Contains(out, audit.ClaimShort+" "+task.String()) {
		t.Fatalf("after the short claim: %v\n%s", err, out)
	}
	out, _ = run(t, "audit", "--data", dir, "-o", "json")
	var r audit.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Counts[audit.ClaimShort] != 1 || r.Total() != 1 {
		t.Fatalf("json report %+v, %v\n%s", r, err, out)
	}
	if _, err := run(t, "audit", "--data", dir+"-missing"); err == nil || !strings.Contains(err.Error(), "not a store directory") {
		t.Fatalf("a missing directory: %v", err)
	}
}
