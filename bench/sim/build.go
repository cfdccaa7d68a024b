package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	auditpkg "github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/jobs"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

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
	Actors func(newClient func(name string) (*client.Client, error)) ([]vtime.Actor, error)
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
	clock := vtime.NewClock()
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
	// The runners decide one at a time on the store's line of views: one
	// MachineIndex takes in each change to the machines once for all of
	// them (schedulers.Env.Machines; a framework's offer views keep to
	// its own).
	machines := new(schedulers.MachineIndex)
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
			rc.Machines = machines
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
	var actors []vtime.Actor
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
	// How the runners are driven: the architecture's actors, if it has its
	// own (their clients made after the others': those keep their random
	// streams whatever the architecture).
	arch, err := LookupArchitecture(cfg.Architecture)
	if err != nil {
		return nil, err
	}
	busy, placing := newBusyBook(len(runners)), newBusyBook(len(runners))
	var drive *Driving
	if arch.Drive != nil {
		if drive, err = arch.Drive(Drive{Config: cfg, Runners: runners, NewClient: newClient, Busy: busy.add, Placing: placing.add}); err != nil {
			return nil, fmt.Errorf("sim: the %s architecture: %w", arch.Name, err)
		}
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
	s, err := New(Options{
		LockThread: cfg.CPUTime,
		Store:      st, Submitter: sub, Runners: runners, Fleet: fleet, Jobs: jobCtl, Source: src, Clock: clock,
		Duration: time.Duration(cfg.Workload.Days * float64(24*time.Hour)), FleetTick: cfg.FleetTick,
		Progress: cfg.Progress, ProgressEvery: cfg.ProgressEvery,
		Audit:     audit,
		Observers: observers,
		Actors:    actors,
		Drive:     drive,
		busy:      busy,
		placing:   placing,
		liar:      liar,
		Unrouted:  cell.UnroutedJobs,
		Retire:    cell.Retire,
	})
	if err != nil {
		return nil, err
	}
	s.Fleet, s.cfg, s.src = fleet, cfg, src
	ok = true
	return s, nil
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

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
