package txn_test

import (
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestPutMachine(t *testing.T) {
	t.Run("commits, keeps the allocation", func(t *testing.T) {
		c := std(t)
		c.place(m1, res(1000, 1000, "gpu", 1), t1, t2)
		before := c.machine(m1)
		p := machineState(m1, res(3000, 2000, "gpu", 2), draining)
		p.Meta.Labels = map[string]string{"zone": "b"}
		// A client-supplied allocation is ignored.
		p.Status.Allocated = res(1, 1).Proto()
		p.Status.Tasks = 42
		p.Status.AgentAddress = "10.0.0.1:7000"
		r := c.commit(c.tx(txn.PutMachine(p, before.Version)))
		wantCodes(t, r, cCommitted)
		m := c.machine(m1)
		wantRes(t, "allocated", m.Allocated, res(2000, 2000, "gpu", 2))
		wantRes(t, "capacity", m.Capacity, res(3000, 2000, "gpu", 2))
		if m.Tasks != 2 || m.State != draining || m.Agent != "10.0.0.1:7000" || m.Version != r.Revision ||
			m.Seq != r.Revision || m.CreateRev != before.CreateRev || m.Created != before.Created || m.Meta.GetLabels()["zone"] != "b" {
			t.Fatalf("machine %+v", m)
		}
		wantRes(t, "total capacity", c.s.Capacity(), res(5000, 4000, "gpu", 2))
		// Tasks on it are untouched.
		if tk := c.task(t1); tk.State != assigned || tk.Machine != m1 {
			t.Fatalf("task %+v", tk)
		}
	})
	t.Run("blind put", func(t *testing.T) {
		c := std(t)
		c.commit(c.tx(txn.PutMachine(machineP(m2, res(2500, 2500)), 0)))
		wantRes(t, "capacity", c.machine(m2).Capacity, res(2500, 2500))
	})
	t.Run("two puts in one transaction check the base version", func(t *testing.T) {
		c := std(t)
		v := c.machine(m2).Version
		r := c.commit(c.tx(
			txn.PutMachine(machineP(m2, res(2500, 2500)), v),
			txn.PutMachine(machineP(m2, res(3000, 3000)), v),
		))
		wantCodes(t, r, cCommitted, cCommitted)
		wantRes(t, "capacity", c.machine(m2).Capacity, res(3000, 3000))
	})

	cases := []struct {
		name string
		op   func(c *cell) txn.Op
		code omegav1.OutcomeCode
		err  error
	}{
		{"version mismatch", func(c *cell) txn.Op {
			return txn.PutMachine(machineP(m1, res(9000, 9000)), c.machine(m1).Version+1)
		}, cVersion, nil},
		{"shrink cpu below allocation", func(c *cell) txn.Op {
			return txn.PutMachine(machineP(m1, res(1999, 4000, "gpu", 2)), 0)
		}, cInsufficient, nil},
		{"shrink gpu below allocation", func(c *cell) txn.Op {
			return txn.PutMachine(machineP(m1, res(4000, 4000, "gpu", 1)), 0)
		}, cInsufficient, nil},
		{"drop the gpu dimension", func(c *cell) txn.Op {
			return txn.PutMachine(machineP(m1, res(4000, 4000)), 0)
		}, cInsufficient, nil},
		{"unknown machine", func(c *cell) txn.Op { return txn.PutMachine(machineP(m3, res(1, 1)), 0) }, 0, txn.ErrNotFound},
		{"negative capacity", func(c *cell) txn.Op { return txn.PutMachine(machineP(m1, res(-1, 1)), 0) }, 0, txn.ErrInvalid},
		{"a task", func(c *cell) txn.Op {
			return txn.Op{Kind: txn.OpPut, NewTask: taskP(t1, res(1, 1), 0)}
		}, 0, txn.ErrInvalid},
		{"nothing", func(c *cell) txn.Op { return txn.Op{Kind: txn.OpPut} }, 0, txn.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			c.place(m1, res(1000, 1000, "gpu", 1), t1, t2)
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
				t.Fatal("conflicting put changed something")
			}
		})
	}
	t.Run("shrink exactly to the allocation", func(t *testing.T) {
		c := std(t)
		c.place(m1, res(1000, 1000, "gpu", 1), t1, t2)
		r := c.commit(c.tx(txn.PutMachine(machineP(m1, res(2000, 2000, "gpu", 2)), 0)))
		wantCodes(t, r, cCommitted)
		r = c.commit(c.tx(txn.Claim(t3, m1, res(1, 0), c.ver(t3))))
		wantCodes(t, r, cInsufficient)
	})
	t.Run("shrink after a release in the same transaction", func(t *testing.T) {
		c := std(t)
		c.place(m1, res(1000, 1000, "gpu", 1), t1, t2)
		r := c.commit(c.tx(
			txn.SetStatus(t1, succeeded, 0, ""),
			txn.PutMachine(machineP(m1, res(1000, 1000, "gpu", 1)), 0),
		))
		wantCodes(t, r, cCommitted, cCommitted)
		wantRes(t, "allocated", c.machine(m1).Allocated, res(1000, 1000, "gpu", 1))
	})
}

func TestPutJob(t *testing.T) {
	c := std(t)
	c.commit(c.tx(txn.CreateJob(jobP(j1))))
	j0, _ := c.s.Job(j1)
	p := jobP(j1)
	p.Spec.Priority = 7
	p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING, Running: 1}
	r := c.commit(c.tx(txn.PutJob(p, j0.Version)))
	wantCodes(t, r, cCommitted)
	j, _ := c.s.Job(j1)
	if j.Version != r.Revision || j.CreateRev != j0.CreateRev || j.Created != j0.Created ||
		j.Spec.GetPriority() != 7 || j.Status.GetPhase() != omegav1.JobPhase_JOB_PHASE_RUNNING {
		t.Fatalf("job %+v", j)
	}
	before := dump(c.s)
	r, ws, err := c.eval(c.tx(txn.PutJob(jobP(j1), j0.Version)))
	if err != nil {
		t.Fatal(err)
	}
	wantCodes(t, r, cVersion)
	if ws != nil || dump(c.s) != before {
		t.Fatal("conflicting put changed something")
	}
	c.mustErr(c.tx(txn.PutJob(jobP(uid(998)), 0)), txn.ErrNotFound, 0)
	bad := jobP(j1)
	bad.Spec = nil
	c.mustErr(c.tx(txn.PutJob(bad, 0)), txn.ErrInvalid, 0)
}

func TestDelete(t *testing.T) {
	t.Run("placed task frees its resources", func(t *testing.T) {
		c := std(t)
		c.place(m2, res(2000, 2000), t1)
		r := c.commit(c.tx(
			txn.Delete(kindTask, t1, c.ver(t1)),
			txn.Claim(t2, m2, res(2000, 2000), c.ver(t2)), // fits in what the delete freed
		))
		wantCodes(t, r, cCommitted, cCommitted)
		if _, ok := c.s.Task(t1); ok {
			t.Fatal("task still there")
		}
		m := c.machine(m2)
		if m.Tasks != 1 || m.Seq != r.Revision {
			t.Fatalf("machine %+v", m)
		}
		wantRes(t, "allocated", m.Allocated, res(2000, 2000))
		if c.s.NumTasks() != 4 {
			t.Fatalf("%d tasks", c.s.NumTasks())
		}
	})
	t.Run("terminal task frees nothing twice", func(t *testing.T) {
		c := std(t)
		c.place(m2, res(1000, 1000), t1, t2)
		c.commit(c.tx(txn.SetStatus(t1, succeeded, 0, "")))
		c.commit(c.tx(txn.Delete(kindTask, t1, 0)))
		m := c.machine(m2)
		wantRes(t, "allocated", m.Allocated, res(1000, 1000))
		if m.Tasks != 1 {
			t.Fatalf("machine %+v", m)
		}
	})
	t.Run("deleted task leaves the pending index", func(t *testing.T) {
		c := std(t)
		c.commit(c.tx(txn.CreateJob(jobP(j1)), txn.CreateTask(ownedTaskP(uid(100), j1, res(1, 1))), txn.CreateTask(ownedTaskP(uid(101), j1, res(1, 1)))))
		c.commit(c.tx(txn.Delete(kindTask, uid(100), 0)))
		var left []uuid.UUID
		c.s.RangePendingTasks(j1, func(x *txn.Task) bool { left = append(left, x.UID); return true })
		if len(left) != 1 || left[0] != uid(101) {
			t.Fatalf("job tasks %v", left)
		}
		c.commit(c.tx(txn.Delete(kindTask, uid(101), 0), txn.Delete(kindJob, j1, 0)))
		n := 0
		c.s.RangePendingTasks(j1, func(*txn.Task) bool { n++; return true })
		if _, ok := c.s.Job(j1); ok || n != 0 {
			t.Fatalf("job still there or indexed: %d", n)
		}
	})
	t.Run("machine with tasks is in use", func(t *testing.T) {
		c := std(t)
		c.place(m2, res(1, 1), t1)
		c.mustErr(c.tx(txn.Delete(kindMachine, m2, 0)), txn.ErrInUse, 0)
		// Once its task is terminal, it can go, in the same transaction.
		r := c.commit(c.tx(txn.SetStatus(t1, lost, 0, "machine gone"), txn.Delete(kindMachine, m2, 0)))
		wantCodes(t, r, cCommitted, cCommitted)
		if _, ok := c.s.Machine(m2); ok || c.s.NumMachines() != 1 {
			t.Fatal("machine still there")
		}
		wantRes(t, "total capacity", c.s.Capacity(), res(4000, 4000, "gpu", 2))
		wantRes(t, "total allocated", c.s.Allocated(), res(0, 0))
	})
	t.Run("created and deleted in one transaction", func(t *testing.T) {
		c := std(t)
		n := uid(100)
		r := c.commit(c.tx(
			txn.CreateTask(taskP(n, res(1, 1), 0)),
			txn.Claim(n, m1, res(500, 500), 0),
			txn.Delete(kindTask, n, 0),
			txn.CreateMachine(machineP(m3, res(1, 1))),
			txn.Delete(kindMachine, m3, 0),
		))
		wantCodes(t, r, cCommitted, cCommitted, cCommitted, cCommitted, cCommitted)
		if _, ok := c.s.Task(n); ok {
			t.Fatal("task exists")
		}
		if _, ok := c.s.Machine(m3); ok {
			t.Fatal("machine exists")
		}
		if m := c.machine(m1); m.Tasks != 0 || !m.Allocated.IsZero() {
			t.Fatalf("machine %+v", m)
		}
	})

	cases := []struct {
		name string
		op   func(c *cell) txn.Op
		code omegav1.OutcomeCode
		err  error
	}{
		{"task version mismatch", func(c *cell) txn.Op { return txn.Delete(kindTask, t1, c.ver(t1)+1) }, cVersion, nil},
		{"job version mismatch", func(c *cell) txn.Op { return txn.Delete(kindJob, j1, 1) }, cVersion, nil},
		{"machine version mismatch", func(c *cell) txn.Op { return txn.Delete(kindMachine, m2, 2) }, cVersion, nil},
		{"unknown task", func(c *cell) txn.Op { return txn.Delete(kindTask, uid(999), 0) }, 0, txn.ErrNotFound},
		{"unknown job", func(c *cell) txn.Op { return txn.Delete(kindJob, uid(999), 0) }, 0, txn.ErrNotFound},
		{"unknown machine", func(c *cell) txn.Op { return txn.Delete(kindMachine, uid(999), 0) }, 0, txn.ErrNotFound},
		{"unspecified kind", func(c *cell) txn.Op { return txn.Delete(0, t1, 0) }, 0, txn.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			c.commit(c.tx(txn.CreateJob(jobP(j1))))
			c.place(m1, res(1, 1), t1)
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
				t.Fatal("conflicting delete changed something")
			}
		})
	}
}
