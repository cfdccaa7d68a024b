package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/bench/pool"
	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/internal/finite"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
)

type simFlags struct {
	history                                                                                                                     string
	auditHistory, faultyAgent, force                                                                                            bool
	config, schedulers, tJob, tTask, conflict, commit, policy, fleetTick, out, route, decisionTime, arrivals, arch, storePolicy string
	allocatorTime, offerInterval                                                                                                string
	offers, offerMin, offerRetry, offerShares                                                                                   string
	placement                                                                                                                   string
	machines, seeds, jobs                                                                                                       int
	days, failures, loadFactor, batchLoad, gpuMachines, gpuJobs                                                                 float64
	gpusPerMachine, mapTasksPerWorker                                                                                           int
	mrShare                                                                                                                     optFloat
	seed                                                                                                                        uint64
	asJSON                                                                                                                      bool
	file                                                                                                                        configFile
}

// simCmd is `omega sim`: its flags, and the config they make once checked.
type simCmd struct {
	f     simFlags
	cfg   sim.Config
	seeds int
}

func newSimCmd() *cobra.Command {
	var s simCmd
	return s.command()
}

func (s *simCmd) command() *cobra.Command {
	f := &s.f
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run one simulation of competing schedulers in virtual time",
		Long: `Simulates a cell (the Omega paper's lightweight setup, with distributions fitted
to the Google 2011 trace) in virtual time: the real store, client library and
schedulers, and a simulated fleet. Writes summary.json, jobs.csv, schedulers.csv
and utilization.csv into --out; with --seeds N, one directory per seed and
aggregate.json with each figure's median and spread.

Every setting is checked before anything runs or is written: a bad one is an
error naming its flag (or its field in the --config file), and --out is left
as it was.`,
		Args: cobra.NoArgs,
		// PreRunE checks every setting before anything (a profile, --out)
		// is created.
		PreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			s.cfg, s.seeds, err = f.build(cmd)
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.jobs < 1 || f.jobs > 1024 {
				return fmt.Errorf("--jobs %d: want 1 to 1024 simulations at once", f.jobs)
			}
			if err := refuseResults(f.out, f.force); err != nil {
				return err
			}
			defer useBatchCollector()()
			if f.history != "" {
				h, err := os.Create(f.history)
				if err != nil {
					return fmt.Errorf("--history: %w", err)
				}
				hw := sim.NewHistoryWriter(h)
				s.cfg.History = hw
				err = runSims(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), s.cfg, s.seeds, f.jobs, f.out, f.asJSON)
				if ferr := hw.Flush(); err == nil {
					err = ferr
				}
				if cerr := h.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					os.Remove(f.history) // a partial history would pass for a whole one
				}
				return err
			}
			return runSims(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), s.cfg, s.seeds, f.jobs, f.out, f.asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "YAML file with the same settings as the flags, in snake_case (flags given explicitly win)")
	fl.IntVar(&f.machines, "machines", 10000, fmt.Sprintf("machines in the cell, 1 to %d", maxMachines))
	fl.Float64Var(&f.days, "days", 7, fmt.Sprintf("simulated days, %v (86.4 simulated seconds) to %d", minDays, maxDays))
	fl.Float64Var(&f.loadFactor, "load", 1, fmt.Sprintf("offered load per machine, as a multiple of the fitted trace's cell (1: jobs arrive at the trace's rate scaled to --machines), %v to %v", minLoad, maxLoad))
	fl.Float64Var(&f.batchLoad, "batch-load", 1, fmt.Sprintf("the batch jobs' arrival rate as a multiple of --load's, %v to %v (the Omega paper's Figure 8 scales the batch load alone)", minLoad, maxLoad))
	fl.StringVar(&f.schedulers, "schedulers", "batch=1,service=1", fmt.Sprintf("scheduler instances per kind, each 1 to %d, e.g. batch=2,service=1,mapreduce=1 (a kind left out runs none)", maxPerKind))
	fl.StringVar(&f.tJob, "t-job", "batch=0.1s,service=0.1s", fmt.Sprintf("per-job decision time per kind, 0 to %s (a kind not named: 0.1s)", fmtDuration(maxTJob)))
	fl.StringVar(&f.tTask, "t-task", "batch=5ms,service=5ms", fmt.Sprintf("per-task decision time per kind, 0 to %s (a kind not named: 5ms)", fmtDuration(maxTTask)))
	fl.StringVar(&f.route, "route", "", "send a workload kind's jobs (batch, service, mapreduce) to another scheduler kind that --schedulers runs, e.g. batch=leastloaded (a custom scheduler)")
	fl.StringVar(&f.conflict, "conflict", "fine", "conflict detection: fine or coarse")
	fl.StringVar(&f.commit, "commit", "incremental", "commit mode: incremental or all-or-nothing")
	fl.StringVar(&f.policy, "mapreduce-policy", "max-parallelism", "max-parallelism, global-cap, relative-size or none (the workers requested, no more)")
	fl.Float64Var(&f.gpuMachines, "gpu-machines", 0, "share of the machines, 0 to 1, that carry GPUs (the extended resource \"gpu\"), spread evenly")
	fl.IntVar(&f.mapTasksPerWorker, "map-tasks-per-worker", 16, fmt.Sprintf("a MapReduce job's map tasks per worker it requests, 1 to %d: the most workers it can use, so the most an elastic policy can speed it up; omega's assumption (the trace has no such figure), not a fitted value (docs/WORKLOADS.md)", workload.MaxMapTasksPerWorker))
	fl.IntVar(&f.gpusPerMachine, "gpus-per-machine", 8, fmt.Sprintf("GPUs on each GPU machine, 1 to %d", workload.MaxGPUsPerMachine))
	fl.Float64Var(&f.gpuJobs, "gpu-jobs", 0, "share of the batch jobs, 0 to 1, whose tasks each ask for one GPU (needs --gpu-machines)")
	fl.StringVar(&f.storePolicy, "policy", "raw", "the store's policy: raw (Omega's: the state as the schedulers and agents write it) or mediated (the store validates every operation, as Kubernetes' API server)")
	fl.StringVar(&f.arch, "architecture", sim.DefaultArchitecture, "how scheduling is organised (the Omega paper's section 4): "+architectureHelp())
	fl.StringVar(&f.allocatorTime, "allocator-time", "1ms", fmt.Sprintf("with --architecture two-level: the allocator's time to make an offer, 0 to %s", fmtDuration(sim.MaxAllocatorTime)))
	fl.StringVar(&f.offerInterval, "offer-interval", "1s", fmt.Sprintf("with --architecture two-level: how often the allocator makes an offer while a framework wants resources, above 0 to %s", fmtDuration(sim.MaxOfferInterval)))
	fl.StringVar(&f.offers, "offers", sim.OffersConcurrent, "with --architecture two-level: how a framework takes its offers: concurrent (the paper's simulator's: each decided the moment it arrives, several at once when the framework is slow, so its busyness can pass 1) or serial (one at a time, the next waiting with its resources locked until the answer before it lands: the other framework starves behind a slow one)")
	fl.StringVar(&f.placement, "placement", string(schedulers.PlacementBestFit), "how the built-in schedulers (batch, service, mapreduce, monolithic) pick a task's machine: best-fit (each kind's own: the service scheduler's tightest of 16 feasible machines, spread across failure domains; the batch and mapreduce schedulers' randomized first fit, 64 machines examined per task at most) or random-first-fit (the paper's simulator's, for every kind: random machines until one fits, no spreading, no bound; the experiments that reproduce the paper use it)")
	fl.StringVar(&f.offerShares, "offer-shares", sim.OfferSharesFrameworks, "with --architecture two-level: what counts toward a framework's DRF share: frameworks (the paper's simulator's: the tasks it placed itself) or with-prefill (also the pre-fill's long-running services, for the service framework, as a real cell's would own them)")
	fl.StringVar(&f.offerRetry, "offer-retry", sim.OfferRetryDecision, "with --architecture two-level: when a job an offer did not place whole is tried again: decision (the paper's simulator's: a second after the framework decided it, before its answer lands, so at slow decisions a job is tried on many offers while one answer waits) or answer (a second after its answer lands, one attempt of a job at a time)")
	fl.StringVar(&f.offerMin, "offer-min", sim.OfferMinGoogle, "with --architecture two-level: the allocator's floor: google (the paper's simulator's: an offer only while at least 100 cores are unoffered) or small (while a tenth of a core or 100 MiB is: offers of scraps, which take jobs to the abandonment bounds sooner)")
	fl.StringVar(&f.arrivals, "arrivals", "poisson", "time between a class's arrivals: poisson (exponential gaps with the trace's mean) or empirical (the trace's own gaps, far burstier, as the Omega paper's simulator draws them)")
	fl.Var(&f.mrShare, "mapreduce-share", "share of batch jobs that are MapReduce, 0 to 1 (default 0.2 when a mapreduce scheduler runs, else 0)")
	fl.Float64Var(&f.failures, "machine-failures-per-day", 0, fmt.Sprintf("machine failures per simulated day, 0 to %d per machine (a failed machine is repaired in an hour)", failuresPerMachineDay))
	fl.StringVar(&f.fleetTick, "fleet-tick", "1s", fmt.Sprintf("interval of the fleet's batched status transactions, %s to %s", fmtDuration(minFleetTick), fmtDuration(maxFleetTick)))
	fl.StringVar(&f.decisionTime, "decision-time", "model", "model (t_job + t_task x tasks, reproducible) or cpu (the scheduler's measured CPU time; results vary between runs)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed")
	fl.IntVar(&f.jobs, "jobs", runtime.GOMAXPROCS(0), "with --seeds: how many simulations run at once (default: one per core; each summary's host figures, wall time and peak RSS, are then shared with the runs beside it)")
	fl.IntVar(&f.seeds, "seeds", 1, fmt.Sprintf("run this many seeds (seed, seed+1, ...), 1 to %d, and report medians and spread", maxSeeds))
	fl.StringVar(&f.history, "history", "", "write the run's history to this file: the starting state, then every revision's changes (length-delimited omega.v1.RevisionChanges), for omega audit --history; one seed only")
	fl.BoolVar(&f.auditHistory, "audit-history", false, "audit every revision as it commits (summary.json's violations_history: violations the final state no longer shows, and when each kind was first detectable)")
	fl.BoolVar(&f.faultyAgent, "faulty-agent", false, "add a faulty agent (the \"don't expose raw state\" experiment's fault d): the first machine's agent reports, every simulated minute, a task that never ran and another machine's running task as SUCCEEDED")
	fl.StringVar(&f.out, "out", "", "directory for the results (required unless --json; created only once there are results)")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary (or the aggregate) as JSON on stdout")
	fl.BoolVar(&f.force, "force", false, "write over the results of an earlier run in --out (refused without it)")
	return cmd
}

// build reads --config, if given, then checks every setting and turns them
// into a simulation config. It creates nothing.
func (f *simFlags) build(cmd *cobra.Command) (sim.Config, int, error) {
	f.file = configFile{path: f.config}
	if f.config != "" {
		if err := f.file.load(cmd, "config", "out", "json"); err != nil {
			return sim.Config{}, 0, err
		}
	}
	return f.validate(cmd)
}

// validate is the one place that checks the settings of `omega sim`,
// flags and config fields alike: numbers finite and within the bounds in
// validate.go, counts whole, names known. Every problem is reported, each
// naming its flag or config field.
func (f *simFlags) validate(cmd *cobra.Command) (sim.Config, int, error) {
	var p problems
	name := f.file.name
	cfg := sim.DefaultConfig()

	if p.count(name("machines"), f.machines, 1, maxMachines, "machines in the cell") {
		cfg.Workload.Machines = f.machines
	}
	p.float(name("machine-failures-per-day"), f.failures, 0, failuresPerMachineDay*float64(min(max(f.machines, 1), maxMachines)),
		fmt.Sprintf("machine failures per simulated day (at most %d per machine)", failuresPerMachineDay))
	cfg.FailuresPerDay = f.failures
	if p.days(name("days"), f.days) {
		cfg.Workload.Days = f.days
	}
	if p.float(name("load"), f.loadFactor, minLoad, maxLoad, "the offered load per machine as a multiple of the trace cell's") {
		cfg.Workload.Load = f.loadFactor
	}
	if p.float(name("batch-load"), f.batchLoad, minLoad, maxLoad, "the batch arrival rate as a multiple of --load's") && f.batchLoad != 1 {
		cfg.Workload.BatchInterarrival = time.Duration(math.Round(float64(cfg.Workload.BatchInterarrival) / f.batchLoad))
	}

	counts := parseSchedulers(&p, name("schedulers"), f.schedulers)
	tj := parseDurations(&p, name("t-job"), f.tJob, maxTJob, "a per-job decision time")
	tt := parseDurations(&p, name("t-task"), f.tTask, maxTTask, "a per-task decision time")
	route, share := map[string]string{}, map[string]float64{}
	if es, err := parseEntries(name("route"), f.route, "kind=scheduler[:share][,kind=scheduler[:share]], e.g. batch=leastloaded or batch=faulty-units:0.2"); err != nil {
		p = append(p, err)
	} else {
		for _, e := range es {
			if to, sh, ok := strings.Cut(e.value, ":"); ok {
				v, err := strconv.ParseFloat(sh, 64)
				if err != nil || !(v > 0 && v <= 1) {
					p.add(name("route"), e.kind+"="+e.value, "the share after %q must be a number greater than 0 and at most 1", to+":")
					continue
				}
				if counts != nil && counts[e.kind] == 0 && v < 1 {
					p.add(name("route"), e.kind+"="+e.value, "the rest of the %s jobs need a %s scheduler: %s runs none", e.kind, e.kind, name("schedulers"))
					continue
				}
				e.value = to
				share[e.kind] = v
			}
			switch {
			case !slices.Contains(workloadKinds, e.kind):
				p.add(name("route"), e.kind+"="+e.value, "%q is not a kind of job the workload submits (%s)", e.kind, strings.Join(workloadKinds, ", "))
			case counts != nil && counts[e.value] == 0:
				p.add(name("route"), e.kind+"="+e.value, "%s runs no %s scheduler", name("schedulers"), e.value)
			default:
				route[e.kind] = e.value
			}
		}
	}
	if len(route) > 0 {
		cfg.Route = route
	}
	if len(share) > 0 {
		cfg.RouteShare = share
	}
	if counts != nil {
		cfg.Schedulers = nil
		kinds := slices.Sorted(maps.Keys(counts))
		for _, k := range kinds {
			spec := sim.SchedulerSpec{Kind: k, Count: counts[k], TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond}
			if d, ok := tj[k]; ok {
				spec.TJob = d
			}
			if d, ok := tt[k]; ok {
				spec.TTask = d
			}
			cfg.Schedulers = append(cfg.Schedulers, spec)
		}
		// A decision time for a kind that does not run is a mistake when
		// it is given on the command line (a config file may serve several
		// --schedulers).
		for _, m := range []struct {
			flag string
			d    map[string]time.Duration
		}{{"t-job", tj}, {"t-task", tt}} {
			for _, k := range slices.Sorted(maps.Keys(m.d)) {
				if counts[k] == 0 && f.file.explicit(cmd, m.flag) {
					p.add("--"+m.flag, k+"="+m.d[k].String(), "%s runs no %s scheduler", name("schedulers"), k)
				}
			}
		}
	}

	var err error
	if cfg.Conflict, err = parseConflict(f.conflict); err != nil {
		p.add(name("conflict"), strconv.Quote(f.conflict), "%v", err)
	}
	if cfg.Commit, err = parseCommit(f.commit); err != nil {
		p.add(name("commit"), strconv.Quote(f.commit), "%v", err)
	}
	if cfg.MapReducePolicy, err = schedulers.ParseMapReducePolicy(f.policy); err != nil {
		p.add(name("mapreduce-policy"), strconv.Quote(f.policy), "want max-parallelism, global-cap, relative-size or none")
	}
	if p.float(name("gpu-machines"), f.gpuMachines, 0, 1, "the share of the machines with GPUs") {
		cfg.Workload.GPUMachineShare = f.gpuMachines
	}
	if p.count(name("map-tasks-per-worker"), f.mapTasksPerWorker, 1, workload.MaxMapTasksPerWorker, "map tasks per requested worker") {
		cfg.Workload.MapTasksPerWorker = f.mapTasksPerWorker
	}
	if p.count(name("gpus-per-machine"), f.gpusPerMachine, 1, workload.MaxGPUsPerMachine, "GPUs on a GPU machine") {
		cfg.Workload.GPUsPerMachine = f.gpusPerMachine
	}
	if p.float(name("gpu-jobs"), f.gpuJobs, 0, 1, "the share of the batch jobs that ask for GPUs") {
		cfg.Workload.GPUJobShare = f.gpuJobs
		if f.gpuJobs > 0 && int(float64(min(max(f.machines, 1), maxMachines))*f.gpuMachines) == 0 {
			p.add(name("gpu-jobs"), fmtFloat(f.gpuJobs), "the cell has no GPU machine for them (--gpu-machines)")
		}
	}
	if cfg.Policy, err = store.ParsePolicy(f.storePolicy); err != nil {
		p.add(name("policy"), strconv.Quote(f.storePolicy), "want raw or mediated")
	}
	if cfg.Workload.Arrivals, err = workload.ParseArrivalModel(f.arrivals); err != nil {
		p.add(name("arrivals"), strconv.Quote(f.arrivals), "want poisson or empirical")
	}
	switch f.decisionTime {
	case "model":
	case "cpu":
		cfg.CPUTime = true
	default:
		p.add(name("decision-time"), strconv.Quote(f.decisionTime), "want model or cpu")
	}
	for _, d := range []struct {
		flag, value string
		lo, hi      time.Duration
		what        string
		to          *time.Duration
	}{
		{"allocator-time", f.allocatorTime, 0, sim.MaxAllocatorTime, "the two-level allocator's time to make an offer", &cfg.AllocatorTime},
		{"offer-interval", f.offerInterval, time.Nanosecond, sim.MaxOfferInterval, "the two-level allocator's interval between offers", &cfg.OfferInterval},
	} {
		if v, err := time.ParseDuration(d.value); err != nil {
			p.add(name(d.flag), strconv.Quote(d.value), "want a duration like 1s, from %s to %s", fmtDuration(d.lo), fmtDuration(d.hi))
		} else if p.duration(name(d.flag), strconv.Quote(d.value), v, d.lo, d.hi, d.what) {
			*d.to = v
		}
	}
	if d, err := time.ParseDuration(f.fleetTick); err != nil {
		p.add(name("fleet-tick"), strconv.Quote(f.fleetTick), "want a duration like 1s, from %s to %s", fmtDuration(minFleetTick), fmtDuration(maxFleetTick))
	} else if p.duration(name("fleet-tick"), strconv.Quote(f.fleetTick), d, minFleetTick, maxFleetTick, "the fleet's reporting period") {
		cfg.FleetTick = d
	}

	// The share of MapReduce jobs, and who schedules every kind of job.
	shareOK := true
	switch {
	case f.mrShare.set:
		if shareOK = p.float(name("mapreduce-share"), f.mrShare.v, 0, 1, "the share of batch jobs that are MapReduce"); shareOK {
			cfg.Workload.MapReduceShare = f.mrShare.v
		}
	case counts["mapreduce"] == 0:
		cfg.Workload.MapReduceShare = 0
	}
	if counts != nil && shareOK {
		for _, k := range sim.NeededKinds(cfg.Workload.MapReduceShare) {
			if _, routed := route[k]; routed || counts[k] > 0 {
				continue
			}
			if k == "mapreduce" {
				p.add(name("mapreduce-share"), fmtFloat(cfg.Workload.MapReduceShare), "the workload then submits mapreduce jobs, but %s runs no mapreduce scheduler (add mapreduce=1, --route mapreduce=KIND, or share 0)", name("schedulers"))
				continue
			}
			p.add(name("schedulers"), strconv.Quote(f.schedulers), "the workload submits %s jobs, but no %s scheduler runs (add %s=1, or --route %s=KIND)", k, k, k, k)
		}
	}

	if p.count(name("seeds"), f.seeds, 1, maxSeeds, "runs, one per seed") && f.seed > math.MaxUint64-uint64(f.seeds-1) {
		p.add(name("seed"), strconv.FormatUint(f.seed, 10), "with %d seeds the last would pass 2^64-1", f.seeds)
	}
	cfg.Workload.Seed = f.seed
	cfg.AuditHistory, cfg.FaultyAgent = f.auditHistory, f.faultyAgent
	if f.history != "" && f.seeds > 1 {
		p.add(name("history"), f.history, "one history is one run: use --seeds 1")
	}
	if f.out == "" && !f.asJSON {
		p = append(p, errors.New("--out: required (or --json)"))
	}
	p.dir("--out", f.out)
	if !slices.Contains(sim.OffersModes(), f.offers) {
		p.add(name("offers"), strconv.Quote(f.offers), "want %s", strings.Join(sim.OffersModes(), " or "))
	}
	if !slices.Contains(sim.OfferMins(), f.offerMin) {
		p.add(name("offer-min"), strconv.Quote(f.offerMin), "want %s", strings.Join(sim.OfferMins(), " or "))
	}
	if pl, err := schedulers.ParsePlacement(f.placement); err != nil {
		p.add(name("placement"), strconv.Quote(f.placement), "want %s", strings.Join(schedulers.Placements(), " or "))
	} else {
		cfg.Placement = pl
	}
	if !slices.Contains(sim.OfferRetries(), f.offerRetry) {
		p.add(name("offer-retry"), strconv.Quote(f.offerRetry), "want %s", strings.Join(sim.OfferRetries(), " or "))
	}
	if !slices.Contains(sim.OfferSharesModes(), f.offerShares) {
		p.add(name("offer-shares"), strconv.Quote(f.offerShares), "want %s", strings.Join(sim.OfferSharesModes(), " or "))
	}
	cfg.Offers, cfg.OfferMin, cfg.OfferRetry, cfg.OfferShares = f.offers, f.offerMin, f.offerRetry, f.offerShares
	if _, err := sim.LookupArchitecture(f.arch); err != nil || f.arch == "" {
		p.add(name("architecture"), strconv.Quote(f.arch), "want %s", strings.Join(sim.ArchitectureNames(), ", "))
	} else if len(p) == 0 {
		if cfg, err = cfg.WithArchitecture(f.arch); err != nil {
			p.add(name("architecture"), f.arch, "%v", strings.TrimPrefix(err.Error(), "sim: "))
		}
	}
	if len(p) > 0 {
		return sim.Config{}, 0, p.err()
	}
	// The simulation's own check, which the above should leave nothing to.
	if err := cfg.Validate(); err != nil {
		return sim.Config{}, 0, err
	}
	return cfg, f.seeds, nil
}

// architectureHelp lists the registered architectures with their docs.
func architectureHelp() string {
	var parts []string
	for _, a := range sim.Architectures() {
		parts = append(parts, a.Name+": "+a.Doc)
	}
	return strings.Join(parts, "; ")
}

// optFloat is a float flag that knows whether it was given.
type optFloat struct {
	v   float64
	set bool
}

func (o *optFloat) String() string {
	if !o.set {
		return ""
	}
	return fmtFloat(o.v)
}

func (o *optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return errors.New("not a number")
	}
	o.v, o.set = v, true
	return nil
}

func (o *optFloat) Type() string { return "float" }

// runSims runs the seeds and writes the results: with several, up to
// jobs of them at once (independent simulations, each deterministic on
// its own: their results do not depend on how many run beside them).
func runSims(ctx context.Context, stdout, stderr io.Writer, cfg sim.Config, seeds, jobs int, out string, asJSON bool) error {
	sums := make([]sim.Summary, seeds)
	errs := make([]error, seeds)
	configs := make([]sim.Config, seeds)
	dirs := make([]string, seeds)
	for k := range seeds {
		configs[k] = cfg
		configs[k].Workload.Seed = cfg.Workload.Seed + uint64(k)
		dirs[k] = out
		if seeds > 1 && out != "" {
			dirs[k] = filepath.Join(out, fmt.Sprintf("seed-%d", configs[k].Workload.Seed))
		}
	}
	if seeds == 1 {
		sums[0], errs[0] = runOne(ctx, stderr, configs[0], dirs[0], nil)
	} else {
		// One progress bar for them all: simulated hours over every seed.
		hours := int(cfg.Workload.Days*24+0.999) * seeds
		bar := progressbar.NewOptions(hours, progressbar.OptionSetWriter(progressTo(stderr)),
			progressbar.OptionSetDescription(fmt.Sprintf("%d seeds, %d at a time: simulated hours", seeds, min(jobs, seeds))),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
		var barMu sync.Mutex
		tick := func() { barMu.Lock(); bar.Add(1); barMu.Unlock() }
		// The first failure stops the others; errs holds each seed's, read below.
		pool.Run(ctx, seeds, jobs, func(ctx context.Context, k int) error {
			sums[k], errs[k] = runOne(ctx, stderr, configs[k], dirs[k], tick)
			return errs[k]
		})
		barMu.Lock()
		bar.Finish()
		barMu.Unlock()
	}
	for k, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("seed %d: %w", configs[k].Workload.Seed, err)
		}
	}
	for k, err := range errs {
		if err != nil {
			return fmt.Errorf("seed %d: %w", configs[k].Workload.Seed, err)
		}
	}
	if seeds == 1 {
		if asJSON {
			b, err := finite.JSON(sums[0])
			if err != nil {
				return fmt.Errorf("summary: %w", err)
			}
			_, err = stdout.Write(b)
			return err
		}
		printSummary(stdout, sums[0])
		return nil
	}
	agg := sim.Aggregate(sums)
	if out != "" {
		b, err := finite.JSON(agg)
		if err != nil {
			return fmt.Errorf("aggregate.json: %w", err)
		}
		if err := writeFiles(out, []outFile{{"aggregate.json", bytesFile(b)}}); err != nil {
			return err
		}
	}
	if asJSON {
		b, err := finite.JSON(agg)
		if err != nil {
			return fmt.Errorf("aggregate: %w", err)
		}
		_, err = stdout.Write(b)
		return err
	}
	for _, s := range sums {
		printSummary(stdout, s)
	}
	printAggregate(stdout, agg)
	return nil
}

// printAggregate prints the medians over the seeds, each with its range
// (aggregate.json holds them with their median absolute deviation too).
func printAggregate(w io.Writer, a sim.AggregateSummary) {
	seeds := make([]string, len(a.Seeds))
	for i, s := range a.Seeds {
		seeds[i] = strconv.FormatUint(s, 10)
	}
	sp := func(x sim.Spread, f string) string {
		return fmt.Sprintf(f+" ["+f+", "+f+"]", x.Median, x.Min, x.Max)
	}
	fmt.Fprintf(w, "\nmedians over %d seeds (%s), [min, max]:\n", len(a.Seeds), strings.Join(seeds, ", "))
	fmt.Fprintf(w, "jobs scheduled %s, abandoned %s; mean utilisation %s\n\n", sp(a.JobsScheduled, "%.0f"), sp(a.JobsAbandoned, "%.0f"), sp(a.Utilization, "%.3f"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scheduler\tjobs\tabandoned\ttxns\tconflict fraction\tbusyness\twait mean s\twait p90 s\t")
	for _, n := range slices.Sorted(maps.Keys(a.Schedulers)) {
		m := a.Schedulers[n]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", n, sp(m["jobs_scheduled"], "%.0f"), sp(m["jobs_abandoned"], "%.0f"), sp(m["transactions"], "%.0f"),
			sp(m["conflict_fraction"], "%.3f"), sp(m["busyness_median"], "%.3f"), sp(m["wait_mean_s"], "%.2f"), sp(m["wait_p90_s"], "%.2f"))
	}
	tw.Flush()
}

// runOne runs one simulation; tick, if set, is told of each simulated
// hour (else it draws a progress bar of its own).
func runOne(ctx context.Context, stderr io.Writer, cfg sim.Config, dir string, tick func()) (sim.Summary, error) {
	var bar *progressbar.ProgressBar
	if tick == nil {
		hours := int(cfg.Workload.Days*24 + 0.999)
		bar = progressbar.NewOptions(hours, progressbar.OptionSetWriter(progressTo(stderr)), progressbar.OptionSetDescription(fmt.Sprintf("seed %d: simulated hours", cfg.Workload.Seed)),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
		tick = func() { bar.Add(1) }
	}
	cfg.Progress = func(time.Duration) { tick() }
	start := time.Now()
	s, err := sim.Build(ctx, cfg)
	if err != nil {
		return sim.Summary{}, err
	}
	defer s.Close()
	if err := s.Run(ctx); err != nil {
		return sim.Summary{}, err
	}
	if bar != nil {
		bar.Finish()
	}
	sum := s.Summarize(cfg.Workload.Seed, cfg.Workload.Machines)
	wall := time.Since(start).Seconds()
	sum.Host = sim.Host{WallSeconds: wall, EventsPerSec: ratio(float64(sum.Events), wall), WallSecondsPerSimDay: ratio(wall, cfg.Workload.Days), PeakRSSMb: peakRSSMb()}
	for _, w := range sum.Warnings {
		fmt.Fprintf(stderr, "warning: seed %d: %s\n", cfg.Workload.Seed, w)
	}
	if dir != "" {
		if err := writeResults(dir, s, sum); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// ratio is a/b, or 0 when b is not positive (a rate over no time).
func ratio(a, b float64) float64 {
	if !(b > 0) {
		return 0
	}
	return a / b
}

// writeResults writes a run's four files. summary.json is rendered first:
// if it cannot be (a figure that is not finite), nothing is written.
func writeResults(dir string, s *sim.Sim, sum sim.Summary) error {
	b, err := finite.JSON(sum) // the bytes sum.WriteJSON writes
	if err != nil {
		return fmt.Errorf("summary.json: %w", err)
	}
	return writeFiles(dir, []outFile{
		{"summary.json", bytesFile(b)},
		{"jobs.csv", s.WriteJobsCSV},
		{"schedulers.csv", sum.WriteSchedulersCSV},
		{"utilization.csv", s.WriteUtilizationCSV},
	})
}

// outFile is one result file and how to write it.
type outFile struct {
	name  string
	write func(io.Writer) error
}

func bytesFile(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// writeFiles writes the files into dir, creating it if need be. Each is
// written under a temporary name and renamed once all are written, so a
// failure leaves no file behind, empty or partial.
func writeFiles(dir string, files []outFile) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tmps []string
	defer func() {
		if err != nil {
			for _, t := range tmps {
				os.Remove(t)
			}
		}
	}()
	for _, of := range files {
		f, err := os.CreateTemp(dir, "."+of.name+".*.tmp")
		if err != nil {
			return err
		}
		tmps = append(tmps, f.Name())
		if err := of.write(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", of.name, err)
		}
		if err := f.Chmod(0o644); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", of.name, err)
		}
	}
	for i, of := range files {
		if err := os.Rename(tmps[i], filepath.Join(dir, of.name)); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(w io.Writer, s sim.Summary) {
	fmt.Fprintf(w, "seed %d: %.1f simulated days, %d machines, %d events, mean utilisation %.1f%%\n", s.Seed, s.SimSeconds/86400, s.Machines, s.Events, 100*s.UtilizationMean)
	fmt.Fprintf(w, "jobs: %d submitted, %d scheduled, %d abandoned, %d pending, %d finished (all their tasks ended); %d tasks placed\n\n", s.JobsSubmitted, s.JobsScheduled, s.JobsAbandoned, s.JobsPending, s.JobsFinished, s.TasksPlaced)
	printSchedulerTable(w, s)
	fmt.Fprintf(w, "\nhost: %.1f s wall, %.2f s per simulated day, %.0f events/s, peak RSS %.0f MiB\n", s.Host.WallSeconds, s.Host.WallSecondsPerSimDay, s.Host.EventsPerSec, s.Host.PeakRSSMb)
}
