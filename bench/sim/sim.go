// Package sim assembles the Omega paper's cell on the virtual-time engine
// (package vtime): the real store (durability none), the real client
// library, the real schedulers through their Runners, the simulated fleet
// and the job controller, each an actor, with the cell's watch fed to an
// intake that routes the jobs to the schedulers. Build makes the cell of
// the workload generator, BuildCell of anything else (omega replay makes
// a trace's). How the schedulers are organised is an Architecture, one
// file each, registered by name. Nothing is placed or freed beside the
// store's commit path. The same seed and inputs give the same events, the
// same commits and the same results.
package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/jobs"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Epoch is virtual time zero (vtime.Epoch).
var Epoch = vtime.Epoch

// Options configures a Sim made by New: the cell's parts, made by the
// caller (BuildCell makes them from a Config).
type Options struct {
	Store     *store.Store
	Submitter *client.Client // creates the arriving jobs
	Runners   []*schedulers.Runner
	Fleet     Fleet
	// Jobs, if set, is the job controller, ticked at FleetTick after the
	// fleet's reports.
	Jobs   *jobs.Controller
	Source Source
	Clock  *vtime.Clock
	// Drive, if set, is how the runners are driven (an Architecture's
	// Drive made it); nil: each runner on a loop of its own.
	Drive *Driving
	// Actors are components beside the built-in ones (arrivals, the
	// runners, the fleet, expiry, sampling) — a faulty agent, a trace
	// source — started at Epoch after them, in this order.
	Actors []vtime.Actor
	// Duration of the simulation; not negative.
	Duration time.Duration
	// FleetTick is the interval of the fleet's status transactions. Zero
	// means the default, 1s; negative is an error.
	FleetTick time.Duration
	// ExpireEvery is how often the store expires finished objects. Zero
	// means the default, 1m; negative is an error.
	ExpireEvery time.Duration
	// SampleEvery is the utilisation sampling interval. Zero means the
	// default, 1m; negative is an error.
	SampleEvery time.Duration
	// OnCommit, if set, sees every commit of a runner on a loop of its own
	// (tests: the event log).
	OnCommit func(runner string, at time.Time, a *schedulers.Attempt, o schedulers.Outcome)
	// Progress, if set, is called about once per ProgressEvery of
	// simulated time (default an hour).
	Progress      func(now time.Duration)
	ProgressEvery time.Duration
	// LockThread keeps Run on one OS thread (for thread CPU-time
	// measurement).
	LockThread bool
	// Audit, if set, audits the cell's history as the intake's watch
	// delivers it (summary.json's violations_history).
	Audit *audit.Stream
	// Observers see the same history: the starting state (again after a
	// re-list) and every write set after it, in revision order (omega sim
	// --history writes it to a file).
	Observers []Observer
	// Unrouted lets jobs name a scheduler that no runner here is (they
	// stay pending unless something else places them).
	Unrouted bool
	// Retire, if set, takes the record of each job that leaves the cell
	// (deleted after its retention window), which the runners then no
	// longer hold (schedulers.Runner.SetRetire): the summary keeps its
	// counts and waits, and memory follows the live cell. Without it the
	// runners keep every job's record for Records and the reports.
	Retire func(*schedulers.Runner, schedulers.JobRecord)
	// busy and placing are the books the Drive's actors book decision time
	// in (every decision's, and those that placed a task); BuildCell makes
	// them before the actors; nil: New makes them.
	busy, placing *busyBook
	// liar is the faulty agent among Actors, if there is one, for the
	// summary.
	liar *faultyAgent
}

// Observer sees the cell's history as the intake's watch delivers it. An
// error stops the run.
type Observer interface {
	Start(st *txn.State, unixNanos int64) error
	Observe(ws *txn.WriteSet) error
}

// Sim is an assembled simulation of a cell: the engine and its actors, the
// intake between the cell's watch and the runners, and the books the
// summary is made of.
type Sim struct {
	Store *store.Store
	// Fleet is the simulated fleet (BuildCell's; nil from New).
	Fleet *agents.SimFleet

	o        Options
	eng      *vtime.Engine
	cfg      Config
	src      *aheadSource       // BuildCell's read-ahead of the arrivals
	intake   *schedulers.Intake // routes the cell's jobs to the runners
	wakes    []int              // per runner, the engine's index of the actor its work wakes
	byRunner map[*schedulers.Runner]int
	observe  []Observer       // the drive's, then Options.Observers
	cell     *client.Informer // the cell's changes, for the intake
	woken    []int            // runners the intake gave work during the current step
	now      time.Time        // the current step's time
	samples  []Sample
	busy     *busyBook // every decision's time
	placing  *busyBook // the time of the decisions that placed a task
	retired  []tally   // per runner, the jobs retired (Options.Retire)
}

// Sample is one utilisation sample.
type Sample struct {
	At          time.Duration
	CPU, Memory float64 // allocated / capacity
}

// New assembles a simulation of the parts o names.
func New(o Options) (*Sim, error) {
	if o.Store == nil || o.Submitter == nil || o.Source == nil || o.Clock == nil || len(o.Runners) == 0 {
		return nil, errors.New("sim: Store, Submitter, Source, Clock and at least one Runner are required")
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Duration", o.Duration}, {"FleetTick", o.FleetTick}, {"ExpireEvery", o.ExpireEvery}, {"SampleEvery", o.SampleEvery}} {
		if d.v < 0 {
			return nil, fmt.Errorf("sim: sim.Options.%s = %v: want 0 or more", d.field, d.v)
		}
	}
	for i, a := range o.Actors {
		if a == nil {
			return nil, fmt.Errorf("sim: sim.Options.Actors[%d] is nil", i)
		}
	}
	if d := o.Drive; d != nil && (len(d.Wakes) != len(o.Runners) || slices.ContainsFunc(d.Wakes, func(i int) bool { return i < 0 || i >= len(d.Actors) })) {
		return nil, fmt.Errorf("sim: sim.Options.Drive.Wakes = %v: want, for each of the %d runners, the index of one of its %d actors", d.Wakes, len(o.Runners), len(d.Actors))
	}
	if o.FleetTick == 0 {
		o.FleetTick = time.Second
	}
	if o.ExpireEvery == 0 {
		o.ExpireEvery = time.Minute
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = time.Minute
	}
	if o.busy == nil {
		o.busy = newBusyBook(len(o.Runners))
	}
	if o.placing == nil {
		o.placing = newBusyBook(len(o.Runners))
	}
	s := &Sim{Store: o.Store, o: o, intake: schedulers.NewIntake(), busy: o.busy, placing: o.placing, byRunner: map[*schedulers.Runner]int{}}
	eng, err := vtime.New(vtime.Options{Clock: o.Clock, Duration: o.Duration, After: s.afterStep,
		Progress: o.Progress, ProgressEvery: o.ProgressEvery, LockThread: o.LockThread})
	if err != nil {
		return nil, err
	}
	s.eng = eng
	s.intake.Strict = !o.Unrouted // every job of the workload must have a scheduler here
	s.retired = make([]tally, len(o.Runners))
	if o.Retire != nil {
		for i, r := range o.Runners {
			mapreduce := r.Scheduler().Kind() == "mapreduce"
			r.SetRetire(func(rec schedulers.JobRecord) {
				s.retired[i].add(rec, mapreduce)
				o.Retire(r, rec)
			})
		}
	}
	eng.Add(&arrivals{src: o.Source, sub: o.Submitter})
	for i, r := range o.Runners {
		if err := s.intake.Add(r); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.byRunner[r] = i
	}
	// The runners' drivers, after the arrivals: each on a loop of its own,
	// or the architecture's actors.
	s.wakes = make([]int, len(o.Runners))
	if d := o.Drive; d != nil {
		first := -1
		for _, a := range d.Actors {
			if k := eng.Add(a); first < 0 {
				first = k
			}
		}
		for i, k := range d.Wakes {
			s.wakes[i] = first + k
		}
		s.observe = append(s.observe, d.Observers...)
	} else {
		for i, r := range o.Runners {
			s.wakes[i] = eng.Add(&runnerActor{s: s, i: i, r: r})
		}
	}
	s.observe = append(s.observe, o.Observers...)
	if o.Fleet != nil {
		eng.Add(vtime.Every(o.FleetTick, o.FleetTick, vtime.PhaseReport, func(ctx context.Context, now time.Time) error {
			_, err := o.Fleet.Tick(ctx, now)
			return err
		}))
	}
	if o.Jobs != nil {
		eng.Add(vtime.Every(o.FleetTick, o.FleetTick, vtime.PhaseStatus, func(ctx context.Context, now time.Time) error {
			_, err := o.Jobs.Tick(ctx, now.UnixNano())
			return err
		}))
	}
	eng.Add(vtime.Every(o.ExpireEvery, o.ExpireEvery, vtime.PhaseExpire, func(ctx context.Context, now time.Time) error {
		_, err := o.Store.Expire(ctx, now)
		return err
	}))
	eng.Add(vtime.Every(0, o.SampleEvery, vtime.PhaseSample, s.sample))
	for _, a := range o.Actors {
		eng.Add(a)
	}
	inf, err := client.NewInformer(o.Submitter, intakeFeed{s})
	if err != nil {
		return nil, err
	}
	if err := inf.List(context.Background()); err != nil {
		return nil, fmt.Errorf("sim: watch the cell: %w", err)
	}
	s.cell = inf
	return s, nil
}

// Run simulates until the end (Options.Duration, or where EndAt moved it).
func (s *Sim) Run(ctx context.Context) error {
	if err := s.eng.Run(ctx); err != nil {
		return err
	}
	if src, ok := s.o.Source.(interface{ Err() error }); ok && src.Err() != nil {
		return fmt.Errorf("sim: workload: %w", src.Err())
	}
	return nil
}

// EndAt moves the end of the run to t (not before the current time): a
// trace replay ends at the last task event of its window, which it learns
// only when it reads that far. The summary's duration follows.
func (s *Sim) EndAt(t time.Time) { s.eng.EndAt(t) }

// Events is how many steps the engine took from its queue.
func (s *Sim) Events() int64 { return s.eng.Events() }

// Samples returns the utilisation samples.
func (s *Sim) Samples() []Sample { return s.samples }

// Runners are the run's schedulers, in the order of the configuration.
func (s *Sim) Runners() []*schedulers.Runner { return s.o.Runners }

// DailyBusy returns, per runner, the decision time spent in each simulated
// day.
func (s *Sim) DailyBusy() [][]time.Duration {
	out := make([][]time.Duration, len(s.o.Runners))
	for i := range out {
		out[i] = s.busy.days(i, s.eng.Duration())
	}
	return out
}

// Close stops the workload's generator and releases the store.
func (s *Sim) Close() error {
	if s.src != nil {
		s.src.Close()
	}
	return s.Store.Close()
}

// Config returns the configuration (BuildCell's; the zero Config from
// New).
func (s *Sim) Config() Config { return s.cfg }

// Clock is the simulation's virtual clock.
func (s *Sim) Clock() *vtime.Clock { return s.o.Clock }

// afterStep is the engine's After: it feeds what the cell's watch delivered to
// the intake, which routes new jobs to their schedulers and lost and
// evicted tasks to the schedulers of their jobs, and wakes the actors of
// the runners that got work.
func (s *Sim) afterStep(ctx context.Context, now time.Time) error {
	s.now, s.woken = now, s.woken[:0]
	if err := s.cell.Poll(ctx); err != nil {
		return fmt.Errorf("watch the cell: %w", err)
	}
	for _, k := range s.woken {
		if err := s.eng.Wake(ctx, k, now); err != nil {
			return err
		}
	}
	return nil
}

// intakeFeed hands the intake what the cell's informer delivers: each
// revision routed (Observe), a fresh view recovered (Recover: after the
// watch fell behind, the jobs no runner owns yet — pre-fill jobs included,
// which only a run whose engine fell that far behind sees owned); the
// actors of the runners that got work are woken after.
type intakeFeed struct{ s *Sim }

func (f intakeFeed) Relisted(st *txn.State) error {
	now := f.s.now
	if now.IsZero() {
		now = Epoch
	}
	if a := f.s.o.Audit; a != nil {
		a.Start(st, now.UnixNano())
	}
	for _, o := range f.s.observe {
		if err := o.Start(st, now.UnixNano()); err != nil {
			return err
		}
	}
	if f.s.cell == nil {
		// The first view, before the run: its jobs (the pre-fill's) are the
		// cell's starting state, no runner's.
		return nil
	}
	f.wake(f.s.intake.Recover(st, f.s.now))
	return nil
}

func (f intakeFeed) Apply(ws *txn.WriteSet) error {
	if a := f.s.o.Audit; a != nil {
		a.Observe(ws)
	}
	for _, o := range f.s.observe {
		if err := o.Observe(ws); err != nil {
			return err
		}
	}
	rs, err := f.s.intake.Observe(ws, f.s.now)
	f.wake(rs)
	return err
}

func (f intakeFeed) wake(rs []*schedulers.Runner) {
	for _, r := range rs {
		if k := f.s.wakes[f.s.byRunner[r]]; !slices.Contains(f.s.woken, k) {
			f.s.woken = append(f.s.woken, k)
		}
	}
}

func (s *Sim) sample(_ context.Context, now time.Time) error {
	st := s.o.Store.Snapshot()
	capacity, alloc := st.Capacity(), st.Allocated()
	s.samples = append(s.samples, Sample{At: now.Sub(Epoch), CPU: ratio(alloc.CPU, capacity.CPU), Memory: ratio(alloc.Memory, capacity.Memory)})
	return nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
