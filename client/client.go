// Package client is the one library every omega component — scheduler,
// agent, submitter, the benchmark — uses to reach the cell-state store. It
// keeps a local copy of the cell in sync (Cell), hands out immutable views,
// builds transactions, and runs the optimistic loop: view → decide →
// commit → read the outcome → re-sync and retry what conflicted, within a
// bound.
//
// The loop comes in two forms. Steps (View, NewTxn, Commit, Loop.Observe,
// SyncTo) let a virtual-time engine interleave attempts with other events;
// Transact runs the same steps as a blocking loop for live use. Time,
// randomness and uuids are injected through Config, so the same code runs
// under the real clock and, deterministically, in virtual time. Nothing here
// starts a goroutine.
package client

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Clock is the client's source of time.
type Clock interface {
	Now() time.Time
	// Sleep pauses for d or until ctx is done. Only Transact sleeps.
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock, for live components.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Config configures a Client.
type Config struct {
	// Component names the client in every transaction (recorded on claims,
	// checked by a mediating store). Required.
	Component string
	// Clock. Required: live code passes RealClock{}, the simulation its
	// virtual clock.
	Clock Clock
	// Rand drives jitter. Required (seeded by the caller).
	Rand *rand.Rand
	// UUIDs is the entropy for new object ids (uuid.NewRandomFromReader).
	// Default: a source of its own seeded from Rand, so ids follow the seed
	// and do not depend on how often the loop drew jitter.
	UUIDs io.Reader
	// Conflict and Commit are the modes NewTxn sets. Defaults: fine,
	// incremental.
	Conflict omegav1.ConflictMode
	Commit   omegav1.CommitMode
	// Retry bounds and paces the loop. Default DefaultRetryPolicy().
	Retry RetryPolicy
}

// Counters are what a client counts, as DESIGN.md "Counting" defines them.
type Counters struct {
	// Attempts: transactions the store evaluated (a result came back).
	Attempts int64
	// Conflicted: attempts with at least one conflicting operation, even if
	// incremental mode committed the rest.
	Conflicted int64
	// Partial: attempts that committed some operations and conflicted on
	// others.
	Partial int64
	// ClaimsAttempted, ClaimsCommitted, ClaimsConflicted count claims one by
	// one; ClaimsRejected the claims the store's policy refused (neither
	// committed nor conflicted).
	ClaimsAttempted, ClaimsCommitted, ClaimsConflicted, ClaimsRejected int64
	// Rejected counts the operations the store's policy refused.
	Rejected int64
	// Errors: commits that returned an error (bad input, store failure).
	Errors int64
	// GaveUp: loops that reached their retry bound.
	GaveUp int64
}

// ConflictFraction is conflicted attempts per attempt with no conflict (the
// paper's "conflicts per successful transaction"; it can exceed 1). Zero
// when there were no conflict-free attempts.
func (c Counters) ConflictFraction() float64 {
	ok := c.Attempts - c.Conflicted
	if ok <= 0 {
		return 0
	}
	return float64(c.Conflicted) / float64(ok)
}

// Client is one component's handle on the cell. It belongs to one
// goroutine (the component's loop); views it returns may be shared.
type Client struct {
	cfg      Config
	tr       Transport
	cell     *Cell
	uuids    io.Reader
	counters Counters
}

// New connects a client: it lists the cell through tr and watches it.
func New(ctx context.Context, tr Transport, cfg Config) (*Client, error) {
	if cfg.Component == "" {
		return nil, fmt.Errorf("client config: Component is required")
	}
	if cfg.Clock == nil || cfg.Rand == nil {
		return nil, fmt.Errorf("client config for %s: Clock and Rand are required (inject them)", cfg.Component)
	}
	if cfg.Retry == (RetryPolicy{}) {
		cfg.Retry = DefaultRetryPolicy()
	}
	if err := cfg.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("client config for %s: %w", cfg.Component, err)
	}
	cell, err := NewCell(ctx, tr)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, tr: tr, cell: cell, uuids: cfg.UUIDs}
	if c.uuids == nil {
		// A stream of its own, seeded from Rand, so a retry's jitter does
		// not shift every later id.
		c.uuids = RandReader(rand.New(rand.NewPCG(cfg.Rand.Uint64(), cfg.Rand.Uint64())))
	}
	return c, nil
}

// Component returns the client's component name.
func (c *Client) Component() string { return c.cfg.Component }

// Cell returns the client's local copy.
func (c *Client) Cell() *Cell { return c.cell }

// View returns the local copy as it is now (call Sync first for the newest).
func (c *Client) View() View { return c.cell.View() }

// Sync brings the local copy up to date without blocking.
func (c *Client) Sync(ctx context.Context) error { return c.cell.Sync(ctx) }

// SyncTo blocks until the local copy includes revision rev.
func (c *Client) SyncTo(ctx context.Context, rev uint64) error { return c.cell.SyncTo(ctx, rev) }

// Watch streams the cell's revisions after fromRevision straight from the
// transport, for a component that follows changes itself (an agent noting
// the tasks placed on its machines) rather than through the Cell. The
// stream is the caller's: one goroutine owns it, and it must Close it. An
// error wrapping ErrCompacted means fromRevision is no longer
// retained: take a fresh view and watch from its revision.
func (c *Client) Watch(ctx context.Context, fromRevision uint64) (Watch, error) {
	return c.tr.Watch(ctx, fromRevision)
}

// ListAndWatch is the package's ListAndWatch through the client's
// transport, for a component that follows the cell itself (an agent's
// tracker) rather than through the client's Cell.
func (c *Client) ListAndWatch(ctx context.Context) (*txn.State, Watch, error) {
	st, w, _, err := ListAndWatch(ctx, c.tr)
	return st, w, err
}

// Counters returns the counts so far.
func (c *Client) Counters() Counters { return c.counters }

// NewUID returns a fresh object id from the injected entropy.
func (c *Client) NewUID() uuid.UUID {
	u, err := uuid.NewRandomFromReader(c.uuids)
	if err != nil {
		panic(fmt.Sprintf("client %s: uuid entropy failed: %v", c.cfg.Component, err))
	}
	return u
}

// NewTxn starts a transaction against v with the client's component, clock
// and modes.
func (c *Client) NewTxn(v View) *txn.Txn {
	return &txn.Txn{
		ViewRevision: v.Revision(),
		Conflict:     c.cfg.Conflict,
		Commit:       c.cfg.Commit,
		Component:    c.cfg.Component,
		UnixNanos:    c.cfg.Clock.Now().UnixNano(),
	}
}

// NewLoop starts the retry state for one logical operation.
func (c *Client) NewLoop() *Loop { return NewLoop(c.cfg.Retry, c.cfg.Rand) }

// Commit sends tx and counts the attempt. It does not retry.
func (c *Client) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	claims := 0
	for i := range tx.Ops {
		if tx.Ops[i].Kind == txn.OpClaim {
			claims++
		}
	}
	res, err := c.tr.Commit(ctx, tx)
	if err != nil {
		c.counters.Errors++
		return res, err
	}
	c.counters.Attempts++
	c.counters.ClaimsAttempted += int64(claims)
	c.counters.ClaimsConflicted += int64(res.ClaimsConflicted)
	rejectedClaims := 0
	if res.Rejected > 0 {
		c.counters.Rejected += int64(res.Rejected)
		for i, o := range res.Outcomes {
			if o.Code == omegav1.OutcomeCode_OUTCOME_CODE_REJECTED && i < len(tx.Ops) && tx.Ops[i].Kind == txn.OpClaim {
				rejectedClaims++
			}
		}
		c.counters.ClaimsRejected += int64(rejectedClaims)
	}
	if res.Revision != 0 {
		c.counters.ClaimsCommitted += int64(claims - res.ClaimsConflicted - rejectedClaims)
	}
	if res.Conflicted() {
		c.counters.Conflicted++
		if res.Partial() {
			c.counters.Partial++
		}
	}
	return res, nil
}

// Observe is Loop.Observe that also counts a loop giving up.
func (c *Client) Observe(l *Loop, res *txn.Result) Decision {
	d := l.Observe(res)
	if d.GiveUp {
		c.counters.GaveUp++
	}
	return d
}

// Transact runs the optimistic loop for live use: it syncs, calls decide
// with a fresh view, commits what decide returns, and retries while
// anything conflicts — re-syncing first (up to its own commit after a
// partial one) and pausing as the retry policy says. decide must build its
// transaction from the view it is given (via NewTxn) and may return nil when
// nothing is left to do. Transact returns the last result; ErrGaveUp when
// the bound was reached; decide's error or a commit error as they are.
func (c *Client) Transact(ctx context.Context, decide func(v View) (*txn.Txn, error)) (txn.Result, error) {
	l := c.NewLoop()
	var last txn.Result // the last attempt's result, returned whichever way the loop ends
	for {
		if err := c.cell.Sync(ctx); err != nil {
			return last, err
		}
		tx, err := decide(c.View())
		if err != nil || tx == nil || len(tx.Ops) == 0 {
			return last, err
		}
		res, err := c.Commit(ctx, tx)
		if err != nil {
			return res, err
		}
		last = res
		d := c.Observe(l, &res)
		switch {
		case d.Done:
			return res, nil
		case d.GiveUp:
			return res, fmt.Errorf("%s: %w (%d)", c.cfg.Component, ErrGaveUp, l.Attempts())
		}
		if d.SyncTo != 0 {
			if err := c.cell.SyncTo(ctx, d.SyncTo); err != nil {
				return res, err
			}
		}
		if err := c.cfg.Clock.Sleep(ctx, d.Backoff); err != nil {
			return res, err
		}
	}
}

// RandReader adapts a seeded source to an io.Reader, for uuids.
func RandReader(r *rand.Rand) io.Reader { return randReader{r} }

type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := 0; i < len(p); i += 8 {
		v := r.r.Uint64()
		for j := 0; j < 8 && i+j < len(p); j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	return len(p), nil
}
