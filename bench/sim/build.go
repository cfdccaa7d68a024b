package sim

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/client"
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
}

// Config is one simulation. Start from DefaultConfig.
type Config struct {
	Workload   workload.Config
	Schedulers []SchedulerSpec
	// Conflict and Commit are every scheduler's modes (a gang job commits
	// all-or-nothing whatever Commit says).
	Conflict omegav1.ConflictMode
	Commit   omegav1.CommitMode
	// Route sends the workload's jobs of one kind ("batch", "service",
	// "mapreduce") to schedulers of another (registered) kind: how a custom
	// scheduler takes over a class of jobs. Unrouted kinds go to schedulers
	// of their own kind.
	Route map[string]string
	// MapReducePolicy is the mapreduce schedulers' policy.
	MapReducePolicy schedulers.MapReducePolicy
	// Runner bounds every scheduler's attempts (TJob/TTask come from the
	// SchedulerSpec).
	Runner schedulers.RunnerConfig
	// FleetTick: the fleet's status transactions. Default 1s.
	FleetTick time.Duration
	// FailuresPerDay: machine failures per simulated day. Default 0.
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
	// Progress, if set, is called about once per simulated hour.
	Progress func(time.Duration)
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
	}
}

// Validate reports the first invalid field, by name.
func (c *Config) Validate() error {
	if err := c.Workload.Validate(); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	if len(c.Schedulers) == 0 {
		return errors.New("schedulers: need at least one")
	}
	kinds := map[string]bool{}
	for _, s := range c.Schedulers {
		if _, err := schedulers.New(s.Kind); err != nil {
			return fmt.Errorf("schedulers: %w", err)
		}
		if s.Count < 1 {
			return fmt.Errorf("schedulers: %s=%d: need at least 1", s.Kind, s.Count)
		}
		if s.TJob < 0 || s.TTask < 0 {
			return fmt.Errorf("schedulers: %s: negative decision time", s.Kind)
		}
		if kinds[s.Kind] {
			return fmt.Errorf("schedulers: %s listed twice", s.Kind)
		}
		kinds[s.Kind] = true
	}
	// Every kind of job the workload makes needs a scheduler.
	need := []string{"batch", "service"}
	if c.Workload.MapReduceShare > 0 {
		need = append(need, "mapreduce")
	}
	for from := range c.Route {
		if from != "batch" && from != "service" && from != "mapreduce" {
			return fmt.Errorf("route: %q is not a workload kind (batch, service, mapreduce)", from)
		}
	}
	for _, k := range need {
		to := k
		if r, ok := c.Route[k]; ok {
			to = r
		}
		if !kinds[to] {
			return fmt.Errorf("schedulers: the workload submits %s jobs but no %s scheduler runs (add %s=1, route them elsewhere, or set mapreduce share 0)", k, to, to)
		}
	}
	if err := c.Runner.Validate(); err != nil {
		return err
	}
	if c.FleetTick < 0 || c.FailuresPerDay < 0 {
		return errors.New("fleet: negative tick or failure rate")
	}
	if c.Durability == store.DurabilitySync && c.Dir == "" {
		return errors.New("dir: required with durability sync")
	}
	return nil
}

// Sim is an assembled simulation.
type Sim struct {
	Engine *Engine
	Store  *store.Store
	Fleet  *agents.SimFleet
	cfg    Config
}

// Close releases the store.
func (s *Sim) Close() error { return s.Store.Close() }

// Config returns the configuration.
func (s *Sim) Config() Config { return s.cfg }

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
	opts := store.DefaultOptions(cfg.Dir)
	opts.Durability, opts.CheckInvariants = cfg.Durability, cfg.CheckInvariants
	opts.Logger = quietLogger()
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
	tr := client.InProcess(st)
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
	if err := registerMachines(ctx, sub, gen.Machines()); err != nil {
		return nil, err
	}
	if err := prefill(ctx, sub, gen, seed); err != nil {
		return nil, err
	}
	var runners []*schedulers.Runner
	for _, spec := range cfg.Schedulers {
		for i := range spec.Count {
			s, err := schedulers.New(spec.Kind)
			if err != nil {
				return nil, err
			}
			if mr, isMR := s.(*schedulers.MapReduce); isMR {
				mr.Policy = cfg.MapReducePolicy
			}
			c, err := newClient(fmt.Sprintf("%s-%d", spec.Kind, i))
			if err != nil {
				return nil, err
			}
			rc := cfg.Runner
			rc.TJob, rc.TTask = spec.TJob, spec.TTask
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
	fleet, err := agents.NewSimFleet(ctx, fc, fleetCfg)
	if err != nil {
		return nil, err
	}
	src := &genSource{gen: gen, ids: client.RandReader(rand.New(rand.NewPCG(seed, 4000))), route: cfg.Route}
	e, err := New(Options{
		LockThread: cfg.CPUTime,
		Store:      st, Submitter: sub, Runners: runners, Fleet: fleet, Source: src, Clock: clock,
		Duration: time.Duration(cfg.Workload.Days * float64(24*time.Hour)), FleetTick: cfg.FleetTick,
		Progress: cfg.Progress,
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return &Sim{Engine: e, Store: st, Fleet: fleet, cfg: cfg}, nil
}

func registerMachines(ctx context.Context, c *client.Client, ms []workload.Machine) error {
	for start := 0; start < len(ms); start += 5000 {
		tx := c.NewTxn(c.View())
		for _, m := range ms[start:min(start+5000, len(ms))] {
			tx.Ops = append(tx.Ops, txn.CreateMachine(&omegav1.Machine{
				Meta: &omegav1.ObjectMeta{Uid: c.NewUID().String(), Name: m.Name},
				Spec: &omegav1.MachineSpec{
					Capacity:      &omegav1.Resources{CpuMillis: m.CPUMillis, MemoryBytes: m.MemoryBytes},
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

// genSource adapts a workload generator to the engine.
type genSource struct {
	gen   *workload.Generator
	ids   io.Reader
	route map[string]string
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
	if to, ok := s.route[job.Spec.GetScheduler()]; ok {
		job.Spec.Scheduler = to
	}
	return Arrival{At: a.Submit, Job: job, Tasks: tasks}, true
}

// ParseSchedulers parses "batch=1,service=1,mapreduce=1" into counts.
func ParseSchedulers(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		kind, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("--schedulers %q: want kind=count[,kind=count]", s)
		}
		var count int
		if _, err := fmt.Sscanf(n, "%d", &count); err != nil || count < 0 {
			return nil, fmt.Errorf("--schedulers %q: count %q for %s is not a non-negative number", s, n, kind)
		}
		out[kind] = count
	}
	return out, nil
}

// ParseDurations parses "batch=0.1s,service=10s".
func ParseDurations(flag, s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		kind, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%s %q: want kind=duration[,kind=duration]", flag, s)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s %q: %s: %q is not a duration (like 0.1s or 5ms)", flag, s, kind, v)
		}
		out[kind] = d
	}
	return out, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
