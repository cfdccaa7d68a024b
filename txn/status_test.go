package txn_test

import (
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestSetStatusRunning(t *testing.T) {
	c := std(t)
	c.place(m1, res(1000, 1000), t1)
	tx := c.tx(txn.SetStatus(t1, running, c.ver(t1), "started"))
	r := c.commit(tx)
	wantCodes(t, r, cCommitted)
	tk := c.task(t1)
	if tk.State != running || tk.Started != tx.UnixNanos || tk.Machine != m1 || tk.Version != r.Revision || tk.Message() != "started" {
		t.Fatalf("running task %+v", tk)
	}
	// Running keeps the claim.
	wantRes(t, "claimed", tk.Claimed, res(1000, 1000))
	wantRes(t, "allocated", c.machine(m1).Allocated, res(1000, 1000))
	// Reporting RUNNING again does not move the start time.
	c.commit(c.tx(txn.SetStatus(t1, running, 0, "still")))
	if got := c.task(t1); got.Started != tx.UnixNanos || got.Message() != "still" {
		t.Fatalf("started %d, want %d", got.Started, tx.UnixNanos)
	}
}

func TestSetStatusTerminalFrees(t *testing.T) {
	for _, st := range []omegav1.TaskState{succeeded, failed, lost, killed} {
		for _, from := range []omegav1.TaskState{assigned, running} {
			t.Run(st.String()+"/from-"+from.String(), func(t *testing.T) {
				c := std(t)
				c.place(m2, res(1500, 1500), t1)
				c.place(m2, res(500, 500), t2)
				if from == running {
					c.commit(c.tx(txn.SetStatus(t1, running, 0, "")))
				}
				// The terminal status frees t1's resources for a claim later in
				// the same transaction, which would not fit otherwise.
				tx := c.tx(
					txn.SetStatus(t1, st, c.ver(t1), "done"),
					txn.Claim(t3, m2, res(1500, 1500), c.ver(t3)),
				)
				r := c.commit(tx)
				wantCodes(t, r, cCommitted, cCommitted)
				tk := c.task(t1)
				if tk.State != st || tk.Finished != tx.UnixNanos || tk.Version != r.Revision {
					t.Fatalf("task %+v", tk)
				}
				// A terminal task remembers where it ran.
				if tk.Machine != m2 {
					t.Fatalf("terminal task machine %s", tk.Machine)
				}
				m := c.machine(m2)
				wantRes(t, "allocated", m.Allocated, res(2000, 2000))
				if m.Tasks != 2 || m.Seq != r.Revision {
					t.Fatalf("machine %+v", m)
				}
				wantRes(t, "total", c.s.Allocated(), res(2000, 2000))
			})
		}
	}
}

func TestSetStatusTerminalOfPendingTask(t *testing.T) {
	c := std(t)
	before := c.machine(m1)
	r := c.commit(c.tx(txn.SetStatus(t1, killed, c.ver(t1), "job killed")))
	wantCodes(t, r, cCommitted)
	if tk := c.task(t1); tk.State != killed {
		t.Fatalf("task %+v", tk)
	}
	if m := c.machine(m1); m.Seq != before.Seq {
		t.Fatal("a pending task's status changed a machine")
	}
}

// ABANDONED (the scheduler gave up placing it) is written on a PENDING
// task: it becomes terminal with the reason, leaves the pending index and
// touches no machine.
func TestSetStatusAbandonedOfPendingTask(t *testing.T) {
	c := std(t)
	before := c.machine(m1)
	r := c.commit(c.tx(txn.SetStatus(t1, abandoned, c.ver(t1), "gave up after 1000 attempts")))
	wantCodes(t, r, cCommitted)
	tk := c.task(t1)
	if tk.State != abandoned || !tk.Terminal() || tk.Message() != "gave up after 1000 attempts" || tk.Finished == 0 {
		t.Fatalf("task %+v", tk)
	}
	c.s.RangePendingTasks(tk.Job, func(p *txn.Task) bool {
		if p.UID == t1 {
			t.Fatal("an abandoned task is still in the pending index")
		}
		return true
	})
	if m := c.machine(m1); m.Seq != before.Seq {
		t.Fatal("a pending task's abandonment changed a machine")
	}
}

func TestSetStatusRejected(t *testing.T) {
	cases := []struct {
		name string
		op   func(c *cell) txn.Op
		code omegav1.OutcomeCode
		err  error
	}{
		// t1 is SUCCEEDED, t2 ASSIGNED, t3 PENDING (see setup below).
		{"leave terminal, matching version", func(c *cell) txn.Op { return txn.SetStatus(t1, running, c.ver(t1), "") }, 0, txn.ErrIllegalState},
		{"terminal to terminal, matching version", func(c *cell) txn.Op { return txn.SetStatus(t1, failed, c.ver(t1), "") }, 0, txn.ErrIllegalState},
		{"leave terminal, blind", func(c *cell) txn.Op { return txn.SetStatus(t1, running, 0, "") }, cTaskChanged, nil},
		{"terminal to terminal, blind", func(c *cell) txn.Op { return txn.SetStatus(t1, lost, 0, "") }, cTaskChanged, nil},
		{"running unplaced, matching version", func(c *cell) txn.Op { return txn.SetStatus(t3, running, c.ver(t3), "") }, 0, txn.ErrIllegalState},
		{"running unplaced, blind", func(c *cell) txn.Op { return txn.SetStatus(t3, running, 0, "") }, cTaskChanged, nil},
		{"abandon placed, matching version", func(c *cell) txn.Op { return txn.SetStatus(t2, abandoned, c.ver(t2), "") }, 0, txn.ErrIllegalState},
		{"abandon placed, blind", func(c *cell) txn.Op { return txn.SetStatus(t2, abandoned, 0, "") }, cTaskChanged, nil},
		{"abandon terminal, blind", func(c *cell) txn.Op { return txn.SetStatus(t1, abandoned, 0, "") }, cTaskChanged, nil},
		{"stale version", func(c *cell) txn.Op { return txn.SetStatus(t2, running, c.ver(t2)-1, "") }, cTaskChanged, nil},
		{"stale version of a terminal task", func(c *cell) txn.Op { return txn.SetStatus(t1, running, 2, "") }, cTaskChanged, nil},
		{"target PENDING", func(c *cell) txn.Op { return txn.SetStatus(t2, pending, 0, "") }, 0, txn.ErrInvalid},
		{"target ASSIGNED", func(c *cell) txn.Op { return txn.SetStatus(t3, assigned, 0, "") }, 0, txn.ErrInvalid},
		{"target UNSPECIFIED", func(c *cell) txn.Op { return txn.SetStatus(t2, 0, 0, "") }, 0, txn.ErrInvalid},
		{"target out of range", func(c *cell) txn.Op { return txn.SetStatus(t2, 42, 0, "") }, 0, txn.ErrInvalid},
		{"unknown task", func(c *cell) txn.Op { return txn.SetStatus(uid(999), running, 0, "") }, 0, txn.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			c.place(m1, res(1000, 1000), t1, t2)
			c.commit(c.tx(txn.SetStatus(t1, succeeded, 0, "")))
			tx := c.tx(tc.op(c))
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
			if ws != nil || dump(c.s) != before {
				t.Fatalf("conflicting status: %+v %v", r, ws)
			}
		})
	}
}

func TestSetStatusTwiceInOneTxn(t *testing.T) {
	// An agent's batch may report a task twice: RUNNING then SUCCEEDED.
	c := std(t)
	c.place(m1, res(1000, 1000), t1)
	v := c.ver(t1)
	r := c.commit(c.tx(txn.SetStatus(t1, running, v, ""), txn.SetStatus(t1, succeeded, v, "")))
	wantCodes(t, r, cCommitted, cCommitted)
	if tk := c.task(t1); tk.State != succeeded || tk.Started == 0 || tk.Finished == 0 {
		t.Fatalf("task %+v", tk)
	}
	if m := c.machine(m1); m.Tasks != 0 || !m.Allocated.IsZero() {
		t.Fatalf("machine %+v", m)
	}
	// Terminal twice: the second is illegal at the version the caller saw,
	// and a conflict if blind.
	c.place(m1, res(1000, 1000), t2)
	v = c.ver(t2)
	c.mustErr(c.tx(txn.SetStatus(t2, failed, v, ""), txn.SetStatus(t2, lost, v, "")), txn.ErrIllegalState, 1)
	r = c.commit(c.tx(txn.SetStatus(t2, failed, 0, ""), txn.SetStatus(t2, lost, 0, "")))
	wantCodes(t, r, cCommitted, cTaskChanged)
	if tk := c.task(t2); tk.State != failed {
		t.Fatalf("task %+v", tk)
	}
	if m := c.machine(m1); m.Tasks != 0 || !m.Allocated.IsZero() {
		t.Fatalf("double release: machine %+v", m)
	}
}
