package txn_test

import (
	"strings"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestClaimCommits(t *testing.T) {
	c := std(t)
	before := c.machine(m1)
	want := res(1500, 700, "gpu", 1)
	tx := c.tx(txn.Claim(t1, m1, want, c.ver(t1)))
	tx.Component = "batch-7"
	r := c.commit(tx)
	wantCodes(t, r, cCommitted)
	if r.Revision != 3 || r.Committed != 1 || r.Conflicts != 0 || r.Partial() || r.Conflicted() {
		t.Fatalf("result %+v", r)
	}
	tk := c.task(t1)
	if tk.State != assigned || tk.Machine != m1 || tk.Scheduler != "batch-7" || tk.Version != 3 || tk.Assigned != tx.UnixNanos {
		t.Fatalf("claimed task %+v", tk)
	}
	// The claim reserves what it declares, not the task's request.
	wantRes(t, "claimed", tk.Claimed, want)
	m := c.machine(m1)
	wantRes(t, "allocated", m.Allocated, before.Allocated.Add(want))
	wantRes(t, "free", m.Free(), res(2500, 3300, "gpu", 1))
	if m.Tasks != before.Tasks+1 || m.Seq != 3 {
		t.Fatalf("machine tasks %d seq %d, want %d and 3", m.Tasks, m.Seq, before.Tasks+1)
	}
	// A claim is not a change of the machine object: its version stays.
	if m.Version != before.Version {
		t.Fatalf("machine version %d, was %d", m.Version, before.Version)
	}
	wantRes(t, "state total", c.s.Allocated(), want)
	// The wire form carries the claim too.
	st := tk.Proto().GetStatus()
	if st.GetMachineUid() != m1.String() || st.GetScheduler() != "batch-7" || st.GetState() != assigned ||
		!txn.ResourcesFromProto(st.GetClaimed()).Equal(want) {
		t.Fatalf("task status proto %v", st)
	}
	if got := c.machine(m1).Proto().GetStatus(); got.GetTasks() != 1 || got.GetSeq() != 3 ||
		!txn.ResourcesFromProto(got.GetAllocated()).Equal(want) {
		t.Fatalf("machine status proto %v", got)
	}
}

func TestClaimFillsMachineExactly(t *testing.T) {
	c := std(t)
	// Two claims of half the machine each fit exactly; a third of 1 milli-core
	// does not, in the same transaction (fit counts the earlier claims).
	r := c.commit(c.tx(
		txn.Claim(t1, m2, res(1000, 1000), c.ver(t1)),
		txn.Claim(t2, m2, res(1000, 1000), c.ver(t2)),
		txn.Claim(t3, m2, res(1, 0), c.ver(t3)),
	))
	wantCodes(t, r, cCommitted, cCommitted, cInsufficient)
	m := c.machine(m2)
	wantRes(t, "allocated", m.Allocated, res(2000, 2000))
	if m.Tasks != 2 {
		t.Fatalf("tasks %d", m.Tasks)
	}
	if c.task(t3).State != pending {
		t.Fatalf("conflicting claim changed its task: %+v", c.task(t3))
	}
}

func TestClaimRejected(t *testing.T) {
	type setupFn func(c *cell)
	noSetup := func(c *cell) {}
	cases := []struct {
		name  string
		setup setupFn
		op    func(c *cell) txn.Op
		code  omegav1.OutcomeCode // a conflict, or
		err   error               // an error
		dim   string              // for INSUFFICIENT_RESOURCES: the dimension named
	}{
		{
			name: "stale expect version",
			setup: func(c *cell) {
				// Someone else's status change bumps t1's version.
				c.commit(c.tx(txn.SetStatus(t1, killed, 0, "")))
			},
			op:   func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), 2) },
			code: cTaskChanged,
		},
		{
			name:  "expect version from the future",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), 7) },
			code:  cTaskChanged,
		},
		{
			name:  "stale version of a task placed since",
			setup: func(c *cell) { c.place(m2, res(1, 1), t1) },
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), 2) },
			code:  cTaskChanged,
		},
		{
			name:  "task seen placed",
			setup: func(c *cell) { c.place(m2, res(1, 1), t1) },
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), c.ver(t1)) },
			err:   txn.ErrNotPending,
		},
		{
			name: "task seen terminal",
			setup: func(c *cell) {
				c.commit(c.tx(txn.SetStatus(t1, succeeded, 0, "")))
			},
			op:  func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), c.ver(t1)) },
			err: txn.ErrNotPending,
		},
		{
			name:  "unknown task",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(uid(999), m1, res(1, 1), 0) },
			err:   txn.ErrNotFound,
		},
		{
			name:  "unknown machine",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, uid(999), res(1, 1), c.ver(t1)) },
			err:   txn.ErrNotFound,
		},
		{
			name:  "negative resources",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, -1), c.ver(t1)) },
			err:   txn.ErrInvalid,
		},
		{
			name:  "negative extended resource",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1, "gpu", -1), c.ver(t1)) },
			err:   txn.ErrInvalid,
		},
		{
			name: "machine draining",
			setup: func(c *cell) {
				c.commit(c.tx(txn.PutMachine(machineState(m1, res(4000, 4000, "gpu", 2), draining), 0)))
			},
			op:   func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), c.ver(t1)) },
			code: cNotUp,
		},
		{
			name:  "machine down",
			setup: func(c *cell) { c.commit(c.tx(txn.PutMachine(machineState(m1, res(4000, 4000, "gpu", 2), down), 0))) },
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1), c.ver(t1)) },
			code:  cNotUp,
		},
		{
			name:  "no fit: cpu",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m2, res(2001, 1), c.ver(t1)) },
			code:  cInsufficient, dim: "cpu",
		},
		{
			name:  "no fit: memory",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m2, res(1, 2001), c.ver(t1)) },
			code:  cInsufficient, dim: "memory",
		},
		{
			name:  "no fit: gpu beyond capacity",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1, "gpu", 3), c.ver(t1)) },
			code:  cInsufficient, dim: "gpu",
		},
		{
			name:  "no fit: gpu on a machine without gpus",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m2, res(1, 1, "gpu", 1), c.ver(t1)) },
			code:  cInsufficient, dim: "gpu",
		},
		{
			name:  "no fit: gpu taken by earlier claims",
			setup: func(c *cell) { c.place(m1, res(10, 10, "gpu", 1), t2, t3) },
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1, "gpu", 1), c.ver(t1)) },
			code:  cInsufficient, dim: "gpu",
		},
		{
			name:  "no fit: unknown extended dimension",
			setup: noSetup,
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m1, res(1, 1, "fpga", 1), c.ver(t1)) },
			code:  cInsufficient, dim: "fpga",
		},
		{
			name:  "no fit: cpu already allocated",
			setup: func(c *cell) { c.place(m2, res(1500, 10), t2) },
			op:    func(c *cell) txn.Op { return txn.Claim(t1, m2, res(501, 1), c.ver(t1)) },
			code:  cInsufficient, dim: "cpu",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			tc.setup(c)
			op := tc.op(c)
			tx := c.tx(op)
			if tc.err != nil {
				c.mustErr(tx, tc.err, 0)
				return
			}
			before := dump(c.s)
			r, ws, err := c.eval(tx)
			if err != nil {
				t.Fatal(err)
			}
			wantCodes(t, r, tc.code)
			if ws != nil || r.Revision != 0 || r.ClaimsConflicted != 1 {
				t.Fatalf("conflicting claim: ws %v, result %+v", ws, r)
			}
			if tc.dim != "" && !strings.HasSuffix(r.Outcomes[0].Detail, ": "+tc.dim) {
				t.Fatalf("detail %q does not name dimension %q", r.Outcomes[0].Detail, tc.dim)
			}
			if dump(c.s) != before {
				t.Fatal("state changed")
			}
		})
	}
}

func TestClaimExtendedResource(t *testing.T) {
	c := std(t)
	r := c.commit(c.tx(
		txn.Claim(t1, m1, res(100, 100, "gpu", 1), c.ver(t1)),
		txn.Claim(t2, m1, res(100, 100, "gpu", 1), c.ver(t2)),
		txn.Claim(t3, m1, res(100, 100, "gpu", 1), c.ver(t3)), // the gpus are gone
		txn.Claim(t4, m1, res(100, 100), c.ver(t4)),           // cpu and memory are not
		txn.Claim(t5, m1, res(100, 100, "gpu", 0), c.ver(t5)), // zero of a dimension always fits
	))
	wantCodes(t, r, cCommitted, cCommitted, cInsufficient, cCommitted, cCommitted)
	if !strings.HasSuffix(r.Outcomes[2].Detail, ": gpu") {
		t.Fatalf("detail %q", r.Outcomes[2].Detail)
	}
	m := c.machine(m1)
	wantRes(t, "allocated", m.Allocated, res(400, 400, "gpu", 2))
	wantRes(t, "free", m.Free(), res(3600, 3600))
	// Releasing a gpu task gives the gpu back.
	c.commit(c.tx(txn.SetStatus(t1, succeeded, 0, "")))
	r = c.commit(c.tx(txn.Claim(t3, m1, res(100, 100, "gpu", 1), c.ver(t3))))
	wantCodes(t, r, cCommitted)
	wantRes(t, "allocated", c.machine(m1).Allocated, res(400, 400, "gpu", 2))
}

func TestClaimTaskCreatedInSameTxn(t *testing.T) {
	c := std(t)
	n1, n2 := uid(101), uid(102)
	r := c.commit(c.tx(
		txn.CreateTask(taskP(n1, res(500, 500), 0)),
		txn.Claim(n1, m2, res(500, 500), 0),
		txn.CreateTask(taskP(n2, res(500, 500), 0)),
		txn.Claim(n2, m2, res(500, 500), 3), // a version the view cannot have seen
	))
	wantCodes(t, r, cCommitted, cCommitted, cCommitted, cTaskChanged)
	tk := c.task(n1)
	if tk.State != assigned || tk.Machine != m2 || tk.Version != 3 || tk.CreateRev != 3 {
		t.Fatalf("task %+v", tk)
	}
	if tk2 := c.task(n2); tk2.State != pending {
		t.Fatalf("task n2 %+v", tk2)
	}
	wantRes(t, "allocated", c.machine(m2).Allocated, res(500, 500))

	// Claiming the same task twice in one transaction is a claimer's bug:
	// the second claim sees it placed at the version it names.
	c.mustErr(c.tx(
		txn.Claim(t1, m1, res(1, 1), c.ver(t1)),
		txn.Claim(t1, m2, res(1, 1), c.ver(t1)),
	), txn.ErrNotPending, 1)
	c.mustErr(c.tx(
		txn.CreateTask(taskP(uid(103), res(1, 1), 0)),
		txn.Claim(uid(103), m1, res(1, 1), 0),
		txn.Claim(uid(103), m2, res(1, 1), 0),
	), txn.ErrNotPending, 2)
}

func TestClaimOfTaskDeletedInSameTxn(t *testing.T) {
	c := std(t)
	c.mustErr(c.tx(
		txn.Delete(kindTask, t1, 0),
		txn.Claim(t1, m1, res(1, 1), c.ver(t1)),
	), txn.ErrNotFound, 1)
	c.mustErr(c.tx(
		txn.Delete(kindMachine, m2, 0),
		txn.Claim(t1, m2, res(1, 1), c.ver(t1)),
	), txn.ErrNotFound, 1)
}

func TestClaimOnMachineCreatedInSameTxn(t *testing.T) {
	for _, mode := range []omegav1.ConflictMode{fine, coarse} {
		c := std(t)
		tx := c.tx(
			txn.CreateMachine(machineP(m3, res(1000, 1000))),
			txn.Claim(t1, m3, res(600, 600), c.ver(t1)),
			txn.Claim(t2, m3, res(600, 600), c.ver(t2)),
		)
		tx.Conflict = mode
		r := c.commit(tx)
		wantCodes(t, r, cCommitted, cCommitted, cInsufficient)
		m := c.machine(m3)
		if m.Tasks != 1 || m.Seq != 3 || m.Version != 3 {
			t.Fatalf("%s: machine %+v", mode, m)
		}
		wantRes(t, "allocated", m.Allocated, res(600, 600))
	}
}

// A claim reserves what it declares, even nothing; the request is not used.
func TestClaimDeclaresItsOwnResources(t *testing.T) {
	c := std(t)
	r := c.commit(c.tx(txn.Claim(t1, m2, res(0, 0), c.ver(t1))))
	wantCodes(t, r, cCommitted)
	if m := c.machine(m2); !m.Allocated.IsZero() || m.Tasks != 1 {
		t.Fatalf("zero claim: machine %+v", m)
	}
	if c.task(t1).Machine != m2 {
		t.Fatal("zero claim did not place")
	}
}
