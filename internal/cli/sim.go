package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/schedulers"
)

// simFile is the --config YAML: every flag of `omega sim`, snake_case.
type simFile struct {
	Machines              *int              `json:"machines,omitempty"`
	Days                  *float64          `json:"days,omitempty"`
	Schedulers            map[string]int    `json:"schedulers,omitempty"`
	TJob                  map[string]string `json:"t_job,omitempty"`
	TTask                 map[string]string `json:"t_task,omitempty"`
	Conflict              *string           `json:"conflict,omitempty"`
	Commit                *string           `json:"commit,omitempty"`
	MapReducePolicy       *string           `json:"mapreduce_policy,omitempty"`
	MapReduceShare        *float64          `json:"mapreduce_share,omitempty"`
	MachineFailuresPerDay *float64          `json:"machine_failures_per_day,omitempty"`
	FleetTick             *string           `json:"fleet_tick,omitempty"`
	Seed                  *uint64           `json:"seed,omitempty"`
	Seeds                 *int              `json:"seeds,omitempty"`
	DecisionTime          *string           `json:"decision_time,omitempty"`
	Load                  *float64          `json:"load,omitempty"`
}

type simFlags struct {
	config, schedulers, tJob, tTask, conflict, commit, policy, fleetTick, out, route, decisionTime string
	machines, seeds                                                                                int
	days, failures, mrShare, loadFactor                                                            float64
	seed                                                                                           uint64
	asJSON                                                                                         bool
}

func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run one simulation of competing schedulers in virtual time",
		Long: `Simulates a cell (the Omega paper's lightweight setup, with distributions fitted
to the Google 2011 trace) in virtual time: the real store, client library and
schedulers, and a simulated fleet. Writes summary.json, jobs.csv, schedulers.csv
and utilization.csv into --out; with --seeds N, one directory per seed and
aggregate.json with each figure's median and spread.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, seeds, err := f.build(cmd)
			if err != nil {
				return err
			}
			return runSims(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg, seeds, f.out, f.asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "YAML file with the same settings as the flags (flags given explicitly win)")
	fl.IntVar(&f.machines, "machines", 10000, "machines in the cell")
	fl.Float64Var(&f.days, "days", 7, "simulated days")
	fl.Float64Var(&f.loadFactor, "load", 1, "job arrival rate as a multiple of the fitted trace's (whose cell had 12,500 machines)")
	fl.StringVar(&f.schedulers, "schedulers", "batch=1,service=1", "scheduler instances per kind, e.g. batch=2,service=1,mapreduce=1")
	fl.StringVar(&f.tJob, "t-job", "batch=0.1s,service=0.1s", "per-job decision time per kind (a kind not named: 0.1s)")
	fl.StringVar(&f.tTask, "t-task", "batch=5ms,service=5ms", "per-task decision time per kind (a kind not named: 5ms)")
	fl.StringVar(&f.route, "route", "", "send a workload kind's jobs to another scheduler kind, e.g. batch=leastloaded (a custom scheduler)")
	fl.StringVar(&f.conflict, "conflict", "fine", "conflict detection: fine or coarse")
	fl.StringVar(&f.commit, "commit", "incremental", "commit mode: incremental or all-or-nothing")
	fl.StringVar(&f.policy, "mapreduce-policy", "max-parallelism", "max-parallelism, global-cap or relative-size")
	fl.Float64Var(&f.mrShare, "mapreduce-share", -1, "share of batch jobs that are MapReduce (default 0.2 when a mapreduce scheduler runs, else 0)")
	fl.Float64Var(&f.failures, "machine-failures-per-day", 0, "machine failures per simulated day")
	fl.StringVar(&f.fleetTick, "fleet-tick", "1s", "interval of the fleet's batched status transactions")
	fl.StringVar(&f.decisionTime, "decision-time", "model", "model (t_job + t_task x tasks, reproducible) or cpu (the scheduler's measured CPU time; results vary between runs)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed")
	fl.IntVar(&f.seeds, "seeds", 1, "run this many seeds (seed, seed+1, ...) and report medians and spread")
	fl.StringVar(&f.out, "out", "", "directory for the results (required unless --json)")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary (or the aggregate) as JSON on stdout")
	return cmd
}

// build turns the flags (and the config file) into a simulation config.
func (f *simFlags) build(cmd *cobra.Command) (sim.Config, int, error) {
	if f.config != "" {
		if err := f.load(cmd); err != nil {
			return sim.Config{}, 0, err
		}
	}
	cfg := sim.DefaultConfig()
	cfg.Workload.Machines = f.machines
	cfg.Workload.Days = f.days
	cfg.Workload.Seed = f.seed
	counts, err := sim.ParseSchedulers(f.schedulers)
	if err != nil {
		return cfg, 0, err
	}
	tj, err := sim.ParseDurations("--t-job", f.tJob)
	if err != nil {
		return cfg, 0, err
	}
	tt, err := sim.ParseDurations("--t-task", f.tTask)
	if err != nil {
		return cfg, 0, err
	}
	cfg.Schedulers = nil
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		if counts[k] == 0 {
			continue
		}
		spec := sim.SchedulerSpec{Kind: k, Count: counts[k], TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond}
		if d, ok := tj[k]; ok {
			spec.TJob = d
		}
		if d, ok := tt[k]; ok {
			spec.TTask = d
		}
		cfg.Schedulers = append(cfg.Schedulers, spec)
	}
	for _, m := range []struct {
		flag string
		d    map[string]time.Duration
	}{{"t-job", tj}, {"t-task", tt}} {
		for k := range m.d {
			if _, ok := counts[k]; !ok && cmd.Flags().Changed(m.flag) {
				return cfg, 0, fmt.Errorf("--%s names %q, which --schedulers does not run", m.flag, k)
			}
		}
	}
	if f.route != "" {
		cfg.Route = map[string]string{}
		for _, part := range strings.Split(f.route, ",") {
			from, to, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || from == "" || to == "" {
				return cfg, 0, fmt.Errorf("--route %q: want kind=scheduler[,kind=scheduler]", f.route)
			}
			cfg.Route[from] = to
		}
	}
	if cfg.Conflict, err = parseConflict(f.conflict); err != nil {
		return cfg, 0, err
	}
	if cfg.Commit, err = parseCommit(f.commit); err != nil {
		return cfg, 0, err
	}
	if cfg.MapReducePolicy, err = schedulers.ParseMapReducePolicy(f.policy); err != nil {
		return cfg, 0, fmt.Errorf("--mapreduce-policy: %w", err)
	}
	switch {
	case f.mrShare >= 0:
		cfg.Workload.MapReduceShare = f.mrShare
	case counts["mapreduce"] == 0:
		cfg.Workload.MapReduceShare = 0
	}
	cfg.FailuresPerDay = f.failures
	if f.loadFactor <= 0 {
		return cfg, 0, fmt.Errorf("--load %v: must be positive", f.loadFactor)
	}
	cfg.Workload.BatchInterarrival = time.Duration(float64(cfg.Workload.BatchInterarrival) / f.loadFactor)
	cfg.Workload.ServiceInterarrival = time.Duration(float64(cfg.Workload.ServiceInterarrival) / f.loadFactor)
	switch f.decisionTime {
	case "model":
	case "cpu":
		cfg.CPUTime = true
	default:
		return cfg, 0, fmt.Errorf("--decision-time %q: want model or cpu", f.decisionTime)
	}
	if cfg.FleetTick, err = time.ParseDuration(f.fleetTick); err != nil || cfg.FleetTick <= 0 {
		return cfg, 0, fmt.Errorf("--fleet-tick %q: not a positive duration", f.fleetTick)
	}
	if f.seeds < 1 {
		return cfg, 0, fmt.Errorf("--seeds %d: need at least 1", f.seeds)
	}
	if f.out == "" && !f.asJSON {
		return cfg, 0, fmt.Errorf("--out: required (or --json)")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, 0, err
	}
	return cfg, f.seeds, nil
}

// load reads --config; a setting it holds applies unless the flag was
// given explicitly.
func (f *simFlags) load(cmd *cobra.Command) error {
	b, err := os.ReadFile(f.config)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var y simFile
	if err := yaml.UnmarshalStrict(b, &y); err != nil {
		return fmt.Errorf("--config %s: %w", f.config, err)
	}
	set := func(name string) bool { return !cmd.Flags().Changed(name) }
	joinMap := func(m map[string]string) string {
		var parts []string
		for k, v := range m {
			parts = append(parts, k+"="+v)
		}
		slices.Sort(parts)
		return strings.Join(parts, ",")
	}
	if y.Machines != nil && set("machines") {
		f.machines = *y.Machines
	}
	if y.Days != nil && set("days") {
		f.days = *y.Days
	}
	if y.Schedulers != nil && set("schedulers") {
		var parts []string
		for k, v := range y.Schedulers {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
		slices.Sort(parts)
		f.schedulers = strings.Join(parts, ",")
	}
	if y.TJob != nil && set("t-job") {
		f.tJob = joinMap(y.TJob)
	}
	if y.TTask != nil && set("t-task") {
		f.tTask = joinMap(y.TTask)
	}
	for _, s := range []struct {
		v    *string
		dst  *string
		flag string
	}{{y.Conflict, &f.conflict, "conflict"}, {y.Commit, &f.commit, "commit"}, {y.MapReducePolicy, &f.policy, "mapreduce-policy"}, {y.FleetTick, &f.fleetTick, "fleet-tick"}} {
		if s.v != nil && set(s.flag) {
			*s.dst = *s.v
		}
	}
	if y.MapReduceShare != nil && set("mapreduce-share") {
		f.mrShare = *y.MapReduceShare
	}
	if y.MachineFailuresPerDay != nil && set("machine-failures-per-day") {
		f.failures = *y.MachineFailuresPerDay
	}
	if y.Seed != nil && set("seed") {
		f.seed = *y.Seed
	}
	if y.Seeds != nil && set("seeds") {
		f.seeds = *y.Seeds
	}
	if y.DecisionTime != nil && set("decision-time") {
		f.decisionTime = *y.DecisionTime
	}
	if y.Load != nil && set("load") {
		f.loadFactor = *y.Load
	}
	return nil
}

// runSims runs the seeds and writes the results.
func runSims(ctx context.Context, stdout, stderr io.Writer, cfg sim.Config, seeds int, out string, asJSON bool) error {
	var sums []sim.Summary
	for k := range seeds {
		c := cfg
		c.Workload.Seed = cfg.Workload.Seed + uint64(k)
		dir := out
		if seeds > 1 && out != "" {
			dir = filepath.Join(out, fmt.Sprintf("seed-%d", c.Workload.Seed))
		}
		sum, err := runOne(ctx, stderr, c, dir)
		if err != nil {
			return fmt.Errorf("seed %d: %w", c.Workload.Seed, err)
		}
		sums = append(sums, sum)
	}
	if seeds == 1 {
		if asJSON {
			return sums[0].WriteJSON(stdout)
		}
		printSummary(stdout, sums[0])
		return nil
	}
	agg := sim.Aggregate(sums)
	if out != "" {
		b, _ := json.MarshalIndent(agg, "", "  ")
		if err := os.WriteFile(filepath.Join(out, "aggregate.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(agg)
	}
	for _, s := range sums {
		printSummary(stdout, s)
	}
	return nil
}

func runOne(ctx context.Context, stderr io.Writer, cfg sim.Config, dir string) (sim.Summary, error) {
	hours := int(cfg.Workload.Days*24 + 0.999)
	bar := progressbar.NewOptions(hours, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription(fmt.Sprintf("seed %d: simulated hours", cfg.Workload.Seed)),
		progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
	cfg.Progress = func(time.Duration) { bar.Add(1) }
	start := time.Now()
	s, err := sim.Build(ctx, cfg)
	if err != nil {
		return sim.Summary{}, err
	}
	defer s.Close()
	if err := s.Engine.Run(ctx); err != nil {
		return sim.Summary{}, err
	}
	bar.Finish()
	sum := s.Engine.Summarize(cfg.Workload.Seed, cfg.Workload.Machines)
	wall := time.Since(start).Seconds()
	sum.Host = sim.Host{WallSeconds: wall, EventsPerSec: float64(sum.Events) / wall, WallSecondsPerSimDay: wall / cfg.Workload.Days, PeakRSSMb: peakRSSMb()}
	if dir != "" {
		if err := writeResults(dir, s, sum); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

func writeResults(dir string, s *sim.Sim, sum sim.Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"summary.json":    sum.WriteJSON,
		"jobs.csv":        s.Engine.WriteJobsCSV,
		"schedulers.csv":  sum.WriteSchedulersCSV,
		"utilization.csv": s.Engine.WriteUtilizationCSV,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(w io.Writer, s sim.Summary) {
	fmt.Fprintf(w, "seed %d: %.1f simulated days, %d machines, %d events, mean utilisation %.1f%%\n", s.Seed, s.SimSeconds/86400, s.Machines, s.Events, 100*s.UtilizationMean)
	fmt.Fprintf(w, "jobs: %d submitted, %d scheduled, %d abandoned, %d pending; %d tasks placed\n\n", s.JobsSubmitted, s.JobsScheduled, s.JobsAbandoned, s.JobsPending, s.TasksPlaced)
	printSchedulerTable(w, s)
	fmt.Fprintf(w, "\nhost: %.1f s wall, %.2f s per simulated day, %.0f events/s, peak RSS %.0f MiB\n", s.Host.WallSeconds, s.Host.WallSecondsPerSimDay, s.Host.EventsPerSec, s.Host.PeakRSSMb)
}
