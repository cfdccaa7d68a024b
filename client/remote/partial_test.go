package remote_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// TestPartialChanges: a client's copy of the whole cell over gRPC watches
// with partial changes and, completed against the copy, they rebuild the
// store's state exactly at every synced revision under a randomized
// history; the watch did receive partial changes (of tasks and of
// machines), and a raw watch (an informer's) never does.
func TestPartialChanges(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
		d := storekit.NewDriver(t, st, seed)
		d.Step()
		tr, err := remote.Dial(serve(t, st, seed == 2))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c, err := client.New(ctx, tr, client.Config{Component: "x", Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(seed, 1))})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := tr.Watch(ctx, st.Revision())
		if err != nil {
			t.Fatal(err)
		}
		pw, err := tr.WatchPartial(ctx, st.Revision())
		if err != nil {
			t.Fatal(err)
		}
		compared := 0
		for i := range 300 {
			rev := d.Step()
			if i%5 != 0 {
				continue
			}
			if err := c.SyncTo(ctx, rev); err != nil {
				t.Fatalf("seed %d: sync to %d: %v", seed, rev, err)
			}
			if c.View().Revision() != rev {
				continue
			}
			compared++
			if err := testkit.DiffStates(st.Snapshot(), c.View().State, testkit.Compare{IgnoreSeq: true}); err != nil {
				t.Fatalf("seed %d, revision %d: %v", seed, rev, err)
			}
		}
		if compared < 20 {
			t.Fatalf("seed %d: only %d comparisons", seed, compared)
		}
		d.RequireEveryKind(t) // offers and quotas crossed the partial watch too, whole
		count := func(w interface {
			Next(context.Context, int) ([]*txn.WriteSet, error)
		}) (tasks, machines int) {
			for last := uint64(0); last < st.Revision(); {
				sets, err := w.Next(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, ws := range sets {
					last = ws.Revision
					for _, ch := range ws.Changes {
						switch {
						case ch.Partial && ch.Task != nil:
							tasks++
						case ch.Partial && ch.Machine != nil:
							machines++
						}
					}
				}
			}
			return tasks, machines
		}
		if pt, pm := count(pw); pt == 0 || pm == 0 {
			t.Fatalf("seed %d: the partial watch got %d partial task and %d machine changes", seed, pt, pm)
		}
		if rt, rm := count(raw); rt+rm != 0 {
			t.Fatalf("seed %d: a raw watch got %d partial changes", seed, rt+rm)
		}
		raw.Close()
		pw.Close()
		c.Cell().Close()
		tr.Close()
		cancel()
	}
}
