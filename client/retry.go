package client

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/omega-cell/omega/txn"
)

// RetryPolicy bounds and paces the optimistic loop.
type RetryPolicy struct {
	// MaxAttempts is how many attempts in a row may make no progress
	// (commit nothing, or what the caller counts as progress: Work) before
	// the loop gives up; an attempt that makes progress resets the count.
	// Default 10. A scheduler's runner sets the Omega paper's 100 attempts
	// without a placement.
	MaxAttempts int
	// MaxTotal, if positive, bounds the attempts in all, progress or not
	// (the paper's 1,000 per job). Default 0: no bound beyond MaxAttempts.
	MaxTotal int
	// WaitLeft is the pause before retrying an attempt in which nothing
	// conflicted but work was left (Work.Left: tasks no machine could take;
	// the cell must change first). Default 0.
	WaitLeft time.Duration
	// Backoff is the pause before the first retry after an attempt that made
	// no progress; it doubles with each further such attempt, up to
	// MaxBackoff. Zero (the default) retries at once: in the Omega paper's
	// model a retry pays the scheduler's decision time anyway.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Jitter in [0,1] scales each pause by a random factor in
	// [1-Jitter, 1+Jitter], drawn from the client's injected source, so
	// competing clients fall out of step. Default 0.2.
	Jitter float64
}

// DefaultRetryPolicy returns the defaults.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 10, MaxBackoff: time.Second, Jitter: 0.2}
}

// Validate reports the first invalid field.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return errors.New("retry policy: MaxAttempts must be at least 1")
	case p.MaxTotal < 0:
		return errors.New("retry policy: MaxTotal must not be negative")
	case p.Backoff < 0 || p.MaxBackoff < 0 || p.WaitLeft < 0:
		return errors.New("retry policy: negative backoff or wait")
	case p.Jitter < 0 || p.Jitter > 1:
		return errors.New("retry policy: Jitter must be in [0,1]")
	}
	return nil
}

// Decision is what the loop does after an attempt.
type Decision struct {
	// Done: nothing conflicted and no work was left, so everything the
	// attempt asked for is committed. The loop ends successfully.
	Done bool
	// GiveUp: MaxAttempts attempts in a row made no progress, or MaxTotal
	// attempts were made. The loop ends with ErrGaveUp.
	GiveUp bool
	// SyncTo, when nonzero, is the revision the local copy must reach before
	// the next decision: max(Revision, Base) — the attempt's own commit, or
	// the state it conflicted with — so a retry never decides again on the
	// state that caused the conflict (a transport's non-blocking sync may
	// hand back an older one), and a partial commit is always followed by a
	// re-sync. Set whenever the attempt committed or conflicted, Done and
	// GiveUp included.
	SyncTo uint64
	// Backoff is the pause before the next attempt.
	Backoff time.Duration
}

// ErrGaveUp: the retry bound was reached.
var ErrGaveUp = errors.New("gave up after attempts without progress")

// Loop is the retry state of one logical operation (placing one job, say):
// a pure decision function over attempt results, with no clock and no I/O,
// so a virtual-time engine can drive it between its own events.
type Loop struct {
	policy     RetryPolicy
	rng        *rand.Rand
	attempts   int // total
	noProgress int // in a row
}

// NewLoop starts a loop. rng supplies the jitter; it may be nil when
// Jitter is 0.
func NewLoop(policy RetryPolicy, rng *rand.Rand) *Loop {
	return &Loop{policy: policy, rng: rng}
}

// Attempts returns how many attempts the loop has observed.
func (l *Loop) Attempts() int { return l.attempts }

// Work is what an attempt achieved beside its result, for a caller whose
// goal is more than "nothing conflicted": a scheduler placing a job.
type Work struct {
	// Left counts work the attempt could not even try (tasks no machine
	// could take): with nothing conflicting, the loop waits
	// RetryPolicy.WaitLeft for the cell to change and tries again.
	Left int
	// Progress: the attempt moved the goal on (placed a task), which
	// resets the count of attempts without progress.
	Progress bool
}

// Observe records an attempt's result and decides what comes next; an
// attempt made progress if it committed anything.
func (l *Loop) Observe(res *txn.Result) Decision {
	return l.ObserveWork(res, Work{Progress: res.Revision != 0})
}

// ObserveWork is Observe for a caller that says what counts as progress
// and what work is left.
func (l *Loop) ObserveWork(res *txn.Result, w Work) Decision {
	l.attempts++
	var sync uint64
	if res.Revision != 0 || res.Conflicted() {
		sync = max(res.Revision, res.Base)
	}
	if !res.Conflicted() && w.Left == 0 {
		return Decision{Done: true, SyncTo: sync}
	}
	if w.Progress {
		l.noProgress = 0
	} else {
		l.noProgress++
	}
	if l.noProgress >= l.policy.MaxAttempts || (l.policy.MaxTotal > 0 && l.attempts >= l.policy.MaxTotal) {
		return Decision{GiveUp: true, SyncTo: sync}
	}
	d := Decision{SyncTo: sync}
	switch {
	case !res.Conflicted():
		d.Backoff = l.policy.WaitLeft // nothing fits now: wait for the cell to change
	case !w.Progress:
		d.Backoff = l.backoff()
	}
	return d
}

// Restart starts the count of attempts without progress afresh (the goal
// changed: a job's tasks need placing again); the total stays.
func (l *Loop) Restart() { l.noProgress = 0 }

func (l *Loop) backoff() time.Duration {
	b := l.policy.Backoff
	if b <= 0 {
		return 0
	}
	for i := 1; i < l.noProgress && b < l.policy.MaxBackoff; i++ {
		b *= 2
	}
	if j := l.policy.Jitter; j > 0 && l.rng != nil {
		b = time.Duration(float64(b) * (1 - j + 2*j*l.rng.Float64()))
	}
	if l.policy.MaxBackoff > 0 && b > l.policy.MaxBackoff {
		b = l.policy.MaxBackoff // the cap holds after jitter too
	}
	return b
}
