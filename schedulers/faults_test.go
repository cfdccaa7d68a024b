package schedulers

import (
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// Each faulty scheduler decides as the batch scheduler does on the same
// view and seed, but for its one bug: the unit bug's claims declare the
// memory in MiB, the outdated one's reserve no GPU, the thief adds a claim
// on another job's pending task.
func TestFaultySchedulersDecideWithTheirBug(t *testing.T) {
	c := newCell(t, 1)
	var ms []uuid.UUID
	var ops []txn.Op
	for i := range 6 {
		m := c.ids.next()
		ms = append(ms, m)
		ops = append(ops, txn.CreateMachine(testkit.Machine(m, "g"+m.String()[:4], testkit.Res(4000, 16*gib, "gpu", 8))))
		_ = i
	}
	c.commit(ops...)
	job, other := c.ids.next(), c.ids.next()
	ops = []txn.Op{txn.CreateJob(testkit.Job(job, "gpu-job", "batch")), txn.CreateJob(testkit.Job(other, "other", "batch"))}
	for i := range 3 {
		ops = append(ops, txn.CreateTask(testkit.Task(c.ids.next(), job, "t"+string(rune('a'+i)), testkit.Res(1000, gib, "gpu", 1))))
	}
	victim := c.ids.next()
	ops = append(ops, txn.CreateTask(testkit.Task(victim, other, "v", testkit.Res(100, gib))))
	c.commit(ops...)
	v := c.view()
	req := request(t, v, job)
	want := NewBatch().Decide(v, req, env(1))
	if len(want.Ops) != 3 {
		t.Fatalf("the batch scheduler's decision %+v", want)
	}
	claims := func(d Decision) []txn.Op {
		var out []txn.Op
		for _, op := range d.Ops {
			if op.Kind == txn.OpClaim {
				out = append(out, op)
			}
		}
		return out
	}
	units := claims(NewUnitBug().Decide(v, req, env(1)))
	outdated := claims(NewOutdated().Decide(v, req, env(1)))
	thief := claims(NewThief().Decide(v, req, env(1)))
	for i, w := range claims(want) {
		u, o := units[i], outdated[i]
		if u.Task != w.Task || u.Machine != w.Machine || u.Resources.Memory != w.Resources.Memory>>20 || u.Resources.CPU != w.Resources.CPU || u.Resources.Ext["gpu"] != 1 {
			t.Errorf("unit bug claim %+v, the batch scheduler's %+v", u, w)
		}
		if o.Task != w.Task || o.Machine != w.Machine || o.Resources.Ext != nil || o.Resources.Memory != w.Resources.Memory {
			t.Errorf("outdated claim %+v, the batch scheduler's %+v", o, w)
		}
		if !reflect.DeepEqual(thief[i], w) {
			t.Errorf("thief claim %d %+v, the batch scheduler's %+v", i, thief[i], w)
		}
	}
	if len(thief) != 4 || thief[3].Task != victim || thief[3].Machine != want.Ops[0].Machine {
		t.Fatalf("the thief's claims %+v, want the batch scheduler's and one on task %s", thief, victim)
	}
	// The simulation's registry runs them under their kinds
	// (TestSimulationRegistryBuildsFaultySchedulers, bench/sim); the
	// production one refuses them (TestRegistryHasOnlyRealSchedulers).
}
