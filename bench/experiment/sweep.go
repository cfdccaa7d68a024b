package experiment

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/omega-cell/omega/bench/pool"
)

// Run is one simulation of a sweep: a cell at a seed.
type Run struct {
	Cell *Cell
	Seed uint64
	// Dir is the run's directory, relative to the sweep's: runs/CELL/seed-N.
	Dir string
}

// Args are the run's `omega sim` (or `omega replay`) arguments, without
// --out.
func (r Run) Args() []string {
	var a []string
	for _, f := range r.Cell.Flags {
		a = append(a, "--"+f.Name+"="+f.Value)
	}
	return append(a, "--seed="+strconv.FormatUint(r.Seed, 10))
}

// Sweep is an experiment's runs: every cell at every seed.
type Sweep struct {
	Experiment *Experiment
	Size       Size
	Cells      []Cell
	Seeds      []uint64
	Runs       []Run
}

// NewSweep lays out e's sweep at size over seeds seeds from seed.
func NewSweep(e *Experiment, size Size, overrides []Param, seed uint64, seeds int) (*Sweep, error) {
	if seeds < 1 {
		return nil, fmt.Errorf("seeds %d: want at least 1", seeds)
	}
	cells, err := e.Cells(size, overrides)
	if err != nil {
		return nil, err
	}
	s := &Sweep{Experiment: e, Size: size, Cells: cells}
	for k := range seeds {
		s.Seeds = append(s.Seeds, seed+uint64(k))
	}
	for i := range s.Cells {
		for _, sd := range s.Seeds {
			c := &s.Cells[i]
			s.Runs = append(s.Runs, Run{Cell: c, Seed: sd, Dir: filepath.Join("runs", c.ID, "seed-"+strconv.FormatUint(sd, 10))})
		}
	}
	return s, nil
}

// Plan writes one independent `omega sim` (or `omega replay`) command
// line per run, each writing into its directory under out: run them
// anywhere (a batch system's array, GNU parallel, an omega cell), then
// collect out. It is WritePlan's lines format; WritePlan also writes a
// GNU parallel job file, a Slurm job array and a Kubernetes Indexed Job.
func (s *Sweep) Plan(w io.Writer, binary, out string) error {
	return WritePlan(w, s.Commands(binary, out), PlanOptions{Out: out})
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_=./,:+@%", c)) {
			safe = false
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// RunFunc runs one simulation: `omega sim ARGS --out DIR` (or `omega
// replay`, as the experiment's Command says), ticking once per simulated
// hour. The CLI gives the very code those commands run.
type RunFunc func(ctx context.Context, args []string, dir string, tick func()) error

// commandFile records, in a run's directory, the arguments it ran with; a
// run is finished when its last output (utilization.csv, which `omega
// sim` and `omega replay` rename into place last) is there beside a
// command file that matches.
const commandFile = "command.txt"

// Done reports whether the run's outputs are in out, from a run with the
// same arguments.
func (r Run) Done(out string) bool {
	dir := filepath.Join(out, r.Dir)
	b, err := os.ReadFile(filepath.Join(dir, commandFile))
	if err != nil || string(b) != strings.Join(r.Args(), "\n")+"\n" {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "utilization.csv"))
	return err == nil
}

// Execute runs the sweep's runs that are not done in out, parallel at a
// time, ticking progress once per simulated hour of a run (hours says how
// many there are in all, -1 when a run's length is not known before it
// runs: a replay to the trace's end). A run that fails stops the others; the runs
// that finished stay in out, so running again resumes.
func (s *Sweep) Execute(ctx context.Context, out string, parallel int, run RunFunc, progress func(total int) func()) error {
	var todo []Run
	hours := 0
	for _, r := range s.Runs {
		if !r.Done(out) {
			todo = append(todo, r)
			if h := r.hours(); h < 0 || hours < 0 {
				hours = -1
			} else {
				hours += h
			}
		}
	}
	if len(todo) == 0 {
		return nil
	}
	tick := progress(hours)
	k, err := pool.Run(ctx, len(todo), parallel, func(ctx context.Context, k int) error {
		return s.runOne(ctx, out, todo[k], run, tick)
	})
	if err != nil {
		return fmt.Errorf("%s seed %d: %w", todo[k].Cell.ID, todo[k].Seed, err)
	}
	return nil
}

func (s *Sweep) runOne(ctx context.Context, out string, r Run, run RunFunc, tick func()) error {
	dir := filepath.Join(out, r.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// A stale output from other arguments must not pass for this run's.
	os.Remove(filepath.Join(dir, "utilization.csv"))
	if err := os.WriteFile(filepath.Join(dir, commandFile), []byte(strings.Join(r.Args(), "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return run(ctx, r.Args(), dir, tick)
}

// hours is the run's simulated hours, as `omega sim` ticks them; a
// replay's is its window's (-1 when it runs to the trace's end).
func (r Run) hours() int {
	if r.Cell.replay {
		from, err1 := time.ParseDuration(cmp.Or(r.Cell.Flag("from"), "0s"))
		to, err2 := time.ParseDuration(cmp.Or(r.Cell.Flag("to"), "0s"))
		if err1 != nil || err2 != nil || to <= from {
			return -1
		}
		return int((to - from).Hours() + 0.999)
	}
	d, err := strconv.ParseFloat(r.Cell.Flag("days"), 64)
	if err != nil {
		d = 7 // omega sim's default
	}
	return int(d*24 + 0.999)
}
