package vtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Options configures an Engine.
type Options struct {
	// Clock is the virtual clock the engine moves (required); the
	// components that ask for the time hold the same one.
	Clock *Clock
	// Duration of the run from Epoch; not negative. EndAt moves it.
	Duration time.Duration
	// After, if set, is called after every step, at the step's time: what
	// the step changed is taken in there (the cell's watch, fed to its
	// intake), and actors handed work are woken (Engine.Wake). An error
	// stops the run.
	After func(ctx context.Context, now time.Time) error
	// Progress, if set, is called about once per ProgressEvery of
	// simulated time (default an hour).
	Progress      func(now time.Duration)
	ProgressEvery time.Duration
	// LockThread keeps Run on one OS thread (for thread CPU-time
	// measurement).
	LockThread bool
}

// slot is an actor and its place in the queue.
type slot struct {
	a    Actor
	next Next
	seq  uint64 // the queued entry's seq; 0: nothing queued
}

// Engine runs one simulation: it steps every actor in turn, in the order of
// the times and phases they ask for (ties in the order they were asked
// for), and after each step calls Options.After.
type Engine struct {
	o      Options
	q      queue
	seq    uint64
	slots  []slot
	events int64
	end    time.Time // when the run stops (EndAt may move it)
}

// New builds an engine with no actors.
func New(o Options) (*Engine, error) {
	if o.Clock == nil {
		return nil, errors.New("vtime: Options.Clock is required")
	}
	if o.Duration < 0 {
		return nil, fmt.Errorf("vtime: Options.Duration = %v: want 0 or more", o.Duration)
	}
	return &Engine{o: o, end: Epoch.Add(o.Duration)}, nil
}

// Add adds an actor, to be started at Epoch when the run starts (actors
// start in the order added), and returns its index for Wake. Add it
// before Run.
func (e *Engine) Add(a Actor) int {
	e.slots = append(e.slots, slot{a: a})
	return len(e.slots) - 1
}

// Wake hands actor i work at now: a Waker is asked for its next time at
// once; another actor keeps the time it asked for.
func (e *Engine) Wake(ctx context.Context, i int, now time.Time) error {
	w, ok := e.slots[i].a.(Waker)
	if !ok {
		return nil
	}
	n, err := w.Wake(ctx, now)
	if err != nil {
		return err
	}
	e.set(i, n, now)
	return nil
}

// EndAt moves the end of the run to t (not before the current time): a
// trace replay ends at the last task event of its window, which it learns
// only when it reads that far.
func (e *Engine) EndAt(t time.Time) {
	if now := e.o.Clock.now; now.After(t) {
		t = now
	}
	e.end, e.o.Duration = t, t.Sub(Epoch)
}

// Duration is the run's length from Epoch (Options.Duration, or where
// EndAt moved it).
func (e *Engine) Duration() time.Duration { return e.o.Duration }

// Events is how many steps the engine took from its queue.
func (e *Engine) Events() int64 { return e.events }

// set queues slot i's next step. An unchanged next keeps its entry (and
// its place among ties); a new one makes the old entry stale. A time
// before now is now: nothing acts in the past.
func (e *Engine) set(i int, n Next, now time.Time) {
	s := &e.slots[i]
	if n.At.IsZero() {
		s.seq = 0
		return
	}
	if n.At.Before(now) {
		n.At = now
	}
	if s.seq != 0 && s.next.At.Equal(n.At) && s.next.Phase == n.Phase {
		return
	}
	e.seq++
	s.next, s.seq = n, e.seq
	e.q.push(entry{at: n.At, phase: n.Phase, seq: e.seq, slot: i})
}

// Run starts every actor at Epoch and steps them until the end. The clock
// reads the end when it returns.
func (e *Engine) Run(ctx context.Context) error {
	if e.o.LockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	e.end = Epoch.Add(e.o.Duration)
	e.o.Clock.now = Epoch
	for i := range e.slots {
		n, err := e.slots[i].a.Start(ctx, Epoch)
		if err != nil {
			return fmt.Errorf("sim at start: %w", err)
		}
		e.set(i, n, Epoch)
	}
	lastProgress, every := time.Duration(0), cmp.Or(e.o.ProgressEvery, time.Hour)
	for {
		at, ok, err := e.step(ctx, e.end)
		if err != nil {
			return fmt.Errorf("sim at %v: %w", at.Sub(Epoch), err)
		}
		if !ok {
			break
		}
		if p := e.o.Progress; p != nil && at.Sub(Epoch)-lastProgress >= every {
			lastProgress = at.Sub(Epoch)
			p(lastProgress)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	e.o.Clock.now = e.end
	return nil
}

// Queued returns actor i's next step, if one is queued.
func (e *Engine) Queued(i int) (Next, bool) {
	s := &e.slots[i]
	return s.next, s.seq != 0
}

// Step takes one step by hand, as Run does (a test stepping to a point of
// interest; Run must have started the actors, or Start them itself).
func (e *Engine) Step(ctx context.Context, end time.Time) (time.Time, bool, error) {
	return e.step(ctx, end)
}

// step takes the next current entry at or before end off the queue, steps
// its actor, and calls After. It reports false when nothing is left to do
// by end.
func (e *Engine) step(ctx context.Context, end time.Time) (time.Time, bool, error) {
	for e.q.Len() > 0 {
		en := e.q.pop()
		s := &e.slots[en.slot]
		if en.seq != s.seq {
			continue // replaced by a later next
		}
		if en.at.After(end) {
			return en.at, false, nil
		}
		s.seq = 0
		e.o.Clock.now = en.at
		e.events++
		n, err := s.a.Step(ctx, en.at)
		if err != nil {
			return en.at, false, err
		}
		e.set(en.slot, n, en.at)
		if e.o.After == nil {
			return en.at, true, nil
		}
		return en.at, true, e.o.After(ctx, en.at)
	}
	return time.Time{}, false, nil
}
