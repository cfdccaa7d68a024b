package sim

import (
	"context"
	"fmt"
	"github.com/omega-cell/omega/bench/vtime"
	"testing"
	"time"

	"github.com/omega-cell/omega/txn"
)

// The engine's order (time, phase, then scheduling) is bench/vtime's to
// test; here, actors plugged into the cell beside its built-in ones.

// evictor force-evicts one placed task at a set time through the
// submitter's client: a component that is not a scheduler writing to the
// cell, as an offer allocator or a trace replayer would.
type evictor struct {
	s      *testSim
	at     time.Duration
	victim *txn.Task
}

func (v *evictor) Start(_ context.Context, now time.Time) (vtime.Next, error) {
	return vtime.Next{At: now.Add(v.at), Phase: vtime.PhaseReport}, nil
}

func (v *evictor) Step(ctx context.Context, _ time.Time) (vtime.Next, error) {
	v.s.st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
		if tk.Placed() {
			v.victim = tk
			return false
		}
		return true
	})
	if v.victim == nil {
		return vtime.Next{}, fmt.Errorf("nothing placed to evict")
	}
	sub := v.s.e.o.Submitter
	if err := sub.Sync(ctx); err != nil {
		return vtime.Next{}, err
	}
	tx := sub.NewTxn(sub.View())
	tx.Ops = []txn.Op{txn.ForceEvict(v.victim.UID, v.victim.Version, "test")}
	if r, err := sub.Commit(ctx, tx); err != nil || r.Committed != 1 {
		return vtime.Next{}, fmt.Errorf("evict: %+v %v", r, err)
	}
	return vtime.Next{}, nil
}

// A plugged-in actor's write reaches the schedulers through the cell: the
// engine feeds the intake after every step, so the evicted task's job goes
// back to its scheduler, which places it again, with no engine code for
// the evictor.
func TestPluggedActorWritesReachSchedulers(t *testing.T) {
	const seed = 11
	s := newTestSim(t, seed, 8, 20, nil)
	ev := &evictor{s: s, at: 30 * time.Second}
	s.e.eng.Add(ev)
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
