// Package sim is omega's discrete-event simulation engine: one event queue,
// a virtual clock and a seeded random source drive the real store
// (durability none), the real client library, the real schedulers through
// their Runners, and the simulated fleet. Nothing is placed or freed beside
// the store's commit path. The same seed and inputs give the same events,
// the same commits and the same results.
package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Epoch is virtual time zero: the start of every simulation.
var Epoch = time.Date(2011, 5, 1, 0, 0, 0, 0, time.UTC)

// Clock is the engine's virtual clock, handed to every client. Nothing in a
// simulation sleeps; Sleep fails loudly if something tries.
type Clock struct{ now time.Time }

func (c *Clock) Now() time.Time { return c.now }

func (c *Clock) Sleep(context.Context, time.Duration) error {
	return errors.New("sim: a component slept; in virtual time, schedule an event instead")
}

// Arrival is one job submission: the job and its tasks (none for a
// mapreduce job, whose scheduler creates its workers), at a virtual offset.
type Arrival struct {
	At    time.Duration
	Job   *omegav1.Job
	Tasks []*omegav1.Task
}

// Source yields arrivals in time order.
type Source interface {
	Next() (Arrival, bool)
}

// Fleet is the simulated fleet as the engine drives it.
type Fleet interface {
	// Tick reports what finished or failed by now, in one transaction.
	Tick(ctx context.Context, now time.Time) (txn.Result, error)
}

// RunnerSpec is one scheduler instance to run.
type RunnerSpec struct {
	Runner *schedulers.Runner
}

// Options configures an Engine.
type Options struct {
	Store     *store.Store
	Submitter *client.Client // creates the arriving jobs
	Runners   []*schedulers.Runner
	Fleet     Fleet
	Source    Source
	Clock     *Clock
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
	// OnCommit, if set, sees every scheduler commit (tests: the event log).
	OnCommit func(runner string, at time.Time, a *schedulers.Attempt, o schedulers.Outcome)
	// Progress, if set, is called about once per simulated hour.
	Progress func(now time.Duration)
	// LockThread keeps Run on one OS thread (for thread CPU-time
	// measurement).
	LockThread bool
}

// Engine runs one simulation. It is single-threaded: Run drives every
// component in turn.
type Engine struct {
	o       Options
	q       queue
	seq     uint64
	busy    []bool
	intake  *schedulers.Intake         // routes the cell's jobs to the runners
	index   map[*schedulers.Runner]int // runner → its index
	events  int64
	samples []Sample
	daily   [][]time.Duration // per runner, busy time per simulated day
	watch   client.Watch      // the cell's changes: lost and evicted tasks
}

// Sample is one utilisation sample.
type Sample struct {
	At          time.Duration
	CPU, Memory float64 // allocated / capacity
}

// New builds an engine.
func New(o Options) (*Engine, error) {
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
	if o.FleetTick == 0 {
		o.FleetTick = time.Second
	}
	if o.ExpireEvery == 0 {
		o.ExpireEvery = time.Minute
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = time.Minute
	}
	e := &Engine{o: o, busy: make([]bool, len(o.Runners)), intake: schedulers.NewIntake(), index: map[*schedulers.Runner]int{}}
	e.intake.Strict = true // every job of the workload must have a scheduler here
	e.daily = make([][]time.Duration, len(o.Runners))
	for i, r := range o.Runners {
		e.intake.Add(r)
		e.index[r] = i
	}
	w, err := o.Submitter.Watch(context.Background(), o.Submitter.View().Revision())
	if err != nil {
		return nil, fmt.Errorf("sim: watch the cell: %w", err)
	}
	e.watch = w
	return e, nil
}

func (e *Engine) schedule(at time.Time, kind eventKind, runner int, data any) {
	e.seq++
	heap.Push(&e.q, &event{at: at, kind: kind, seq: e.seq, runner: runner, data: data})
}

// Events is how many events the engine processed.
func (e *Engine) Events() int64 { return e.events }

// Samples returns the utilisation samples.
func (e *Engine) Samples() []Sample { return e.samples }

// DailyBusy returns, per runner, the decision time spent in each simulated
// day.
func (e *Engine) DailyBusy() [][]time.Duration { return e.daily }

// Run simulates until Duration.
func (e *Engine) Run(ctx context.Context) error {
	if e.o.LockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	end := Epoch.Add(e.o.Duration)
	e.o.Clock.now = Epoch
	if err := e.nextArrival(); err != nil {
		return err
	}
	if e.o.Fleet != nil {
		e.schedule(Epoch.Add(e.o.FleetTick), evFleetTick, -1, nil)
	}
	e.schedule(Epoch.Add(e.o.ExpireEvery), evExpire, -1, nil)
	e.schedule(Epoch, evSample, -1, nil)
	lastProgress := time.Duration(0)
	for e.q.Len() > 0 {
		ev := heap.Pop(&e.q).(*event)
		if ev.at.After(end) {
			break
		}
		e.o.Clock.now = ev.at
		e.events++
		if err := e.handle(ctx, ev); err != nil {
			return fmt.Errorf("sim at %v: %w", ev.at.Sub(Epoch), err)
		}
		if p := e.o.Progress; p != nil && ev.at.Sub(Epoch)-lastProgress >= time.Hour {
			lastProgress = ev.at.Sub(Epoch)
			p(lastProgress)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	e.o.Clock.now = end
	if src, ok := e.o.Source.(interface{ Err() error }); ok && src.Err() != nil {
		return fmt.Errorf("sim: workload: %w", src.Err())
	}
	return nil
}

func (e *Engine) nextArrival() error {
	a, ok := e.o.Source.Next()
	if !ok {
		return nil
	}
	e.schedule(Epoch.Add(a.At), evArrival, -1, a)
	return nil
}

func (e *Engine) handle(ctx context.Context, ev *event) error {
	now := ev.at
	switch ev.kind {
	case evArrival:
		a := ev.data.(Arrival)
		if err := e.submit(ctx, a, now); err != nil {
			return err
		}
		return e.nextArrival()
	case evWake:
		return e.wake(ctx, ev.runner, now)
	case evCommit:
		r := e.o.Runners[ev.runner]
		a := ev.data.(*schedulers.Attempt)
		o, err := r.Finish(ctx, a, now)
		if err != nil {
			return err
		}
		if e.o.OnCommit != nil {
			e.o.OnCommit(r.Name(), now, a, o)
		}
		e.busy[ev.runner] = false
		return e.wake(ctx, ev.runner, now)
	case evFleetTick:
		if _, err := e.o.Fleet.Tick(ctx, now); err != nil {
			return err
		}
		if err := e.observe(ctx, now); err != nil {
			return err
		}
		e.schedule(now.Add(e.o.FleetTick), evFleetTick, -1, nil)
	case evExpire:
		if _, err := e.o.Store.Expire(ctx, now); err != nil {
			return err
		}
		e.schedule(now.Add(e.o.ExpireEvery), evExpire, -1, nil)
	case evSample:
		s := e.o.Store.Snapshot()
		capacity, alloc := s.Capacity(), s.Allocated()
		e.samples = append(e.samples, Sample{At: now.Sub(Epoch), CPU: ratio(alloc.CPU, capacity.CPU), Memory: ratio(alloc.Memory, capacity.Memory)})
		e.schedule(now.Add(e.o.SampleEvery), evSample, -1, nil)
	}
	return nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// submit creates the job and its tasks in one transaction and hands the job
// to a scheduler of its kind (by a hash of its id).
func (e *Engine) submit(ctx context.Context, a Arrival, now time.Time) error {
	c := e.o.Submitter
	if err := c.Sync(ctx); err != nil {
		return err
	}
	tx := c.NewTxn(c.View())
	tx.Ops = make([]txn.Op, 0, 1+len(a.Tasks))
	tx.Ops = append(tx.Ops, txn.CreateJob(a.Job))
	for _, t := range a.Tasks {
		tx.Ops = append(tx.Ops, txn.CreateTask(t))
	}
	if _, err := c.Commit(ctx, tx); err != nil {
		return fmt.Errorf("submit job %s: %w", a.Job.GetMeta().GetName(), err)
	}
	// The job reaches its scheduler through the cell: the intake reads it
	// from the watch, as a scheduler process would.
	return e.observe(ctx, now)
}

// observe feeds what the cell's watch delivered to the intake, which
// routes new jobs to their schedulers and lost and evicted tasks to the
// schedulers of their jobs, and wakes the runners that got work.
func (e *Engine) observe(ctx context.Context, now time.Time) error {
	sets, err := e.watch.Poll(0)
	if err != nil {
		return fmt.Errorf("watch the cell: %w", err)
	}
	var woken []int
	for _, ws := range sets {
		rs, err := e.intake.Observe(ws, now)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if i := e.index[r]; !e.busy[i] && !slices.Contains(woken, i) {
				woken = append(woken, i)
			}
		}
	}
	for _, i := range woken {
		if err := e.wake(ctx, i, now); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) wake(ctx context.Context, i int, now time.Time) error {
	if e.busy[i] {
		return nil
	}
	r := e.o.Runners[i]
	a, ok, err := r.Begin(ctx, now)
	if err != nil {
		return err
	}
	if ok {
		e.busy[i] = true
		e.addBusy(i, now, a.DecisionTime)
		e.schedule(now.Add(a.DecisionTime), evCommit, i, a)
		return nil
	}
	if at, ok := r.NextReady(); ok {
		e.schedule(at, evWake, i, nil)
	}
	return nil
}

// addBusy books decision time [start, start+d) to the days it spans.
func (e *Engine) addBusy(i int, start time.Time, d time.Duration) {
	const day = 24 * time.Hour
	off := start.Sub(Epoch)
	for d > 0 {
		k := int(off / day)
		for len(e.daily[i]) <= k {
			e.daily[i] = append(e.daily[i], 0)
		}
		part := min(d, time.Duration(k+1)*day-off)
		e.daily[i][k] += part
		off += part
		d -= part
	}
}
