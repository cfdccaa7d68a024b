package agents

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/txn"
)

// Tasks claimed at T with duration D are reported SUCCEEDED at the first
// tick at or after T+D, the tasks due at one tick in one status
// transaction, and their machine's allocation drops in that same commit.
func TestFinishAtFirstTickAfterDuration(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(1)
	ms := makeMachines(t, st, g, 2)
	h := newHarness(t, st, DefaultFleetConfig())

	a, va := place(t, st, g, ms[0], t0, 2500*time.Millisecond)          // due t0+2.5s → tick 3s
	b, vb := place(t, st, g, ms[0], t0, 3*time.Second)                  // due t0+3s → tick 3s
	c, vc := place(t, st, g, ms[1], t0.Add(time.Second), 3*time.Second) // due t0+4s → tick 4s
	forever, _ := place(t, st, g, ms[1], t0.Add(time.Second), 0)        // never
	beforeFinish := machineAt(t, st.Snapshot(), ms[0]).Allocated
	if beforeFinish.CPU != 1000 {
		t.Fatalf("setup: machine 0 allocated %v", beforeFinish)
	}

	if err := h.fleet.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := h.fleet.NextEvent(), t0.Add(2500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("NextEvent %v, want %v", got, want)
	}
	if got, want := h.fleet.NextTick(t0), t0.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("NextTick(t0) %v, want %v", got, want)
	}

	want := map[time.Duration][]uuid.UUID{3 * time.Second: {a, b}, 4 * time.Second: {c}}
	versions := map[uuid.UUID]uint64{a: va, b: vb, c: vc}
	for s := 1; s <= 10; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		before := st.Revision()
		r := h.tick(t, now)
		due := want[time.Duration(s)*time.Second]
		if len(due) == 0 {
			if r.Revision != 0 || st.Revision() != before {
				t.Fatalf("tick %ds: committed revision %d with nothing due", s, r.Revision)
			}
			continue
		}
		if r.Revision != before+1 || st.Revision() != r.Revision {
			t.Fatalf("tick %ds: result revision %d, store %d → %d: want one status transaction", s, r.Revision, before, st.Revision())
		}
		if r.Committed != len(due) || r.Conflicted() {
			t.Fatalf("tick %ds: %d committed, %d conflicts, want %d committed", s, r.Committed, r.Conflicts, len(due))
		}
		after := st.Snapshot()
		for _, u := range due {
			tk := taskAt(t, after, u)
			if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || tk.Version != r.Revision || tk.Finished != now.UnixNano() {
				t.Fatalf("tick %ds: task %s is %s at version %d finished %d, want SUCCEEDED at %d finished %d",
					s, u, tk.State, tk.Version, tk.Finished, r.Revision, now.UnixNano())
			}
			m := machineAt(t, after, tk.Machine)
			if m.Seq != r.Revision {
				t.Fatalf("tick %ds: machine %s last changed at %d, want the status commit %d", s, m.UID, m.Seq, r.Revision)
			}
		}
		// The recorded transaction: SetStatus SUCCEEDED expecting the claim's version.
		log := h.rec.commits()
		tx := log[len(log)-1].tx
		if tx.Component != "fleet" || tx.UnixNanos != now.UnixNano() || tx.ViewRevision != before {
			t.Fatalf("tick %ds: txn component %q at %d view %d", s, tx.Component, tx.UnixNanos, tx.ViewRevision)
		}
		for i, op := range tx.Ops {
			if op.Kind != txn.OpSetStatus || op.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || op.Task != due[i] || op.ExpectVersion != versions[op.Task] {
				t.Fatalf("tick %ds: op %d is %+v", s, i, op)
			}
		}
	}
	s := st.Snapshot()
	if got := machineAt(t, s, ms[0]).Allocated; !got.IsZero() || machineAt(t, s, ms[0]).Tasks != 0 {
		t.Fatalf("machine 0 still holds %v", got)
	}
	if got := machineAt(t, s, ms[1]).Allocated; got.CPU != 500 {
		t.Fatalf("machine 1 holds %v, want the forever task's 500m", got)
	}
	if tk := taskAt(t, s, forever); tk.State != assigned {
		t.Fatalf("forever task is %s", tk.State)
	}
	c0 := h.fleet.Counters()
	if c0.TasksFinished != 3 || c0.StatusTxns != 2 || c0.Conflicts != 0 || c0.TasksLost != 0 {
		t.Fatalf("counters %+v", c0)
	}
	if h.fleet.Tracked() != 1 {
		t.Fatalf("tracking %d tasks, want the forever one", h.fleet.Tracked())
	}
	if cc := h.cl.Counters(); cc.Attempts != 2 || cc.Conflicted != 0 {
		t.Fatalf("client counters %+v", cc)
	}
}

// A task of duration 0 runs forever: a simulated week of ticks reports
// nothing, and NextEvent says nothing is scheduled.
func TestDurationZeroNeverFinishes(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(2)
	ms := makeMachines(t, st, g, 1)
	h := newHarness(t, st, DefaultFleetConfig())
	u, _ := place(t, st, g, ms[0], t0, 0)
	if err := h.fleet.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.fleet.Tracked() != 1 {
		t.Fatalf("tracked %d", h.fleet.Tracked())
	}
	if next := h.fleet.NextEvent(); !next.IsZero() {
		t.Fatalf("NextEvent %v, want none", next)
	}
	for now := t0; now.Before(t0.Add(7 * 24 * time.Hour)); now = now.Add(time.Minute) {
		if r := h.tick(t, now); r.Revision != 0 {
			t.Fatalf("tick at %v committed %d", now.Sub(t0), r.Revision)
		}
	}
	if tk := taskAt(t, st.Snapshot(), u); tk.State != assigned {
		t.Fatalf("task is %s", tk.State)
	}
	if len(h.rec.commits()) != 0 {
		t.Fatalf("fleet sent %d transactions", len(h.rec.commits()))
	}
}

// A task that leaves ASSIGNED/RUNNING before its finish time is not
// reported: no error, no conflict, not tracked. One re-placed elsewhere is
// reported at its new finish time, and one another agent marked RUNNING is
// reported at the version that report gave it.
func TestTaskThatLeftIsNotReported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, st *txn.State, u uuid.UUID, v uint64, other uuid.UUID, at time.Time) []txn.Op
		report  time.Duration // 0: never
		running bool
	}{
		{name: "evicted", change: func(_ *testing.T, _ *txn.State, u uuid.UUID, v uint64, _ uuid.UUID, _ time.Time) []txn.Op {
			return []txn.Op{txn.ForceEvict(u, v, "drain")}
		}},
		{name: "deleted", change: func(_ *testing.T, _ *txn.State, u uuid.UUID, v uint64, _ uuid.UUID, _ time.Time) []txn.Op {
			return []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, u, v)}
		}},
		{name: "failed-by-another", change: func(_ *testing.T, _ *txn.State, u uuid.UUID, v uint64, _ uuid.UUID, _ time.Time) []txn.Op {
			return []txn.Op{txn.SetStatus(u, failedSt, v, "crashed")}
		}},
		{name: "evicted-and-replaced", report: 8 * time.Second, change: func(_ *testing.T, _ *txn.State, u uuid.UUID, v uint64, other uuid.UUID, _ time.Time) []txn.Op {
			// Placed again at t0+3s on the other machine: due at t0+8s.
			return []txn.Op{txn.ForceEvict(u, v, "move"), txn.Claim(u, other, res(500, gib), v)}
		}},
		{name: "running", report: 5 * time.Second, running: true, change: func(_ *testing.T, _ *txn.State, u uuid.UUID, v uint64, _ uuid.UUID, _ time.Time) []txn.Op {
			return []txn.Op{txn.SetStatus(u, running, v, "")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t, 0)
			g := newIDs(3)
			ms := makeMachines(t, st, g, 2)
			h := newHarness(t, st, DefaultFleetConfig())
			u, v := place(t, st, g, ms[0], t0, 5*time.Second)
			h.tick(t, t0.Add(time.Second))
			h.tick(t, t0.Add(2*time.Second))
			at := t0.Add(3 * time.Second)
			commitAt(t, st, at, tc.change(t, st.Snapshot(), u, v, ms[1], at)...)
			var reportedAt time.Duration
			for s := 3; s <= 12; s++ {
				r := h.tick(t, t0.Add(time.Duration(s)*time.Second))
				if r.Conflicted() {
					t.Fatalf("tick %ds conflicted: %+v", s, r.Outcomes)
				}
				if r.Revision != 0 {
					if reportedAt != 0 {
						t.Fatalf("reported twice")
					}
					reportedAt = time.Duration(s) * time.Second
				}
			}
			if reportedAt != tc.report {
				t.Fatalf("reported at %v, want %v (0: never)", reportedAt, tc.report)
			}
			c := h.fleet.Counters()
			if c.Conflicts != 0 || h.fleet.Tracked() != 0 {
				t.Fatalf("counters %+v, tracking %d", c, h.fleet.Tracked())
			}
			if tc.report != 0 {
				tk := taskAt(t, st.Snapshot(), u)
				if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || c.TasksFinished != 1 {
					t.Fatalf("task is %s, finished %d", tk.State, c.TasksFinished)
				}
				if tc.running && tk.Started != at.UnixNano() {
					t.Fatalf("started %d", tk.Started)
				}
			}
		})
	}
}

// A task that changes between the fleet's poll and its commit just
// conflicts: the report is dropped, the rest of the transaction commits,
// and the fleet follows the change through the watch.
func TestChangeBeforeCommitConflictsAndIsDropped(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(4)
	ms := makeMachines(t, st, g, 1)
	h := newHarness(t, st, DefaultFleetConfig())
	a, _ := place(t, st, g, ms[0], t0, time.Second)
	b, _ := place(t, st, g, ms[0], t0, time.Second)
	// Evict whichever task the first status transaction reports first,
	// just before it lands, and place it again for 10s.
	var victim uuid.UUID
	h.rec.before = func(n int, tx *txn.Txn) {
		if n != 0 {
			return
		}
		victim = tx.Ops[0].Task
		tk := taskAt(t, st.Snapshot(), victim)
		commitAt(t, st, t0.Add(time.Second), txn.ForceEvict(victim, tk.Version, "preempted"), txn.Claim(victim, ms[0], res(500, gib), tk.Version))
	}
	r := h.tick(t, t0.Add(time.Second))
	if r.Conflicts != 1 || r.Committed != 1 || r.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED {
		t.Fatalf("result %+v", r)
	}
	other := a
	if victim == a {
		other = b
	}
	if taskAt(t, st.Snapshot(), other).State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("the other task was not reported")
	}
	c := h.fleet.Counters()
	if c.Conflicts != 1 || c.ConflictedTxns != 1 || c.TasksFinished != 1 || c.StatusTxns != 1 {
		t.Fatalf("counters %+v", c)
	}
	// The victim was placed again at t0+1s for 1s: the watch brings it back.
	r = h.tick(t, t0.Add(2*time.Second))
	if r.Committed != 1 || r.Conflicted() {
		t.Fatalf("second tick %+v", r)
	}
	if tk := taskAt(t, st.Snapshot(), victim); tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("victim is %s", tk.State)
	}
}

// With failures on, machines go DOWN and every task on them becomes LOST in
// one transaction — their allocation freed in it — and come back UP at the
// first tick at or after RepairTime later.
func TestFailuresDownAndLostThenRepaired(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(5)
	ms := makeMachines(t, st, g, 10)
	for i, m := range ms {
		place(t, st, g, m, t0, 0)
		place(t, st, g, m, t0, 0)
		place(t, st, g, m, t0, time.Duration(i+1)*17*time.Minute)
	}
	cfg := DefaultFleetConfig()
	cfg.FailuresPerDay = 24 * 4 // about four an hour in the cell
	cfg.RepairTime = 10 * time.Minute
	cfg.Rand = rand.New(rand.NewPCG(11, 12))
	cfg.Start = t0
	h := newHarness(t, st, cfg)
	if next := h.fleet.NextEvent(); next.IsZero() || next.After(t0.Add(17*time.Minute)) {
		t.Fatalf("NextEvent %v", next)
	}

	downAt := map[uuid.UUID]time.Time{}
	var failures, repairs, lost int
	for now := t0.Add(time.Second); !now.After(t0.Add(3 * time.Hour)); now = now.Add(time.Second) {
		before := st.Snapshot()
		r := h.tick(t, now)
		if r.Revision == 0 {
			continue
		}
		if r.Conflicted() {
			t.Fatalf("tick %v conflicted: %+v", now.Sub(t0), r.Outcomes)
		}
		after := st.Snapshot()
		if after.Revision() != before.Revision()+1 {
			t.Fatalf("tick %v: revisions %d → %d", now.Sub(t0), before.Revision(), after.Revision())
		}
		for _, m := range ms {
			mb, ma := machineAt(t, before, m), machineAt(t, after, m)
			switch {
			case mb.State == omegav1.MachineState_MACHINE_STATE_UP && ma.State == omegav1.MachineState_MACHINE_STATE_DOWN:
				failures++
				downAt[m] = now
				if ma.Version != r.Revision || !ma.Allocated.IsZero() || ma.Tasks != 0 {
					t.Fatalf("failed machine %s: version %d allocated %v tasks %d", m, ma.Version, ma.Allocated, ma.Tasks)
				}
				// Every task placed on it before is LOST in this commit.
				n := 0
				before.RangeTasks(func(tk *txn.Task) bool {
					if tk.Placed() && tk.Machine == m {
						n++
						ta := taskAt(t, after, tk.UID)
						if ta.State != omegav1.TaskState_TASK_STATE_LOST || ta.Version != r.Revision || ta.Message() != MessageMachineFailed {
							t.Fatalf("task %s on failed machine is %s at %d", tk.UID, ta.State, ta.Version)
						}
						lost++
					}
					return true
				})
				if n != int(mb.Tasks) {
					t.Fatalf("machine held %d tasks, %d seen", mb.Tasks, n)
				}
			case mb.State == omegav1.MachineState_MACHINE_STATE_DOWN && ma.State == omegav1.MachineState_MACHINE_STATE_UP:
				repairs++
				d := now.Sub(downAt[m])
				if d < cfg.RepairTime || d >= cfg.RepairTime+cfg.Tick {
					t.Fatalf("machine %s down for %v, want %v (within a tick)", m, d, cfg.RepairTime)
				}
				delete(downAt, m)
			}
		}
	}
	if failures < 3 || repairs < 2 {
		t.Fatalf("%d failures and %d repairs in 3 simulated hours at 4 an hour", failures, repairs)
	}
	c := h.fleet.Counters()
	if c.MachinesFailed != int64(failures) || c.MachinesRepaired != int64(repairs) || c.TasksLost != int64(lost) {
		t.Fatalf("counters %+v; saw %d failures %d repairs %d lost", c, failures, repairs, lost)
	}
	t.Logf("%d failures, %d repairs, %d tasks lost, %d finished", failures, repairs, lost, c.TasksFinished)
}

// A claim that lands on a machine between the fleet's poll and its DOWN
// write escapes the failure's LOST reports; the fleet watches it arrive on
// a machine it holds DOWN and reports it LOST at the next tick.
func TestClaimRacingAFailureIsLostNextTick(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(6)
	ms := makeMachines(t, st, g, 3)
	for _, m := range ms {
		place(t, st, g, m, t0, 0)
	}
	cfg := DefaultFleetConfig()
	cfg.FailuresPerDay = 24 * 60
	cfg.Rand = rand.New(rand.NewPCG(3, 4))
	h := newHarness(t, st, cfg)
	var stray uuid.UUID
	h.rec.before = func(n int, tx *txn.Txn) {
		if stray != uuid.Nil {
			return
		}
		for _, op := range tx.Ops {
			if op.Kind == txn.OpPut && op.NewMachine.GetStatus().GetState() == omegav1.MachineState_MACHINE_STATE_DOWN {
				m, err := txn.ParseUID(op.NewMachine.GetMeta().GetUid(), "machine")
				if err != nil {
					t.Fatal(err)
				}
				stray, _ = place(t, st, g, m, time.Unix(0, tx.UnixNanos), 0)
				return
			}
		}
	}
	var now time.Time
	for now = t0; stray == uuid.Nil && now.Before(t0.Add(time.Hour)); now = now.Add(time.Second) {
		h.tick(t, now)
	}
	if stray == uuid.Nil {
		t.Fatal("no failure within an hour at 60 an hour")
	}
	if tk := taskAt(t, st.Snapshot(), stray); tk.State != assigned {
		t.Fatalf("stray is %s right after the failure", tk.State)
	}
	if err := h.fleet.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if next := h.fleet.NextEvent(); next.After(now) {
		t.Fatalf("NextEvent %v with a stray to report, last tick %v", next, now)
	}
	r := h.tick(t, now)
	if tk := taskAt(t, st.Snapshot(), stray); tk.State != omegav1.TaskState_TASK_STATE_LOST || tk.Version != r.Revision {
		t.Fatalf("stray is %s at %d after the next tick (%+v)", tk.State, tk.Version, r)
	}
}

// The fleet falls behind the store's retained history: it takes a fresh
// view, tracks the placed tasks in it, and still reports them on time.
func TestRelistAfterCompaction(t *testing.T) {
	for _, sharing := range []bool{true, false} {
		name := "sharing"
		var opts []inproc.Option
		if !sharing {
			name = "watching"
			opts = append(opts, inproc.WithoutSharing())
		}
		t.Run(name, func(t *testing.T) {
			st := openStore(t, 8)
			g := newIDs(7)
			ms := makeMachines(t, st, g, 2)
			h := newHarness(t, st, DefaultFleetConfig(), opts...)
			a, _ := place(t, st, g, ms[0], t0, 10*time.Second)
			place(t, st, g, ms[1], t0, 0)
			makeMachines(t, st, g, 20) // more changes than the store retains
			if r := h.tick(t, t0.Add(9*time.Second)); r.Revision != 0 {
				t.Fatalf("reported early: %+v", r)
			}
			if c := h.fleet.Counters(); c.Relists != 1 || h.fleet.Tracked() != 2 {
				t.Fatalf("relists %d, tracked %d", c.Relists, h.fleet.Tracked())
			}
			r := h.tick(t, t0.Add(10*time.Second))
			if r.Committed != 1 || taskAt(t, st.Snapshot(), a).State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
				t.Fatalf("task a not reported after the relist: %+v", r)
			}
		})
	}
}

// A commit error changes nothing in the store, and the fleet reports the
// same work at the next tick.
func TestCommitErrorKeepsWork(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(8)
	ms := makeMachines(t, st, g, 1)
	fail := true
	cl, err := client.New(context.Background(), failingTransport{inproc.New(st), &fail}, client.Config{Component: "fleet", Clock: &vclock{now: t0}, Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewSimFleet(context.Background(), cl, DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, _ := place(t, st, g, ms[0], t0, time.Second)
	if _, err := f.Tick(context.Background(), t0.Add(time.Second)); !errors.Is(err, errInjected) {
		t.Fatalf("tick error %v, want the injected one", err)
	}
	if f.Tracked() != 1 || !f.NextEvent().Equal(t0.Add(time.Second)) {
		t.Fatalf("after the error: tracked %d, next %v", f.Tracked(), f.NextEvent())
	}
	fail = false
	r, err := f.Tick(context.Background(), t0.Add(2*time.Second))
	if err != nil || r.Committed != 1 {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	if taskAt(t, st.Snapshot(), u).State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatal("not reported after the error")
	}
}

var errInjected = errors.New("injected commit failure")

type failingTransport struct {
	client.Transport
	fail *bool
}

func (f failingTransport) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	if *f.fail {
		return txn.Result{}, errInjected
	}
	return f.Transport.Commit(ctx, tx)
}

func TestFleetConfigValidate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		cfg  FleetConfig
		want string // "" valid
	}{
		{"default", DefaultFleetConfig(), ""},
		{"zero means defaults", FleetConfig{}, ""},
		{"failures with rand", FleetConfig{FailuresPerDay: 5, Rand: r}, ""},
		{"negative tick", FleetConfig{Tick: -time.Second}, "Tick"},
		{"negative repair", FleetConfig{RepairTime: -time.Second}, "RepairTime"},
		{"negative failures", FleetConfig{FailuresPerDay: -1, Rand: r}, "FailuresPerDay"},
		{"NaN failures", FleetConfig{FailuresPerDay: math.NaN(), Rand: r}, "FailuresPerDay"},
		{"infinite failures", FleetConfig{FailuresPerDay: math.Inf(1), Rand: r}, "FailuresPerDay"},
		{"failures without rand", FleetConfig{FailuresPerDay: 1}, "Rand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	st := openStore(t, 0)
	cl, err := client.New(context.Background(), inproc.New(st), client.Config{Component: "fleet", Clock: &vclock{now: t0}, Rand: r})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSimFleet(context.Background(), cl, FleetConfig{FailuresPerDay: 1}); err == nil {
		t.Fatal("NewSimFleet accepted failures without Rand")
	}
	f, err := NewSimFleet(context.Background(), cl, FleetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Config(); got.Tick != time.Second || got.RepairTime != time.Hour {
		t.Fatalf("defaults not filled: %+v", got)
	}
}

func TestNextTick(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(9)
	ms := makeMachines(t, st, g, 1)
	cfg := DefaultFleetConfig()
	cfg.Tick = 10 * time.Second
	h := newHarness(t, st, cfg)
	if got := h.fleet.NextTick(t0); !got.IsZero() {
		t.Fatalf("NextTick with nothing scheduled: %v", got)
	}
	place(t, st, g, ms[0], t0, 25*time.Second)
	place(t, st, g, ms[0], t0, 3*time.Second)
	if err := h.fleet.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ last, want time.Duration }{
		{0, 10 * time.Second},                 // due at 3s: the next tick
		{5 * time.Second, 15 * time.Second},   // already due: the next tick
		{-30 * time.Second, 10 * time.Second}, // the first of -30s+k*10s at or after 3s
	} {
		if got := h.fleet.NextTick(t0.Add(tc.last)); !got.Equal(t0.Add(tc.want)) {
			t.Fatalf("NextTick(%v) = %v, want %v", tc.last, got.Sub(t0), tc.want)
		}
	}
	// Skipping idle ticks: tick only at NextTick and both tasks are reported,
	// each at the first grid tick at or after its finish.
	last := t0
	var at []time.Duration
	for range 5 {
		next := h.fleet.NextTick(last)
		if next.IsZero() {
			break
		}
		if r := h.tick(t, next); r.Revision != 0 {
			at = append(at, next.Sub(t0))
		}
		last = next
	}
	if len(at) != 2 || at[0] != 10*time.Second || at[1] != 30*time.Second {
		t.Fatalf("reports at %v, want [10s 30s]", at)
	}
}

// refusing fails commits while *fail, keeping what it refused and what it
// let through.
type refusing struct {
	client.Transport
	fail      *bool
	refused   []*txn.Txn
	committed []*txn.Txn
}

func (r *refusing) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	cp := *tx
	cp.Ops = append([]txn.Op(nil), tx.Ops...)
	if *r.fail {
		r.refused = append(r.refused, &cp)
		return txn.Result{}, errInjected
	}
	r.committed = append(r.committed, &cp)
	return r.Transport.Commit(ctx, tx)
}

// opLines names what each of a status transaction's operations does.
func opLines(ops []txn.Op) []string {
	var out []string
	for _, op := range ops {
		l := fmt.Sprintf("%s task=%s state=%s expect=%d", op.Kind, op.Task, op.State, op.ExpectVersion)
		if op.NewMachine != nil {
			l += fmt.Sprintf(" machine=%s to=%s", op.NewMachine.GetMeta().GetUid(), op.NewMachine.GetStatus().GetState())
		}
		out = append(out, l)
	}
	return out
}

// A commit error at a failure's tick, and at a repair's, loses neither: the
// next tick sends every refused DOWN, LOST and UP report again.
func TestCommitErrorKeepsFailuresAndRepairs(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(9)
	ms := makeMachines(t, st, g, 6)
	for _, m := range ms {
		place(t, st, g, m, t0, 0)
	}
	fail := false
	tr := &refusing{Transport: inproc.New(st), fail: &fail}
	cl, err := client.New(context.Background(), tr, client.Config{Component: "fleet", Clock: &vclock{now: t0}, Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultFleetConfig()
	cfg.FailuresPerDay = 24 * 60 // about one a minute
	cfg.RepairTime = 5 * time.Minute
	cfg.Rand = rand.New(rand.NewPCG(3, 4))
	cfg.Start = t0
	f, err := NewSimFleet(context.Background(), cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	refusedDown, refusedUp := false, false
	for now := t0.Add(time.Second); now.Before(t0.Add(time.Hour)) && !(refusedDown && refusedUp); now = now.Add(time.Second) {
		// Refuse every tick with something due until a failure and a repair
		// were each refused once.
		fail = true
		before := len(tr.refused)
		if _, err := f.Tick(ctx, now); err == nil {
			if len(tr.refused) != before {
				t.Fatalf("tick %v: refused, but no error", now.Sub(t0))
			}
			continue // nothing due
		} else if !errors.Is(err, errInjected) {
			t.Fatalf("tick %v: %v", now.Sub(t0), err)
		}
		lines := opLines(tr.refused[len(tr.refused)-1].Ops)
		joined := strings.Join(lines, "\n")
		hasDown, hasUp := strings.Contains(joined, "to=MACHINE_STATE_DOWN"), strings.Contains(joined, "to=MACHINE_STATE_UP")
		fail = false
		r, err := f.Tick(ctx, now.Add(time.Second/2))
		if err != nil || r.Revision == 0 {
			t.Fatalf("tick %v after the refusal: %+v %v", now.Sub(t0), r, err)
		}
		sent := map[string]int{}
		for _, l := range opLines(tr.committed[len(tr.committed)-1].Ops) {
			sent[l]++
		}
		for _, l := range lines {
			if sent[l] == 0 {
				t.Fatalf("tick %v: refused %q, not sent again:\n%s", now.Sub(t0), l, strings.Join(opLines(tr.committed[len(tr.committed)-1].Ops), "\n"))
			}
			sent[l]--
		}
		refusedDown = refusedDown || hasDown
		refusedUp = refusedUp || hasUp
	}
	if !refusedDown || !refusedUp {
		t.Fatalf("refused a failure %v, a repair %v: the hour showed too little", refusedDown, refusedUp)
	}
}
