package remote_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// project is the part of s one machine's agent follows: the machine and the
// tasks placed on it (or last placed on it, until deleted).
func project(t *testing.T, s *txn.State, machine uuid.UUID) *txn.State {
	t.Helper()
	r := txn.NewRestorer(s.Revision())
	if m, ok := s.Machine(machine); ok {
		if err := r.Machine(m.Proto()); err != nil {
			t.Fatal(err)
		}
	}
	s.RangeTasks(func(tk *txn.Task) bool {
		if tk.Machine == machine {
			if err := r.Task(tk.Proto(), tk.Version); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	out, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMachineTransport: a client on one machine's part of the cell, under
// a randomized history (claims, evictions, reports, deletions, machines
// coming and going), holds exactly the cell's projection on that machine
// at every revision it syncs to — nothing of other machines' tasks, the
// evictions elsewhere included.
func TestMachineTransport(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
		d := storekit.NewDriver(t, st, seed)
		for st.Snapshot().NumMachines() < 3 {
			d.Step()
		}
		var machine uuid.UUID
		st.Snapshot().RangeMachines(func(m *txn.Machine) bool { machine = m.UID; return false })
		tr, err := remote.Dial(serve(t, st, true))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := client.New(ctx, tr.ForMachine(machine), client.Config{Component: "agent/x", Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(seed, 1))})
		if err != nil {
			t.Fatal(err)
		}
		others, compared := 0, 0
		for i := range 400 {
			rev := d.Step()
			if i%7 != 0 {
				continue
			}
			if err := c.SyncTo(ctx, rev); err != nil {
				t.Fatalf("seed %d: sync to %d: %v", seed, rev, err)
			}
			got := c.View().State
			if got.Revision() != rev {
				continue // a later revision came in the same batch: compared next time
			}
			compared++
			want := project(t, st.Snapshot(), machine)
			if err := testkit.DiffStates(want, got, testkit.Compare{IgnoreSeq: true}); err != nil {
				t.Fatalf("seed %d, revision %d: %v", seed, rev, err)
			}
			st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
				if tk.Machine != machine {
					others++
				}
				return true
			})
		}
		if others == 0 || compared < 20 {
			t.Fatalf("seed %d: %d comparisons, %d tasks seen elsewhere: the test shows nothing", seed, compared, others)
		}
		c.Cell().Close()
	}
}
