package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/bench/experiment"
	"github.com/omega-cell/omega/bench/replay"
	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/internal/finite"
)

// overridable are the `omega sim` flags `omega bench NAME` passes to every
// simulation of the sweep (an experiment that sweeps one refuses it).
var overridable = []struct{ name, usage string }{
	{"machines", "machines in the cell (default: the experiment's, 10,000; 1,000 with --quick)"},
	{"days", "simulated days (default: the experiment's, 7; 0.25 with --quick)"},
	{"load", "offered load per machine, as omega sim's --load"},
	{"arrivals", "poisson or empirical (default: empirical, the paper's)"},
	{"machine-failures-per-day", "machine failures per simulated day, as omega sim's"},
	{"fleet-tick", "the fleet's reporting period, as omega sim's"},
	{"decision-time", "model or cpu, as omega sim's"},
	{"conflict", "fine or coarse, as omega sim's (conflict-modes sweeps it)"},
	{"commit", "incremental or all-or-nothing, as omega sim's (conflict-modes sweeps it)"},
	{"t-task", "per-task decision times, as omega sim's (service-times sweeps it)"},
}

// replayOverridable are the `omega replay` flags `omega bench replay`
// passes to every replay of the sweep: the trace (required) and its
// window, and how the replay maps it.
var replayOverridable = []struct{ name, usage string }{
	{"format", "the trace's format (required): " + strings.Join(replay.Formats, ", ")},
	{"trace", "the trace's directory (required), as omega replay's"},
	{"from", "start of the window in trace time, as omega replay's"},
	{"to", "end of the window in trace time, as omega replay's (default: the trace's end; 30m with --quick)"},
	{"machines", "keep this many of the trace's machines, as omega replay's (default: all; 1,000 with --quick)"},
	{"sample", "keep this share of the trace's machines and jobs, as omega replay's"},
	{"overcommit", "multiply every machine's capacity by this factor, as omega replay's"},
	{"machine-cpu", "cores of a machine of normalised capacity 1.0, as omega replay's"},
	{"machine-memory", "memory of a machine of normalised capacity 1.0, as omega replay's"},
	{"service-priority", "jobs of this priority or more go to the service scheduler, as omega replay's"},
	{"evictions", "replay or ignore, as omega replay's"},
	{"coalesce", "as omega replay's"},
	{"lookahead", "as omega replay's"},
	{"fleet-tick", "the fleet's reporting period, as omega sim's"},
	{"decision-time", "model or cpu, as omega sim's"},
	{"conflict", "fine or coarse, as omega sim's"},
	{"commit", "incremental or all-or-nothing, as omega sim's"},
	{"t-task", "per-task decision times, as omega sim's"},
}

type benchExpFlags struct {
	overridable  []struct{ name, usage string }
	quick        bool
	seeds        int
	seed         uint64
	parallel     int
	out, collect string
	plan, cost   bool
	binary       string
	// The plan's form and its batch system's settings (--plan-format,
	// --plan-time for slurm, --plan-image and --plan-claim for k8s).
	planFormat, planTime, planImage, planClaim string
	overrideValues                             map[string]*string
}

func newBenchExperimentCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, name := range experiment.Names() {
		cmds = append(cmds, newBenchExperimentCmd(name))
	}
	return cmds
}

func newBenchExperimentCmd(name string) *cobra.Command {
	f := &benchExpFlags{overrideValues: map[string]*string{}}
	short := "every experiment, each into --out/NAME, and an index report"
	var e *experiment.Experiment
	if name != "all" {
		e, _ = experiment.Lookup(name)
		short = e.Title
		if e.Figures != "" {
			short += " (the Omega paper's " + e.Figures + ")"
		}
	}
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Long: short + `

Runs the experiment's grid of simulations (every cell at every seed), --parallel
at a time, with one progress bar for the sweep, into --out: runs/CELL/seed-N
(each run's omega sim outputs), results.csv (a row per run: every parameter and
metric), host.csv (wall time and memory per run, which vary between runs),
PNG figures, summary.json and report.md (each result beside the published one).
A run already finished in --out is kept, so an interrupted sweep resumes.

--plan prints each run as an independent omega sim command line; run them
anywhere, then --collect DIR assembles the same results.csv, figures and report
from their outputs. ` + planFormatsHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, name)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.quick, "quick", false, "a small cell and a short horizon (the figures' shape in seconds, not the paper's values)")
	fl.IntVar(&f.seeds, "seeds", 1, fmt.Sprintf("seeds per cell, 1 to %d: results vary widely between seeds; the report gives medians and ranges", maxSeeds))
	fl.Uint64Var(&f.seed, "seed", 1, "the first seed")
	fl.IntVar(&f.parallel, "parallel", runtime.GOMAXPROCS(0), "simulations at once (default: one per core)")
	fl.StringVar(&f.out, "out", "", "directory for the sweep (required; with --collect, default the collected directory)")
	fl.StringVar(&f.collect, "collect", "", "assemble the results of a plan's runs from this directory instead of running them")
	fl.BoolVar(&f.plan, "plan", false, "print every run as an omega sim command line (writing under --out), in --plan-format's form, and run nothing")
	fl.BoolVar(&f.cost, "store-cost", true, "raw-vs-mediated: also measure the policies on the commit path (omega bench store under each, interleaved) into store-cost.json")
	fl.StringVar(&f.binary, "plan-binary", "omega", "with --plan: the omega binary the command lines name")
	fl.StringVar(&f.planFormat, "plan-format", string(experiment.PlanLines), "with --plan: the plan's form: "+planFormatNames+" (see above)")
	fl.StringVar(&f.planTime, "plan-time", experiment.DefaultPlanTime, "with --plan-format slurm: each run's time limit, as sbatch --time (2 hours: four times the longest run measured or projected on 2 cores, docs/BENCHMARKS.md)")
	fl.StringVar(&f.planImage, "plan-image", experiment.DefaultPlanImage, "with --plan-format k8s: the container's image, with the --plan-binary on its PATH and a POSIX shell")
	fl.StringVar(&f.planClaim, "plan-claim", experiment.DefaultPlanClaim, "with --plan-format k8s: the PersistentVolumeClaim mounted at --out (ReadWriteMany when the runs land on several nodes)")
	f.overridable = overridable
	if e != nil && e.NeedsTrace() {
		f.overridable = replayOverridable
		cmd.Use = name + " --format F --trace PATH --out DIR"
		cmd.Long = short + `

Replays one window of a public cluster trace (omega replay) under each cell of
the experiment's grid, every cell on the same window, --parallel at a time, into
--out: runs/CELL/seed-N (each run's omega replay outputs), results.csv (a row
per run: every parameter and metric, the trace's own waits and allocation
beside the replay's), host.csv, PNG figures, summary.json and report.md (the
production cluster's outcome and the Omega paper's claims beside the measured
values). A run already finished in --out is kept, so an interrupted sweep
resumes. --plan prints the runs as omega replay command lines; --collect
assembles their outputs. omega bench all leaves this experiment out: it needs
a trace. ` + planFormatsHelp
	}
	for _, o := range f.overridable {
		f.overrideValues[o.name] = fl.String(o.name, "", o.usage)
	}
	return cmd
}

// planFormatNames lists the plan's formats for help and errors.
var planFormatNames = func() string {
	var n []string
	for _, f := range experiment.PlanFormats {
		n = append(n, string(f))
	}
	return strings.Join(n, ", ")
}()

const planFormatsHelp = `--plan-format says the plan's form:
  lines     a shell command line a run (the default)
  parallel  a GNU parallel job file, a run a line, each run through the shell:
            parallel -j N --joblog plan.log < plan.txt
            (--joblog records each run's exit; --resume-failed reruns the failed)
  slurm     a bash script of a Slurm job array, a run an array task
            (--plan-time its limit, --parallel its throttle, logs in
            OUT/slurm/, which Slurm does not create):
            mkdir -p OUT/slurm && sbatch plan.sh
  k8s       a Kubernetes ConfigMap of the runs and an Indexed Job, a run a
            completion (--plan-image, --plan-claim mounted at --out, an
            absolute path; --parallel its parallelism, default every run):
            kubectl apply -f plan.yaml
Each run writes its own directory under --out; when they are done, the same
command with --collect OUT (instead of --plan) gathers them.`

// planOptions checks the plan's flags, adding what is wrong to p, and
// returns the plan's options. A plan flag without --plan, or one of another
// format's, is refused: it would do nothing.
func (f *benchExpFlags) planOptions(cmd *cobra.Command, name string, p *problems) experiment.PlanOptions {
	changed := cmd.Flags().Changed
	format, err := experiment.ParsePlanFormat(f.planFormat)
	if err != nil {
		p.add("--plan-format", quoteClip(f.planFormat), "%v", err)
	} else if changed("plan-format") && !f.plan {
		p.add("--plan-format", quoteClip(f.planFormat), "only with --plan: it is the form the plan prints the runs in")
	}
	for _, fl := range []struct {
		name, value string
		format      experiment.PlanFormat
	}{{"plan-time", f.planTime, experiment.PlanSlurm}, {"plan-image", f.planImage, experiment.PlanK8s}, {"plan-claim", f.planClaim, experiment.PlanK8s}} {
		if changed(fl.name) && (!f.plan || format != fl.format) {
			p.add("--"+fl.name, quoteClip(fl.value), "only with --plan --plan-format %s", fl.format)
		}
	}
	o := experiment.PlanOptions{Format: format, Experiment: name, Out: f.out, Time: f.planTime, Image: f.planImage, Claim: f.planClaim}
	if changed("parallel") {
		o.Parallel = f.parallel
	}
	if !f.plan {
		return o
	}
	check := func(flag, value string, err error) {
		if err != nil {
			p.add(flag, quoteClip(value), "%v", err)
		}
	}
	switch format {
	case experiment.PlanSlurm:
		check("--plan-time", f.planTime, experiment.CheckSlurmTime(f.planTime))
		check("--out", f.out, experiment.CheckSlurmOut(f.out))
	case experiment.PlanK8s:
		check("--out", f.out, experiment.CheckK8sOut(f.out))
		check("--plan-image", f.planImage, experiment.CheckImage(f.planImage))
		check("--plan-claim", f.planClaim, experiment.CheckK8sName(f.planClaim))
	}
	return o
}

// quoteClip is s quoted for an error message, at most its first 64 bytes
// (cut at a character's start, "..." after).
func quoteClip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

// overrides are the sim flags the user set, in a fixed order.
func (f *benchExpFlags) overrides(cmd *cobra.Command) []experiment.Param {
	var out []experiment.Param
	for _, o := range f.overridable {
		if cmd.Flags().Changed(o.name) {
			v := *f.overrideValues[o.name]
			if o.name == "trace" {
				// The runs' command lines name the trace wherever they run
				// from (a plan's, a resumed sweep's).
				if abs, err := filepath.Abs(v); err == nil {
					v = abs
				}
			}
			out = append(out, experiment.Param{Name: o.name, Value: v})
		}
	}
	return out
}

func (f *benchExpFlags) run(cmd *cobra.Command, name string) error {
	var p problems
	p.count("--seeds", f.seeds, 1, maxSeeds, "seeds per cell")
	p.count("--parallel", f.parallel, 1, 1024, "simulations at once")
	if f.out == "" {
		f.out = f.collect
	}
	if f.out == "" {
		p.add("--out", `""`, "required: the directory of the sweep")
	}
	if f.plan && f.collect != "" {
		p.add("--plan", "true", "--plan prints the runs and --collect gathers them: give one")
	}
	plan := f.planOptions(cmd, name, &p)
	exps := experiment.Synthetic()
	if name != "all" {
		e, _ := experiment.Lookup(name)
		exps = []*experiment.Experiment{e}
		if e.NeedsTrace() {
			for _, flag := range []string{"format", "trace"} {
				if !cmd.Flags().Changed(flag) {
					p.add("--"+flag, `""`, "required: omega bench %s replays a trace (omega replay's --format and --trace)", name)
				}
			}
		}
	}
	size := experiment.Size{Quick: f.quick}
	var sweeps []*experiment.Sweep
	for _, e := range exps {
		ov := f.overrides(cmd)
		if name == "all" {
			// An override an experiment sweeps is left to it.
			ov = slices.DeleteFunc(ov, func(o experiment.Param) bool { _, err := e.Cells(size, []experiment.Param{o}); return err != nil })
		}
		s, err := experiment.NewSweep(e, size, ov, f.seed, f.seeds)
		if err != nil {
			p = append(p, err)
			continue
		}
		sweeps = append(sweeps, s)
	}
	if len(p) > 0 {
		return p.err()
	}
	// Every run's settings are checked before anything runs: a bad
	// override is one error, not a failure an hour into the sweep.
	for _, s := range sweeps {
		for _, c := range s.Cells {
			check := func(args []string) error { _, err := simConfigFromArgs(args); return err }
			if s.Experiment.NeedsTrace() {
				check = func(args []string) error { _, _, err := replayConfigFromArgs(args); return err }
			}
			if err := check(append(runArgs(c), "--out=check")); err != nil {
				return fmt.Errorf("%s, cell %s: %w", s.Experiment.Name, c.ID, err)
			}
		}
	}
	dirOf := func(s *experiment.Sweep, root string) string {
		if name == "all" {
			return filepath.Join(root, s.Experiment.Name)
		}
		return root
	}
	if f.plan {
		var runs [][]string
		for _, s := range sweeps {
			runs = append(runs, s.Commands(f.binary, dirOf(s, f.out))...)
		}
		if err := experiment.WritePlan(cmd.OutOrStdout(), runs, plan); err != nil {
			return fmt.Errorf("--plan-format %s: %w", plan.Format, err)
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	defer useBatchCollector()()
	stderr := cmd.ErrOrStderr()
	var index []indexEntry
	for _, s := range sweeps {
		out := dirOf(s, f.out)
		if f.collect == "" {
			fmt.Fprintf(stderr, "omega bench %s: %d runs (%d cells x %d seeds), %d at a time, into %s\n", s.Experiment.Name, len(s.Runs), len(s.Cells), len(s.Seeds), f.parallel, out)
			run := simRunFunc(stderr)
			if s.Experiment.NeedsTrace() {
				run = replayRunFunc()
			}
			if err := s.Execute(ctx, out, f.parallel, run, sweepBar(stderr, s.Experiment.Name)); err != nil {
				return fmt.Errorf("bench %s: %w (the finished runs stay in %s: run again to resume)", s.Experiment.Name, err, out)
			}
		}
		res, err := experiment.Load(s, dirOf(s, cmp.Or(f.collect, f.out)))
		if err != nil {
			return fmt.Errorf("bench %s: %w", s.Experiment.Name, err)
		}
		if s.Experiment.Name == "raw-vs-mediated" && f.collect == "" && f.cost {
			if err := measureStoreCost(ctx, stderr, out, f.quick); err != nil {
				return fmt.Errorf("bench %s: the policies' cost on the commit path: %w", s.Experiment.Name, err)
			}
		}
		if err := res.Write(out); err != nil {
			return fmt.Errorf("bench %s: %w", s.Experiment.Name, err)
		}
		index = append(index, indexEntry{s.Experiment, res})
		fmt.Fprintf(stderr, "omega bench %s: %s\n", s.Experiment.Name, filepath.Join(out, "report.md"))
	}
	if name == "all" {
		return writeIndex(f.out, index)
	}
	return nil
}

func runArgs(c experiment.Cell) []string {
	r := experiment.Run{Cell: &c, Seed: 1}
	return r.Args()
}

// simConfigFromArgs parses `omega sim` arguments exactly as the command
// does and returns the config it would run.
func simConfigFromArgs(args []string) (sim.Config, error) {
	var s simCmd
	cmd := s.command()
	if err := cmd.ParseFlags(args); err != nil {
		return sim.Config{}, err
	}
	cfg, seeds, err := s.f.build(cmd)
	if err == nil && seeds != 1 {
		err = fmt.Errorf("one seed per run, not %d", seeds)
	}
	return cfg, err
}

// simRunFunc runs one simulation of a sweep as `omega sim ARGS --out DIR`
// runs it.
func simRunFunc(stderr io.Writer) experiment.RunFunc {
	return func(ctx context.Context, args []string, dir string, tick func()) error {
		cfg, err := simConfigFromArgs(append(slices.Clone(args), "--out="+dir))
		if err != nil {
			return err
		}
		_, err = runOne(ctx, io.Discard, cfg, dir, tick)
		return err
	}
}

// sweepBar is one progress bar for a sweep's simulated hours.
func sweepBar(stderr io.Writer, name string) func(int) func() {
	return func(hours int) func() {
		bar := progressbar.NewOptions(hours, progressbar.OptionSetWriter(progressTo(stderr)),
			progressbar.OptionSetDescription(name+": simulated hours"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetSpinnerChangeInterval(0)) // hours -1 (unknown): a spinner, turned by the ticks, not a racing ticker of its own
		var mu sync.Mutex
		return func() { mu.Lock(); bar.Add(1); mu.Unlock() }
	}
}

func measureStoreCost(ctx context.Context, stderr io.Writer, out string, quick bool) error {
	cost, err := experiment.MeasureStoreCost(ctx, stderr, quick)
	if err != nil {
		return err
	}
	b, err := finite.JSON(cost)
	if err != nil {
		return err
	}
	return writeFiles(out, []outFile{{experiment.StoreCostFile, bytesFile(b)}})
}

type indexEntry struct {
	e   *experiment.Experiment
	res *experiment.Results
}

// writeIndex writes `omega bench all`'s report.md: every experiment's
// findings, linking to its own report.
func writeIndex(out string, index []indexEntry) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# omega bench all\n\nEach experiment's report is in its directory; their findings:\n\n")
	fmt.Fprintf(&b, "| experiment | published | measured | verdict | in its expected band |\n|---|---|---|---|---|\n")
	runs := 0
	for _, x := range index {
		runs += len(x.res.Rows)
		inBand := x.res.InBand()
		for i, f := range x.res.Findings() {
			fmt.Fprintf(&b, "| [%s](%s/report.md) | %s | %s | **%s** | %s |\n", x.e.Name, x.e.Name,
				strings.ReplaceAll(f.Published, "|", "\\|"), strings.ReplaceAll(f.Measured, "|", "\\|"), f.Verdict, inBand[i])
		}
	}
	fmt.Fprintf(&b, "\n%d simulations in all; the wall time of each is in its experiment's host.csv.\n", runs)
	return writeFiles(out, []outFile{{"report.md", bytesFile([]byte(b.String()))}})
}
