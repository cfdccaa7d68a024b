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
	"time"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
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
}

// Run takes the cell's jobs for its instance (Intake.Recover on a fresh
// listing), then loops until ctx ends: it feeds the intake what the watch
// delivers, attempts the next ready job — spending its decision time, then
// committing — and otherwise waits for the watch or for the next job to
// become ready. It returns ctx's error when stopped, or the first error
// of the store or the watch.
func (d *Driver) Run(ctx context.Context) error {
	idle := d.Idle
	if idle <= 0 {
		idle = time.Second
	}
	c := d.Runner.Client()
	st, w, err := c.ListAndWatch(ctx)
	if err != nil {
		return err
	}
	defer func() { w.Close() }()
	d.Intake.Recover(st, d.Clock.Now())
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		sets, err := w.Poll(0)
		if errors.Is(err, client.ErrCompacted) {
			// Fell behind: list again; jobs already known stay queued.
			w.Close()
			if st, w, err = c.ListAndWatch(ctx); err != nil {
				return err
			}
			d.Intake.Recover(st, d.Clock.Now())
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: watch: %w", d.Runner.Name(), err)
		}
		for _, ws := range sets {
			if _, err := d.Intake.Observe(ws, d.Clock.Now()); err != nil {
				return err
			}
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
				return fmt.Errorf("%s: %w", d.Runner.Name(), err)
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
		sets, err = w.Next(wctx, 0)
		cancel()
		switch {
		case err == nil:
			for _, ws := range sets {
				if _, err := d.Intake.Observe(ws, d.Clock.Now()); err != nil {
					return err
				}
			}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		case errors.Is(err, client.ErrCompacted):
		default:
			return err
		}
	}
}
