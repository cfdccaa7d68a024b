package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/bench/experiment"
	"github.com/omega-cell/omega/bench/replay"
	"github.com/omega-cell/omega/internal/finite"
)

// replaySimFlags are omega sim's flags that a replay takes as they are:
// the schedulers and how they decide, conflicts and commits, the store's
// policy and the architecture. The workload's flags (machines, days, load,
// arrivals) do not apply: the trace is the workload.
var replaySimFlags = []string{"schedulers", "t-job", "t-task", "route", "conflict", "commit", "policy", "architecture",
	"allocator-time", "offer-interval", "offers", "offer-min", "offer-retry", "offer-shares", "placement", "fleet-tick", "decision-time", "seed"}

type replayFlags struct {
	format, trace, out, from, to, evictions, coalesce, lookahead, machineMemory string
	sample, machineCPU, overcommit                                              float64
	servicePriority, machines                                                   int
	strict, fidelity, asJSON, force                                             bool
}

// replayCmd is omega replay: its flags and, once they are checked, the
// replay's config.
type replayCmd struct {
	s   simCmd
	f   replayFlags
	cfg replay.Config
}

func newReplayCmd() *cobra.Command {
	var r replayCmd
	return r.command()
}

func (r *replayCmd) command() *cobra.Command {
	s, f := &r.s, &r.f
	simCobra := s.command() // omega sim's flags, to borrow
	cmd := &cobra.Command{
		Use:   "replay --format F --trace PATH --out DIR",
		Short: "Replay a public cluster trace through omega's schedulers in virtual time",
		Long: `Reads a public cluster trace as it was published (google2011: clusterdata-2011-2's
sharded tables; google2019: the 2019 Borg traces as exported JSON lines;
alibaba2018: cluster-trace-v2018's tables) and replays it in virtual time:
the trace's machines join, change and leave at their times; what ran when the
window opens is placed where the trace had it; every later submission is a job
of the cell, placed by the schedulers of the run (omega sim's --schedulers,
decision times, conflict and commit modes, --architecture), each task running
for its runtime in the trace. With --fidelity no scheduler decides: the trace's
own placements are applied through the store, and those it refuses are counted
with their rows.

Writes summary.json (omega sim's, with a "replay" section: the reader's rows
and skipped rows by cause, what the replay did, and the waits compared with
the trace's), jobs.csv (each job's wait beside the trace's own),
schedulers.csv and utilization.csv into --out. docs/REPLAY.md sets out the
semantics.`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return r.build(cmd) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseResults(f.out, f.force); err != nil {
				return err
			}
			defer useBatchCollector()()
			return runReplay(cmd, r.cfg, f.out, f.asJSON)
		},
	}
	fl := cmd.Flags()
	for _, name := range replaySimFlags {
		fl.AddFlag(simCobra.Flags().Lookup(name))
	}
	def := replay.DefaultConfig()
	fl.StringVar(&f.format, "format", "", "the trace's format: "+strings.Join(replay.Formats, ", "))
	fl.StringVar(&f.trace, "trace", "", "the trace's directory (google2011: with task_events/ and the other tables under it; google2019 and alibaba2018: with a file or directory per table)")
	fl.StringVar(&f.from, "from", "0s", "start of the window in trace time (e.g. 2h); the run's time 0")
	fl.StringVar(&f.to, "to", "0s", "end of the window in trace time (0: the trace's end); the run ends at the window's last task event")
	fl.Float64Var(&f.sample, "sample", def.Sample, "keep this share of the trace's machines and of its jobs, chosen by a seeded hash of their ids, above 0 to 1")
	fl.IntVar(&f.machines, "machines", 0, "keep this many of the machines the trace has when the window opens (chosen by a seeded hash of their ids; later machines by the same cut) and the jobs in the same share (0: every machine)")
	fl.Float64Var(&f.machineCPU, "machine-cpu", def.MachineCPU, "cores of a machine of normalised capacity 1.0 (Google's traces normalise to their largest machine)")
	fl.StringVar(&f.machineMemory, "machine-memory", "128Gi", "memory of a machine of normalised capacity 1.0 (Google's), or of 100% (Alibaba's), e.g. 128Gi")
	fl.Float64Var(&f.overcommit, "overcommit", def.Overcommit, "multiply every machine's capacity by this factor, 1 to 100 (the trace's cell placed beyond its recorded capacities; 1 replays them as recorded)")
	fl.IntVar(&f.servicePriority, "service-priority", -1, "jobs of this priority or more go to the service scheduler, the rest to batch (default: the format's, 9 for google2011, 120 for google2019, containers for alibaba2018)")
	fl.StringVar(&f.evictions, "evictions", def.Evictions, "replay (an evicted run ends when the trace evicted it; its resubmission is new work) or ignore (the run goes on to its next end)")
	fl.StringVar(&f.coalesce, "coalesce", def.Coalesce.String(), "a trace job's task submissions within this time of its first are one job of the cell (0: one per distinct time)")
	fl.StringVar(&f.lookahead, "lookahead", def.Lookahead.String(), "how far ahead of the simulated time the trace is read (a run's runtime must be known when the cell places it)")
	fl.BoolVar(&f.fidelity, "fidelity", false, "apply the trace's own placements through the store, with no scheduler deciding; placements refused for fit are counted with their rows")
	fl.BoolVar(&f.force, "force", false, "write over the results of an earlier run in --out (refused without it)")
	fl.BoolVar(&f.strict, "strict", false, "a malformed row is an error naming its file, line and column (default: counted by cause and skipped)")
	fl.StringVar(&f.out, "out", "", "directory for the results")
	fl.BoolVar(&f.asJSON, "json", false, "print summary.json on stdout")
	return cmd
}

// build checks the flags and sets the replay's config.
func (r *replayCmd) build(cmd *cobra.Command) error {
	r.s.f.out = r.f.out // omega sim's checks of --out are the replay's
	r.s.f.asJSON = r.f.asJSON
	sc, _, err := r.s.f.validate(cmd)
	if err != nil {
		return err
	}
	cfg, err := r.f.config(cmd)
	if err != nil {
		return err
	}
	// The simulation's settings are omega sim's; its workload is the
	// trace (Build sets the horizon; the machines count sizes the store's
	// watch history only).
	sc.Workload.MapReduceShare = 0
	cfg.Sim = sc
	r.cfg = cfg
	return cfg.Validate()
}

// replayConfigFromArgs parses `omega replay` arguments exactly as the
// command does and returns the config it would run and its --out.
func replayConfigFromArgs(args []string) (replay.Config, string, error) {
	var r replayCmd
	cmd := r.command()
	if err := cmd.ParseFlags(args); err != nil {
		return replay.Config{}, "", err
	}
	err := r.build(cmd)
	return r.cfg, r.f.out, err
}

// config turns the replay's own flags into a config, every problem named.
func (f *replayFlags) config(cmd *cobra.Command) (replay.Config, error) {
	var p problems
	cfg := replay.DefaultConfig()
	cfg.Format, cfg.Trace, cfg.Strict, cfg.Fidelity, cfg.Evictions = f.format, f.trace, f.strict, f.fidelity, f.evictions
	cfg.Sample, cfg.MachineCPU, cfg.Overcommit, cfg.Machines = f.sample, f.machineCPU, f.overcommit, f.machines
	if f.trace != "" {
		switch fi, err := os.Stat(f.trace); {
		case errors.Is(err, fs.ErrNotExist):
			p.add("--trace", strconv.Quote(f.trace), "no such file or directory")
		case err != nil:
			p.add("--trace", strconv.Quote(f.trace), "%v", err)
		case !fi.IsDir() && f.format == "google2011":
			p.add("--trace", strconv.Quote(f.trace), "not a directory (google2011 reads task_events/ and the other tables under it)")
		}
	}
	if f.servicePriority < -1 || f.servicePriority > math.MaxInt32 {
		p.add("--service-priority", strconv.Itoa(f.servicePriority), "want a priority of 0 or more")
	}
	cfg.ServicePriority = int32(f.servicePriority)
	dur := func(flag, v string, out *time.Duration) {
		d, err := time.ParseDuration(v)
		if err != nil {
			p.add("--"+flag, v, "want a duration such as 90s or 2h")
			return
		}
		*out = d
	}
	dur("from", f.from, &cfg.From)
	dur("to", f.to, &cfg.To)
	dur("coalesce", f.coalesce, &cfg.Coalesce)
	dur("lookahead", f.lookahead, &cfg.Lookahead)
	if mem, err := parseBytes(f.machineMemory); err != nil {
		p.add("--machine-memory", f.machineMemory, "%v", err)
	} else {
		cfg.MachineMemory = mem
	}
	return cfg, p.err()
}

// parseBytes reads a size: a number of bytes, or with a Ki, Mi, Gi or Ti
// suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for i, suf := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if strings.HasSuffix(s, suf) {
			mult, s = int64(1)<<(10*(i+1)), strings.TrimSuffix(s, suf)
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || v*float64(mult) > 1<<50 {
		return 0, fmt.Errorf("want a positive size, e.g. 128Gi")
	}
	return int64(v * float64(mult)), nil
}

// runReplay builds and runs the replay, with a progress bar of trace time
// and events read per second on stderr, and writes its results.
func runReplay(cmd *cobra.Command, cfg replay.Config, out string, asJSON bool) error {
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(progressTo(stderr)), progressbar.OptionSetDescription("replay"),
		progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSpinnerType(14),
		// The spinner turns as the replay reports (its own ticker would race
		// with Describe: progressbar v3.19.1 reads its state unlocked).
		progressbar.OptionSetSpinnerChangeInterval(0))
	sum, b, err := replayRun(cmd.Context(), cfg, out, func(r *replay.Replay, now time.Duration) {
		events := r.EventsRead()
		bar.Describe(fmt.Sprintf("replay: trace time %s, %d events, %.0f events/s", fmtDuration((cfg.From + now).Truncate(time.Second)), events,
			float64(events)/time.Since(start).Seconds()))
		bar.Add(1)
	})
	if err != nil {
		return err
	}
	bar.Finish()
	for _, w := range sum.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if asJSON {
		_, err := cmd.OutOrStdout().Write(b)
		return err
	}
	printReplaySummary(cmd.OutOrStdout(), sum)
	return nil
}

// replayRun runs the replay of cfg, calling progress about once per
// simulated minute, and writes its results into out (nothing when out is
// ""): jobs.csv (streamed under a temporary name as the jobs leave the
// cell), summary.json, schedulers.csv, utilization.png and, last,
// utilization.csv (a run is finished when it is there: omega bench's
// resume). It returns the summary and its JSON.
func replayRun(ctx context.Context, cfg replay.Config, out string, progress func(r *replay.Replay, now time.Duration)) (replay.Summary, []byte, error) {
	start := time.Now()
	var r *replay.Replay
	if progress != nil {
		cfg.Sim.ProgressEvery = time.Minute
		cfg.Sim.Progress = func(now time.Duration) {
			if r != nil {
				progress(r, now)
			}
		}
	}
	var jobsTmp *os.File
	var jobsBuf *bufio.Writer
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return replay.Summary{}, nil, err
		}
		// A stale utilization.csv must not mark an unfinished run done.
		os.Remove(filepath.Join(out, "utilization.csv"))
		f, err := os.CreateTemp(out, ".jobs.csv.*.tmp")
		if err != nil {
			return replay.Summary{}, nil, err
		}
		jobsTmp, jobsBuf = f, bufio.NewWriterSize(f, 1<<16)
		defer func() {
			if jobsTmp != nil {
				jobsTmp.Close()
				os.Remove(jobsTmp.Name())
			}
		}()
		cfg.JobsCSV = jobsBuf
	}
	var err error
	r, err = replay.Build(ctx, cfg)
	if err != nil {
		return replay.Summary{}, nil, err
	}
	defer r.Close()
	if err := r.Run(ctx); err != nil {
		return replay.Summary{}, nil, err
	}
	sum := r.Summarize()
	wall := time.Since(start).Seconds()
	sum.Host.WallSeconds, sum.Host.EventsPerSec, sum.Host.PeakRSSMb = wall, ratio(float64(sum.Replay.Reader.Events), wall), peakRSSMb()
	sum.Host.WallSecondsPerSimDay = ratio(wall, sum.SimSeconds/86400)
	b, err := finite.JSON(sum)
	if err != nil {
		return sum, nil, fmt.Errorf("summary.json: %w", err)
	}
	if out == "" {
		return sum, b, nil
	}
	if err := r.FinishJobsCSV(); err != nil {
		return sum, nil, fmt.Errorf("jobs.csv: %w", err)
	}
	if err := errors.Join(jobsBuf.Flush(), jobsTmp.Chmod(0o644), jobsTmp.Close()); err != nil {
		return sum, nil, fmt.Errorf("jobs.csv: %w", err)
	}
	if err := os.Rename(jobsTmp.Name(), filepath.Join(out, "jobs.csv")); err != nil {
		return sum, nil, err
	}
	jobsTmp = nil
	if err := writeFiles(out, []outFile{
		{"summary.json", bytesFile(b)},
		{"schedulers.csv", sum.WriteSchedulersCSV},
		{"utilization.png", r.WriteUtilizationPNG},
		{"utilization.csv", r.WriteUtilizationCSV},
	}); err != nil {
		return sum, nil, err
	}
	return sum, b, nil
}

// replayRunFunc runs one replay of a sweep as `omega replay ARGS --out
// DIR` runs it, ticking once per simulated hour.
func replayRunFunc() experiment.RunFunc {
	return func(ctx context.Context, args []string, dir string, tick func()) error {
		cfg, _, err := replayConfigFromArgs(append(slices.Clone(args), "--out="+dir))
		if err != nil {
			return err
		}
		hours := 0
		_, _, err = replayRun(ctx, cfg, dir, func(_ *replay.Replay, now time.Duration) {
			for ; time.Duration(hours+1)*time.Hour <= now; hours++ {
				tick()
			}
		})
		return err
	}
}

func printReplaySummary(w io.Writer, s replay.Summary) {
	x := s.Replay
	fmt.Fprintf(w, "%s %s: %d events read (%d rows skipped), %.0f simulated s, %d machines\n", x.Format, x.Trace, x.Reader.Events, sumValues(x.Reader.Skipped), s.SimSeconds, s.Machines)
	fmt.Fprintf(w, "replay: %d jobs (%d tasks) submitted, %d tasks running at the opening placed, %d trace placements applied, %d refused\n",
		x.Stats.JobsSubmitted, x.Stats.TasksSubmitted, x.Stats.TasksPrefilled, x.Stats.TracePlacements, x.Stats.PlacementsRefused)
	fmt.Fprintf(w, "jobs: %d scheduled, %d abandoned, %d pending; mean utilisation %.1f%%\n", s.JobsScheduled, s.JobsAbandoned, s.JobsPending, 100*s.UtilizationMean)
	c := x.Comparison
	fmt.Fprintf(w, "wait to every task placed, %d jobs the trace placed whole: ours p50 %.1f s p90 %.1f s (%d not placed); the trace's p50 %.1f s p90 %.1f s\n",
		c.Jobs, c.OursP50S, c.OursP90S, c.OursUnplaced, c.TraceP50S, c.TraceP90S)
	fmt.Fprintf(w, "mean utilisation, CPU: ours %.1f%%, the trace's %.1f%%; memory: ours %.1f%%, the trace's %.1f%% (utilization.csv, utilization.png)\n\n",
		100*c.OursCPUMean, 100*c.TraceCPUMean, 100*c.OursMemoryMean, 100*c.TraceMemoryMean)
	printSchedulerTable(w, s.Summary)
	fmt.Fprintf(w, "\nhost: %.1f s wall, %.0f events/s, peak RSS %.0f MiB\n", s.Host.WallSeconds, s.Host.EventsPerSec, s.Host.PeakRSSMb)
}

func sumValues(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
