package txn_test

import (
	"errors"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// mixed is a transaction with one conflict among committable operations of
// every kind: create, claim, evict, set-status, put, delete.
func mixed(c *cell) *txn.Txn {
	c.place(m1, res(1000, 1000), t4, t5)
	return c.tx(
		txn.CreateTask(taskP(uid(100), res(1, 1), 0)),
		txn.Claim(uid(100), m2, res(100, 100), 0),
		txn.Claim(t1, m2, res(100, 100), c.ver(t1)),
		txn.Claim(t2, m2, res(5000, 1), c.ver(t2)), // the conflict
		txn.ForceEvict(t4, c.ver(t4), ""),
		txn.SetStatus(t5, running, 0, ""),
		txn.PutMachine(machineP(m1, res(4000, 4000, "gpu", 2)), 0),
		txn.Delete(kindTask, t3, 0),
		txn.CreateJob(jobP(j1)),
	)
}

func TestAllOrNothing(t *testing.T) {
	c := std(t)
	tx := mixed(c)
	tx.Commit = allOrNone
	before := dump(c.s)
	r, ws, err := c.eval(tx)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes(t, r, cAborted, cAborted, cAborted, cInsufficient, cAborted, cAborted, cAborted, cAborted, cAborted)
	if r.Revision != 0 || ws != nil || r.Committed != 0 || r.Conflicts != 1 || r.ClaimsConflicted != 1 || !r.Conflicted() || r.Partial() {
		t.Fatalf("result %+v, ws %v", r, ws)
	}
	for i, o := range r.Outcomes {
		if o.Code == cAborted && o.Detail == "" {
			t.Errorf("op %d aborted without detail", i)
		}
	}
	if dump(c.s) != before {
		t.Fatal("state changed")
	}

	// Without the conflict it all commits.
	tx.Ops[3] = txn.Claim(t2, m2, res(100, 100), c.ver(t2))
	r = c.commit(tx)
	if r.Committed != len(tx.Ops) || r.Conflicts != 0 || r.Revision != 4 {
		t.Fatalf("result %+v", r)
	}
	if m := c.machine(m2); m.Tasks != 3 {
		t.Fatalf("m2 %+v", m)
	}
}

func TestAllOrNothingEveryOpConflicts(t *testing.T) {
	c := std(t)
	tx := c.tx(txn.Claim(t1, m2, res(5000, 1), c.ver(t1)), txn.Claim(t2, m2, res(5000, 1), c.ver(t2)))
	tx.Commit = allOrNone
	r, ws, err := c.eval(tx)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes(t, r, cInsufficient, cInsufficient)
	if ws != nil || r.Revision != 0 || r.Conflicts != 2 || r.ClaimsConflicted != 2 {
		t.Fatalf("result %+v", r)
	}
}

func TestIncremental(t *testing.T) {
	c := std(t)
	tx := mixed(c)
	r := c.commit(tx)
	wantCodes(t, r, cCommitted, cCommitted, cCommitted, cInsufficient, cCommitted, cCommitted, cCommitted, cCommitted, cCommitted)
	if r.Revision != 4 || c.s.Revision() != 4 || r.Committed != 8 || r.Conflicts != 1 || r.ClaimsConflicted != 1 || !r.Partial() || !r.Conflicted() {
		t.Fatalf("result %+v", r)
	}
	// Exactly the non-conflicting part took effect.
	if tk := c.task(t2); tk.State != pending || tk.Version != 2 {
		t.Fatalf("conflicting claim's task %+v", tk)
	}
	if tk := c.task(uid(100)); tk.State != assigned || tk.Machine != m2 {
		t.Fatalf("created-and-claimed task %+v", tk)
	}
	if tk := c.task(t1); tk.Machine != m2 {
		t.Fatalf("t1 %+v", tk)
	}
	if tk := c.task(t4); tk.State != pending {
		t.Fatalf("t4 %+v", tk)
	}
	if tk := c.task(t5); tk.State != running {
		t.Fatalf("t5 %+v", tk)
	}
	if _, ok := c.s.Task(t3); ok {
		t.Fatal("t3 not deleted")
	}
	if _, ok := c.s.Job(j1); !ok {
		t.Fatal("job not created")
	}
	wantRes(t, "m2", c.machine(m2).Allocated, res(200, 200))
	wantRes(t, "m1", c.machine(m1).Allocated, res(1000, 1000))
}

func TestIncrementalAllConflict(t *testing.T) {
	c := std(t)
	tx := c.tx(
		txn.Claim(t1, m2, res(5000, 1), c.ver(t1)),
		txn.Claim(t2, m1, res(1, 1), 1),
		txn.PutMachine(machineP(m1, res(1, 1)), 99),
	)
	r, ws, err := c.eval(tx)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes(t, r, cInsufficient, cTaskChanged, cVersion)
	if ws != nil || r.Revision != 0 || r.Committed != 0 || r.Conflicts != 3 || r.ClaimsConflicted != 2 || r.Partial() || !r.Conflicted() {
		t.Fatalf("result %+v", r)
	}
}

func TestEmptyTxn(t *testing.T) {
	c := std(t)
	r, ws, err := c.eval(c.tx())
	if err != nil || ws != nil || r.Revision != 0 || len(r.Outcomes) != 0 {
		t.Fatalf("empty txn: %+v %v %v", r, ws, err)
	}
}

func TestErrTooLarge(t *testing.T) {
	c := std(t)
	c.lim = txn.Limits{MaxOps: 3}
	ops := []txn.Op{
		txn.Claim(t1, m1, res(1, 1), c.ver(t1)),
		txn.Claim(t2, m1, res(1, 1), c.ver(t2)),
		txn.Claim(t3, m1, res(1, 1), c.ver(t3)),
	}
	c.commit(c.tx(ops[:3]...)) // at the limit: fine
	c = std(t)
	c.lim = txn.Limits{MaxOps: 3}
	ops = append(ops, txn.Claim(t4, m1, res(1, 1), c.ver(t4)))
	err := c.mustErr(c.tx(ops...), txn.ErrTooLarge, -1)
	var oe *txn.OpError
	if errors.As(err, &oe) {
		t.Fatalf("ErrTooLarge names op %d", oe.Index)
	}
	if txn.DefaultLimits().MaxOps != 100_000 {
		t.Fatalf("default MaxOps %d", txn.DefaultLimits().MaxOps)
	}
	// MaxOps 0 means no limit.
	c.lim = txn.Limits{}
	c.commit(c.tx(ops...))
}

func TestErrFutureRevision(t *testing.T) {
	c := std(t)
	tx := c.tx(txn.Claim(t1, m1, res(1, 1), c.ver(t1)))
	tx.ViewRevision = c.s.Revision() + 1
	c.mustErr(tx, txn.ErrFutureRevision, -1)
	tx.ViewRevision = c.s.Revision()
	c.commit(tx)
}

func TestBadModes(t *testing.T) {
	c := std(t)
	tx := c.tx(txn.Claim(t1, m1, res(1, 1), c.ver(t1)))
	tx.Conflict = omegav1.ConflictMode(7)
	c.mustErr(tx, txn.ErrInvalid, -1)
	tx.Conflict = fine
	tx.Commit = omegav1.CommitMode(7)
	c.mustErr(tx, txn.ErrInvalid, -1)
}

// Every kind of error, placed after operations that would commit, leaves the
// state exactly as it was (c.eval compares full dumps before and after).
func TestErrorsLeaveStateUnchanged(t *testing.T) {
	cases := []struct {
		name string
		bad  func(c *cell) txn.Op
		want error
	}{
		{"invalid", func(c *cell) txn.Op { return txn.Claim(t3, m1, res(-1, 0), c.ver(t3)) }, txn.ErrInvalid},
		{"not found", func(c *cell) txn.Op { return txn.Claim(uid(999), m1, res(1, 0), 1) }, txn.ErrNotFound},
		{"already exists", func(c *cell) txn.Op { return txn.CreateTask(taskP(t5, res(1, 1), 0)) }, txn.ErrAlreadyExists},
		{"not pending", func(c *cell) txn.Op { return txn.Claim(t4, m1, res(1, 0), c.ver(t4)) }, txn.ErrNotPending},
		{"illegal state", func(c *cell) txn.Op { return txn.ForceEvict(t3, c.ver(t3), "") }, txn.ErrIllegalState},
		{"in use", func(c *cell) txn.Op { return txn.Delete(kindMachine, m2, 0) }, txn.ErrInUse},
	}
	for _, tc := range cases {
		for _, commit := range []omegav1.CommitMode{incremental, allOrNone} {
			t.Run(tc.name+"/"+commit.String(), func(t *testing.T) {
				c := std(t)
				c.place(m2, res(100, 100), t4)
				tx := c.tx(
					txn.CreateTask(taskP(uid(100), res(1, 1), 0)),
					txn.Claim(uid(100), m1, res(100, 100), 0),
					txn.Claim(t1, m1, res(100, 100), c.ver(t1)),
					txn.SetStatus(t4, running, 0, ""),
					txn.PutMachine(machineP(m1, res(5000, 5000)), 0),
					tc.bad(c),
					txn.Claim(t2, m1, res(100, 100), c.ver(t2)),
				)
				tx.Commit = commit
				before := dump(c.s)
				c.mustErr(tx, tc.want, 5)
				if dump(c.s) != before {
					t.Fatal("state changed") // c.eval checks this too
				}
				// The same transaction without the bad op commits.
				tx.Ops = append(tx.Ops[:5:5], tx.Ops[6])
				r := c.commit(tx)
				if r.Committed != 6 {
					t.Fatalf("result %+v", r)
				}
			})
		}
	}
}

func TestEvaluatePanicsOnOldRevision(t *testing.T) {
	c := std(t)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	txn.Evaluate(c.s, c.tx(), c.s.Revision(), txn.DefaultLimits())
}

func TestCounters(t *testing.T) {
	c := std(t)
	c.place(m1, res(100, 100), t5)
	r := c.commit(c.tx(
		txn.Claim(t1, m2, res(1500, 1), c.ver(t1)),  // committed
		txn.Claim(t2, m2, res(1500, 1), c.ver(t2)),  // conflict (claim)
		txn.Claim(t3, m1, res(1, 1), 1),             // conflict (claim)
		txn.Evict(t5, c.ver(t5), 5, ""),             // conflict (not a claim)
		txn.SetStatus(t5, running, c.ver(t5), "ok"), // committed
	))
	if r.Committed != 2 || r.Conflicts != 3 || r.ClaimsConflicted != 2 || !r.Partial() || !r.Conflicted() {
		t.Fatalf("counters %+v", r)
	}
	r = c.commit(c.tx(txn.Claim(t4, m1, res(1, 1), c.ver(t4))))
	if r.Committed != 1 || r.Conflicts != 0 || r.ClaimsConflicted != 0 || r.Partial() || r.Conflicted() {
		t.Fatalf("counters %+v", r)
	}
}

func TestRevisionsAreConsecutive(t *testing.T) {
	c := std(t)
	// A transaction that commits nothing does not use up a revision.
	r := c.commit(c.tx(txn.Claim(t1, m2, res(9000, 1), c.ver(t1))))
	if r.Revision != 0 || c.s.Revision() != 2 {
		t.Fatalf("revision %d, state %d", r.Revision, c.s.Revision())
	}
	r = c.commit(c.tx(txn.Claim(t1, m2, res(1, 1), c.ver(t1))))
	if r.Revision != 3 || c.s.Revision() != 3 || c.task(t1).Version != 3 {
		t.Fatalf("revision %d, state %d", r.Revision, c.s.Revision())
	}
}
