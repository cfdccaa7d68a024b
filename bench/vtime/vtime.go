// Package vtime is omega's discrete-event engine: one event queue, a
// virtual clock and actors that say when they next need to act. It knows
// nothing of cells, stores or schedulers: package sim assembles the
// paper's cell on it (the store, the schedulers' runners, the fleet, the
// arrivals, each an Actor), and omega replay adds a trace's actor to that
// cell. The engine is single-threaded and reads no wall clock: the same
// actors, stepped in the same order, give the same run.
package vtime

import (
	"context"
	"errors"
	"time"
)

// Epoch is virtual time zero: the start of every simulation.
var Epoch = time.Date(2011, 5, 1, 0, 0, 0, 0, time.UTC)

// Clock is the engine's virtual clock, handed to every component that asks
// for the time (client.Clock). Nothing in a simulation sleeps; Sleep fails
// loudly if something tries.
type Clock struct{ now time.Time }

// NewClock returns a clock at Epoch. The engine moves it.
func NewClock() *Clock { return &Clock{now: Epoch} }

func (c *Clock) Now() time.Time { return c.now }

func (c *Clock) Sleep(context.Context, time.Duration) error {
	return errors.New("sim: a component slept; in virtual time, schedule an event instead")
}

// Phase orders what happens at one instant. The phases are the cell's:
// at one time, arrivals are queued before scheduler attempts land,
// attempts before the fleet reports, the job controller writes the jobs'
// status after the reports, the store's expiry and sampling come after,
// and idle schedulers look for work last, so a scheduler freed at t sees
// everything else that happened at t. An actor that plugs in (an offer
// allocator, a trace source) picks the phase its steps belong to.
type Phase uint8

const (
	PhaseArrive Phase = iota
	PhaseCommit
	PhaseReport
	PhaseStatus
	PhaseExpire
	PhaseSample
	PhaseWake
)

// Next is when an actor next needs to act; the zero At means not until it
// is woken.
type Next struct {
	At    time.Time
	Phase Phase
}

// Actor is a component of the simulation: it says when it first and next
// needs to act, and acts when stepped. The engine steps an actor at the
// time it asked for, and also at once when something wakes it
// (Engine.Wake): an actor stepped before its time does what it can now and
// answers with its next time again. An actor reads the time from now,
// never from a clock, and starts no goroutine.
type Actor interface {
	Start(ctx context.Context, now time.Time) (Next, error)
	Step(ctx context.Context, now time.Time) (Next, error)
}

// Waker is an actor that something else can hand work to (a scheduler the
// cell's intake routed a job to): Wake is called at once, in whatever
// phase the waking happened, and answers with the actor's next time like
// Step.
type Waker interface {
	Wake(ctx context.Context, now time.Time) (Next, error)
}

// Every is an actor that calls act at first after the start and then
// every period (a period of 0 or less: once), in phase: a periodic
// component (the fleet's reports, the job controller's tick, a sampler)
// without an actor type of its own.
func Every(first, period time.Duration, phase Phase, act func(ctx context.Context, now time.Time) error) Actor {
	return &every{first: first, period: period, phase: phase, act: act}
}

type every struct {
	first, period time.Duration
	phase         Phase
	act           func(ctx context.Context, now time.Time) error
}

func (v *every) Start(_ context.Context, now time.Time) (Next, error) {
	return Next{At: now.Add(v.first), Phase: v.phase}, nil
}

func (v *every) Step(ctx context.Context, now time.Time) (Next, error) {
	if err := v.act(ctx, now); err != nil {
		return Next{}, err
	}
	if v.period <= 0 {
		return Next{}, nil // once
	}
	return Next{At: now.Add(v.period), Phase: v.phase}, nil
}
