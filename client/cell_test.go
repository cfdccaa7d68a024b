package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// TestCellSyncMatchesStore: a seeded workload commits straight to the
// store; at random points the client syncs (Sync or SyncTo) and its View
// must equal the store's snapshot, object by object.
func TestCellSyncMatchesStore(t *testing.T) {
	for _, d := range durabilities {
		for _, tp := range transports {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("%s/%s/seed=%d", d, tp.name, seed), func(t *testing.T) {
					logSeed(t, seed)
					st := openStore(t, d, 0)
					drv := newDriver(t, st, seed)
					rng := rand.New(rand.NewPCG(seed, 0x5c))
					c, _ := newClient(t, tp.make(st), "watcher", seed, DefaultRetryPolicy())
					steps := 300
					if d == store.DurabilitySync {
						steps = 80 // each commit is an fsync
					}
					syncs := 0
					for i := range steps {
						rev := drv.step()
						switch rng.IntN(4) {
						case 0:
							if err := c.Sync(context.Background()); err != nil {
								t.Fatalf("step %d: Sync: %v", i, err)
							}
						case 1:
							if err := c.SyncTo(context.Background(), rev); err != nil {
								t.Fatalf("step %d: SyncTo(%d): %v", i, rev, err)
							}
						default:
							continue
						}
						syncs++
						if err := diffStates(st.Snapshot(), c.View().State); err != nil {
							t.Fatalf("step %d (revision %d): view differs from the store: %v", i, rev, err)
						}
					}
					if err := c.Sync(context.Background()); err != nil {
						t.Fatal(err)
					}
					if err := diffStates(st.Snapshot(), c.View().State); err != nil {
						t.Fatalf("final view differs from the store: %v", err)
					}
					if err := txn.CheckInvariants(c.View().State); err != nil {
						t.Fatalf("client's copy breaks an invariant: %v", err)
					}
					if c.Cell().Relists() != 0 {
						t.Fatalf("re-listed %d times with a large history", c.Cell().Relists())
					}
					if syncs == 0 || c.View().NumTasks() == 0 {
						t.Fatalf("the workload did not exercise anything (%d syncs, %d tasks)", syncs, c.View().NumTasks())
					}
					if d == store.DurabilityNone {
						drv.RequireEveryKind(t) // offers and quotas crossed the watch too
					}
				})
			}
		}
	}
}

// TestCellRelistsWhenBehind: with a history of a few changes, a client
// that syncs rarely falls behind, re-lists, and still converges; a client
// that syncs after every commit never needs to.
func TestCellRelistsWhenBehind(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logSeed(t, seed)
			st := openStore(t, store.DurabilityNone, 8)
			drv := newDriver(t, st, seed)
			drv.step()
			slow, _ := newClient(t, inproc.New(st, inproc.WithoutSharing()), "slow", seed, DefaultRetryPolicy())
			eager, _ := newClient(t, inproc.New(st, inproc.WithoutSharing()), "eager", seed, DefaultRetryPolicy())
			for round := range 20 {
				var rev uint64
				for range 10 {
					rev = drv.step()
					if err := eager.Sync(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				sync := slow.Sync
				if round%2 == 1 {
					sync = func(ctx context.Context) error { return slow.SyncTo(ctx, rev) }
				}
				if err := sync(context.Background()); err != nil {
					t.Fatalf("round %d: sync after falling behind: %v", round, err)
				}
				for _, c := range []*Client{slow, eager} {
					if err := diffStates(st.Snapshot(), c.View().State); err != nil {
						t.Fatalf("round %d: %s differs from the store: %v", round, c.Component(), err)
					}
				}
			}
			if slow.Cell().Relists() == 0 {
				t.Fatalf("the slow client never re-listed")
			}
			if n := eager.Cell().Relists(); n != 0 {
				t.Fatalf("the eager client re-listed %d times", n)
			}
		})
	}
}

// listRace is a transport whose Snapshot lets the store move on (commit
// runs) after taking the snapshot and before the caller starts watching:
// what happens when other components commit while a client lists.
type listRace struct {
	Transport
	commit func()
	armed  int // how many of the next Snapshots race
}

func (l *listRace) Snapshot(ctx context.Context) (*txn.State, error) {
	s, err := l.Transport.Snapshot(ctx)
	if l.armed > 0 {
		l.armed--
		l.commit()
	}
	return s, err
}

// TestCellListSurvivesCompactionDuringList: with a small history, commits
// landing between a list's snapshot and its watch compact the snapshot's
// successors away. Listing must try again, not fail — when the client is
// created and when it re-lists after falling behind.
func TestCellListSurvivesCompactionDuringList(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 1)
	drv := newDriver(t, st, 1)
	drv.step()
	lr := &listRace{Transport: inproc.New(st, inproc.WithoutSharing()), armed: 1, commit: func() { drv.step(); drv.step() }}
	c, _ := newClient(t, lr, "lister", 1, DefaultRetryPolicy())
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := diffStates(st.Snapshot(), c.View().State); err != nil {
		t.Fatalf("after New: %v", err)
	}
	for range 3 {
		drv.step()
	}
	lr.armed = 1
	if err := c.Sync(context.Background()); err != nil {
		t.Fatalf("Sync after falling behind, with commits during the re-list: %v", err)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := diffStates(st.Snapshot(), c.View().State); err != nil {
		t.Fatalf("after re-list: %v", err)
	}
	if c.Cell().Relists() < 2 {
		t.Fatalf("Relists() = %d, want at least 2 (one fallen behind, one raced)", c.Cell().Relists())
	}
}

// TestCellConvergesUnderConcurrentCommits: a writer commits from its own
// goroutine while the client syncs from the test's, with a tiny history,
// so syncs and lists race with commits. The client ends equal to the store.
func TestCellConvergesUnderConcurrentCommits(t *testing.T) {
	for _, hist := range []int{1, 16, 0} {
		t.Run(fmt.Sprintf("history=%d", hist), func(t *testing.T) {
			st := openStore(t, store.DurabilityNone, hist)
			drv := newDriver(t, st, 42)
			drv.step()
			c, _ := newClient(t, inproc.New(st, inproc.WithoutSharing()), "reader", 42, DefaultRetryPolicy())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			type outcome struct {
				rev uint64
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				var o outcome
				for range 400 {
					if o.rev, o.err = drv.tryStep(); o.err != nil {
						break
					}
				}
				done <- o
			}()
			var last uint64
		loop:
			for {
				select {
				case o := <-done:
					if o.err != nil {
						t.Fatal(o.err)
					}
					last = o.rev
					break loop
				default:
				}
				prev := c.View().Revision()
				if err := c.Sync(ctx); err != nil {
					t.Fatalf("Sync during commits: %v", err)
				}
				if c.View().Revision() < prev {
					t.Fatalf("the view went back from %d to %d", prev, c.View().Revision())
				}
			}
			if err := c.SyncTo(ctx, last); err != nil {
				t.Fatal(err)
			}
			if err := diffStates(st.Snapshot(), c.View().State); err != nil {
				t.Fatalf("after the writer finished: %v (relists %d)", err, c.Cell().Relists())
			}
			t.Logf("history %d: %d relists", hist, c.Cell().Relists())
		})
	}
}

// TestViewsAreImmutable: a View taken earlier never changes, whatever the
// cell does afterwards (commits, syncs, re-lists), on both transports.
func TestViewsAreImmutable(t *testing.T) {
	for _, tp := range transports {
		for _, hist := range []int{0, 4} {
			t.Run(fmt.Sprintf("%s/history=%d", tp.name, hist), func(t *testing.T) {
				st := openStore(t, store.DurabilityNone, hist)
				drv := newDriver(t, st, 3)
				c, _ := newClient(t, tp.make(st), "viewer", 3, DefaultRetryPolicy())
				type kept struct {
					v  View
					fp testkit.Fingerprint
				}
				var views []kept
				for i := range 200 {
					drv.step()
					if i%7 == 0 {
						if err := c.Sync(context.Background()); err != nil {
							t.Fatal(err)
						}
						v := c.View()
						views = append(views, kept{v, fingerprint(v.State)})
					}
				}
				if err := c.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				for i, k := range views {
					if err := k.fp.Diff(fingerprint(k.v.State)); err != nil {
						t.Fatalf("view %d (revision %d) changed: %v", i, k.v.Revision(), err)
					}
				}
				if views[0].v.Revision() == c.View().Revision() {
					t.Fatalf("the cell did not move on")
				}
			})
		}
	}
}

// TestSyncToWaitsForTheRevision: SyncTo blocks until the revision is
// published, on both transports; a cancelled wait fails and leaves the
// view alone.
func TestSyncToWaitsForTheRevision(t *testing.T) {
	for _, d := range durabilities {
		for _, tp := range transports {
			t.Run(fmt.Sprintf("%s/%s", d, tp.name), func(t *testing.T) {
				st := openStore(t, d, 0)
				drv := newDriver(t, st, 5)
				drv.step()
				c, _ := newClient(t, tp.make(st), "waiter", 5, DefaultRetryPolicy())
				target := st.Revision() + 1
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if tp.name == "watch" {
					// The watch waits for a revision not even assigned yet.
					errc := make(chan error, 1)
					go func() { errc <- c.SyncTo(ctx, target) }()
					if _, err := drv.tryStep(); err != nil {
						t.Fatal(err)
					}
					if err := <-errc; err != nil {
						t.Fatalf("SyncTo(%d): %v", target, err)
					}
				} else {
					// SyncTo's contract: rev is a revision the store
					// acknowledged.
					drv.step()
					if err := c.SyncTo(ctx, target); err != nil {
						t.Fatalf("SyncTo(%d): %v", target, err)
					}
				}
				if got := c.View().Revision(); got < target {
					t.Fatalf("after SyncTo(%d) the view is at %d", target, got)
				}
				if err := diffStates(st.Snapshot(), c.View().State); err != nil {
					t.Fatal(err)
				}

				// Nothing more is coming: a wait with a cancelled context
				// fails and leaves the view as it was. (The shared transport
				// refuses a revision not yet assigned with
				// txn.ErrFutureRevision; the watch waits for it.)
				cctx, ccancel := context.WithCancel(context.Background())
				ccancel()
				err := c.SyncTo(cctx, target+1)
				if err == nil {
					t.Fatalf("SyncTo(%d) with a cancelled context and nothing committed returned nil", target+1)
				}
				if tp.name == "watch" && !errors.Is(err, context.Canceled) {
					t.Fatalf("SyncTo with a cancelled context: %v", err)
				}
				if got := c.View().Revision(); got != target {
					t.Fatalf("a failed SyncTo moved the view to %d", got)
				}
			})
		}
	}
}

// laggyWatch is a remote-looking watch: Poll never has anything yet, and
// the first Next reports that the stream fell behind (unless compacted is
// already set).
type laggyWatch struct {
	Watch
	compacted bool
}

func (w *laggyWatch) Poll(int) ([]*txn.WriteSet, error) { return nil, nil }

func (w *laggyWatch) Next(ctx context.Context, max int) ([]*txn.WriteSet, error) {
	if !w.compacted {
		w.compacted = true
		return nil, fmt.Errorf("watch stream: %w", store.ErrCompacted)
	}
	return w.Watch.Next(ctx, max)
}

type laggyTransport struct {
	Transport
	watches int
}

func (l *laggyTransport) Watch(ctx context.Context, from uint64) (Watch, error) {
	w, err := l.Transport.Watch(ctx, from)
	if err != nil {
		return nil, err
	}
	l.watches++
	return &laggyWatch{Watch: w, compacted: l.watches > 1}, nil // only the first stream falls behind
}

// TestSyncToRelistsWhenTheStreamFallsBehind: SyncTo waiting on the watch
// stream re-lists when the stream reports compaction, and still reaches
// the revision.
func TestSyncToRelistsWhenTheStreamFallsBehind(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 0)
	drv := newDriver(t, st, 8)
	drv.step()
	lt := &laggyTransport{Transport: inproc.New(st, inproc.WithoutSharing())}
	c, _ := newClient(t, lt, "laggy", 8, DefaultRetryPolicy())
	rev := drv.step()
	if err := c.SyncTo(context.Background(), rev); err != nil {
		t.Fatalf("SyncTo(%d): %v", rev, err)
	}
	if c.Cell().Relists() != 1 || lt.watches != 2 {
		t.Fatalf("%d relists, %d watches; want 1 and 2", c.Cell().Relists(), lt.watches)
	}
	if err := diffStates(st.Snapshot(), c.View().State); err != nil {
		t.Fatal(err)
	}
	// Next now delivers: SyncTo follows the stream without re-listing.
	rev = drv.step()
	if err := c.SyncTo(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	if c.Cell().Relists() != 1 {
		t.Fatalf("re-listed again (%d)", c.Cell().Relists())
	}
	if err := diffStates(st.Snapshot(), c.View().State); err != nil {
		t.Fatal(err)
	}
}
