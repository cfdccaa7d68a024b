package audit

import (
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

const gib = 1 << 30

// cell is a state built through txn's raw evaluation, as a raw store would
// take the operations.
type cell struct {
	t   *testing.T
	s   *txn.State
	ids *testkit.IDs
	// stream, once set, audits every commit's write set.
	stream *Stream
}

func newCell(t *testing.T) *cell {
	return &cell{t: t, s: txn.NewState(), ids: testkit.NewIDs(3, 0xa0d)}
}

func (c *cell) commit(component string, ops ...txn.Op) {
	c.t.Helper()
	rev := c.s.Revision() + 1
	r, ws, err := txn.Evaluate(c.s, &txn.Txn{ViewRevision: c.s.Revision(), Component: component, UnixNanos: int64(rev), Ops: ops}, rev, txn.DefaultLimits())
	if err != nil || ws == nil || r.Conflicted() {
		c.t.Fatalf("commit: %+v %v", r, err)
	}
	c.s = c.s.Apply(ws)
	if c.stream != nil {
		c.stream.Observe(ws)
	}
}

func (c *cell) ver(u uuid.UUID) uint64 {
	t, _ := c.s.Task(u)
	return t.Version
}

// setup: one machine of 4 cores, 4 GiB and 2 GPUs; a batch job of three
// tasks of 1 core and 1 GiB, the third also asking for a GPU.
func setup(t *testing.T) (c *cell, m uuid.UUID, tasks []uuid.UUID) {
	c = newCell(t)
	m = c.ids.Next()
	job := c.ids.Next()
	ops := []txn.Op{txn.CreateMachine(testkit.Machine(m, "m0", testkit.Res(4000, 4*gib, "gpu", 2))), txn.CreateJob(testkit.Job(job, "j", "batch"))}
	for i := range 3 {
		u := c.ids.Next()
		tasks = append(tasks, u)
		req := testkit.Res(1000, gib)
		if i == 2 {
			req = testkit.Res(1000, gib, "gpu", 1)
		}
		ops = append(ops, txn.CreateTask(testkit.Task(u, job, "t", req)))
	}
	c.commit("submitter", ops...)
	return c, m, tasks
}

func want(t *testing.T, r Report, counts map[string]int) {
	t.Helper()
	for _, k := range Kinds {
		if r.Counts[k] != counts[k] {
			t.Fatalf("%s: %d, want %d (all: %v; %+v)", k, r.Counts[k], counts[k], r.Counts, r.Violations)
		}
	}
	for _, v := range r.Violations {
		if v.Object == uuid.Nil || v.Detail == "" {
			t.Fatalf("a violation that names nothing: %+v", v)
		}
	}
}

// A correct cell: claims that declare what their tasks request, the
// reports of what ran. No violation.
func TestCleanCell(t *testing.T) {
	c, m, ts := setup(t)
	c.commit("batch-0", txn.Claim(ts[0], m, testkit.Res(1000, gib), c.ver(ts[0])), txn.Claim(ts[2], m, testkit.Res(1000, gib, "gpu", 1), c.ver(ts[2])))
	c.commit("fleet", txn.SetStatus(ts[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, c.ver(ts[0]), ""))
	want(t, Check(c.s), nil)
}

// A claim in MiB for a task requesting bytes (the unit bug), and one that
// reserves no GPU for a task asking for one (the outdated scheduler): both
// claim short; the machine's allocation is what they claimed, so no drift.
func TestClaimShort(t *testing.T) {
	c, m, ts := setup(t)
	c.commit("batch-0", txn.Claim(ts[0], m, testkit.Res(1000, 1024), c.ver(ts[0])), txn.Claim(ts[2], m, testkit.Res(1000, gib), c.ver(ts[2])))
	want(t, Check(c.s), map[string]int{ClaimShort: 2})
}

// Short claims let the machine take more than it has: its tasks request 5
// GiB of its 4.
func TestOverCommitted(t *testing.T) {
	c, m, _ := setup(t)
	job := c.ids.Next()
	ops := []txn.Op{txn.CreateJob(testkit.Job(job, "big", "batch"))}
	var big []uuid.UUID
	for range 5 {
		u := c.ids.Next()
		big = append(big, u)
		ops = append(ops, txn.CreateTask(testkit.Task(u, job, "b", testkit.Res(100, gib))))
	}
	c.commit("submitter", ops...)
	ops = nil
	for _, u := range big {
		ops = append(ops, txn.Claim(u, m, testkit.Res(100, 1024), c.ver(u)))
	}
	c.commit("batch-0", ops...)
	want(t, Check(c.s), map[string]int{ClaimShort: 5, OverCommitted: 1})
}

// A machine whose recorded allocation is not its tasks' claims: only a
// state corrupted past the store's evaluation has one.
func TestAllocationDrift(t *testing.T) {
	c, m, ts := setup(t)
	c.commit("batch-0", txn.Claim(ts[0], m, testkit.Res(1000, gib), c.ver(ts[0])))
	mm, _ := c.s.Machine(m)
	bad := *mm
	bad.Allocated = testkit.Res(10, 10)
	c.s = c.s.Apply(&txn.WriteSet{Revision: c.s.Revision() + 1, Changes: []txn.Change{{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: &bad}}})
	want(t, Check(c.s), map[string]int{AllocationDrift: 1})
}

// An agent that reports what did not happen: a task never claimed,
// SUCCEEDED (the raw store takes it).
func TestNeverRan(t *testing.T) {
	c, _, ts := setup(t)
	c.commit("agent/m0", txn.SetStatus(ts[1], omegav1.TaskState_TASK_STATE_SUCCEEDED, c.ver(ts[1]), "done"))
	want(t, Check(c.s), map[string]int{NeverRan: 1})
}

// A scheduler that claims a task of a job another kind owns; the
// submitter placing the pre-fill is no scheduler instance and is not
// counted.
func TestForeignClaim(t *testing.T) {
	c, m, ts := setup(t)
	c.commit("faulty-thief-0", txn.Claim(ts[0], m, testkit.Res(1000, gib), c.ver(ts[0])))
	c.commit("submitter", txn.Claim(ts[1], m, testkit.Res(1000, gib), c.ver(ts[1])))
	want(t, Check(c.s), map[string]int{ForeignClaim: 1})
	for _, x := range []struct {
		in   string
		kind string
		ok   bool
	}{{"batch-0", "batch", true}, {"faulty-thief-12", "faulty-thief", true}, {"submitter", "", false}, {"batch-", "", false}, {"-3", "", false}, {"agent/m0", "", false}} {
		if k, ok := schedulerKind(x.in); k != x.kind || ok != x.ok {
			t.Errorf("schedulerKind(%q) = %q, %v", x.in, k, ok)
		}
	}
}
