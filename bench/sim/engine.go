// Package sim is omega's discrete-event simulation engine: one event queue,
// a virtual clock and a seeded random source drive the real store
// (durability none), the real client library, the real schedulers through
// their Runners, and the simulated fleet. Nothing is placed or freed beside
// the store's commit path. The same seed and inputs give the same events,
// the same commits and the same results.
package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/jobs"
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

// Options configures an Engine.
type Options struct {
	Store     *store.Store
	Submitter *client.Client // creates the arriving jobs
	Runners   []*schedulers.Runner
	Fleet     Fleet
	// Jobs, if set, is the job controller, ticked at FleetTick after the
	// fleet's reports.
	Jobs   *jobs.Controller
	Source Source
	Clock  *Clock
	// Actors are components beside the built-in ones (arrivals, the
	// runners, the fleet, expiry, sampling) — an offer allocator, a trace
	// source — started at Epoch after them, in this order.
	Actors []Actor
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
	// Progress, if set, is called about once per ProgressEvery of
	// simulated time (default an hour).
	Progress      func(now time.Duration)
	ProgressEvery time.Duration
	// LockThread keeps Run on one OS thread (for thread CPU-time
	// measurement).
	LockThread bool
	// Audit, if set, audits the cell's history as the engine's watch
	// delivers it (summary.json's violations_history).
	Audit *audit.Stream
	// Observers see the same history: the starting state (again after a
	// re-list) and every write set after it, in revision order (omega sim
	// --history writes it to a file).
	Observers []Observer
	// TwoLevel, if set, runs the runners as two-level frameworks under an
	// allocator (the Omega paper's Mesos baseline) instead of each on its
	// own loop.
	TwoLevel *TwoLevelOptions
	// Unrouted lets jobs name a scheduler that no runner here is (they
	// stay pending unless something else places them).
	Unrouted bool
	// Retire, if set, takes the record of each job that leaves the cell
	// (deleted after its retention window), which the runners then no
	// longer hold (schedulers.Runner.SetRetire): the summary keeps its
	// counts and waits, and memory follows the live cell. Without it the
	// runners keep every job's record for Records and the reports.
	Retire func(*schedulers.Runner, schedulers.JobRecord)
	// liar is the faulty agent among Actors, if there is one, for the
	// summary.
	liar *faultyAgent
}

// Observer sees the cell's history as the engine's watch delivers it. An
// error stops the run.
type Observer interface {
	Start(st *txn.State, unixNanos int64) error
	Observe(ws *txn.WriteSet) error
}

// Waker is an actor that something else can hand work to (a scheduler the
// intake routed a job to): Wake is called at once, in whatever phase the
// waking happened, and answers with the actor's next time like Step.
type Waker interface {
	Wake(ctx context.Context, now time.Time) (Next, error)
}

// slot is an actor and its place in the queue.
type slot struct {
	a    Actor
	next Next
	seq  uint64 // the queued entry's seq; 0: nothing queued
}

// Engine runs one simulation. It is single-threaded: Run steps every actor
// in turn, in the order of the times and phases they ask for, and after
// each step feeds the cell's watch to the intake, which routes new jobs and
// lost or evicted tasks to the runners and wakes them.
type Engine struct {
	o        Options
	q        queue
	seq      uint64
	slots    []slot
	byRunner map[*schedulers.Runner]int // runner → its slot
	intake   *schedulers.Intake         // routes the cell's jobs to the runners
	events   int64
	samples  []Sample
	daily    [][]time.Duration // per runner, busy time per simulated day
	busyTo   []time.Time       // per runner, the end of its last decision booked
	cell     *client.Informer  // the cell's changes, for the intake
	woken    []int             // runners the intake gave work during the current observe
	now      time.Time         // the current observe's time
	tl       *twoLevel         // the allocator and frameworks, with Options.TwoLevel
	end      time.Time         // when the run stops (EndAt may move it)
	retired  []tally           // per runner, the jobs retired (Options.Retire)
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
	for i, a := range o.Actors {
		if a == nil {
			return nil, fmt.Errorf("sim: sim.Options.Actors[%d] is nil", i)
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
	e := &Engine{o: o, intake: schedulers.NewIntake(), byRunner: map[*schedulers.Runner]int{}}
	e.intake.Strict = !o.Unrouted // every job of the workload must have a scheduler here
	e.daily = make([][]time.Duration, len(o.Runners))
	e.busyTo = make([]time.Time, len(o.Runners))
	e.retired = make([]tally, len(o.Runners))
	if o.Retire != nil {
		for i, r := range o.Runners {
			mapreduce := r.Scheduler().Kind() == "mapreduce"
			r.SetRetire(func(rec schedulers.JobRecord) {
				e.retired[i].add(rec, mapreduce)
				o.Retire(r, rec)
			})
		}
	}
	e.add(&arrivals{src: o.Source, sub: o.Submitter})
	if tl := o.TwoLevel; tl != nil {
		if tl.Allocator == nil || tl.AllocatorTime < 0 || tl.OfferInterval <= 0 {
			return nil, fmt.Errorf("sim: sim.Options.TwoLevel wants an allocator's client, an allocator time of 0 or more and a positive offer interval, not %+v", *tl)
		}
		e.tl = newTwoLevel(e, *tl, o.Runners)
	}
	for i, r := range o.Runners {
		if err := e.intake.Add(r); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		e.byRunner[r] = len(e.slots)
		if e.tl != nil {
			continue // the frameworks are one actor: the intake wakes it
		}
		e.add(&runnerActor{e: e, i: i, r: r})
	}
	if e.tl != nil {
		e.add(e.tl)
	}
	if o.Fleet != nil {
		e.add(&every{first: o.FleetTick, period: o.FleetTick, phase: PhaseReport, act: func(ctx context.Context, now time.Time) error {
			_, err := o.Fleet.Tick(ctx, now)
			return err
		}})
	}
	if o.Jobs != nil {
		e.add(Every(o.FleetTick, o.FleetTick, PhaseStatus, func(ctx context.Context, now time.Time) error {
			_, err := o.Jobs.Tick(ctx, now.UnixNano())
			return err
		}))
	}
	e.add(&every{first: o.ExpireEvery, period: o.ExpireEvery, phase: PhaseExpire, act: func(ctx context.Context, now time.Time) error {
		_, err := o.Store.Expire(ctx, now)
		return err
	}})
	e.add(&every{period: o.SampleEvery, phase: PhaseSample, act: e.sample})
	for _, a := range o.Actors {
		e.add(a)
	}
	inf, err := client.NewInformer(o.Submitter, intakeFeed{e})
	if err != nil {
		return nil, err
	}
	if err := inf.List(context.Background()); err != nil {
		return nil, fmt.Errorf("sim: watch the cell: %w", err)
	}
	e.cell = inf
	return e, nil
}

// EndAt moves the end of the run to t (not before the current time): a
// trace replay ends at the last task event of its window, which it learns
// only when it reads that far. The summary's duration follows.
func (e *Engine) EndAt(t time.Time) {
	t = maxTime(t, e.o.Clock.now)
	e.end, e.o.Duration = t, t.Sub(Epoch)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (e *Engine) add(a Actor) { e.slots = append(e.slots, slot{a: a}) }

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

// Events is how many steps the engine took from its queue.
func (e *Engine) Events() int64 { return e.events }

// Samples returns the utilisation samples.
func (e *Engine) Samples() []Sample { return e.samples }

// DailyBusy returns, per runner, the decision time spent in each simulated
// day.
func (e *Engine) DailyBusy() [][]time.Duration {
	out := make([][]time.Duration, len(e.daily))
	for i := range e.daily {
		out[i] = e.dailyBusy(i)
	}
	return out
}

// dailyBusy is runner i's busy time per day within the run: a decision
// that began before the end and would have ended after it counts up to the
// end. (A runner decides one thing at a time, so only its last decision
// can cross the end.)
func (e *Engine) dailyBusy(i int) []time.Duration {
	out := slices.Clone(e.daily[i])
	end := Epoch.Add(e.o.Duration)
	if over := e.busyTo[i].Sub(end); over > 0 {
		book(&out, end.Sub(Epoch), over, -1)
	}
	return out
}

// Run simulates until Duration.
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
	if src, ok := e.o.Source.(interface{ Err() error }); ok && src.Err() != nil {
		return fmt.Errorf("sim: workload: %w", src.Err())
	}
	return nil
}

// step takes the next current entry at or before end off the queue, steps
// its actor, and feeds the intake what the step changed in the cell. It
// reports false when nothing is left to do by end.
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
		return en.at, true, e.observe(ctx, en.at)
	}
	return time.Time{}, false, nil
}

// intakeFeed hands the intake what the cell's informer delivers: each
// revision routed (Observe), a fresh view recovered (Recover: after the
// watch fell behind, the jobs no runner owns yet — pre-fill jobs included,
// which only a run whose engine fell that far behind sees owned); the
// runners that got work are woken after.
type intakeFeed struct{ e *Engine }

func (f intakeFeed) Relisted(st *txn.State) error {
	now := f.e.now
	if now.IsZero() {
		now = Epoch
	}
	if a := f.e.o.Audit; a != nil {
		a.Start(st, now.UnixNano())
	}
	if tl := f.e.tl; tl != nil {
		tl.al.Relist(st)
	}
	for _, o := range f.e.o.Observers {
		if err := o.Start(st, now.UnixNano()); err != nil {
			return err
		}
	}
	if f.e.cell == nil {
		// The first view, before the run: its jobs (the pre-fill's) are the
		// cell's starting state, no runner's.
		return nil
	}
	f.wake(f.e.intake.Recover(st, f.e.now))
	return nil
}

func (f intakeFeed) Apply(ws *txn.WriteSet) error {
	if a := f.e.o.Audit; a != nil {
		a.Observe(ws)
	}
	if tl := f.e.tl; tl != nil {
		tl.al.Observe(ws)
	}
	for _, o := range f.e.o.Observers {
		if err := o.Observe(ws); err != nil {
			return err
		}
	}
	rs, err := f.e.intake.Observe(ws, f.e.now)
	f.wake(rs)
	return err
}

func (f intakeFeed) wake(rs []*schedulers.Runner) {
	for _, r := range rs {
		if i := f.e.byRunner[r]; !slices.Contains(f.e.woken, i) {
			f.e.woken = append(f.e.woken, i)
		}
	}
}

// observe feeds what the cell's watch delivered to the intake, which
// routes new jobs to their schedulers and lost and evicted tasks to the
// schedulers of their jobs, and wakes the runners that got work.
func (e *Engine) observe(ctx context.Context, now time.Time) error {
	e.now, e.woken = now, e.woken[:0]
	if err := e.cell.Poll(ctx); err != nil {
		return fmt.Errorf("watch the cell: %w", err)
	}
	for _, i := range e.woken {
		w, ok := e.slots[i].a.(Waker)
		if !ok {
			continue
		}
		n, err := w.Wake(ctx, now)
		if err != nil {
			return err
		}
		e.set(i, n, now)
	}
	return nil
}

func (e *Engine) sample(_ context.Context, now time.Time) error {
	s := e.o.Store.Snapshot()
	capacity, alloc := s.Capacity(), s.Allocated()
	e.samples = append(e.samples, Sample{At: now.Sub(Epoch), CPU: ratio(alloc.CPU, capacity.CPU), Memory: ratio(alloc.Memory, capacity.Memory)})
	return nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// arrivals submits the workload's jobs at their times: each job and its
// tasks in one transaction. The job reaches its scheduler through the
// cell: the intake reads it from the watch, as a scheduler process would.
type arrivals struct {
	src  Source
	sub  *client.Client
	next Arrival
}

func (a *arrivals) Start(context.Context, time.Time) (Next, error) { return a.load(), nil }

func (a *arrivals) load() Next {
	x, ok := a.src.Next()
	if !ok {
		return Next{}
	}
	a.next = x
	return Next{At: Epoch.Add(x.At), Phase: PhaseArrive}
}

func (a *arrivals) Step(ctx context.Context, _ time.Time) (Next, error) {
	c := a.sub
	if err := c.Sync(ctx); err != nil {
		return Next{}, err
	}
	tx := c.NewTxn(c.View())
	tx.Ops = make([]txn.Op, 0, 1+len(a.next.Tasks))
	tx.Ops = append(tx.Ops, txn.CreateJob(a.next.Job))
	for _, t := range a.next.Tasks {
		tx.Ops = append(tx.Ops, txn.CreateTask(t))
	}
	if _, err := c.Commit(ctx, tx); err != nil {
		return Next{}, fmt.Errorf("submit job %s: %w", a.next.Job.GetMeta().GetName(), err)
	}
	return a.load(), nil
}

// runnerActor drives one scheduler's Runner: idle until the intake gives
// it work, then an attempt at a time, each landing (PhaseCommit) after its
// decision time; with work that is not ready yet it asks to look again
// then (PhaseWake).
type runnerActor struct {
	e  *Engine
	i  int // the runner's index in Options.Runners
	r  *schedulers.Runner
	a  *schedulers.Attempt // in flight
	at time.Time           // when it lands
}

func (ra *runnerActor) Start(context.Context, time.Time) (Next, error) { return Next{}, nil }

func (ra *runnerActor) Step(ctx context.Context, now time.Time) (Next, error) {
	if a := ra.a; a != nil {
		if now.Before(ra.at) {
			return Next{At: ra.at, Phase: PhaseCommit}, nil
		}
		ra.a = nil
		o, err := ra.r.Finish(ctx, a, now)
		if err != nil {
			return Next{}, err
		}
		if ra.e.o.OnCommit != nil {
			ra.e.o.OnCommit(ra.r.Name(), now, a, o)
		}
	}
	return ra.begin(ctx, now)
}

func (ra *runnerActor) Wake(ctx context.Context, now time.Time) (Next, error) {
	if ra.a != nil {
		return Next{At: ra.at, Phase: PhaseCommit}, nil // busy: the work waits for the attempt to land
	}
	return ra.begin(ctx, now)
}

func (ra *runnerActor) begin(ctx context.Context, now time.Time) (Next, error) {
	a, ok, err := ra.r.Begin(ctx, now)
	if err != nil {
		return Next{}, err
	}
	if ok {
		ra.a, ra.at = a, now.Add(a.DecisionTime)
		ra.e.addBusy(ra.i, now, a.DecisionTime)
		return Next{At: ra.at, Phase: PhaseCommit}, nil
	}
	if at, ok := ra.r.NextReady(); ok {
		return Next{At: at, Phase: PhaseWake}, nil
	}
	return Next{}, nil
}

// Every is an actor that calls act at first after the start and then
// every period (a period of 0 or less: once), in phase: a periodic component (the job controller's tick,
// a sampler of one's own) without an actor type of its own.
func Every(first, period time.Duration, phase Phase, act func(ctx context.Context, now time.Time) error) Actor {
	return &every{first: first, period: period, phase: phase, act: act}
}

// every acts at first (after Epoch) and then every period.
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

// addBusy books decision time [start, start+d) to the days it spans.
func (e *Engine) addBusy(i int, start time.Time, d time.Duration) {
	book(&e.daily[i], start.Sub(Epoch), d, 1)
	e.busyTo[i] = maxTime(e.busyTo[i], start.Add(d))
}

// book adds sign x the time [off, off+d) from the epoch to the days of
// daily it spans.
func book(daily *[]time.Duration, off, d time.Duration, sign time.Duration) {
	const day = 24 * time.Hour
	for d > 0 {
		k := int(off / day)
		for len(*daily) <= k {
			*daily = append(*daily, 0)
		}
		part := min(d, time.Duration(k+1)*day-off)
		(*daily)[k] += sign * part
		off += part
		d -= part
	}
}

// Runners are the run's schedulers, in the order of the configuration.
func (e *Engine) Runners() []*schedulers.Runner { return e.o.Runners }
