package storekit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

const gib = int64(1) << 30

// Driver commits a seeded mix of realistic transactions straight to a
// store, each decided on the store's newest state so none conflicts:
// machines come and go and drain, jobs arrive with tasks, tasks are
// claimed (several per transaction), start, finish (SUCCEEDED, FAILED,
// LOST), get evicted and deleted. It is the randomized history the layers
// above the store test against: a client's synced copy, an agent's
// tracker, anything that follows the cell must end up agreeing with the
// store (testkit.DiffStates) whatever the history.
type Driver struct {
	t   testing.TB
	st  *store.Store
	rng *rand.Rand
	g   *testkit.IDs
	n   int
}

// NewDriver makes a driver of st from seed.
func NewDriver(t testing.TB, st *store.Store, seed uint64) *Driver {
	return &Driver{t: t, st: st, rng: rand.New(rand.NewPCG(seed, 0xd1)), g: testkit.IDsFrom(rand.New(rand.NewPCG(seed^0xabc, 0x1d5)))}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// Step commits one transaction and returns its revision; an error fails
// the test.
func (d *Driver) Step() uint64 {
	d.t.Helper()
	rev, err := d.TryStep()
	if err != nil {
		d.t.Fatal(err)
	}
	return rev
}

// TryStep is Step for a goroutine other than the test's.
func (d *Driver) TryStep() (uint64, error) {
	const (
		up       = omegav1.MachineState_MACHINE_STATE_UP
		draining = omegav1.MachineState_MACHINE_STATE_DRAINING
		pending  = omegav1.TaskState_TASK_STATE_PENDING
		assigned = omegav1.TaskState_TASK_STATE_ASSIGNED
		running  = omegav1.TaskState_TASK_STATE_RUNNING
	)
	s := d.st.Snapshot()
	var upMachines, emptyMachines, allMachines []*txn.Machine
	s.RangeMachines(func(m *txn.Machine) bool {
		allMachines = append(allMachines, m)
		if m.State == up {
			upMachines = append(upMachines, m)
		}
		if m.Tasks == 0 {
			emptyMachines = append(emptyMachines, m)
		}
		return true
	})
	var pend, placed, terminal []*txn.Task
	s.RangeTasks(func(t *txn.Task) bool {
		switch {
		case t.State == pending:
			pend = append(pend, t)
		case t.Placed():
			placed = append(placed, t)
		case t.Terminal():
			terminal = append(terminal, t)
		}
		return true
	})
	var ops []txn.Op
	for len(ops) == 0 {
		switch k := d.rng.IntN(12); {
		case k == 0 || len(allMachines) < 3:
			d.n++
			ops = append(ops, txn.CreateMachine(testkit.Machine(d.g.Next(), fmt.Sprintf("w%03d", d.n), testkit.Res(4000+int64(d.rng.IntN(8))*1000, 16*gib))))
		case k <= 2:
			j := d.g.Next()
			d.n++
			ops = append(ops, txn.CreateJob(testkit.Job(j, fmt.Sprintf("j%03d", d.n), "driver")))
			for i := range 1 + d.rng.IntN(4) {
				ops = append(ops, txn.CreateTask(testkit.Task(d.g.Next(), j, fmt.Sprintf("j%03d-%d", d.n, i), testkit.Res(int64(1+d.rng.IntN(3))*500, gib))))
			}
		case k <= 5 && len(pend) > 0 && len(upMachines) > 0:
			used := map[uuid.UUID]txn.Resources{}
			for range 1 + d.rng.IntN(3) {
				t := pick(d.rng, pend)
				m := pick(d.rng, upMachines)
				u, seen := used[m.UID]
				if !seen {
					u = m.Allocated
				}
				if ok, _ := txn.Fits(m.Capacity, u, t.Request()); !ok || slices.ContainsFunc(ops, func(o txn.Op) bool { return o.Task == t.UID }) {
					continue
				}
				used[m.UID] = u.Add(t.Request())
				ops = append(ops, txn.Claim(t.UID, m.UID, t.Request(), t.Version))
			}
		case k == 6 && len(placed) > 0:
			t := pick(d.rng, placed)
			if t.State == assigned {
				ops = append(ops, txn.SetStatus(t.UID, running, t.Version, "started"))
			}
		case k == 7 && len(placed) > 0:
			t := pick(d.rng, placed)
			st := pick(d.rng, []omegav1.TaskState{omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_LOST})
			ops = append(ops, txn.SetStatus(t.UID, st, t.Version, "finished"))
		case k == 8 && len(placed) > 0:
			t := pick(d.rng, placed)
			ops = append(ops, txn.ForceEvict(t.UID, t.Version, "drain"))
		case k == 9 && len(terminal)+len(pend) > 0:
			t := pick(d.rng, append(terminal, pend...))
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, t.UID, t.Version))
		case k == 10 && len(allMachines) > 0:
			m := pick(d.rng, allMachines)
			p := testkit.Machine(m.UID, m.Name(), m.Capacity)
			p.Status = &omegav1.MachineStatus{State: up}
			if m.State == up {
				p.Status.State = draining
			}
			ops = append(ops, txn.PutMachine(p, m.Version))
		case k == 11 && len(emptyMachines) > 0 && len(allMachines) > 3:
			m := pick(d.rng, emptyMachines)
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m.UID, m.Version))
		}
	}
	res, err := d.st.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Component: "driver", Ops: ops})
	if err != nil {
		return 0, fmt.Errorf("driver commit at revision %d: %w", s.Revision(), err)
	}
	if res.Conflicted() {
		return 0, fmt.Errorf("driver commit at revision %d conflicted: %+v", s.Revision(), res.Outcomes)
	}
	return res.Revision, nil
}
