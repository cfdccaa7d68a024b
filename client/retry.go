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
	// (commit nothing) before the loop gives up; an attempt that commits
	// anything resets the count. Default 10.
	MaxAttempts int
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
	case p.Backoff < 0 || p.MaxBackoff < 0:
		return errors.New("retry policy: negative backoff")
	case p.Jitter < 0 || p.Jitter > 1:
		return errors.New("retry policy: Jitter must be in [0,1]")
	}
	return nil
}

// Decision is what the loop does after an attempt.
type Decision struct {
	// Done: nothing conflicted, so everything the attempt asked for is
	// committed. The loop ends successfully.
	Done bool
	// GiveUp: MaxAttempts attempts in a row made no progress. The loop ends
	// with ErrGaveUp.
	GiveUp bool
	// SyncTo, when nonzero, is the revision the local copy must reach before
	// the next attempt: the attempt's own commit, or the state it conflicted
	// with, so a retry never decides again on the state that caused the
	// conflict, and a partial commit is always followed by a re-sync.
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

// Observe records an attempt's result and decides what comes next.
func (l *Loop) Observe(res *txn.Result) Decision {
	l.attempts++
	if !res.Conflicted() {
		return Decision{Done: true}
	}
	d := Decision{SyncTo: max(res.Revision, res.Base)}
	if res.Revision != 0 {
		l.noProgress = 0
		return d
	}
	l.noProgress++
	if l.noProgress >= l.policy.MaxAttempts {
		return Decision{GiveUp: true}
	}
	d.Backoff = l.backoff()
	return d
}

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
