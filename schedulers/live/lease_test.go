package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// hookClock is a virtual clock whose Sleep advances it and then calls
// onSleep: another process acting while the keeper waits.
type hookClock struct {
	testkit.Clock
	onSleep func()
}

func (c *hookClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := c.Clock.Sleep(ctx, d); err != nil {
		return err
	}
	if c.onSleep != nil {
		c.onSleep()
	}
	return nil
}

type leaseCell struct {
	t     *testing.T
	st    *store.Store
	clock *hookClock
}

func newLeaseCell(t *testing.T) *leaseCell {
	return &leaseCell{t: t, st: storekit.Open(t, storekit.Options(t, store.DurabilityNone)),
		clock: &hookClock{Clock: *testkit.NewClock(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))}}
}

// keeper is a process's keeper of the lease "batch-0", holder holder.
func (c *leaseCell) keeper(holder string) (*leaseKeeper, *client.Client) {
	c.t.Helper()
	tr := inproc.New(c.st)
	cl, err := client.New(context.Background(), tr, client.Config{Component: "batch-0", Clock: c.clock, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		c.t.Fatal(err)
	}
	return &leaseKeeper{tr: tr, name: "batch-0", kind: "batch", holder: holder, duration: 3 * time.Second, poll: 500 * time.Millisecond,
		logger: slog.New(slog.DiscardHandler), clock: c.clock}, cl
}

func (c *leaseCell) lease() (*txn.Lease, bool) { return c.st.Snapshot().Lease(txn.LeaseUID("batch-0")) }

// TestLeaseTakenRenewedGivenBack: a keeper makes its lease in a cell that
// has none, renews it at the version it wrote (the renewal time moving
// with its clock), and deletes it when it stops; a lease deleted under it
// is made again at its next renewal.
func TestLeaseTakenRenewedGivenBack(t *testing.T) {
	c := newLeaseCell(t)
	k, cl := c.keeper("p1")
	if err := k.take(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	l, ok := c.lease()
	if !ok || l.Holder() != "p1" || l.SchedulerKind() != "batch" || l.Role() != "scheduler" || l.Duration() != 3*time.Second || l.Version != k.version {
		t.Fatalf("taken: %+v (found %v)", l, ok)
	}
	c.clock.T = c.clock.T.Add(time.Second)
	if err := k.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l2, _ := c.lease(); l2.Version <= l.Version || l2.RenewUnixNanos() != c.clock.T.UnixNano() || l2.AcquireUnixNanos() != l.AcquireUnixNanos() {
		t.Fatalf("renewed: %+v after %+v", l2, l)
	}
	// Deleted by an operator: made again.
	c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.st.Revision(), Component: "admin", Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, txn.LeaseUID("batch-0"), 0)}})
	if err := k.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l3, ok := c.lease(); !ok || l3.Holder() != "p1" {
		t.Fatalf("made again: %+v (found %v)", l3, ok)
	}
	k.release(time.Second)
	if _, ok := c.lease(); ok {
		t.Fatal("the lease is still there after release")
	}
}

// TestLeaseOfALiveInstanceRefused: a second process of the name waits on
// the first's lease; the first renews it meanwhile, so the second is
// refused with ErrLeaseHeld naming the holder, and the lease is the
// first's still. A lease the first renews no more (it died) is taken over
// after its duration; the first, renewing after that, has lost it.
func TestLeaseOfALiveInstanceRefused(t *testing.T) {
	c := newLeaseCell(t)
	k1, cl1 := c.keeper("p1")
	if err := k1.take(context.Background(), cl1); err != nil {
		t.Fatal(err)
	}
	k2, cl2 := c.keeper("p2")
	sleeps := 0
	c.clock.onSleep = func() {
		if sleeps++; sleeps == 2 {
			if err := k1.renew(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	err := k2.take(context.Background(), cl2)
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), `scheduler "batch-0" is running elsewhere: its lease is held by "p1"`) {
		t.Fatalf("the second process: %v", err)
	}
	if l, _ := c.lease(); l.Holder() != "p1" {
		t.Fatalf("the lease after the refusal: %+v", l)
	}

	// p1 stops renewing: p2 takes the lease once a duration passed
	// without a renewal, by its own clock.
	c.clock.onSleep = nil
	start := c.clock.T
	k3, cl3 := c.keeper("p3")
	if err := k3.take(context.Background(), cl3); err != nil {
		t.Fatal(err)
	}
	if waited := c.clock.T.Sub(start); waited <= 3*time.Second || waited > 4*time.Second {
		t.Fatalf("took over after %v, want just over the duration (3s)", waited)
	}
	if l, _ := c.lease(); l.Holder() != "p3" {
		t.Fatalf("taken over: %+v", l)
	}
	if err := k1.renew(context.Background()); !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "lost its lease") {
		t.Fatalf("the first, renewing after the takeover: %v", err)
	}
	// A lease whose renewal is older than twice its duration by this clock
	// is taken at once.
	c.clock.T = c.clock.T.Add(10 * time.Second)
	start = c.clock.T
	k4, cl4 := c.keeper("p4")
	if err := k4.take(context.Background(), cl4); err != nil || c.clock.T != start {
		t.Fatalf("a long-stale lease: %v, after %v", err, c.clock.T.Sub(start))
	}
}

// lostAnswers commits through the store and then, for the first n
// commits, says the cell was unavailable: the answer lost with a server.
type lostAnswers struct {
	failingCommits
}

func (l *lostAnswers) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	res, err := l.Transport.Commit(ctx, tx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		l.n--
		return txn.Result{}, l.err
	}
	return res, err
}

// TestLeaseTakenThroughAnUnavailableCell: a keeper whose first commits the
// cell could not take (transport.ErrUnavailable) tries again and takes its
// lease; one whose create committed but whose answer was lost finds the
// lease its own (its holder) and takes it, not waiting on itself; an
// error that is not transient still fails the take.
func TestLeaseTakenThroughAnUnavailableCell(t *testing.T) {
	unavailable := fmt.Errorf("%w: connection reset by peer", transport.ErrUnavailable)
	for _, tc := range []struct {
		name string
		tr   func(st *store.Store) transport.Transport
		fail bool
	}{
		{"refused twice", func(st *store.Store) transport.Transport {
			return &failingCommits{Transport: inproc.New(st), n: 2, err: unavailable}
		}, false},
		{"answer lost", func(st *store.Store) transport.Transport {
			return &lostAnswers{failingCommits{Transport: inproc.New(st), n: 1, err: unavailable}}
		}, false},
		{"invalid", func(st *store.Store) transport.Transport {
			return &failingCommits{Transport: inproc.New(st), n: 1, err: fmt.Errorf("%w: no", txn.ErrInvalid)}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLeaseCell(t)
			tr := tc.tr(c.st)
			cl, err := client.New(context.Background(), tr, client.Config{Component: "batch-0", Clock: c.clock, Rand: rand.New(rand.NewPCG(1, 2))})
			if err != nil {
				t.Fatal(err)
			}
			k := &leaseKeeper{tr: tr, name: "batch-0", kind: "batch", holder: "p1", duration: 3 * time.Second, poll: 500 * time.Millisecond,
				logger: slog.New(slog.DiscardHandler), clock: c.clock}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := c.clock.Now()
			err = k.take(ctx, cl)
			if tc.fail {
				if !errors.Is(err, txn.ErrInvalid) {
					t.Fatalf("take: %v, want the commit's ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if l, ok := c.lease(); !ok || l.Holder() != "p1" || l.Version != k.version {
				t.Fatalf("the lease after the take: %+v (found %v), the keeper's version %d", l, ok, k.version)
			}
			if waited := c.clock.Now().Sub(start); waited >= k.duration {
				t.Fatalf("the take waited %v (the lease's duration is %v): it waited on its own lease", waited, k.duration)
			}
		})
	}
}
