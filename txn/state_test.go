package txn_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// busy builds a state with objects in every situation: machines with and
// without tasks, one draining, tasks pending, assigned, running, terminal,
// evicted, deleted, owned by a job, with gpu claims.
func busy(t testing.TB) *cell {
	c := std(t)
	c.commit(c.tx(
		txn.CreateMachine(machineState(m3, res(8000, 8000, "gpu", 8), draining)),
		txn.CreateJob(jobP(j1)),
		txn.CreateTask(ownedTaskP(uid(100), j1, res(1, 1))),
		txn.CreateTask(ownedTaskP(uid(101), j1, res(1, 1))),
		txn.Claim(uid(100), m1, res(500, 600, "gpu", 1), 0),
	))
	c.place(m1, res(1000, 1000), t1, t2)
	c.place(m2, res(700, 800), t3, t4)
	c.commit(c.tx(
		txn.SetStatus(t1, running, 0, "up"),
		txn.SetStatus(t3, succeeded, 0, "done"),
		txn.ForceEvict(t4, c.ver(t4), "drain"),
		txn.Delete(kindTask, t2, 0),
	))
	c.commit(c.tx(txn.PutMachine(machineState(m3, res(8000, 8000, "gpu", 8), up), 0)))
	c.place(m3, res(100, 100, "gpu", 4), t4, t5)
	if err := txn.CheckInvariants(c.s); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestApplyIsPersistent(t *testing.T) {
	c := busy(t)
	s0 := c.s
	d0 := dump(s0)
	// Two different futures of the same state.
	txA := c.tx(
		txn.SetStatus(t1, failed, 0, ""),
		txn.Claim(uid(101), m1, res(2000, 2000, "gpu", 1), c.ver(uid(101))),
		txn.Delete(kindJob, j1, 0),
		txn.PutMachine(machineP(m2, res(9000, 9000)), 0),
	)
	txB := c.tx(
		txn.ForceEvict(uid(100), c.ver(uid(100)), ""),
		txn.Delete(kindTask, t3, 0),
		txn.CreateMachine(machineP(uid(4), res(1, 1))),
	)
	rev := s0.Revision() + 1
	_, wsA, err := txn.Evaluate(s0, txA, rev, c.lim)
	if err != nil || wsA == nil {
		t.Fatal(err)
	}
	_, wsB, err := txn.Evaluate(s0, txB, rev, c.lim)
	if err != nil || wsB == nil {
		t.Fatal(err)
	}
	sA := s0.Apply(wsA)
	if dump(s0) != d0 {
		t.Fatalf("Apply changed its receiver:\n%s", diff(d0, dump(s0)))
	}
	sB := s0.Apply(wsB)
	if dump(s0) != d0 {
		t.Fatalf("Apply changed its receiver:\n%s", diff(d0, dump(s0)))
	}
	dA := dump(sA)
	for _, s := range []*txn.State{s0, sA, sB} {
		if err := txn.CheckInvariants(s); err != nil {
			t.Fatal(err)
		}
	}
	// Each future has its own changes and not the other's.
	if tk, _ := sA.Task(t1); tk.State != failed {
		t.Fatalf("A: t1 %s", tk.State)
	}
	if tk, _ := sB.Task(t1); tk.State != running {
		t.Fatalf("B: t1 %s", tk.State)
	}
	if _, ok := sA.Task(t3); !ok {
		t.Fatal("A lost t3")
	}
	if _, ok := sB.Task(t3); ok {
		t.Fatal("B kept t3")
	}
	if _, ok := sA.Machine(uid(4)); ok || sB.NumMachines() != 4 || sA.NumMachines() != 3 {
		t.Fatal("machine counts")
	}
	if _, ok := sA.Job(j1); ok {
		t.Fatal("A kept the job")
	}
	if _, ok := sB.Job(j1); !ok {
		t.Fatal("B lost the job")
	}
	// Objects read from the old state are unchanged too.
	if m, _ := s0.Machine(m1); !m.Allocated.Equal(res(1500, 1600, "gpu", 1)) {
		t.Fatalf("s0 m1 %v", m.Allocated)
	}
	// Building on sB leaves sA alone.
	_, wsC, err := txn.Evaluate(sB, &txn.Txn{ViewRevision: sB.Revision(), Ops: []txn.Op{txn.Claim(t3 /*deleted*/, m1, res(1, 1), 0)}}, rev+1, c.lim)
	if !errors.Is(err, txn.ErrNotFound) || wsC != nil {
		t.Fatalf("claim of a task deleted in B: %v", err)
	}
	if dump(sA) != dA {
		t.Fatal("sA changed")
	}
}

func TestApplyPanicsOnOldRevision(t *testing.T) {
	c := busy(t)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	c.s.Apply(&txn.WriteSet{Revision: c.s.Revision()})
}

func TestApplyWriteSetsInOrderEqualsCommits(t *testing.T) {
	// A client applying the write sets it watched rebuilds the store's state.
	src := newCell(t)
	var sets []*txn.WriteSet
	record := func(tx *txn.Txn) {
		_, ws, err := src.eval(tx)
		if err != nil {
			t.Fatal(err)
		}
		if ws != nil {
			sets = append(sets, ws)
			src.s = src.s.Apply(ws)
		}
	}
	record(src.tx(txn.CreateMachine(machineP(m1, res(1000, 1000))), txn.CreateTask(taskP(t1, res(1, 1), 0))))
	record(src.tx(txn.Claim(t1, m1, res(600, 600), src.ver(t1)), txn.CreateTask(taskP(t2, res(1, 1), 0))))
	record(src.tx(txn.Claim(t2, m1, res(600, 600), src.ver(t2)))) // conflicts: no write set
	record(src.tx(txn.SetStatus(t1, succeeded, 0, ""), txn.Claim(t2, m1, res(600, 600), src.ver(t2))))
	if len(sets) != 3 {
		t.Fatalf("%d write sets", len(sets))
	}
	replica := txn.NewState()
	for _, ws := range sets {
		replica = replica.Apply(ws)
	}
	if dump(replica) != dump(src.s) {
		t.Fatalf("replica differs:\n%s", diff(dump(src.s), dump(replica)))
	}
}

// restore rebuilds s through a Restorer from the objects' wire forms, with
// the derived fields of the machines' status scrambled to show they are not
// read.
func restore(t testing.TB, s *txn.State) (*txn.State, error) {
	t.Helper()
	r := txn.NewRestorer(s.Revision())
	var err error
	s.RangeMachines(func(m *txn.Machine) bool {
		p := m.Proto()
		p.Status = &omegav1.MachineStatus{State: p.Status.State, AgentAddress: p.Status.AgentAddress,
			Allocated: res(123, 456, "gpu", 7).Proto(), Tasks: 99, Seq: 1}
		err = r.Machine(p)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	s.RangeJobs(func(j *txn.Job) bool { err = r.Job(j.Proto()); return err == nil })
	if err != nil {
		return nil, err
	}
	s.RangeTasks(func(tk *txn.Task) bool { err = r.Task(tk.Proto(), tk.Version); return err == nil })
	if err != nil {
		return nil, err
	}
	return r.Finish()
}

func TestRestorerRebuildsCommittedState(t *testing.T) {
	c := busy(t)
	got, err := restore(t, c.s)
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.CheckInvariants(got); err != nil {
		t.Fatal(err)
	}
	if got.Revision() != c.s.Revision() || got.NumMachines() != c.s.NumMachines() ||
		got.NumTasks() != c.s.NumTasks() || got.NumJobs() != c.s.NumJobs() {
		t.Fatal("revision or counts differ")
	}
	wantRes(t, "total capacity", got.Capacity(), c.s.Capacity())
	wantRes(t, "total allocated", got.Allocated(), c.s.Allocated())
	c.s.RangeMachines(func(want *txn.Machine) bool {
		m, ok := got.Machine(want.UID)
		if !ok {
			t.Fatalf("machine %s missing", want.UID)
		}
		if !m.Allocated.Equal(want.Allocated) || m.Tasks != want.Tasks || !m.Capacity.Equal(want.Capacity) ||
			m.State != want.State || m.Version != want.Version || m.CreateRev != want.CreateRev || m.Created != want.Created {
			t.Fatalf("machine %s restored as %+v, want %+v", want.UID, m, want)
		}
		// After a restart the coarse sequence is the reopening revision.
		if m.Seq != c.s.Revision() {
			t.Fatalf("seq %d, want %d", m.Seq, c.s.Revision())
		}
		return true
	})
	// Tasks and jobs (and the job index) are identical.
	keep := func(d string) string {
		var out []string
		for _, l := range strings.Split(d, "\n") {
			if strings.HasPrefix(l, "task ") || strings.HasPrefix(l, "job ") || strings.HasPrefix(l, "jobtasks ") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if keep(dump(got)) != keep(dump(c.s)) {
		t.Fatalf("restored tasks and jobs differ:\n%s", diff(keep(dump(c.s)), keep(dump(got))))
	}
	// And the two states decide the next (fine) transaction alike.
	tx := c.tx(
		txn.Claim(uid(101), m1, res(2501, 100), c.ver(uid(101))),
		txn.Claim(t3, m1, res(1, 1), c.ver(t3)),
		txn.SetStatus(t5, lost, 0, ""),
		txn.Claim(t4, m3, res(100, 100), c.ver(t4)-1),
	)
	rA, wsA, errA := txn.Evaluate(c.s, tx, c.s.Revision()+1, c.lim)
	rB, wsB, errB := txn.Evaluate(got, tx, got.Revision()+1, c.lim)
	if !errors.Is(errB, txn.ErrNotPending) || !errors.Is(errA, txn.ErrNotPending) {
		t.Fatalf("claim of a terminal task: %v / %v", errA, errB)
	}
	tx.Ops = append(tx.Ops[:1:1], tx.Ops[2:]...)
	rA, wsA, errA = txn.Evaluate(c.s, tx, c.s.Revision()+1, c.lim)
	rB, wsB, errB = txn.Evaluate(got, tx, got.Revision()+1, c.lim)
	if errA != nil || errB != nil || (wsA == nil) != (wsB == nil) {
		t.Fatalf("%v / %v", errA, errB)
	}
	if a, b := codes(rA), codes(rB); len(a) != 3 || a[0] != cInsufficient || a[1] != cCommitted || a[2] != cTaskChanged || b[0] != a[0] || b[1] != a[1] || b[2] != a[2] {
		t.Fatalf("outcomes %v / %v", a, b)
	}
}

func TestRestorerRejects(t *testing.T) {
	task := func(st omegav1.TaskState, machine string, claimed txn.Resources) *omegav1.Task {
		p := taskP(t1, res(1, 1), 0)
		p.Status = &omegav1.TaskStatus{State: st, MachineUid: machine, Claimed: claimed.Proto()}
		return p
	}
	t.Run("placed on unknown machine", func(t *testing.T) {
		r := txn.NewRestorer(5)
		if err := r.Machine(machineP(m1, res(10, 10))); err != nil {
			t.Fatal(err)
		}
		if err := r.Task(task(running, m2.String(), res(1, 1)), 3); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Finish(); !errors.Is(err, txn.ErrNotFound) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("over capacity", func(t *testing.T) {
		r := txn.NewRestorer(5)
		if err := r.Machine(machineP(m1, res(10, 10))); err != nil {
			t.Fatal(err)
		}
		if err := r.Task(task(assigned, m1.String(), res(11, 1)), 3); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Finish(); !errors.Is(err, txn.ErrInvalid) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("terminal task on unknown machine is fine", func(t *testing.T) {
		r := txn.NewRestorer(5)
		if err := r.Task(task(succeeded, m2.String(), res(1, 1)), 3); err != nil {
			t.Fatal(err)
		}
		s, err := r.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if err := txn.CheckInvariants(s); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("duplicate machine", func(t *testing.T) {
		r := txn.NewRestorer(5)
		if err := r.Machine(machineP(m1, res(10, 10))); err != nil {
			t.Fatal(err)
		}
		if err := r.Machine(machineP(m1, res(10, 10))); !errors.Is(err, txn.ErrAlreadyExists) {
			t.Fatalf("err %v", err)
		}
	})
	for name, p := range map[string]*omegav1.Task{
		"unspecified state": task(0, "", txn.Resources{}),
		"unknown state":     task(42, "", txn.Resources{}),
		"bad machine uid":   task(running, "nope", res(1, 1)),
		"negative claim":    task(running, m1.String(), res(-1, 1)),
	} {
		t.Run(name, func(t *testing.T) {
			r := txn.NewRestorer(5)
			if err := r.Task(p, 3); !errors.Is(err, txn.ErrInvalid) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func TestCheckInvariantsDetectsCorruption(t *testing.T) {
	corrupt := []struct {
		name   string
		change func(c *cell) txn.Change
	}{
		{"machine allocation off", func(c *cell) txn.Change {
			m := *c.machine(m1)
			m.Allocated = m.Allocated.Add(res(1, 0))
			return txn.Change{Kind: kindMachine, Machine: &m}
		}},
		{"machine gpu allocation lost", func(c *cell) txn.Change {
			m := *c.machine(m1)
			m.Allocated = m.Allocated.Sub(res(0, 0, "gpu", 1))
			return txn.Change{Kind: kindMachine, Machine: &m}
		}},
		{"machine task count off", func(c *cell) txn.Change {
			m := *c.machine(m1)
			m.Tasks++
			return txn.Change{Kind: kindMachine, Machine: &m}
		}},
		{"machine over capacity", func(c *cell) txn.Change {
			m := *c.machine(m1)
			m.Capacity = res(100, 100, "gpu", 1)
			return txn.Change{Kind: kindMachine, Machine: &m}
		}},
		{"machine of placed tasks deleted", func(c *cell) txn.Change {
			return txn.Change{Kind: kindMachine, Machine: c.machine(m1), Deleted: true}
		}},
		{"task moved", func(c *cell) txn.Change {
			tk := *c.task(t1)
			tk.Machine = m2
			return txn.Change{Kind: kindTask, Task: &tk}
		}},
		{"task claim changed", func(c *cell) txn.Change {
			tk := *c.task(t1)
			tk.Claimed = res(1, 1)
			return txn.Change{Kind: kindTask, Task: &tk}
		}},
		{"placed task on unknown machine", func(c *cell) txn.Change {
			tk := *c.task(t1)
			tk.Machine = uid(999)
			return txn.Change{Kind: kindTask, Task: &tk}
		}},
		{"pending task with a machine", func(c *cell) txn.Change {
			tk := *c.task(uid(101))
			tk.Machine = m2
			return txn.Change{Kind: kindTask, Task: &tk}
		}},
		{"terminal task still counted", func(c *cell) txn.Change {
			tk := *c.task(t1)
			tk.State = succeeded
			return txn.Change{Kind: kindTask, Task: &tk}
		}},
		{"placed task vanished", func(c *cell) txn.Change {
			return txn.Change{Kind: kindTask, Task: c.task(t5), Deleted: true}
		}},
	}
	for _, tc := range corrupt {
		t.Run(tc.name, func(t *testing.T) {
			c := busy(t)
			b := c.s.Builder()
			ch := tc.change(c)
			b.Apply(&ch)
			bad := b.Finish(c.s.Revision() + 1)
			if err := txn.CheckInvariants(bad); err == nil {
				t.Fatalf("corruption %q not detected", tc.name)
			}
			// The original is intact and still passes.
			if err := txn.CheckInvariants(c.s); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("clean", func(t *testing.T) {
		c := busy(t)
		b := c.s.Builder()
		m := *c.machine(m2)
		m.Agent = "elsewhere"
		b.Apply(&txn.Change{Kind: kindMachine, Machine: &m})
		if err := txn.CheckInvariants(b.Finish(c.s.Revision() + 1)); err != nil {
			t.Fatalf("harmless change flagged: %v", err)
		}
		if err := txn.CheckInvariants(txn.NewState()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTaskSize: a task version is 192 bytes, a size class of whole cache
// lines (an allocation of 208, the next class, spans five lines when it
// starts mid-line); a field added must pay for itself.
func TestTaskSize(t *testing.T) {
	if got := unsafe.Sizeof(txn.Task{}); got > 192 {
		t.Fatalf("txn.Task is %d bytes, want at most 192", got)
	}
}
