// Package live runs schedulers under the real clock: the blocking loop a
// scheduler process runs around the same Runner and Intake the simulation
// steps in virtual time. It owns a goroutine (the caller's, in Run) and
// waits on the cell's watch and on the decision time; the decisions
// themselves stay in package schedulers, which has no clock and starts no
// goroutine.
package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// Driver runs one scheduler instance live: its Runner (whose client it
// commits through) and the Intake that routes the cell's jobs to it.
type Driver struct {
	Runner *schedulers.Runner
	Intake *schedulers.Intake
	// Clock is the time the Runner sees and the decision time is spent
	// in. Live: client.RealClock{}.
	Clock client.Clock
	// Idle bounds how long the driver waits for the watch when no job is
	// queued, so that it notices its context promptly on a quiet cell.
	// Default 1s.
	Idle time.Duration
	// Members, if set, delivers the instances of the runner's kind as the
	// cell's membership lists them — every live instance, this one
	// included, by name — whenever they change: the intake routes the
	// kind's jobs among them (Intake.SetMembers), so the jobs of an
	// instance that died move to the others. Nil: this instance is alone
	// (it takes every job of its kind).
	// The driver looks at it between attempts and waits: a change is
	// applied within Idle.
	Members <-chan []string
	// Logger says what the driver rides through (a commit the cell could
	// not take). Default slog.Default().
	Logger *slog.Logger
}

// RetryPause is how long the driver waits after a commit the cell could
// not take (its server gone, no leader yet) before it goes on.
const RetryPause = 200 * time.Millisecond

// transient: a commit's error that says the cell could not take it now —
// its server unreachable or stopping, a replicated cell between leaders,
// the call's own deadline — rather than that the scheduler is wrong. The
// job is queued again (OutcomeRetry); a claim that did commit after all
// shows in the watch, and the next attempt's conflicts say so.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, transport.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded))
}

// members applies the newest members the membership delivered, if any,
// to the jobs of the cell as of rev, the revision the intake has taken in
// (the client's own view syncs to it first: it follows the cell apart
// from the informer).
func (d *Driver) members(ctx context.Context, rev uint64) error {
	var names []string
	for drained := false; !drained && d.Members != nil; {
		select {
		case n, ok := <-d.Members:
			if ok {
				names = n
			} else {
				drained = true
			}
		default:
			drained = true
		}
	}
	if names == nil {
		return nil
	}
	kind := d.Runner.Scheduler().Kind()
	if err := d.Runner.Client().SyncTo(ctx, rev); err != nil {
		return fmt.Errorf("%s: %w", d.Runner.Name(), err)
	}
	if _, err := d.Intake.SetMembers(kind, names, d.Runner.Client().View().State, d.Clock.Now()); err != nil {
		return fmt.Errorf("%s: %w", d.Runner.Name(), err)
	}
	return nil
}

// intakeFeed is the intake as the driver's informer's handler: a fresh
// view recovers the instance's jobs (those already known stay queued),
// each revision is routed.
type intakeFeed struct{ d *Driver }

func (f intakeFeed) Relisted(st *txn.State) error {
	f.d.Intake.Recover(st, f.d.Clock.Now())
	return nil
}

func (f intakeFeed) Apply(ws *txn.WriteSet) error {
	_, err := f.d.Intake.Observe(ws, f.d.Clock.Now())
	return err
}

// Run takes the cell's jobs for its instance (Intake.Recover on a fresh
// listing), then loops until ctx ends: it feeds the intake what the watch
// delivers, attempts the next ready job — spending its decision time, then
// committing — and otherwise waits for the watch or for the next job to
// become ready. A watch that falls behind re-lists (client.Informer). It
// returns ctx's error when stopped, or the first error of the store or the
// watch.
func (d *Driver) Run(ctx context.Context) error {
	idle := d.Idle
	if idle <= 0 {
		idle = time.Second
	}
	inf, err := client.NewInformer(d.Runner.Client(), intakeFeed{d})
	if err != nil {
		return err
	}
	defer inf.Close()
	if err := inf.List(ctx); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := inf.Poll(ctx); err != nil {
			return fmt.Errorf("%s: %w", d.Runner.Name(), err)
		}
		if err := d.members(ctx, inf.Revision()); err != nil {
			return err
		}
		a, ok, err := d.Runner.Begin(ctx, d.Clock.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", d.Runner.Name(), err)
		}
		if ok {
			if err := d.Clock.Sleep(ctx, a.DecisionTime); err != nil {
				return err
			}
			if _, err := d.Runner.Finish(ctx, a, d.Clock.Now()); err != nil {
				if !transient(ctx, err) {
					return fmt.Errorf("%s: %w", d.Runner.Name(), err)
				}
				logger := d.Logger
				if logger == nil {
					logger = slog.Default()
				}
				logger.Warn("the cell could not take a commit: the job is queued again", "name", d.Runner.Name(), "job", a.Job, "err", err)
				if err := d.Clock.Sleep(ctx, RetryPause); err != nil {
					return err
				}
			}
			continue
		}
		// Nothing ready: wait for the cell to change, or for the next
		// queued job's time, or at most idle.
		wait := idle
		if next, queued := d.Runner.NextReady(); queued {
			wait = min(wait, max(next.Sub(d.Clock.Now()), 0))
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err = inf.Wait(wctx)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		default:
			return fmt.Errorf("%s: %w", d.Runner.Name(), err)
		}
	}
}
