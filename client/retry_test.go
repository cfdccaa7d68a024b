package client

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/txn"
)

// Results the loop tests feed to Observe.
var (
	// ok: everything committed.
	resOK = txn.Result{Revision: 5, Base: 4, Committed: 2}
	// empty: nothing committed and nothing conflicted (no operations).
	resEmpty = txn.Result{Base: 4}
	// none: every operation conflicted, nothing committed, evaluated at 7.
	resNone = txn.Result{Base: 7, Conflicts: 2, ClaimsConflicted: 2}
	// partial: committed at 9 (on base 8), one operation conflicted.
	resPartial = txn.Result{Revision: 9, Base: 8, Committed: 1, Conflicts: 1, ClaimsConflicted: 1}
	// odd: a base beyond the revision (a transport may report either
	// first); SyncTo must take the larger.
	resOdd = txn.Result{Revision: 3, Base: 10, Committed: 1, Conflicts: 1}
	// aborted: all-or-nothing aborted, nothing committed.
	resAborted = txn.Result{Base: 11, Conflicts: 1, ClaimsConflicted: 1}
)

const ms = time.Millisecond

// TestLoopWork: the loop as a scheduler's runner drives it — progress is a
// placement, tasks no machine could take are work left (a wait, then a
// retry on a view synced to what the attempt saw), the total is bounded
// too, and Restart begins the count without progress afresh.
func TestLoopWork(t *testing.T) {
	type step struct {
		res  txn.Result
		work Work
		want Decision
	}
	left := Work{Left: 2}
	placed := Work{Progress: true}
	for _, tc := range []struct {
		name    string
		policy  RetryPolicy
		steps   []step
		restart int // Restart before this step (0: never)
	}{
		{"work left waits and syncs", RetryPolicy{MaxAttempts: 5, WaitLeft: time.Second},
			[]step{{resEmpty, left, Decision{Backoff: time.Second}}, {resOK, Work{Left: 1, Progress: true}, Decision{SyncTo: 5, Backoff: time.Second}}, {resOK, placed, Decision{Done: true, SyncTo: 5}}}, 0},
		{"a commit that placed nothing is no progress", RetryPolicy{MaxAttempts: 2},
			[]step{{resPartial, Work{}, Decision{SyncTo: 9}}, {resPartial, Work{}, Decision{GiveUp: true, SyncTo: 9}}}, 0},
		{"placements reset the count", RetryPolicy{MaxAttempts: 2},
			[]step{{resNone, Work{}, Decision{SyncTo: 7}}, {resPartial, placed, Decision{SyncTo: 9}}, {resNone, Work{}, Decision{SyncTo: 7}}, {resNone, Work{}, Decision{GiveUp: true, SyncTo: 7}}}, 0},
		{"MaxTotal bounds progress too", RetryPolicy{MaxAttempts: 10, MaxTotal: 3},
			[]step{{resPartial, placed, Decision{SyncTo: 9}}, {resPartial, placed, Decision{SyncTo: 9}}, {resPartial, placed, Decision{GiveUp: true, SyncTo: 9}}}, 0},
		// Without the Restart the third attempt would give up; the fourth
		// does, at the total.
		{"Restart keeps the total", RetryPolicy{MaxAttempts: 3, MaxTotal: 4},
			[]step{{resNone, Work{}, Decision{SyncTo: 7}}, {resNone, Work{}, Decision{SyncTo: 7}}, {resNone, Work{}, Decision{SyncTo: 7}}, {resNone, Work{}, Decision{GiveUp: true, SyncTo: 7}}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.policy.Validate(); err != nil {
				t.Fatal(err)
			}
			l := NewLoop(tc.policy, nil)
			for i, s := range tc.steps {
				if tc.restart > 0 && i == tc.restart {
					l.Restart()
				}
				res := s.res
				if got := l.ObserveWork(&res, s.work); got != s.want {
					t.Fatalf("step %d: ObserveWork(%+v, %+v) = %+v, want %+v", i, s.res, s.work, got, s.want)
				}
			}
		})
	}
}

func TestLoopDecisions(t *testing.T) {
	type step struct {
		res  txn.Result
		want Decision
	}
	cases := []struct {
		name   string
		policy RetryPolicy
		steps  []step
	}{
		{"done when nothing conflicted", RetryPolicy{MaxAttempts: 3},
			[]step{{resOK, Decision{Done: true, SyncTo: 5}}}},
		{"done when nothing committed and nothing conflicted", RetryPolicy{MaxAttempts: 3},
			[]step{{resEmpty, Decision{Done: true}}}},
		{"full conflict syncs to the base", RetryPolicy{MaxAttempts: 3},
			[]step{{resNone, Decision{SyncTo: 7}}}},
		{"partial commit syncs to its own revision", RetryPolicy{MaxAttempts: 3},
			[]step{{resPartial, Decision{SyncTo: 9}}}},
		{"SyncTo is the max of revision and base", RetryPolicy{MaxAttempts: 3},
			[]step{{resOdd, Decision{SyncTo: 10}}}},
		{"aborted all-or-nothing is no progress", RetryPolicy{MaxAttempts: 2},
			[]step{{resAborted, Decision{SyncTo: 11}}, {resAborted, Decision{GiveUp: true, SyncTo: 11}}}},
		{"MaxAttempts 1 gives up on the first conflict", RetryPolicy{MaxAttempts: 1},
			[]step{{resNone, Decision{GiveUp: true, SyncTo: 7}}}},
		{"gives up after exactly MaxAttempts without progress", RetryPolicy{MaxAttempts: 3},
			[]step{{resNone, Decision{SyncTo: 7}}, {resNone, Decision{SyncTo: 7}}, {resNone, Decision{GiveUp: true, SyncTo: 7}}}},
		{"partial commit resets the bound", RetryPolicy{MaxAttempts: 3},
			[]step{
				{resNone, Decision{SyncTo: 7}}, {resNone, Decision{SyncTo: 7}},
				{resPartial, Decision{SyncTo: 9}},
				{resNone, Decision{SyncTo: 7}}, {resNone, Decision{SyncTo: 7}},
				{resNone, Decision{GiveUp: true, SyncTo: 7}},
			}},
		{"partial commits alone never give up", RetryPolicy{MaxAttempts: 1},
			[]step{{resPartial, Decision{SyncTo: 9}}, {resPartial, Decision{SyncTo: 9}}, {resPartial, Decision{SyncTo: 9}}, {resOK, Decision{Done: true, SyncTo: 5}}}},
		{"zero backoff retries at once", RetryPolicy{MaxAttempts: 5, MaxBackoff: time.Second, Jitter: 0.5},
			[]step{{resNone, Decision{SyncTo: 7}}, {resNone, Decision{SyncTo: 7}}, {resNone, Decision{SyncTo: 7}}}},
		{"backoff doubles up to MaxBackoff", RetryPolicy{MaxAttempts: 10, Backoff: 10 * ms, MaxBackoff: 80 * ms},
			[]step{
				{resNone, Decision{SyncTo: 7, Backoff: 10 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 20 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 40 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 80 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 80 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 80 * ms}},
			}},
		{"backoff capped between doublings", RetryPolicy{MaxAttempts: 10, Backoff: 10 * ms, MaxBackoff: 25 * ms},
			[]step{
				{resNone, Decision{SyncTo: 7, Backoff: 10 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 20 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 25 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 25 * ms}},
			}},
		{"Backoff above MaxBackoff is capped at once", RetryPolicy{MaxAttempts: 10, Backoff: 50 * ms, MaxBackoff: 30 * ms},
			[]step{{resNone, Decision{SyncTo: 7, Backoff: 30 * ms}}, {resNone, Decision{SyncTo: 7, Backoff: 30 * ms}}}},
		// MaxBackoff 0 means "no doubling": the pause stays at Backoff.
		{"MaxBackoff zero keeps Backoff fixed", RetryPolicy{MaxAttempts: 10, Backoff: 10 * ms},
			[]step{{resNone, Decision{SyncTo: 7, Backoff: 10 * ms}}, {resNone, Decision{SyncTo: 7, Backoff: 10 * ms}}, {resNone, Decision{SyncTo: 7, Backoff: 10 * ms}}}},
		{"progress resets the backoff too", RetryPolicy{MaxAttempts: 10, Backoff: 10 * ms, MaxBackoff: time.Second},
			[]step{
				{resNone, Decision{SyncTo: 7, Backoff: 10 * ms}},
				{resNone, Decision{SyncTo: 7, Backoff: 20 * ms}},
				{resPartial, Decision{SyncTo: 9}},
				{resNone, Decision{SyncTo: 7, Backoff: 10 * ms}},
			}},
		{"give up carries no pause", RetryPolicy{MaxAttempts: 2, Backoff: 10 * ms, MaxBackoff: time.Second},
			[]step{{resNone, Decision{SyncTo: 7, Backoff: 10 * ms}}, {resNone, Decision{GiveUp: true, SyncTo: 7}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.policy.Validate(); err != nil {
				t.Fatalf("policy %+v: %v", tc.policy, err)
			}
			// Jitter needs a source; with Backoff 0 it must not matter.
			l := NewLoop(tc.policy, rand.New(rand.NewPCG(1, 2)))
			for i, s := range tc.steps {
				res := s.res
				got := l.Observe(&res)
				if got != s.want {
					t.Fatalf("step %d: Observe(%+v) = %+v, want %+v", i, s.res, got, s.want)
				}
				if l.Attempts() != i+1 {
					t.Fatalf("step %d: Attempts() = %d, want %d", i, l.Attempts(), i+1)
				}
			}
		})
	}
}

// TestLoopJitter: each pause lies in [1-J, 1+J] times the un-jittered one
// (and never above MaxBackoff),
// the pauses really vary, and the same seed gives the same pauses.
func TestLoopJitter(t *testing.T) {
	for _, j := range []float64{0.01, 0.2, 0.5, 1} {
		for seed := uint64(1); seed <= 5; seed++ {
			policy := RetryPolicy{MaxAttempts: 1000, Backoff: 10 * ms, MaxBackoff: 160 * ms, Jitter: j}
			plain := policy
			plain.Jitter = 0
			run := func(p RetryPolicy, seed uint64) []time.Duration {
				l := NewLoop(p, rand.New(rand.NewPCG(seed, 99)))
				var out []time.Duration
				for range 200 {
					res := resNone
					out = append(out, l.Observe(&res).Backoff)
				}
				return out
			}
			got, again, base := run(policy, seed), run(policy, seed), run(plain, seed)
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for i := range got {
				if got[i] != again[i] {
					t.Fatalf("jitter %v seed %d: pause %d is %v, then %v with the same seed", j, seed, i, got[i], again[i])
				}
				min := time.Duration(float64(base[i]) * (1 - j))
				max := minDur(time.Duration(float64(base[i])*(1+j)), policy.MaxBackoff) // the cap holds after jitter
				if got[i] < min || got[i] > max {
					t.Fatalf("jitter %v seed %d: pause %d is %v, outside [%v, %v] around %v", j, seed, i, got[i], min, max, base[i])
				}
				if i >= 5 { // past the doubling, base is constant
					lo, hi = minDur(lo, got[i]), maxDur(hi, got[i])
				}
			}
			// The spread over 195 draws must cover a good part of the range
			// below the cap, [1-J, 1] x MaxBackoff.
			if spread := float64(hi-lo) / float64(160*ms); spread < j/2 {
				t.Fatalf("jitter %v seed %d: pauses only span [%v, %v]", j, seed, lo, hi)
			}
		}
	}
	// Different seeds fall out of step.
	a := NewLoop(RetryPolicy{MaxAttempts: 10, Backoff: time.Second, MaxBackoff: time.Second, Jitter: 0.2}, rand.New(rand.NewPCG(1, 1)))
	b := NewLoop(RetryPolicy{MaxAttempts: 10, Backoff: time.Second, MaxBackoff: time.Second, Jitter: 0.2}, rand.New(rand.NewPCG(2, 1)))
	ra, rb := resNone, resNone
	if a.Observe(&ra).Backoff == b.Observe(&rb).Backoff {
		t.Fatalf("seeds 1 and 2 drew the same jitter")
	}
	// Without a source, jitter is off rather than a panic.
	l := NewLoop(RetryPolicy{MaxAttempts: 10, Backoff: 10 * ms, MaxBackoff: time.Second, Jitter: 0.5}, nil)
	r := resNone
	if d := l.Observe(&r); d.Backoff != 10*ms {
		t.Fatalf("nil source: backoff %v, want 10ms", d.Backoff)
	}
}

func minDur(a, b time.Duration) time.Duration { return min(a, b) }
func maxDur(a, b time.Duration) time.Duration { return max(a, b) }

func TestRetryPolicyValidate(t *testing.T) {
	if err := DefaultRetryPolicy().Validate(); err != nil {
		t.Fatalf("default policy: %v", err)
	}
	d := DefaultRetryPolicy()
	if d.MaxAttempts != 10 || d.Backoff != 0 || d.Jitter != 0.2 {
		t.Fatalf("defaults changed: %+v", d)
	}
	bad := []RetryPolicy{
		{MaxAttempts: 0},
		{MaxAttempts: -1},
		{MaxAttempts: 1, Backoff: -1},
		{MaxAttempts: 1, MaxBackoff: -1},
		{MaxAttempts: 1, Jitter: -0.1},
		{MaxAttempts: 1, Jitter: 1.1},
	}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v: Validate accepted it", p)
		}
	}
	for _, p := range []RetryPolicy{{MaxAttempts: 1}, {MaxAttempts: 1, Jitter: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

func TestCounterConflictFraction(t *testing.T) {
	cases := []struct {
		c    Counters
		want float64
	}{
		{Counters{}, 0},
		{Counters{Attempts: 4}, 0},
		{Counters{Attempts: 4, Conflicted: 4}, 0}, // no conflict-free attempt
		{Counters{Attempts: 4, Conflicted: 1}, 1.0 / 3},
		{Counters{Attempts: 5, Conflicted: 3}, 1.5}, // may exceed 1
	}
	for _, tc := range cases {
		if got := tc.c.ConflictFraction(); got != tc.want {
			t.Errorf("%+v: ConflictFraction %v, want %v", tc.c, got, tc.want)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	st := openStore(t, durabilities[0], 0)
	tr := inproc.New(st)
	r := rand.New(rand.NewPCG(1, 1))
	clk := newFakeClock()
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no component", Config{Clock: clk, Rand: r}},
		{"no clock", Config{Component: "x", Rand: r}},
		{"no rand", Config{Component: "x", Clock: clk}},
		{"bad retry", Config{Component: "x", Clock: clk, Rand: r, Retry: RetryPolicy{MaxAttempts: 1, Jitter: 2}}},
	}
	for _, tc := range cases {
		if _, err := New(context.Background(), tr, tc.cfg); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, tc.cfg)
		}
	}
	c, err := New(context.Background(), tr, Config{Component: "x", Clock: clk, Rand: r})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Retry != DefaultRetryPolicy() {
		t.Fatalf("zero Retry became %+v, want the default", c.cfg.Retry)
	}
	if c.Component() != "x" {
		t.Fatalf("Component() = %q", c.Component())
	}
}

// TestClientObserveCountsGiveUp: the step API counts a loop giving up.
func TestClientObserveCountsGiveUp(t *testing.T) {
	st := openStore(t, durabilities[0], 0)
	c, _ := newClient(t, inproc.New(st), "x", 1, RetryPolicy{MaxAttempts: 2})
	l := c.NewLoop()
	for i, want := range []bool{false, true} {
		res := resNone
		if d := c.Observe(l, &res); d.GiveUp != want {
			t.Fatalf("attempt %d: GiveUp %v, want %v", i, d.GiveUp, want)
		}
	}
	if got := c.Counters().GaveUp; got != 1 {
		t.Fatalf("GaveUp = %d, want 1", got)
	}
}
