package schedulers

import (
	"reflect"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestBatchPlacesEveryPendingTaskThatFits(t *testing.T) {
	forSeeds(t, 5, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		machines := c.addMachines(uniform(10, 4000, 16*gib, 0)...)
		job, tasks := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 30, cpu: 1000, mem: gib})
		v := c.view()
		d := NewBatch().Decide(v, request(t, v, job), env(seed))

		if d.Unplaceable != 0 || len(claims(d)) != len(tasks) || len(d.Ops) != len(tasks) {
			t.Fatalf("seed %d: %d claims of %d ops, %d unplaceable; want %d claims", seed, len(claims(d)), len(d.Ops), d.Unplaceable, len(tasks))
		}
		if d.Considered != len(tasks) || d.AllOrNothing {
			t.Fatalf("seed %d: considered %d, all-or-nothing %t; want %d, false", seed, d.Considered, d.AllOrNothing, len(tasks))
		}
		checkClaimsFit(t, v, d)
		res := c.commitDecision(v, d)
		if res.Conflicted() || res.Committed != len(tasks) {
			t.Fatalf("seed %d: committed %d, conflicts %d", seed, res.Committed, res.Conflicts)
		}
		c.checkInvariants()
		var total int32
		for _, m := range machines {
			total += c.machine(m).Tasks
		}
		if total != int32(len(tasks)) {
			t.Fatalf("seed %d: %d tasks on machines, want %d", seed, total, len(tasks))
		}
		for _, u := range tasks {
			if tk := c.task(u); tk.State != assignedState || tk.Scheduler != "test-0" {
				t.Fatalf("seed %d: task %s is %s by %q", seed, u, tk.State, tk.Scheduler)
			}
		}
	})
}

// The view shows several machines each with room for exactly one more task
// (cpu-bound on some, memory-bound on others, partly used by another job on
// the rest). A job of more tasks than that must get one task per machine:
// the Placer counts the decision's own claims.
func TestBatchNeverPutsMoreOnAMachineThanFits(t *testing.T) {
	forSeeds(t, 20, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		var specs []machineSpec
		specs = append(specs, uniform(3, 1500, 16*gib, 0)...)        // cpu: room for one
		specs = append(specs, uniform(3, 16000, gib+gib/2, 0)...)    // memory: room for one
		specs = append(specs, uniform(3, 2000, 16*gib, 0)...)        // room for one once filled
		specs = append(specs, machineSpec{cpu: 999, mem: 64 * gib})  // room for none
		specs = append(specs, machineSpec{cpu: 64000, mem: gib - 1}) // room for none
		machines := c.addMachines(specs...)
		c.fill(1000, gib/4, machines[6:9]...)
		job, tasks := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 12, cpu: 1000, mem: gib})
		const fits = 9

		v := c.view()
		d := NewBatch().Decide(v, request(t, v, job), env(seed))
		checkClaimsFit(t, v, d)
		if got := len(claims(d)); got != fits || d.Unplaceable != len(tasks)-fits {
			t.Fatalf("seed %d: %d claims, %d unplaceable; want %d and %d", seed, got, d.Unplaceable, fits, len(tasks)-fits)
		}
		for m, n := range perMachine(d) {
			if n != 1 {
				t.Fatalf("seed %d: %d claims on machine %s, room for one", seed, n, m)
			}
		}
		res := c.commitDecision(v, d)
		if res.Committed != fits || res.Conflicted() {
			t.Fatalf("seed %d: committed %d (conflicts %d), want %d", seed, res.Committed, res.Conflicts, fits)
		}
		c.checkInvariants()
		for _, m := range machines[:9] {
			if free := c.machine(m).Free(); free.CPU >= 1000 && free.Memory >= gib {
				t.Fatalf("seed %d: machine %s still has room for a task after the decision: free %v", seed, m, free)
			}
		}
	})
}

func TestBatchLeavesTasksUnplaceableWhenTheCellIsFull(t *testing.T) {
	const seed = 7
	logSeed(t, seed)
	c := newCell(t, seed)
	machines := c.addMachines(uniform(4, 2000, 4*gib, 0)...)
	// Room left: none by cpu on two machines, none by memory on the other
	// two. A DRAINING and a DOWN machine with plenty of room take nothing.
	c.fill(1500, gib, machines[0], machines[1])
	c.fill(500, 3*gib+gib/2, machines[2], machines[3])
	c.addMachines(
		machineSpec{cpu: 64000, mem: 64 * gib, state: omegav1.MachineState_MACHINE_STATE_DRAINING},
		machineSpec{cpu: 64000, mem: 64 * gib, state: omegav1.MachineState_MACHINE_STATE_DOWN},
	)
	job, tasks := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 5, cpu: 1000, mem: gib})
	v := c.view()
	d := NewBatch().Decide(v, request(t, v, job), env(seed))
	if len(d.Ops) != 0 || d.Unplaceable != len(tasks) || d.Considered != len(tasks) {
		t.Fatalf("full cell: %d ops, %d unplaceable, %d considered; want 0, %d, %d\n%s", len(d.Ops), d.Unplaceable, d.Considered, len(tasks), len(tasks), opsString(d.Ops))
	}
}

func TestBatchSameSeedSameDecisionOtherSeedOtherMachines(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(64, 4000, 16*gib, 0)...)
	job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 16, cpu: 1000, mem: gib})
	v := c.view()
	req := request(t, v, job)
	decide := func(seed uint64) Decision { return NewBatch().Decide(v, req, env(seed)) }
	machinesOf := func(d Decision) []uuid.UUID {
		var out []uuid.UUID
		for _, op := range claims(d) {
			out = append(out, op.Machine)
		}
		return out
	}
	for seed := uint64(1); seed <= 5; seed++ {
		a, b := decide(seed), decide(seed)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two decisions differ:\n%s\n---\n%s", seed, opsString(a.Ops), opsString(b.Ops))
		}
		other := decide(seed + 100)
		if reflect.DeepEqual(machinesOf(a), machinesOf(other)) {
			t.Fatalf("seeds %d and %d chose the same machines for all 16 tasks of 64 machines: the seed is not used", seed, seed+100)
		}
	}
	// One scheduler instance keeps its machine index between decisions; its
	// decision must not depend on that.
	s := NewBatch()
	first := s.Decide(v, req, env(3))
	if again := s.Decide(v, req, env(3)); !reflect.DeepEqual(first, again) {
		t.Fatalf("a reused Batch decides differently for the same seed")
	}
}

func TestBatchGangJobIsAllOrNothing(t *testing.T) {
	const seed = 11
	logSeed(t, seed)
	c := newCell(t, seed)
	c.addMachines(uniform(4, 2000, 8*gib, 0)...) // room for 8 tasks
	gang, _ := c.addJob("gang", jobSpec{kind: batchKind, scheduler: "batch", tasks: 6, cpu: 1000, mem: gib, gang: true})
	plain, _ := c.addJob("plain", jobSpec{kind: batchKind, scheduler: "batch", tasks: 6, cpu: 1000, mem: gib})
	v := c.view()
	if d := NewBatch().Decide(v, request(t, v, gang), env(seed)); !d.AllOrNothing || len(claims(d)) != 6 {
		t.Fatalf("gang job: all-or-nothing %t, %d claims; want true, 6", d.AllOrNothing, len(claims(d)))
	}
	if d := NewBatch().Decide(v, request(t, v, plain), env(seed)); d.AllOrNothing {
		t.Fatalf("plain job: all-or-nothing")
	}

	// A gang that does not fit whole is not placed in part.
	big, tasks := c.addJob("big-gang", jobSpec{kind: batchKind, scheduler: "batch", tasks: 10, cpu: 1000, mem: gib, gang: true})
	v = c.view()
	d := NewBatch().Decide(v, request(t, v, big), env(seed))
	if !d.AllOrNothing || d.Unplaceable == 0 {
		t.Fatalf("gang of 10 on room for 8: all-or-nothing %t, unplaceable %d", d.AllOrNothing, d.Unplaceable)
	}
	if len(d.Ops) > 0 {
		c.commitDecision(v, d)
	}
	for _, u := range tasks {
		if st := c.task(u).State; st != pendingState {
			t.Fatalf("gang of 10 on room for 8: task %s is %s; a gang is placed whole or not at all\n%s", u, st, opsString(d.Ops))
		}
	}
}

// Batch honours constraints through the shared Placer too.
func TestBatchHonoursConstraints(t *testing.T) {
	forSeeds(t, 5, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		specs := uniform(8, 8000, 32*gib, 0)
		for i := range specs {
			specs[i].attrs = map[string]string{"zone": []string{"a", "b"}[i%2]}
		}
		c.addMachines(specs...)
		cons := []*omegav1.Constraint{
			{Attribute: "zone", Operator: omegav1.Constraint_OPERATOR_EQUAL, Value: "a"},
			{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES},
		}
		job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 6, cpu: 100, mem: gib, constraints: cons})
		v := c.view()
		d := NewBatch().Decide(v, request(t, v, job), env(seed))
		if len(claims(d)) != 4 || d.Unplaceable != 2 {
			t.Fatalf("seed %d: %d claims, %d unplaceable; want 4 (one per zone-a machine) and 2", seed, len(claims(d)), d.Unplaceable)
		}
		for m, n := range perMachine(d) {
			mm, _ := v.Machine(m)
			if n != 1 || mm.Spec.GetAttributes()["zone"] != "a" {
				t.Fatalf("seed %d: %d claims on a zone-%s machine", seed, n, mm.Spec.GetAttributes()["zone"])
			}
		}
	})
}

// A claim declares what its task asks for, at the version the view saw.
func TestBatchClaimsDeclareTheTaskRequestAtItsVersion(t *testing.T) {
	c := newCell(t, 3)
	c.addMachines(uniform(3, 4000, 16*gib, 0)...)
	job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 3, cpu: 1500, mem: 3 * gib})
	v := c.view()
	d := NewBatch().Decide(v, request(t, v, job), env(3))
	for _, op := range claims(d) {
		tk, _ := v.Task(op.Task)
		if op.ExpectVersion != tk.Version || !op.Resources.Equal(txn.Resources{CPU: 1500, Memory: 3 * gib}) {
			t.Fatalf("claim %s", opString(op))
		}
	}
}
