package txn_test

import (
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestEvictCommits(t *testing.T) {
	for _, st := range []omegav1.TaskState{assigned, running} {
		t.Run(st.String(), func(t *testing.T) {
			c := std(t)
			c.place(m1, res(1000, 500, "gpu", 1), t1)
			if st == running {
				c.commit(c.tx(txn.SetStatus(t1, running, c.ver(t1), "")))
			}
			before := c.task(t1)
			r := c.commit(c.tx(txn.Evict(t1, c.ver(t1), 9, "preempted")))
			wantCodes(t, r, cCommitted)
			tk := c.task(t1)
			if tk.State != pending || tk.Machine != uuid.Nil || !tk.Claimed.IsZero() || tk.Scheduler != "" ||
				tk.Assigned != 0 || tk.Started != 0 || tk.Evictions != before.Evictions+1 || tk.Message() != "preempted" ||
				tk.Version != r.Revision {
				t.Fatalf("evicted task %+v", tk)
			}
			m := c.machine(m1)
			if !m.Allocated.IsZero() || m.Tasks != 0 || m.Seq != r.Revision {
				t.Fatalf("machine after evict %+v", m)
			}
			// The task can be placed again, and evicted again.
			c.place(m2, res(1, 1), t1)
			r = c.commit(c.tx(txn.ForceEvict(t1, c.ver(t1), "drain")))
			wantCodes(t, r, cCommitted)
			if tk := c.task(t1); tk.Evictions != before.Evictions+2 || tk.State != pending {
				t.Fatalf("second eviction %+v", tk)
			}
		})
	}
}

func TestEvictFreesForLaterClaims(t *testing.T) {
	c := std(t)
	c.place(m2, res(1500, 1500), t1) // priority 1
	// Without an eviction the claim does not fit.
	r := c.commit(c.tx(txn.Claim(t5, m2, res(1000, 1000), c.ver(t5))))
	wantCodes(t, r, cInsufficient)
	// With one before it, it does — in the same transaction.
	r = c.commit(c.tx(
		txn.Evict(t1, c.ver(t1), 5, "for t5"),
		txn.Claim(t5, m2, res(1000, 1000), c.ver(t5)),
	))
	wantCodes(t, r, cCommitted, cCommitted)
	m := c.machine(m2)
	wantRes(t, "allocated", m.Allocated, res(1000, 1000))
	if m.Tasks != 1 || c.task(t5).Machine != m2 || c.task(t1).State != pending {
		t.Fatalf("machine %+v", m)
	}
	// An eviction after the claim does not help it: order matters.
	c2 := std(t)
	c2.place(m2, res(1500, 1500), t1)
	r = c2.commit(c2.tx(
		txn.Claim(t5, m2, res(1000, 1000), c2.ver(t5)),
		txn.Evict(t1, c2.ver(t1), 5, "for t5"),
	))
	wantCodes(t, r, cInsufficient, cCommitted)
	// A conflicting eviction frees nothing.
	c3 := std(t)
	c3.place(m2, res(1500, 1500), t3) // priority 3
	r = c3.commit(c3.tx(
		txn.Evict(t3, c3.ver(t3), 3, "for an equal"),
		txn.Claim(t5, m2, res(1000, 1000), c3.ver(t5)),
	))
	wantCodes(t, r, cPriority, cInsufficient)
}

func TestEvictThenReclaimSameTask(t *testing.T) {
	// Moving a task: evict it and claim it elsewhere in one transaction, at
	// the version the view saw.
	c := std(t)
	c.place(m1, res(1000, 1000), t1)
	v := c.ver(t1)
	r := c.commit(c.tx(txn.ForceEvict(t1, v, "move"), txn.Claim(t1, m2, res(700, 700), v)))
	wantCodes(t, r, cCommitted, cCommitted)
	tk := c.task(t1)
	if tk.Machine != m2 || tk.State != assigned || tk.Evictions != 1 {
		t.Fatalf("moved task %+v", tk)
	}
	if m := c.machine(m1); !m.Allocated.IsZero() || m.Tasks != 0 {
		t.Fatalf("old machine %+v", m)
	}
	wantRes(t, "new machine", c.machine(m2).Allocated, res(700, 700))
}

func TestEvictRejected(t *testing.T) {
	cases := []struct {
		name string
		op   func(c *cell) txn.Op
		code omegav1.OutcomeCode
		err  error
	}{
		{"priority equal", func(c *cell) txn.Op { return txn.Evict(t3, c.ver(t3), 3, "") }, cPriority, nil},
		{"priority lower", func(c *cell) txn.Op { return txn.Evict(t3, c.ver(t3), 2, "") }, cPriority, nil},
		{"stale version", func(c *cell) txn.Op { return txn.Evict(t3, c.ver(t3)-1, 9, "") }, cTaskChanged, nil},
		{"stale version, forced", func(c *cell) txn.Op { return txn.ForceEvict(t3, 2, "") }, cTaskChanged, nil},
		{"unplaced task", func(c *cell) txn.Op { return txn.Evict(t1, c.ver(t1), 9, "") }, 0, txn.ErrIllegalState},
		{"unplaced task, forced", func(c *cell) txn.Op { return txn.ForceEvict(t1, c.ver(t1), "") }, 0, txn.ErrIllegalState},
		{"terminal task", func(c *cell) txn.Op { return txn.ForceEvict(t2, c.ver(t2), "") }, 0, txn.ErrIllegalState},
		{"unknown task", func(c *cell) txn.Op { return txn.ForceEvict(uid(999), 1, "") }, 0, txn.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			c.place(m1, res(1000, 1000), t3, t2)
			c.commit(c.tx(txn.SetStatus(t2, failed, 0, "")))
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
			if ws != nil || r.ClaimsConflicted != 0 || dump(c.s) != before {
				t.Fatalf("conflicting evict: %+v %v", r, ws)
			}
		})
	}
	t.Run("priority higher commits, force ignores priority", func(t *testing.T) {
		c := std(t)
		c.place(m1, res(1000, 1000), t3, t4)
		r := c.commit(c.tx(txn.Evict(t3, c.ver(t3), 4, ""), txn.ForceEvict(t4, c.ver(t4), "")))
		wantCodes(t, r, cCommitted, cCommitted)
		if m := c.machine(m1); m.Tasks != 0 || !m.Allocated.IsZero() {
			t.Fatalf("machine %+v", m)
		}
	})
	t.Run("evicting twice in one transaction", func(t *testing.T) {
		c := std(t)
		c.place(m1, res(1000, 1000), t3)
		c.mustErr(c.tx(txn.ForceEvict(t3, c.ver(t3), ""), txn.ForceEvict(t3, c.ver(t3), "")), txn.ErrIllegalState, 1)
	})
}
