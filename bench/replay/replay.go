// Package replay replays a public cluster trace (bench/trace's readers)
// through omega's schedulers in virtual time: the trace's machines and
// submissions at their times, placements decided by the schedulers of the
// run (the trace's own kept for comparison), each task running its trace
// runtime; or, in fidelity mode, the trace's own placements applied through
// the store with no scheduler deciding. docs/REPLAY.md writes the
// semantics down.
package replay

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/trace"
	"github.com/omega-cell/omega/bench/trace/alibaba2018"
	"github.com/omega-cell/omega/bench/trace/google2011"
	"github.com/omega-cell/omega/bench/trace/google2019"
	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/client"
)

// Formats are the trace formats a replay reads.
var Formats = []string{"google2011", "google2019", "alibaba2018"}

// Config is a replay: a trace, a window of it, how it maps onto a cell,
// and the simulation's own settings (schedulers, decision times, conflict
// and commit modes, architecture, policy, seed) in Sim.
type Config struct {
	Sim    sim.Config
	Format string
	Trace  string
	Strict bool
	// From and To cut a window of trace time (To 0: to the trace's end).
	// The run starts at From (virtual time 0) and ends at the last task
	// event of the window.
	From, To time.Duration
	// Sample keeps this share of the trace's machines and of its jobs
	// (chosen by a seeded hash of their ids), 0 < Sample ≤ 1.
	Sample float64
	// Machines, if above 0, keeps that many of the machines the trace has
	// when the window opens (those of the smallest seeded draws; a later
	// machine by the same cut) and the jobs in the same share. Not with
	// Sample below 1.
	Machines int
	// MachineCPU and MachineMemory are the size of a machine of
	// normalised capacity 1.0 (Google's traces), or of 100% (Alibaba's
	// memory): cores and bytes.
	MachineCPU    float64
	MachineMemory int64
	// Overcommit multiplies every machine's capacity: the trace's cell
	// placed more than its machines' capacity (Borg over-commits
	// non-production work), which a store that checks fit refuses; 1
	// replays the capacities as recorded.
	Overcommit float64
	// ServicePriority: a job of this priority or more goes to the service
	// scheduler, the rest to batch (docs/WORKLOADS.md's rule, at the
	// trace's own scale). Negative: the format's default.
	ServicePriority int32
	// Evictions: replay (an evicted run ends in the cell when the trace
	// evicted it, and its resubmission is new work) or ignore (the run
	// goes on through the trace's eviction to its next end).
	Evictions string
	// Fidelity applies every placement of the trace through the store and
	// runs no scheduler's decisions: placements the store refuses for fit
	// are the trace's own over-commitment (or a reader bug), counted and
	// reported with their rows.
	Fidelity bool
	// Coalesce: a trace job's task submissions within this time of its
	// first are one job of the cell, submitted at the first's time (the
	// traces submit a job's tasks one row at a time, microseconds apart).
	// 0: one job per trace job per distinct time.
	Coalesce time.Duration
	// JobsCSV, if set, receives jobs.csv as the jobs leave the cell
	// (FinishJobsCSV writes the rest): the replay keeps nothing of a job
	// that left, so its memory follows the live cell.
	JobsCSV io.Writer
	// Lookahead is how far ahead of the simulated time the trace is read,
	// so a run's runtime is known when the cell places it.
	Lookahead time.Duration

	fraction float64
}

// DefaultConfig is a replay of the default simulation's schedulers.
func DefaultConfig() Config {
	sc := sim.DefaultConfig()
	sc.Workload.MapReduceShare = 0 // the trace's jobs are batch or service
	return Config{Sim: sc, Sample: 1, MachineCPU: 32, MachineMemory: 128 << 30, Overcommit: 1, ServicePriority: -1,
		Evictions: "replay", Coalesce: time.Second, Lookahead: time.Hour}
}

// defaultServicePriority is each format's boundary: 2011's production
// band (9..11); 2019's production tier (120 and up, "Google cluster-usage
// traces v3"); Alibaba's containers are its online services (priority 1
// here), its batch instances 0.
var defaultServicePriority = map[string]int32{"google2011": 9, "google2019": 120, "alibaba2018": 1}

// Validate checks the settings, naming the flag of a bad one.
func (c *Config) Validate() error {
	var errs []string
	if !contains(Formats, c.Format) {
		errs = append(errs, fmt.Sprintf("--format %q: want one of %s", c.Format, strings.Join(Formats, ", ")))
	}
	if c.Trace == "" {
		errs = append(errs, "--trace: required (the trace's directory)")
	}
	if c.From < 0 || c.To < 0 || c.To > 0 && c.To <= c.From {
		errs = append(errs, fmt.Sprintf("--from %v --to %v: want 0 ≤ from < to (to 0: the trace's end)", c.From, c.To))
	}
	if !(c.Sample > 0 && c.Sample <= 1) {
		errs = append(errs, fmt.Sprintf("--sample %v: want a share in (0, 1]", c.Sample))
	}
	if c.Machines < 0 || c.Machines > 10_000_000 {
		errs = append(errs, fmt.Sprintf("--machines %d: want 0 (every machine) to 10,000,000", c.Machines))
	} else if c.Machines > 0 && c.Sample < 1 {
		errs = append(errs, fmt.Sprintf("--machines %d --sample %v: give one of them", c.Machines, c.Sample))
	}
	if !(c.MachineCPU > 0 && c.MachineCPU <= 1e6) || c.MachineMemory <= 0 {
		errs = append(errs, fmt.Sprintf("--machine-cpu %v --machine-memory %d: want positive sizes", c.MachineCPU, c.MachineMemory))
	}
	if !(c.Overcommit >= 1 && c.Overcommit <= 100) {
		errs = append(errs, fmt.Sprintf("--overcommit %v: want a factor from 1 to 100", c.Overcommit))
	}
	if c.Evictions != "replay" && c.Evictions != "ignore" {
		errs = append(errs, fmt.Sprintf("--evictions %q: want replay or ignore", c.Evictions))
	}
	if c.Coalesce < 0 || c.Coalesce > c.Lookahead {
		errs = append(errs, fmt.Sprintf("--coalesce %v: want 0 to the lookahead (%v)", c.Coalesce, c.Lookahead))
	}
	if c.Lookahead < 0 || c.Lookahead > 30*24*time.Hour {
		errs = append(errs, fmt.Sprintf("--lookahead %v: want 0 to 30 days", c.Lookahead))
	}
	if err := c.Sim.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (c *Config) units() trace.Units {
	switch c.Format {
	case "alibaba2018":
		return alibaba2018.Units
	case "google2019":
		return google2019.Units
	}
	return google2011.Units
}

// scale turns a trace amount into millicores and bytes by the format's
// rule: normalised values times the machine size; Alibaba's hundredths of
// a core as they are, its memory a percentage of the machine size.
func (c *Config) scale(r trace.Resources) (cpuMillis, memBytes int64) {
	u := c.units()
	if u.Normalised {
		return int64(math.Round(r.CPU.Value * c.MachineCPU * 1000)), int64(math.Round(r.Memory.Value * float64(c.MachineMemory)))
	}
	return int64(math.Round(r.CPU.Value * u.CPUCores * 1000)), int64(math.Round(r.Memory.Value / 100 * float64(c.MachineMemory)))
}

func (c *Config) request(r trace.Resources) *omegav1.Resources {
	cpu, mem := c.scale(r)
	return &omegav1.Resources{CpuMillis: cpu, MemoryBytes: mem}
}

func (c *Config) capacity(r trace.Resources) *omegav1.Resources {
	cpu, mem := c.scale(r)
	return &omegav1.Resources{CpuMillis: int64(math.Round(float64(cpu) * c.Overcommit)), MemoryBytes: int64(math.Round(float64(mem) * c.Overcommit))}
}

func (c *Config) service(e *trace.Event) bool { return e.Priority >= c.ServicePriority }

// Open opens the configured trace.
func (c *Config) Open() (trace.Source, error) {
	switch c.Format {
	case "google2011":
		return google2011.Open(c.Trace, google2011.Options{Strict: c.Strict})
	case "google2019":
		return google2019.Open(c.Trace, google2019.Options{Strict: c.Strict})
	case "alibaba2018":
		return alibaba2018.Open(c.Trace, alibaba2018.Options{Strict: c.Strict})
	}
	return nil, fmt.Errorf("--format %q: want one of %s", c.Format, strings.Join(Formats, ", "))
}

// Replay is a built replay, ready to run.
type Replay struct {
	Sim   *sim.Sim
	cfg   Config
	src   trace.Source
	actor *actor
	jobs  *csv.Writer // jobs.csv, with Config.JobsCSV
	waits waits       // of the jobs that left the cell, for the comparison
}

// minDays is the shortest horizon a simulation takes; a shorter window
// ends at its last task event all the same.
const minDays = 0.001

// Build opens the trace and assembles the simulation.
func Build(ctx context.Context, cfg Config) (*Replay, error) {
	if cfg.ServicePriority < 0 {
		cfg.ServicePriority = defaultServicePriority[cfg.Format]
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fraction = cfg.Sample
	if cfg.Sim.SaturationAdvice == "" {
		// omega replay has no --load: a trace's jobs beyond its recorded
		// capacity are placed by raising the machines' capacities.
		cfg.Sim.SaturationAdvice = "the trace's work does not fit its machines as recorded: raise --overcommit (2, say)"
	}
	src, err := cfg.Open()
	if err != nil {
		return nil, err
	}
	b := newBook()
	seed := cfg.Sim.Workload.Seed
	a := &actor{cfg: &cfg, book: b, seed: seed,
		live: map[key]*cellTask{}, runs: map[key]int32{}, machines: map[int64]*machine{}, jobs: map[uuid.UUID]*jobInfo{}}
	scfg := cfg.Sim
	// The run ends at the window's last task event, learned as the trace
	// is read; until then the horizon is the window's end or a year.
	scfg.Workload.Days = 365
	if cfg.To > 0 {
		scfg.Workload.Days = max((cfg.To-cfg.From).Hours()/24, minDays)
	}
	r := &Replay{cfg: cfg, src: src}
	if cfg.JobsCSV != nil {
		r.jobs = csv.NewWriter(cfg.JobsCSV)
		r.jobs.Write(jobsHeader)
	}
	s, err := sim.BuildCell(ctx, scfg, sim.Cell{
		Retire: r.retire,
		Actors: func(newClient func(string) (*client.Client, error)) ([]vtime.Actor, error) {
			c, err := newClient("trace")
			if err != nil {
				return nil, err
			}
			a.c = c
			return []vtime.Actor{a}, nil
		},
		NewExecutor: func(tr *agents.Tracker) agents.Executor { return newExecutor(tr, b) },
		// In fidelity mode no scheduler decides: the jobs name none.
		UnroutedJobs: cfg.Fidelity,
	})
	if err != nil {
		src.Close()
		return nil, err
	}
	a.run, a.clock = s, s.Clock()
	a.pre = newPrefetcher(src, &cfg)
	r.Sim, r.actor = s, a
	return r, nil
}

// Close releases the trace and the simulation.
func (r *Replay) Close() error {
	r.actor.pre.finish()
	err := r.src.Close()
	if cerr := r.Sim.Close(); err == nil {
		err = cerr
	}
	return err
}

// Run replays the window.
func (r *Replay) Run(ctx context.Context) error { return r.Sim.Run(ctx) }

// Stats are the replay's counts (the trace's late ends included).
func (r *Replay) Stats() Stats {
	st := r.actor.st
	st.EndsLate, st.EndsLateSeconds = r.actor.book.Late, r.actor.book.Lateness.Seconds()
	return st
}

// TraceStats are the reader's counts: rows read and skipped by cause. The
// reader reads ahead in a goroutine of its own until the trace's end:
// TraceStats stops it, if it has not stopped, and waits for it, so call it
// once the run is over (EventsRead is the count while it runs).
func (r *Replay) TraceStats() *trace.Stats {
	r.actor.pre.finish()
	return r.src.Stats()
}

// EventsRead is the number of the trace's events the replay has taken in
// so far (for progress while it runs).
func (r *Replay) EventsRead() int64 { return r.actor.eventsRead }
