package sim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/omega-cell/omega/txn"
)

// logActor steps every second from Epoch+first, n times, logging each step.
type logActor struct {
	name  string
	phase Phase
	first time.Duration
	n     int
	log   *[]string
}

func (a *logActor) Start(_ context.Context, now time.Time) (Next, error) {
	return Next{At: now.Add(a.first), Phase: a.phase}, nil
}

func (a *logActor) Step(_ context.Context, now time.Time) (Next, error) {
	*a.log = append(*a.log, fmt.Sprintf("%v %s", now.Sub(Epoch), a.name))
	if a.n--; a.n == 0 {
		return Next{}, nil
	}
	return Next{At: now.Add(time.Second), Phase: a.phase}, nil
}

// Actors plugged in beside the built-in ones are started at Epoch and
// stepped at the times they ask for; at one instant the earlier phase goes
// first whatever the order they were added in, and within a phase the
// order they were scheduled in. An actor that asks for nothing is not
// stepped again.
func TestPluggedActorsStepInPhaseOrder(t *testing.T) {
	s := newTestSim(t, 5, 4, 10, nil)
	var log []string
	s.e.add(&logActor{name: "late-phase", phase: PhaseSample, first: time.Second, n: 3, log: &log})
	s.e.add(&logActor{name: "early-phase", phase: PhaseArrive, first: time.Second, n: 2, log: &log})
	s.e.add(&logActor{name: "late-phase-2", phase: PhaseSample, first: time.Second, n: 1, log: &log})
	before := s.e.Events()
	if err := s.e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1s early-phase", "1s late-phase", "1s late-phase-2",
		"2s early-phase", "2s late-phase",
		"3s late-phase",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("steps %q, want %q", log, want)
	}
	if s.e.Events()-before < int64(len(want)) {
		t.Fatalf("%d events counted, want at least the %d plugged steps", s.e.Events()-before, len(want))
	}
}

// evictor force-evicts one placed task at a set time through the
// submitter's client: a component that is not a scheduler writing to the
// cell, as an offer allocator or a trace replayer would.
type evictor struct {
	s      *testSim
	at     time.Duration
	victim *txn.Task
}

func (v *evictor) Start(_ context.Context, now time.Time) (Next, error) {
	return Next{At: now.Add(v.at), Phase: PhaseReport}, nil
}

func (v *evictor) Step(ctx context.Context, _ time.Time) (Next, error) {
	v.s.st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
		if tk.Placed() {
			v.victim = tk
			return false
		}
		return true
	})
	if v.victim == nil {
		return Next{}, fmt.Errorf("nothing placed to evict")
	}
	sub := v.s.e.o.Submitter
	if err := sub.Sync(ctx); err != nil {
		return Next{}, err
	}
	tx := sub.NewTxn(sub.View())
	tx.Ops = []txn.Op{txn.ForceEvict(v.victim.UID, v.victim.Version, "test")}
	if r, err := sub.Commit(ctx, tx); err != nil || r.Committed != 1 {
		return Next{}, fmt.Errorf("evict: %+v %v", r, err)
	}
	return Next{}, nil
}

// A plugged-in actor's write reaches the schedulers through the cell: the
// engine feeds the intake after every step, so the evicted task's job goes
// back to its scheduler, which places it again, with no engine code for
// the evictor.
func TestPluggedActorWritesReachSchedulers(t *testing.T) {
	const seed = 11
	s := newTestSim(t, seed, 8, 20, nil)
	ev := &evictor{s: s, at: 30 * time.Second}
	s.e.add(ev)
	if err := s.e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ev.victim == nil {
		t.Fatalf("seed %d: the evictor never ran", seed)
	}
	tk, _ := s.st.Snapshot().Task(ev.victim.UID)
	if !tk.Placed() || tk.Assigned <= ev.victim.Assigned {
		t.Fatalf("seed %d: evicted task %s is %s assigned at %d (was %d): not placed again", seed, tk.UID, tk.State, tk.Assigned, ev.victim.Assigned)
	}
}
