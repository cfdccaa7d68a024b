package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// transports lists the two ways a client reaches an in-process store.
var transports = []struct {
	name string
	make func(*store.Store) Transport
}{
	{"shared", func(s *store.Store) Transport { return inproc.New(s) }},
	{"watch", func(s *store.Store) Transport { return inproc.New(s, inproc.WithoutSharing()) }},
}

// TestTransactPartialCommitResyncs: a competitor takes a slot on a machine
// between the client's view and its commit, so the claim there conflicts
// while the others commit. The next attempt must decide on a view that
// includes both the competitor's and its own commit, and place the
// conflicting task elsewhere.
func TestTransactPartialCommitResyncs(t *testing.T) {
	for _, d := range durabilities {
		for _, tp := range transports {
			t.Run(fmt.Sprintf("%s/%s", d, tp.name), func(t *testing.T) {
				st := openStore(t, d, 0)
				g := newIDs(7)
				// m00 holds 2 tasks, m01 holds 10; client "a" has 4 tasks,
				// "rival" 1.
				cl := buildCluster(t, st, g, 1, 2000, 64*gib, 4, 1000, "a", "rival")
				big := g.next()
				mustCommit(t, st, txn.CreateMachine(machineProto(big, "m01", 10000, 64*gib)))
				rec, tr := record(tp.make(st))
				var rivalRev uint64
				rec.before = func(ctx context.Context, n int, tx *txn.Txn) {
					if n != 0 {
						return
					}
					rt, _ := st.Snapshot().Task(cl.tasks["rival"][0])
					rivalRev = mustCommit(t, st, txn.Claim(rt.UID, cl.machines[0], rt.Request(), rt.Version)).Revision
				}
				c, clk := newClient(t, tr, "a", 1, DefaultRetryPolicy())
				var views []uint64
				res, err := c.Transact(context.Background(), func(v View) (*txn.Txn, error) {
					views = append(views, v.Revision())
					return firstFit(c, v, cl.jobs["a"], 10), nil
				})
				if err != nil {
					t.Fatalf("Transact: %v", err)
				}
				log := rec.attempts()
				if len(log) != 2 {
					t.Fatalf("%d attempts, want 2: %+v", len(log), log)
				}
				first, second := log[0], log[1]
				if !first.Res.Partial() || first.Res.ClaimsConflicted != 1 || first.Claims != 4 {
					t.Fatalf("first attempt: %d claims, result %+v; want 4 claims, a partial commit with 1 conflict", first.Claims, first.Res)
				}
				if second.ViewRevision < first.Res.Revision || second.ViewRevision < rivalRev {
					t.Fatalf("second attempt decided on revision %d; the first committed at %d and the rival at %d", second.ViewRevision, first.Res.Revision, rivalRev)
				}
				if err := checkResync(log); err != nil {
					t.Fatal(err)
				}
				if second.Claims != 1 || second.Res.Conflicted() || res.Revision != second.Res.Revision {
					t.Fatalf("second attempt: %d claims, result %+v; Transact returned %+v", second.Claims, second.Res, res)
				}
				if !slices.Equal(views, []uint64{first.ViewRevision, second.ViewRevision}) {
					t.Fatalf("decide saw revisions %v, the transport %d and %d", views, first.ViewRevision, second.ViewRevision)
				}
				want := Counters{Attempts: 2, Conflicted: 1, Partial: 1, ClaimsAttempted: 5, ClaimsCommitted: 4, ClaimsConflicted: 1}
				if got := c.Counters(); got != want || got != expectedCounters(log) {
					t.Fatalf("counters %+v, want %+v", got, want)
				}
				if f := c.Counters().ConflictFraction(); f != 1 {
					t.Fatalf("conflict fraction %v, want 1", f)
				}
				// A partial commit made progress: retry at once.
				if !slices.Equal(clk.Sleeps, []time.Duration{0}) {
					t.Fatalf("sleeps %v, want [0]", clk.Sleeps)
				}
				final := st.Snapshot()
				for i, u := range cl.tasks["a"] {
					tk, _ := final.Task(u)
					if tk.State != assigned || tk.Scheduler != "a" {
						t.Fatalf("task %d is %s by %q", i, tk.State, tk.Scheduler)
					}
				}
				if m, _ := final.Machine(big); m.Tasks != 3 {
					t.Fatalf("m01 holds %d tasks, want 3 (two by first fit, one moved there after the conflict)", m.Tasks)
				}
				if err := txn.CheckInvariants(final); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestTransactGivesUpOnFullMachine: a client that insists on a full
// machine conflicts on every attempt and gives up after exactly
// MaxAttempts, pausing with doubling backoff in between.
func TestTransactGivesUpOnFullMachine(t *testing.T) {
	for _, tp := range transports {
		t.Run(tp.name, func(t *testing.T) {
			st := openStore(t, store.DurabilityNone, 0)
			g := newIDs(3)
			cl := buildCluster(t, st, g, 1, 1000, 64*gib, 2, 1000, "a")
			full := cl.machines[0]
			t0, _ := st.Snapshot().Task(cl.tasks["a"][0])
			mustCommit(t, st, txn.Claim(t0.UID, full, t0.Request(), t0.Version))
			rec, tr := record(tp.make(st))
			policy := RetryPolicy{MaxAttempts: 4, Backoff: 10 * ms, MaxBackoff: 25 * ms}
			c, clk := newClient(t, tr, "a", 1, policy)
			decides := 0
			res, err := c.Transact(context.Background(), func(v View) (*txn.Txn, error) {
				decides++
				tk, _ := v.Task(cl.tasks["a"][1])
				tx := c.NewTxn(v)
				tx.Ops = []txn.Op{txn.Claim(tk.UID, full, tk.Request(), tk.Version)}
				return tx, nil
			})
			if !errors.Is(err, ErrGaveUp) {
				t.Fatalf("Transact: %v, want ErrGaveUp", err)
			}
			if decides != 4 || len(rec.attempts()) != 4 {
				t.Fatalf("%d decisions, %d commits; want exactly MaxAttempts = 4", decides, len(rec.attempts()))
			}
			if res.ClaimsConflicted != 1 || res.Revision != 0 {
				t.Fatalf("last result %+v, want the last conflicting attempt", res)
			}
			want := Counters{Attempts: 4, Conflicted: 4, ClaimsAttempted: 4, ClaimsConflicted: 4, GaveUp: 1}
			if got := c.Counters(); got != want {
				t.Fatalf("counters %+v, want %+v", got, want)
			}
			if got := c.Counters().ConflictFraction(); got != 0 {
				t.Fatalf("conflict fraction %v with no conflict-free attempt, want 0", got)
			}
			if want := []time.Duration{10 * ms, 20 * ms, 25 * ms}; !slices.Equal(clk.Sleeps, want) {
				t.Fatalf("sleeps %v, want %v", clk.Sleeps, want)
			}
		})
	}
}

// TestTransactRejectingTransport drives Transact with a transport told to
// reject or half-commit attempts on a schedule: the no-progress bound
// counts rejections in a row, a partial commit resets it, and the loop
// gives up after exactly MaxAttempts rejections in a row.
func TestTransactRejectingTransport(t *testing.T) {
	cases := []struct {
		plan     string // per attempt: r reject, p commit all but the last op, c commit
		attempts int
		gaveUp   bool
		sleeps   []time.Duration
	}{
		{"c", 1, false, nil},
		{"rrc", 3, false, []time.Duration{1 * ms, 2 * ms}},
		{"rrr", 3, true, []time.Duration{1 * ms, 2 * ms}},
		{"rrprrc", 6, false, []time.Duration{1 * ms, 2 * ms, 0, 1 * ms, 2 * ms}},
		{"rrprrr", 6, true, []time.Duration{1 * ms, 2 * ms, 0, 1 * ms, 2 * ms}},
		{"pppc", 4, false, []time.Duration{0, 0, 0}},
	}
	for _, tc := range cases {
		for _, tp := range transports {
			t.Run(tc.plan+"/"+tp.name, func(t *testing.T) {
				st := openStore(t, store.DurabilityNone, 0)
				g := newIDs(5)
				cl := buildCluster(t, st, g, 1, 100_000, 640*gib, 8, 1000, "a")
				rec, tr := record(tp.make(st))
				rec.rewrite = func(ctx context.Context, n int, tx *txn.Txn) (txn.Result, error, bool) {
					switch tc.plan[n] {
					case 'r':
						return conflictAll(tx, st.Revision()), nil, true
					case 'p':
						last := tx.Ops[len(tx.Ops)-1]
						short := *tx
						short.Ops = tx.Ops[:len(tx.Ops)-1]
						res, err := st.Commit(ctx, &short)
						if err != nil {
							return res, err, true
						}
						res.Outcomes = append(res.Outcomes, conflictAll(&txn.Txn{Ops: []txn.Op{last}}, 0).Outcomes...)
						res.Conflicts++
						res.ClaimsConflicted++
						return res, nil, true
					}
					return txn.Result{}, nil, false
				}
				c, clk := newClient(t, tr, "a", 1, RetryPolicy{MaxAttempts: 3, Backoff: 1 * ms, MaxBackoff: time.Second})
				_, err := c.Transact(context.Background(), func(v View) (*txn.Txn, error) {
					return firstFit(c, v, cl.jobs["a"], 2), nil
				})
				log := rec.attempts()
				if errors.Is(err, ErrGaveUp) != tc.gaveUp || (!tc.gaveUp && err != nil) {
					t.Fatalf("Transact: %v, want gave up %v", err, tc.gaveUp)
				}
				if len(log) != tc.attempts {
					t.Fatalf("%d attempts, want %d", len(log), tc.attempts)
				}
				if !slices.Equal(clk.Sleeps, tc.sleeps) {
					t.Fatalf("sleeps %v, want %v", clk.Sleeps, tc.sleeps)
				}
				want := expectedCounters(log)
				if tc.gaveUp {
					want.GaveUp = 1
				}
				if got := c.Counters(); got != want {
					t.Fatalf("counters %+v, want %+v (from the transport's log)", got, want)
				}
				if err := checkResync(log); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestTransactDecideEndsLoop: decide returning nil (or no operations) ends
// the loop without a commit; after a partial commit Transact still returns
// the last result.
func TestTransactDecideEndsLoop(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 0)
	g := newIDs(9)
	cl := buildCluster(t, st, g, 1, 100_000, 640*gib, 4, 1000, "a")
	rec, tr := record(inproc.New(st))
	c, _ := newClient(t, tr, "a", 1, DefaultRetryPolicy())

	for _, empty := range []*txn.Txn{nil, {}} {
		res, err := c.Transact(context.Background(), func(View) (*txn.Txn, error) { return empty, nil })
		if err != nil || res.Revision != 0 || len(res.Outcomes) != 0 {
			t.Fatalf("decide returned %v: Transact = %+v, %v", empty, res, err)
		}
	}
	if n := len(rec.attempts()); n != 0 {
		t.Fatalf("%d commits, want none", n)
	}

	// Attempt 1 commits one claim and "conflicts" on the other; then decide
	// finds nothing left to do.
	rec.rewrite = func(ctx context.Context, n int, tx *txn.Txn) (txn.Result, error, bool) {
		short := *tx
		short.Ops = tx.Ops[:1]
		res, err := st.Commit(ctx, &short)
		res.Outcomes = append(res.Outcomes, conflictAll(&txn.Txn{Ops: tx.Ops[1:]}, 0).Outcomes...)
		res.Conflicts++
		res.ClaimsConflicted++
		return res, err, true
	}
	calls := 0
	res, err := c.Transact(context.Background(), func(v View) (*txn.Txn, error) {
		calls++
		if calls > 1 {
			return nil, nil
		}
		return firstFit(c, v, cl.jobs["a"], 2), nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Transact: %v after %d decisions", err, calls)
	}
	if log := rec.attempts(); len(log) != 1 || res.Revision != log[0].Res.Revision || !res.Partial() {
		t.Fatalf("Transact returned %+v, want the partial commit's result %+v", res, log)
	}
}

// TestTransactErrorsPassThrough: decide's error and the store's bad-input
// errors come back as they are (errors.Is); only commit errors count as
// Errors, and neither counts as an attempt.
func TestTransactErrorsPassThrough(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 0)
	g := newIDs(11)
	cl := buildCluster(t, st, g, 1, 100_000, 640*gib, 1, 1000, "a")
	c, _ := newClient(t, inproc.New(st), "a", 1, DefaultRetryPolicy())

	_, err := c.Transact(context.Background(), func(View) (*txn.Txn, error) { return nil, errDecide })
	if !errors.Is(err, errDecide) {
		t.Fatalf("decide error: got %v", err)
	}
	if got := c.Counters(); got != (Counters{}) {
		t.Fatalf("a decide error changed the counters: %+v", got)
	}

	ghost := uuid.MustParse("00000000-0000-4000-8000-00000000dead")
	_, err = c.Transact(context.Background(), func(v View) (*txn.Txn, error) {
		tx := c.NewTxn(v)
		tx.Ops = []txn.Op{txn.Claim(ghost, cl.machines[0], txn.Resources{CPU: 1}, 1)}
		return tx, nil
	})
	var opErr *txn.OpError
	if !errors.Is(err, txn.ErrNotFound) || !errors.As(err, &opErr) || opErr.Index != 0 {
		t.Fatalf("claim of an unknown task: got %v, want txn.ErrNotFound at op 0", err)
	}
	if got := c.Counters(); got != (Counters{Errors: 1}) {
		t.Fatalf("counters %+v, want one error and nothing else", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Transact(ctx, func(v View) (*txn.Txn, error) { return firstFit(c, v, cl.jobs["a"], 1), nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: got %v", err)
	}
	if got := c.Counters().Errors; got != 2 {
		t.Fatalf("Errors = %d, want 2", got)
	}
	if tk, _ := st.Snapshot().Task(cl.tasks["a"][0]); tk.State != pending {
		t.Fatalf("task is %s after failed transactions", tk.State)
	}
}

// TestCommitCountsAllOrNothing: an aborted gang commits nothing, so none of
// its claims counts as committed, and the attempt is conflicted but not
// partial.
func TestCommitCountsAllOrNothing(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 0)
	g := newIDs(13)
	cl := buildCluster(t, st, g, 1, 1000, 64*gib, 2, 1000, "a")
	c, err := New(context.Background(), inproc.New(st), Config{Component: "a", Clock: newFakeClock(), Rand: newIDs(1).r, Commit: allOrNothing})
	if err != nil {
		t.Fatal(err)
	}
	v := c.View()
	tx := c.NewTxn(v)
	for _, u := range cl.tasks["a"] {
		tk, _ := v.Task(u)
		tx.Ops = append(tx.Ops, txn.Claim(u, cl.machines[0], tk.Request(), tk.Version)) // only one fits
	}
	if tx.Commit != allOrNothing || tx.Component != "a" || tx.ViewRevision != v.Revision() {
		t.Fatalf("NewTxn built %+v", tx)
	}
	if tx.UnixNanos != newFakeClock().Now().UnixNano() {
		t.Fatalf("NewTxn stamped %d, not the injected clock's time", tx.UnixNanos)
	}
	res, err := c.Commit(context.Background(), tx)
	if err != nil || res.Revision != 0 {
		t.Fatalf("Commit = %+v, %v; want an aborted gang", res, err)
	}
	want := Counters{Attempts: 1, Conflicted: 1, ClaimsAttempted: 2, ClaimsConflicted: 1}
	if got := c.Counters(); got != want {
		t.Fatalf("counters %+v, want %+v", got, want)
	}
	if d := c.Observe(c.NewLoop(), &res); d.Done || d.GiveUp || d.SyncTo != res.Base {
		t.Fatalf("decision after an aborted gang: %+v", d)
	}
}
