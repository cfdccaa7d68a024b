package agents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// eventLog records a tracker's events, naming uids by the test's names.
type eventLog struct {
	names map[uuid.UUID]string
	log   []string
}

func (l *eventLog) n(u uuid.UUID) string {
	if s, ok := l.names[u]; ok {
		return s
	}
	return u.String()[:8]
}

func (l *eventLog) Relisted(s *txn.State) {
	l.log = append(l.log, fmt.Sprintf("relisted@%d", s.Revision()))
}
func (l *eventLog) MachineChanged(m *txn.Machine) {
	l.log = append(l.log, "machine "+l.n(m.UID))
}
func (l *eventLog) MachineDeleted(u uuid.UUID) { l.log = append(l.log, "machine deleted "+l.n(u)) }
func (l *eventLog) Placed(t *txn.Task, p Placement) {
	l.log = append(l.log, fmt.Sprintf("placed %s on %s v%d gen%d", l.n(t.UID), l.n(p.Machine), p.Version, p.Gen))
}
func (l *eventLog) Unplaced(u uuid.UUID, p Placement) {
	l.log = append(l.log, fmt.Sprintf("unplaced %s gen%d", l.n(u), p.Gen))
}

// take returns the events since the last take.
func (l *eventLog) take() []string {
	out := l.log
	l.log = nil
	return out
}

func newTracker(t *testing.T, st *store.Store, cfg TrackerConfig, ev TrackerEvents) *Tracker {
	t.Helper()
	cl, err := client.New(context.Background(), inproc.New(st), client.Config{
		Component: "agent", Clock: &vclock{now: t0}, Rand: rand.New(rand.NewPCG(3, 3)),
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracker(cl, cfg, ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

func wantEvents(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: events\n  %s\nwant\n  %s", step, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A tracker of one machine, scripted through a task's life: it lists what
// is already placed on its machine, ignores the other machine, takes a
// RUNNING report as a new version of the same placement (no event), an
// eviction as the placement's end and the next claim as a new placement,
// and after falling behind the retained history lists again, telling its
// owner first.
func TestTrackerScript(t *testing.T) {
	st := openStore(t, 8)
	g := newIDs(21)
	ms := makeMachines(t, st, g, 2)
	mine, other := ms[0], ms[1]
	a, va := place(t, st, g, mine, t0, 0)
	b, _ := place(t, st, g, other, t0, 0)
	ev := &eventLog{names: map[uuid.UUID]string{mine: "m0", other: "m1", a: "a", b: "b"}}
	tr := newTracker(t, st, TrackerConfig{Machines: func(u uuid.UUID) bool { return u == mine }, ByMachine: true}, ev)
	ctx := context.Background()

	if err := tr.List(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "list", ev.take(), fmt.Sprintf("relisted@%d", st.Revision()), "machine m0", fmt.Sprintf("placed a on m0 v%d gen1", va))
	if tr.Len() != 1 || tr.Revision() != st.Revision() {
		t.Fatalf("tracking %d at %d, want 1 at %d", tr.Len(), tr.Revision(), st.Revision())
	}
	if _, ok := tr.On(mine)[a]; !ok || len(tr.On(other)) != 0 {
		t.Fatalf("by machine: mine %v, other %v", tr.On(mine), tr.On(other))
	}

	// RUNNING: the same placement at a newer version.
	r := commitAt(t, st, t0.Add(time.Second), txn.SetStatus(a, omegav1.TaskState_TASK_STATE_RUNNING, va, "started"))
	if err := tr.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "running", ev.take())
	if p, _ := tr.Task(a); p.Version != r.Revision || p.Gen != 1 {
		t.Fatalf("after RUNNING: %+v, want version %d gen 1", p, r.Revision)
	}

	// Evicted, then claimed again on the same machine: a new placement.
	r = commitAt(t, st, t0.Add(2*time.Second), txn.Evict(a, r.Revision, 1, "test"))
	commitAt(t, st, t0.Add(3*time.Second), txn.Claim(a, mine, res(500, gib), r.Revision))
	place(t, st, g, other, t0.Add(3*time.Second), 0) // not mine: no event
	if err := tr.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	va2 := taskAt(t, st.Snapshot(), a).Version
	wantEvents(t, "evict and claim", ev.take(), "machine m0", "unplaced a gen1", "machine m0", fmt.Sprintf("placed a on m0 v%d gen2", va2))
	if _, ok := tr.Current(a, 1); ok {
		t.Fatal("the evicted placement is still current")
	}
	if p, ok := tr.Current(a, 2); !ok || p.Version != va2 {
		t.Fatalf("Current(a, 2) = %+v, %v", p, ok)
	}

	// The owner forgets a task it reported finished: Unplaced once, and the
	// watched SUCCEEDED afterwards is no event.
	tr.Forget(a)
	wantEvents(t, "forget", ev.take(), "unplaced a gen2")
	commitAt(t, st, t0.Add(4*time.Second), txn.SetStatus(a, omegav1.TaskState_TASK_STATE_SUCCEEDED, va2, "done"))
	if err := tr.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "succeeded after forget", ev.take(), "machine m0")

	// Behind the retained history: relisted, and the placements renumbered.
	c, _ := place(t, st, g, mine, t0.Add(5*time.Second), 0)
	ev.names[c] = "c"
	makeMachines(t, st, g, 20)
	if err := tr.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	vc := taskAt(t, st.Snapshot(), c).Version
	wantEvents(t, "relist", ev.take(), fmt.Sprintf("relisted@%d", st.Revision()), "machine m0", fmt.Sprintf("placed c on m0 v%d gen3", vc))
	if tr.Relists() != 1 || tr.Len() != 1 {
		t.Fatalf("relists %d, tracking %d", tr.Relists(), tr.Len())
	}
}

// Without a machine filter the tracker follows every machine, and a
// machine's deletion is an event; Poll before List is an error, not a
// panic.
func TestTrackerAllMachines(t *testing.T) {
	st := openStore(t, 0)
	g := newIDs(22)
	ms := makeMachines(t, st, g, 2)
	ev := &eventLog{names: map[uuid.UUID]string{ms[0]: "m0", ms[1]: "m1"}}
	tr := newTracker(t, st, TrackerConfig{}, ev)
	if err := tr.Poll(context.Background()); err == nil {
		t.Fatal("Poll before List succeeded")
	}
	if err := tr.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev.take()
	a, _ := place(t, st, g, ms[1], t0, 0)
	ev.names[a] = "a"
	m := machineAt(t, st.Snapshot(), ms[0])
	commitAt(t, st, t0, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, ms[0], m.Version))
	if err := tr.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	va := taskAt(t, st.Snapshot(), a).Version
	wantEvents(t, "poll", ev.take(), fmt.Sprintf("placed a on m1 v%d gen1", va), "machine m1", "machine deleted m0")
	if _, ok := tr.Machine(ms[0]); ok {
		t.Fatal("deleted machine still known")
	}
	if len(tr.On(ms[1])) != 0 {
		t.Fatal("On without ByMachine returned tasks")
	}
}

// Random histories (storekit.Driver: machines come, drain and go; tasks
// are claimed, start, end, are evicted and deleted), the tracker polling
// now and then and falling behind a short retained history: at the end it
// follows exactly the store's placed tasks (machine, claim time, version),
// by machine too, and its machines; every placement it was told of ended
// in Unplaced or is still followed.
func TestTrackerFollowsRandomHistories(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_TRACKER_SEED")
	rng := rand.New(rand.NewPCG(seed, 2))
	o := storekit.Options(t, store.DurabilityNone)
	o.HistoryChanges = 24
	st := storekit.Open(t, o)
	d := storekit.NewDriver(t, st, seed)
	ev := &countingEvents{placed: map[uint64]uuid.UUID{}}
	tr := newTracker(t, st, TrackerConfig{ByMachine: true}, ev)
	ctx := context.Background()
	if err := tr.List(ctx); err != nil {
		t.Fatal(err)
	}
	for range 800 {
		d.Step()
		if rng.IntN(4) == 0 {
			if err := tr.Poll(ctx); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
	}
	if err := tr.Poll(ctx); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	d.RequireEveryKind(t) // the tracker skipped offers and quotas on its way
	s := st.Snapshot()
	placed := 0
	s.RangeTasks(func(tk *txn.Task) bool {
		p, ok := tr.Task(tk.UID)
		switch {
		case tk.Placed() && !ok:
			t.Fatalf("seed %d: placed task %s not followed", seed, tk.UID)
		case tk.Placed() && (p.Machine != tk.Machine || p.Assigned != tk.Assigned || p.Version != tk.Version):
			t.Fatalf("seed %d: task %s followed as %+v, the store has it on %s at %d v%d", seed, tk.UID, p, tk.Machine, tk.Assigned, tk.Version)
		case !tk.Placed() && ok:
			t.Fatalf("seed %d: task %s is %s but still followed", seed, tk.UID, tk.State)
		case tk.Placed():
			placed++
			if _, on := tr.On(tk.Machine)[tk.UID]; !on {
				t.Fatalf("seed %d: task %s missing from its machine's set", seed, tk.UID)
			}
		}
		return true
	})
	if tr.Len() != placed {
		t.Fatalf("seed %d: following %d placements, the store has %d", seed, tr.Len(), placed)
	}
	machines := 0
	s.RangeMachines(func(m *txn.Machine) bool {
		machines++
		if got, ok := tr.Machine(m.UID); !ok || got.Version != m.Version {
			t.Fatalf("seed %d: machine %s followed as %v", seed, m.UID, got)
		}
		return true
	})
	if tr.Relists() == 0 || placed == 0 || machines == 0 {
		t.Fatalf("seed %d: relists %d, placed %d, machines %d: the history showed too little", seed, tr.Relists(), placed, machines)
	}
	// Every placement told is still followed or was ended, once.
	if len(ev.placed) != tr.Len() {
		t.Fatalf("seed %d: %d placements told and not ended, %d followed", seed, len(ev.placed), tr.Len())
	}
}

// countingEvents keeps the placements told and not yet ended, by Gen
// (cleared on a re-list, which tells them again).
type countingEvents struct {
	placed map[uint64]uuid.UUID
}

func (c *countingEvents) Relisted(*txn.State)             { clear(c.placed) }
func (c *countingEvents) MachineChanged(*txn.Machine)     {}
func (c *countingEvents) MachineDeleted(uuid.UUID)        {}
func (c *countingEvents) Placed(t *txn.Task, p Placement) { c.placed[p.Gen] = t.UID }
func (c *countingEvents) Unplaced(u uuid.UUID, p Placement) {
	if c.placed[p.Gen] != u {
		panic(fmt.Sprintf("Unplaced %s gen %d, never placed", u, p.Gen))
	}
	delete(c.placed, p.Gen)
}

// A placed task ended and deleted in one transaction is one change, a
// deletion carrying the ended version: the tracker still ends its
// placement, though the end was never delivered alone.
func TestTrackerEndedAndDeletedInOneTransaction(t *testing.T) {
	st := openStore(t, 8)
	g := newIDs(23)
	ms := makeMachines(t, st, g, 1)
	a, va := place(t, st, g, ms[0], t0, 0)
	ev := &eventLog{names: map[uuid.UUID]string{ms[0]: "m0", a: "a"}}
	tr := newTracker(t, st, TrackerConfig{}, ev)
	ctx := context.Background()
	if err := tr.List(ctx); err != nil {
		t.Fatal(err)
	}
	ev.take()
	commitAt(t, st, t0.Add(time.Second),
		txn.SetStatus(a, omegav1.TaskState_TASK_STATE_SUCCEEDED, va, "done"),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, a, 0))
	if err := tr.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "ended and deleted", ev.take(), "machine m0", "unplaced a gen1")
	if tr.Len() != 0 {
		t.Fatalf("tracking %d placements after the task's deletion, want 0", tr.Len())
	}
}
