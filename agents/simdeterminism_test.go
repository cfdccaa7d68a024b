package agents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// workload is a seeded closed loop over a cell: every virtual second a
// submitter-scheduler (committing straight to the store) creates and
// places tasks of random durations, places evicted tasks again and evicts
// one now and then; the fleet ticks every second with failures on; and
// every seventh status transaction has one of its tasks evicted just
// before it lands, so the conflict path runs too.
type workload struct {
	seed, fleetSeed uint64
	machines        int
	span            time.Duration
	watching        bool // the fleet's client syncs by watching instead of sharing snapshots
}

type workloadRun struct {
	st    *store.Store
	fleet *SimFleet
	log   []recorded
}

func (w workload) run(t *testing.T) workloadRun {
	t.Helper()
	st := openStoreCheck(t, 0, false) // checked every simulated minute below
	g := newIDs(w.seed)
	r := rand.New(rand.NewPCG(w.seed, 99))
	makeMachines(t, st, g, w.machines)

	cfg := DefaultFleetConfig()
	cfg.FailuresPerDay = 24 * 6
	cfg.RepairTime = 15 * time.Minute
	cfg.Rand = rand.New(rand.NewPCG(w.fleetSeed, 1))
	var opts []inproc.Option
	if w.watching {
		opts = append(opts, inproc.WithoutSharing())
	}
	h := newHarness(t, st, cfg, opts...)
	h.rec.before = func(n int, tx *txn.Txn) {
		if n%7 != 3 {
			return
		}
		for _, op := range tx.Ops {
			if op.Kind == txn.OpSetStatus && op.State == omegav1.TaskState_TASK_STATE_SUCCEEDED {
				tk := taskAt(t, st.Snapshot(), op.Task)
				commitAt(t, st, time.Unix(0, tx.UnixNanos), txn.ForceEvict(op.Task, tk.Version, "preempted"))
				return
			}
		}
	}
	for now := t0.Add(time.Second); !now.After(t0.Add(w.span)); now = now.Add(time.Second) {
		drive(t, st, g, r, now)
		h.tick(t, now)
		if now.Second() == 0 {
			if err := txn.CheckInvariants(st.Snapshot()); err != nil {
				t.Fatalf("at %v: %v", now.Sub(t0), err)
			}
		}
	}
	return workloadRun{st: st, fleet: h.fleet, log: h.rec.commits()}
}

// drive is one second of the submitter-scheduler.
func drive(t *testing.T, st *store.Store, g *ids, r *rand.Rand, now time.Time) {
	t.Helper()
	s := st.Snapshot()
	var up []*txn.Machine
	s.RangeMachines(func(m *txn.Machine) bool {
		if m.State == omegav1.MachineState_MACHINE_STATE_UP {
			up = append(up, m)
		}
		return true
	})
	used := make([]txn.Resources, len(up))
	for i, m := range up {
		used[i] = m.Allocated
	}
	fit := func(req txn.Resources) (uuid.UUID, bool) {
		if len(up) == 0 {
			return uuid.Nil, false
		}
		off := r.IntN(len(up))
		for k := range up {
			i := (off + k) % len(up)
			if ok, _ := txn.Fits(up[i].Capacity, used[i], req); ok {
				used[i] = used[i].Add(req)
				return up[i].UID, true
			}
		}
		return uuid.Nil, false
	}
	var ops []txn.Op
	if r.IntN(10) == 0 {
		var placed []*txn.Task
		s.RangeTasks(func(tk *txn.Task) bool {
			if tk.Placed() {
				placed = append(placed, tk)
			}
			return true
		})
		if len(placed) > 0 {
			v := placed[r.IntN(len(placed))]
			ops = append(ops, txn.ForceEvict(v.UID, v.Version, "rebalance"))
		}
	}
	tries := 0
	s.RangePendingTasks(uuid.Nil, func(tk *txn.Task) bool {
		if m, ok := fit(tk.Request()); ok {
			ops = append(ops, txn.Claim(tk.UID, m, tk.Request(), tk.Version))
		}
		tries++
		return tries < 50
	})
	for range r.IntN(4) {
		d := time.Duration(1+r.IntN(180_000)) * time.Millisecond
		if r.IntN(100) == 0 {
			d = 0 // runs forever
		}
		u := g.next()
		ops = append(ops, txn.CreateTask(taskProto(u, "t-"+u.String()[:8], 500, gib, d)))
		if m, ok := fit(res(500, gib)); ok {
			ops = append(ops, txn.Claim(u, m, res(500, gib), 0))
		}
	}
	if len(ops) == 0 {
		return
	}
	if _, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Component: "driver", UnixNanos: now.UnixNano(), Ops: ops}); err != nil {
		t.Fatalf("driver commit at %v: %v", now.Sub(t0), err)
	}
}

// Two fleets with the same seed over the same history commit
// byte-identical transactions, whether their client shares the store's
// snapshots or watches; another seed fails other machines.
func TestDeterminism(t *testing.T) {
	w := workload{seed: 21, fleetSeed: 5, machines: 30, span: time.Hour}
	a := w.run(t)
	w.watching = true
	b := w.run(t)
	if len(a.log) != len(b.log) {
		t.Fatalf("%d status transactions, then %d", len(a.log), len(b.log))
	}
	for i := range a.log {
		if a.log[i].enc != b.log[i].enc {
			t.Fatalf("status transaction %d differs:\n%s\nthen\n%s", i, a.log[i].enc, b.log[i].enc)
		}
	}
	if a.fleet.Counters() != b.fleet.Counters() {
		t.Fatalf("counters %+v, then %+v", a.fleet.Counters(), b.fleet.Counters())
	}
	if a.st.Revision() != b.st.Revision() {
		t.Fatalf("store revisions %d and %d", a.st.Revision(), b.st.Revision())
	}
	w.watching, w.fleetSeed = false, 6
	c := w.run(t)
	same := len(a.log) == len(c.log)
	for i := 0; same && i < len(a.log); i++ {
		same = a.log[i].enc == c.log[i].enc
	}
	if same {
		t.Fatal("a different fleet seed gave the same transactions")
	}
}

// The fleet's counters match the store's final state, and every task it
// reported SUCCEEDED was reported at the first tick at or after its finish.
func TestCountersMatchStore(t *testing.T) {
	run := workload{seed: 33, fleetSeed: 8, machines: 30, span: time.Hour}.run(t)
	c := run.fleet.Counters()
	s := run.st.Snapshot()
	if err := txn.CheckInvariants(s); err != nil {
		t.Fatal(err)
	}
	var succeeded, lost, down, other int64
	var err error
	s.RangeTasks(func(tk *txn.Task) bool {
		switch tk.State {
		case omegav1.TaskState_TASK_STATE_SUCCEEDED:
			succeeded++
			due := tk.Assigned + tk.Spec.GetDurationMillis()*int64(time.Millisecond)
			if late := tk.Finished - due; late < 0 || late >= int64(time.Second) {
				err = fmt.Errorf("task %s due at %v reported at %v", tk.UID, time.Unix(0, due).Sub(t0), time.Unix(0, tk.Finished).Sub(t0))
			}
		case omegav1.TaskState_TASK_STATE_LOST:
			lost++
		case omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_KILLED:
			other++
		}
		if tk.Placed() {
			if m := machineAt(t, s, tk.Machine); m.State != omegav1.MachineState_MACHINE_STATE_UP {
				err = fmt.Errorf("task %s still placed on %s machine %s", tk.UID, m.State, m.UID)
			}
		}
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.RangeMachines(func(m *txn.Machine) bool {
		if m.State == omegav1.MachineState_MACHINE_STATE_DOWN {
			down++
		}
		return true
	})
	var conflicts, conflicted int64
	for _, r := range run.log {
		if r.err != nil {
			t.Fatalf("status transaction failed: %v", r.err)
		}
		conflicts += int64(r.res.Conflicts)
		if r.res.Conflicted() {
			conflicted++
		}
	}
	switch {
	case c.TasksFinished != succeeded:
		t.Fatalf("finished %d, store holds %d SUCCEEDED", c.TasksFinished, succeeded)
	case c.TasksLost != lost:
		t.Fatalf("lost %d, store holds %d LOST", c.TasksLost, lost)
	case c.MachinesFailed-c.MachinesRepaired != down:
		t.Fatalf("failed %d repaired %d, store holds %d DOWN", c.MachinesFailed, c.MachinesRepaired, down)
	case c.StatusTxns != int64(len(run.log)):
		t.Fatalf("status transactions %d, transport saw %d", c.StatusTxns, len(run.log))
	case c.Conflicts != conflicts || c.ConflictedTxns != conflicted:
		t.Fatalf("conflicts %d in %d transactions, transport saw %d in %d", c.Conflicts, c.ConflictedTxns, conflicts, conflicted)
	case other != 0:
		t.Fatalf("%d tasks FAILED or KILLED", other)
	}
	// The run must have exercised every path.
	if c.TasksFinished < 1000 || c.TasksLost == 0 || c.MachinesFailed < 3 || c.MachinesRepaired == 0 || c.Conflicts == 0 {
		t.Fatalf("run too small to mean anything: %+v", c)
	}
	t.Logf("%+v", c)
}
