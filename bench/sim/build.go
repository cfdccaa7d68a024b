package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	auditpkg "github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/jobs"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// SchedulerSpec is one kind of scheduler in a simulation.
type SchedulerSpec struct {
	Kind  string // a registered kind (schedulers.Kinds)
	Count int
	// TJob and TTask: decision time = TJob + TTask × tasks considered.
	TJob, TTask time.Duration
	// Params go to the kind's factory (schedulers.Params).
	Params schedulers.Params
	// ByKind, if set, gives jobs of the kinds it names their own decision
	// times (a multi-path monolithic scheduler: WithArchitecture).
	ByKind map[omegav1.JobKind]schedulers.DecisionTime
}

// Config is one simulation. Start from DefaultConfig.
type Config struct {
	Workload   workload.Config
	Schedulers []SchedulerSpec
	// Conflict and Commit are every scheduler's modes (a gang job commits
	// all-or-nothing whatever Commit says).
	Conflict omegav1.ConflictMode
	Commit   omegav1.CommitMode
	// Policy is the store's (nil: store.Raw, Omega's); store.Mediated
	// validates every operation, as Kubernetes' API server does.
	Policy store.Policy
	// Route sends the workload's jobs of one kind ("batch", "service",
	// "mapreduce") to schedulers of another (registered) kind: how a custom
	// scheduler takes over a class of jobs. Unrouted kinds go to schedulers
	// of their own kind.
	Route map[string]string
	// RouteShare, for a kind Route names, sends only that share of its jobs
	// (by the job's uid, so the same jobs for the same seed) to the routed
	// scheduler; the rest go to the kind's own. A kind absent routes all.
	// A faulty scheduler takes part of the batch load beside a correct one
	// this way.
	RouteShare map[string]float64
	// MapReducePolicy is the mapreduce schedulers' policy: shorthand for
	// Params{"policy": ...} on each mapreduce spec that does not set it.
	MapReducePolicy schedulers.MapReducePolicy
	// Runner bounds every scheduler's attempts (TJob/TTask come from the
	// SchedulerSpec).
	Runner schedulers.RunnerConfig
	// FleetTick: the period of the fleet's status transactions, from
	// MinFleetTick to MaxFleetTick. Default 1s (zero is an error, not the
	// default).
	FleetTick time.Duration
	// FailuresPerDay: machine failures per simulated day, from 0 to
	// FailuresPerMachineDay per machine. Default 0.
	FailuresPerDay float64
	// Durability of the store: none (default) keeps it in memory; sync
	// writes it to pebble in Dir (omega demo).
	Durability store.Durability
	Dir        string
	// CPUTime measures each decision's time as the scheduler's CPU time
	// instead of the t_job + t_task model. Results then vary between runs.
	CPUTime bool
	// CheckInvariants checks the store after every commit (tests).
	CheckInvariants bool
	// Progress, if set, is called about once per ProgressEvery of
	// simulated time (default an hour).
	Progress      func(time.Duration)
	ProgressEvery time.Duration
	// AuditHistory audits every revision the run commits (audit.Stream),
	// into summary.json's violations_history: what the final state's audit
	// cannot show, and when each kind of violation was first detectable.
	AuditHistory bool
	// History, if set, receives the run's history (omega sim --history):
	// the starting state, then every write set.
	History Observer
	// FaultyAgent adds fault (d) of the "don't expose raw state"
	// experiment: the first machine's agent reports, every
	// FaultyAgentPeriod, a task that never ran and another machine's
	// running task as SUCCEEDED (summary.json's faulty_agent).
	FaultyAgent bool
	// TwoLevel runs the schedulers as two-level frameworks under an
	// allocator (WithArchitecture(TwoLevel)): AllocatorTime is the time it
	// takes to make an offer, OfferInterval how often it makes one while a
	// framework wants resources (the paper's 1 ms and 1 s, the defaults).
	TwoLevel                     bool
	AllocatorTime, OfferInterval time.Duration
}

// DefaultConfig is the default run: the paper's lightweight cell,
// one batch and one service scheduler at the paper's decision times.
func DefaultConfig() Config {
	r := schedulers.DefaultRunnerConfig()
	return Config{
		Workload: workload.Default(),
		Schedulers: []SchedulerSpec{
			{Kind: "batch", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond},
			{Kind: "service", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond},
		},
		MapReducePolicy: schedulers.MaxParallelism,
		Durability:      store.DurabilityNone,
		Runner:          r,
		FleetTick:       time.Second,
		AllocatorTime:   time.Millisecond,
		OfferInterval:   time.Second,
	}
}

// ErrConfig is wrapped by every error of Config.Validate. Those about
// Config.Workload are also *workload.FieldError (and so wrap
// workload.ErrConfig), named from sim.Config: sim.Config.Workload.Days.
var ErrConfig = errors.New("invalid sim config")

// The bounds Config.Validate checks (the CLI's flags have the same).
const (
	// MaxSchedulersPerKind: instances of one kind (the paper runs up to 32
	// batch schedulers).
	MaxSchedulersPerKind = 100
	// MaxTJob and MaxTTask bound the modelled decision times (the paper
	// sweeps t_job to 100 s and t_task to 1 s).
	MaxTJob  = time.Hour
	MaxTTask = time.Minute
	// MaxAttempts bounds Runner.MaxAttempts and MaxAttemptsNoPlacement
	// (the paper's are 1,000 and 100); MaxRetryDelay bounds RetryDelay.
	MaxAttempts   = 1_000_000
	MaxRetryDelay = 24 * time.Hour
	// MinFleetTick and MaxFleetTick bound the fleet's reporting period:
	// below a millisecond the ticks, not the schedulers, are the
	// simulation; above an hour tasks finish an hour late.
	MinFleetTick, MaxFleetTick = time.Millisecond, time.Hour
	// MaxAllocatorTime and MaxOfferInterval bound the two-level
	// allocator's times (the paper's are 1 ms and 1 s).
	MaxAllocatorTime, MaxOfferInterval = time.Minute, time.Hour
	// FailuresPerMachineDay bounds FailuresPerDay per machine: a failed
	// machine is repaired after an hour, so more would keep the whole cell
	// down.
	FailuresPerMachineDay = 24
)

// WorkloadKinds returns the kinds of jobs the workload may submit (Route's
// keys).
func WorkloadKinds() []string { return []string{"batch", "service", "mapreduce"} }

// NeededKinds returns the kinds of jobs a workload with that MapReduce
// share submits: each needs a scheduler of its kind, or a route.
func NeededKinds(mapReduceShare float64) []string {
	if mapReduceShare > 0 {
		return WorkloadKinds()
	}
	return []string{"batch", "service"}
}

// configError is an error of Config.Validate: it wraps ErrConfig and, for
// the workload's, the *workload.FieldError.
type configError struct {
	msg string
	err error // a *workload.FieldError, or nil
}

func (e *configError) Error() string { return e.msg }

func (e *configError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrConfig}
	}
	return []error{ErrConfig, e.err}
}

// Validate reports the first invalid field, by its Go name from sim.Config
// (sim.Config.Schedulers[1].Count, sim.Config.Workload.Days) and its
// value: floats finite, counts whole and positive, durations positive
// where a zero would mean nothing, every value within the bounds above,
// every kind registered, and a scheduler for every kind of job the
// workload submits.
func (c *Config) Validate() error {
	bad := func(field string, v any, format string, args ...any) error {
		return &configError{msg: fmt.Sprintf("%v: sim.Config.%s = %v: want %s", ErrConfig, field, v, fmt.Sprintf(format, args...))}
	}
	if err := c.Workload.Validate(); err != nil {
		var fe *workload.FieldError
		if errors.As(err, &fe) {
			in := *fe
			in.In = "sim.Config.Workload"
			return &configError{msg: in.Error(), err: &in}
		}
		return &configError{msg: fmt.Sprintf("%v: sim.Config.Workload: %v", ErrConfig, err), err: err}
	}
	if len(c.Schedulers) == 0 {
		return bad("Schedulers", "[]", "at least one scheduler")
	}
	kinds := map[string]bool{}
	for i, s := range c.Schedulers {
		f := fmt.Sprintf("Schedulers[%d]", i)
		switch {
		case !slices.Contains(SchedulerKinds(), s.Kind):
			return bad(f+".Kind", strconv.Quote(s.Kind), "a registered scheduler kind (%s)", strings.Join(SchedulerKinds(), ", "))
		case kinds[s.Kind]:
			return bad(f+".Kind", strconv.Quote(s.Kind), "each kind listed once (count its instances in Count)")
		case s.Count < 1 || s.Count > MaxSchedulersPerKind:
			return bad(f+".Count", s.Count, "a whole number of %s schedulers from 1 to %d (leave a kind out to run none)", s.Kind, MaxSchedulersPerKind)
		case s.TJob < 0 || s.TJob > MaxTJob:
			return bad(f+".TJob", s.TJob, "a per-job decision time from 0 to %v", MaxTJob)
		case s.TTask < 0 || s.TTask > MaxTTask:
			return bad(f+".TTask", s.TTask, "a per-task decision time from 0 to %v", MaxTTask)
		}
		// The parameters, as Build will make the scheduler of them.
		if _, err := NewScheduler(s.Kind, c.params(s)); err != nil {
			return bad(f+".Params", fmt.Sprint(s.Params), "parameters the %s scheduler takes (%v)", s.Kind, err)
		}
		kinds[s.Kind] = true
	}
	for _, from := range slices.Sorted(maps.Keys(c.Route)) {
		to := c.Route[from]
		f := fmt.Sprintf("Route[%q]", from)
		switch {
		case !slices.Contains(WorkloadKinds(), from):
			return bad(f, strconv.Quote(to), "a key that is a kind of job the workload submits (%s)", strings.Join(WorkloadKinds(), ", "))
		case !kinds[to]:
			return bad(f, strconv.Quote(to), "the kind of a scheduler in Schedulers")
		}
	}
	for _, from := range slices.Sorted(maps.Keys(c.RouteShare)) {
		sh := c.RouteShare[from]
		f := fmt.Sprintf("RouteShare[%q]", from)
		switch _, routed := c.Route[from]; {
		case !routed:
			return bad(f, sh, "a share of a kind that Route routes")
		case !(sh > 0 && sh <= 1):
			return bad(f, sh, "a share greater than 0 and at most 1")
		case sh < 1 && !kinds[from]:
			return bad(f, sh, "a share below 1 of a kind whose own scheduler runs in Schedulers (the rest of its jobs go to it)")
		}
	}
	// Every kind of job the workload makes needs a scheduler.
	for _, k := range NeededKinds(c.Workload.MapReduceShare) {
		if _, routed := c.Route[k]; routed || kinds[k] {
			continue
		}
		if k == "mapreduce" {
			return bad("Workload.MapReduceShare", c.Workload.MapReduceShare, "0, or a mapreduce scheduler in Schedulers (or Route[\"mapreduce\"]): the workload submits mapreduce jobs but no mapreduce scheduler runs")
		}
		return bad("Schedulers", kindList(c.Schedulers), "a %s scheduler, or Route[%q]: the workload submits %s jobs", k, k, k)
	}
	if _, ok := omegav1.ConflictMode_name[int32(c.Conflict)]; !ok {
		return bad("Conflict", c.Conflict, "CONFLICT_MODE_FINE or CONFLICT_MODE_COARSE")
	}
	if _, ok := omegav1.CommitMode_name[int32(c.Commit)]; !ok {
		return bad("Commit", c.Commit, "COMMIT_MODE_INCREMENTAL or COMMIT_MODE_ALL_OR_NOTHING")
	}
	if _, err := schedulers.ParseMapReducePolicy(c.MapReducePolicy.String()); err != nil {
		return bad("MapReducePolicy", c.MapReducePolicy, "MaxParallelism, GlobalCap or RelativeSize")
	}
	r := c.Runner
	switch {
	case r.MaxAttempts < 1 || r.MaxAttempts > MaxAttempts:
		return bad("Runner.MaxAttempts", r.MaxAttempts, "a whole number from 1 to %d", MaxAttempts)
	case r.MaxAttemptsNoPlacement < 1 || r.MaxAttemptsNoPlacement > MaxAttempts:
		return bad("Runner.MaxAttemptsNoPlacement", r.MaxAttemptsNoPlacement, "a whole number from 1 to %d", MaxAttempts)
	case r.RetryDelay < 0 || r.RetryDelay > MaxRetryDelay:
		return bad("Runner.RetryDelay", r.RetryDelay, "a duration from 0 to %v", MaxRetryDelay)
	// Runner.TJob and TTask are replaced by each SchedulerSpec's; a value
	// out of range is a mistake all the same.
	case r.TJob < 0 || r.TJob > MaxTJob:
		return bad("Runner.TJob", r.TJob, "a per-job decision time from 0 to %v (each SchedulerSpec's TJob replaces it)", MaxTJob)
	case r.TTask < 0 || r.TTask > MaxTTask:
		return bad("Runner.TTask", r.TTask, "a per-task decision time from 0 to %v (each SchedulerSpec's TTask replaces it)", MaxTTask)
	}
	if err := r.Validate(); err != nil { // what the schedulers check, should they check more
		return &configError{msg: fmt.Sprintf("%v: sim.Config.Runner: %v", ErrConfig, err)}
	}
	if c.TwoLevel {
		switch {
		case c.AllocatorTime < 0 || c.AllocatorTime > MaxAllocatorTime:
			return bad("AllocatorTime", c.AllocatorTime, "the two-level allocator's time to make an offer, from 0 to %v", MaxAllocatorTime)
		case c.OfferInterval <= 0 || c.OfferInterval > MaxOfferInterval:
			return bad("OfferInterval", c.OfferInterval, "the two-level allocator's interval between offers, above 0 and at most %v", MaxOfferInterval)
		}
	}
	if c.FleetTick < MinFleetTick || c.FleetTick > MaxFleetTick {
		return bad("FleetTick", c.FleetTick, "the fleet's reporting period, from %v to %v", MinFleetTick, MaxFleetTick)
	}
	if maxFailures := float64(FailuresPerMachineDay * c.Workload.Machines); !(c.FailuresPerDay >= 0 && c.FailuresPerDay <= maxFailures) { // also NaN
		return bad("FailuresPerDay", c.FailuresPerDay, "a finite number of machine failures per simulated day from 0 to %v (%d per machine)", maxFailures, FailuresPerMachineDay)
	}
	switch c.Durability {
	case store.DurabilityNone:
	case store.DurabilitySync:
		if c.Dir == "" {
			return bad("Dir", strconv.Quote(c.Dir), "a directory for the store, required with Durability sync")
		}
	default:
		return bad("Durability", c.Durability, "store.DurabilityNone or store.DurabilitySync")
	}
	return nil
}

// kindList is the kinds of the schedulers, for a message.
func kindList(ss []SchedulerSpec) string {
	var ks []string
	for _, s := range ss {
		ks = append(ks, s.Kind)
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// Sim is an assembled simulation.
type Sim struct {
	Engine *Engine
	Store  *store.Store
	Fleet  *agents.SimFleet
	cfg    Config
	src    *aheadSource
}

// Close stops the workload's generator and releases the store.
func (s *Sim) Close() error {
	s.src.Close()
	return s.Store.Close()
}

// Config returns the configuration.
func (s *Sim) Config() Config { return s.cfg }

// Clock is the simulation's virtual clock.
func (s *Sim) Clock() *Clock { return s.Engine.o.Clock }

// Build assembles a simulation: the store, the machines, the pre-fill
// placed through the commit path, the runners, the fleet and the arrivals.
func Build(ctx context.Context, cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gen, err := workload.New(cfg.Workload)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	seed := cfg.Workload.Seed
	return BuildCell(ctx, cfg, Cell{
		Machines: gen.Machines(),
		Prefill:  func(ctx context.Context, c *client.Client) error { return prefill(ctx, c, gen, seed) },
		NewSource: func() Source {
			return &genSource{gen: gen, ids: client.RandReader(rand.New(rand.NewPCG(seed, 4000))), route: cfg.Route, share: cfg.RouteShare}
		},
	})
}

// Cell is what a simulation runs besides its schedulers, fleet and job
// controller: the machines registered before it starts, what is placed
// before it starts, where its jobs come from and components of its own.
// Build makes the workload generator's; omega replay makes a trace's.
type Cell struct {
	// Machines are registered at the start, in this order.
	Machines []workload.Machine
	// Prefill, if set, places what runs when the simulation starts,
	// through c (the submitter's client) and the commit path.
	Prefill func(ctx context.Context, c *client.Client) error
	// NewSource makes the arrivals (read ahead on a goroutine of their
	// own); nil: no arrivals (a component of Actors submits).
	NewSource func() Source
	// Actors, if set, makes the cell's own components after every other
	// client is made (so theirs keep their random streams), each client
	// from newClient.
	Actors func(newClient func(name string) (*client.Client, error)) ([]Actor, error)
	// NewExecutor, if set, is the fleet's executor (agents.FleetConfig).
	NewExecutor func(*agents.Tracker) agents.Executor
	// Retire, if set, takes each job's record when the job leaves the
	// cell, and the runners keep nothing of it (Options.Retire).
	Retire func(*schedulers.Runner, schedulers.JobRecord)
	// UnroutedJobs lets jobs name a scheduler the run does not have
	// (omega replay's fidelity mode, where the trace places them);
	// otherwise such a job is an error.
	UnroutedJobs bool
}

// noArrivals is the Source of a cell whose jobs some actor submits.
type noArrivals struct{}

func (noArrivals) Next() (Arrival, bool) { return Arrival{}, false }

// BuildCell assembles a simulation of cfg's schedulers, fleet and store on
// cell: cfg.Workload gives the seed and the horizon (its Days), and sizes
// the store's watch history by its Machines; its generator is not used.
func BuildCell(ctx context.Context, cfg Config, cell Cell) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := store.DefaultOptions(cfg.Dir)
	opts.Durability, opts.CheckInvariants = cfg.Durability, cfg.CheckInvariants
	opts.HistoryChanges = simHistory(cfg.Workload.Machines)
	if cfg.Policy != nil {
		// The simulated fleet commits every machine's reports as one
		// component: the mediated policy is told it speaks for them all.
		opts.Policy = store.WithFleets(cfg.Policy, "fleet")
	}
	opts.Logger = quietLogger()
	opts.JobsManaged = true // the simulation runs the job controller
	st, err := store.Open(opts)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			st.Close()
		}
	}()
	seed := cfg.Workload.Seed
	clock := &Clock{now: Epoch}
	tr := inproc.New(st)
	stream := uint64(0)
	newClient := func(name string) (*client.Client, error) {
		stream++
		return client.New(ctx, tr, client.Config{
			Component: name, Clock: clock, Rand: rand.New(rand.NewPCG(seed, 1000+stream)),
			Conflict: cfg.Conflict, Commit: cfg.Commit,
		})
	}
	sub, err := newClient("submitter")
	if err != nil {
		return nil, err
	}
	if err := registerMachines(ctx, sub, cell.Machines); err != nil {
		return nil, err
	}
	if cell.Prefill != nil {
		if err := cell.Prefill(ctx, sub); err != nil {
			return nil, err
		}
	}
	var runners []*schedulers.Runner
	for _, spec := range cfg.Schedulers {
		for i := range spec.Count {
			s, err := NewScheduler(spec.Kind, cfg.params(spec))
			if err != nil {
				return nil, err
			}
			c, err := newClient(fmt.Sprintf("%s-%d", spec.Kind, i))
			if err != nil {
				return nil, err
			}
			rc := cfg.Runner
			rc.TJob, rc.TTask, rc.ByKind = spec.TJob, spec.TTask, spec.ByKind
			if cfg.CPUTime {
				rc.Measure = threadCPUTime
			}
			stream++
			r, err := schedulers.NewRunner(s, c, rand.New(rand.NewPCG(seed, 2000+stream)), rc)
			if err != nil {
				return nil, err
			}
			runners = append(runners, r)
		}
	}
	fc, err := newClient("fleet")
	if err != nil {
		return nil, err
	}
	fleetCfg := agents.DefaultFleetConfig()
	fleetCfg.Tick = cfg.FleetTick
	fleetCfg.FailuresPerDay = cfg.FailuresPerDay
	fleetCfg.Rand = rand.New(rand.NewPCG(seed, 3000))
	fleetCfg.Start = Epoch
	fleetCfg.NewExecutor = cell.NewExecutor
	fleet, err := agents.NewSimFleet(ctx, fc, fleetCfg)
	if err != nil {
		return nil, err
	}
	jc, err := newClient(jobs.Component)
	if err != nil {
		return nil, err
	}
	jobCtl, err := jobs.New(ctx, jc)
	if err != nil {
		return nil, err
	}
	var inner Source = noArrivals{}
	if cell.NewSource != nil {
		inner = cell.NewSource()
	}
	src := newAheadSource(inner)
	defer func() {
		if !ok {
			src.Close()
		}
	}()
	var actors []Actor
	var liar *faultyAgent
	if cfg.FaultyAgent {
		// The first machine's agent, with a client of its own (made last:
		// the other clients' random streams stay as they were).
		if len(cell.Machines) == 0 {
			return nil, errors.New("sim: a faulty agent needs a machine")
		}
		first := cell.Machines[0].Name
		var uid uuid.UUID
		sub.View().RangeMachines(func(m *txn.Machine) bool {
			if m.Meta.GetName() == first {
				uid = m.UID
				return false
			}
			return true
		})
		ac, err := newClient("agent/" + first)
		if err != nil {
			return nil, err
		}
		liar = &faultyAgent{c: ac, machine: uid, s: FaultyAgentSummary{Component: ac.Component()}}
		actors = append(actors, liar)
	}
	var twoLevel *TwoLevelOptions
	if cfg.TwoLevel {
		// The allocator's client, made after the others: their random
		// streams stay as they are in the other architectures.
		ac, err := newClient("allocator")
		if err != nil {
			return nil, err
		}
		twoLevel = &TwoLevelOptions{Allocator: ac, AllocatorTime: cfg.AllocatorTime, OfferInterval: cfg.OfferInterval}
	}
	if cell.Actors != nil {
		more, err := cell.Actors(newClient)
		if err != nil {
			return nil, err
		}
		actors = append(actors, more...)
	}
	var audit *auditpkg.Stream
	if cfg.AuditHistory {
		audit = auditpkg.NewStream(Epoch.UnixNano())
	}
	var observers []Observer
	if cfg.History != nil {
		observers = append(observers, cfg.History)
	}
	e, err := New(Options{
		LockThread: cfg.CPUTime,
		Store:      st, Submitter: sub, Runners: runners, Fleet: fleet, Jobs: jobCtl, Source: src, Clock: clock,
		Duration: time.Duration(cfg.Workload.Days * float64(24*time.Hour)), FleetTick: cfg.FleetTick,
		Progress: cfg.Progress, ProgressEvery: cfg.ProgressEvery,
		Audit:     audit,
		Observers: observers,
		Actors:    actors,
		TwoLevel:  twoLevel,
		liar:      liar,
		Unrouted:  cell.UnroutedJobs,
		Retire:    cell.Retire,
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return &Sim{Engine: e, Store: st, Fleet: fleet, cfg: cfg, src: src}, nil
}

func registerMachines(ctx context.Context, c *client.Client, ms []workload.Machine) error {
	for start := 0; start < len(ms); start += 5000 {
		tx := c.NewTxn(c.View())
		for _, m := range ms[start:min(start+5000, len(ms))] {
			tx.Ops = append(tx.Ops, txn.CreateMachine(&omegav1.Machine{
				Meta: &omegav1.ObjectMeta{Uid: c.NewUID().String(), Name: m.Name},
				Spec: &omegav1.MachineSpec{
					Capacity:      machineCapacity(m),
					FailureDomain: m.FailureDomain,
				},
			}))
		}
		if _, err := c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("register machines: %w", err)
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
	}
	return nil
}

func machineCapacity(m workload.Machine) *omegav1.Resources {
	r := &omegav1.Resources{CpuMillis: m.CPUMillis, MemoryBytes: m.MemoryBytes}
	if m.GPUs > 0 {
		r.Extended = map[string]int64{workload.GPU: m.GPUs}
	}
	return r
}

// prefill creates the pre-fill's long-running service jobs and places them
// with a batch policy at time zero, through the commit path like any other
// placement (its scheduler is not one of the measured ones).
func prefill(ctx context.Context, c *client.Client, gen *workload.Generator, seed uint64) error {
	ids := client.RandReader(rand.New(rand.NewPCG(seed, 5000)))
	rng := rand.New(rand.NewPCG(seed, 5001))
	placer := schedulers.NewBatch()
	for _, a := range gen.Prefill() {
		job, tasks, err := a.Objects(ids, Epoch.UnixNano())
		if err != nil {
			return err
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
		tx := c.NewTxn(c.View())
		tx.Ops = append(tx.Ops, txn.CreateJob(job))
		for _, t := range tasks {
			tx.Ops = append(tx.Ops, txn.CreateTask(t))
		}
		res, err := c.Commit(ctx, tx)
		if err != nil {
			return fmt.Errorf("prefill %s: %w", a.Name, err)
		}
		if err := c.SyncTo(ctx, res.Revision); err != nil {
			return err
		}
		v := c.View()
		jt, _ := v.Job(mustUID(job.GetMeta().GetUid()))
		req := schedulers.Request{Job: jt}
		v.RangePendingTasks(jt.UID, func(t *txn.Task) bool { req.Pending = append(req.Pending, t); return true })
		d := placer.Decide(v, req, schedulers.Env{Now: Epoch, Rand: rng, NewUID: c.NewUID, Component: "prefill"})
		tx = c.NewTxn(v)
		tx.Ops = d.Ops
		if len(tx.Ops) == 0 {
			continue
		}
		if _, err := c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("prefill %s: place: %w", a.Name, err)
		}
	}
	return nil
}

func mustUID(s string) uuid.UUID {
	id, err := txn.ParseUID(s, "uid")
	if err != nil {
		panic(err)
	}
	return id
}

// simHistory is how many changes the simulation's store keeps for its
// watchers. They are all in process and take in the watch at every step
// (the engine's intake) or every fleet tick (the fleet, the job
// controller), so they need a tick's changes, not the 200,000 the store
// keeps by default for a watcher across a network: those would hold as
// many superseded task versions alive, a third of the live heap of a
// 10,000-machine cell (peak RSS 390 MiB instead of 460 over a simulated
// day). Twice the machines covers a tick in which every machine takes a
// claim and a release. A watcher that falls behind anyway re-lists, which
// costs time and changes nothing else.
func simHistory(machines int) int { return max(20_000, 2*machines) }

// genSource adapts a workload generator to the engine.
type genSource struct {
	gen   *workload.Generator
	ids   io.Reader
	route map[string]string
	share map[string]float64
	err   error
}

// Err reports why the source stopped early, if it did.
func (s *genSource) Err() error { return s.err }

func (s *genSource) Next() (Arrival, bool) {
	a, ok := s.gen.Next()
	if !ok {
		return Arrival{}, false
	}
	job, tasks, err := a.Objects(s.ids, Epoch.UnixNano())
	if err != nil {
		s.err = err
		return Arrival{}, false
	}
	job.Spec.Scheduler = RouteJob(s.route, s.share, job.Spec.GetScheduler(), job.Meta.GetUid())
	return Arrival{At: a.Submit, Job: job, Tasks: tasks}, true
}

// RouteJob is the scheduler a job of kind (named for its kind's scheduler)
// goes to under Config.Route and Config.RouteShare: route's, for the share
// of the jobs share gives by their uids (every job when share names no
// share), or its kind's own.
func RouteJob(route map[string]string, share map[string]float64, kind, uid string) string {
	if route[kind] == "" {
		return kind
	}
	if sh, ok := share[kind]; ok && routedShare(uid) >= sh {
		return kind
	}
	return route[kind]
}

// routedShare places a job in [0, 1) by its uid's first 8 bytes (random,
// from the seeded source of uids), for RouteShare.
func routedShare(uid string) float64 {
	u, err := uuid.Parse(uid)
	if err != nil {
		return 0
	}
	return float64(binary.BigEndian.Uint64(u[:8])>>11) / (1 << 53)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// params is what spec's factory gets: its own, and for mapreduce the
// config's policy unless it names one.
func (c *Config) params(spec SchedulerSpec) schedulers.Params {
	if spec.Kind != "mapreduce" {
		return spec.Params
	}
	if _, ok := spec.Params["policy"]; ok {
		return spec.Params
	}
	p := schedulers.Params{"policy": c.MapReducePolicy.String()}
	for k, v := range spec.Params {
		p[k] = v
	}
	return p
}
