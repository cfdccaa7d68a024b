// Package experiment is `omega bench NAME`: the Omega paper's experiments
// (and the "don't expose raw state" one) as named sweeps of simulations.
//
// An experiment is a grid of cells; a cell is a set of `omega sim` flags
// (or, for the experiments on a trace, `omega replay` flags: Command).
// Every simulation of a sweep is one cell at one seed, and it is exactly
// the command line the sweep's plan prints (Sweep.Plan): the
// direct run hands the same arguments to the same code (RunFunc), so a
// sweep run here, or its plan run anywhere and collected, gives the same
// results.csv byte for byte. What varies between runs of one simulation —
// wall time, peak RSS — goes to host.csv, never to results.csv.
//
// The package reads the runs' own outputs (summary.json, jobs.csv,
// utilization.csv) and writes results.csv, the plots, summary.json and
// report.md, which sets each measured result beside the published one.
package experiment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Param is one `omega sim` flag (its name without the dashes) and its
// value.
type Param struct{ Name, Value string }

// Cell is one point of an experiment's grid.
type Cell struct {
	// ID names the cell's directory under runs/: its axes' values, in the
	// experiment's axis order, as name=value joined by "_".
	ID string
	// Axes are the values the experiment sweeps, in its axis order.
	Axes []Param
	// Flags are the cell's `omega sim` (or `omega replay`) flags, axes
	// included, without --seed and --out.
	Flags []Param
	// replay: the cell's runs are `omega replay`.
	replay bool
}

// Axis returns the value of the named axis ("" if the cell has none).
func (c *Cell) Axis(name string) string {
	for _, p := range c.Axes {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// Flag returns the value of the named flag ("" if the cell sets none).
func (c *Cell) Flag(name string) string {
	for _, p := range slices.Backward(c.Flags) {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// Size is how big an experiment's runs are.
type Size struct {
	// Quick: a small cell and a short horizon, for a first look and the
	// tests.
	Quick bool
}

// Experiment is one named experiment.
type Experiment struct {
	Name  string
	Title string
	// Figures: the paper's figures it reproduces ("" for none).
	Figures string
	// Command is the omega command each run is: "sim" (the default) or
	// "replay" (a trace window; such an experiment needs the trace, so
	// `omega bench all` leaves it out).
	Command string
	// Axes are the names of the parameters the grid sweeps.
	Axes []string
	// grid builds the cells; common are the flags every cell shares.
	grid func(Size) (common []Param, cells []gridCell)
	// analyze reads the results and says what they show.
	analyze func(*Results) Analysis
}

// Cmd is the omega command the experiment's runs are.
func (e *Experiment) Cmd() string {
	if e.Command == "" {
		return "sim"
	}
	return e.Command
}

// NeedsTrace reports whether the experiment replays a trace (its runs are
// `omega replay`): it needs the user's --format and --trace.
func (e *Experiment) NeedsTrace() bool { return e.Cmd() == "replay" }

// registry holds the experiments, in order (package initialisation
// registers them in whatever order their dependencies allow, so register
// sorts them into this one).
var registry []*Experiment

// order is the experiments' report order: the paper's figures in order,
// then the lesson, then the experiments on a trace.
var order = []string{"arch", "batch-load", "n-batch", "service-times", "conflict-modes", "mapreduce", "raw-vs-mediated", "replay"}

func register(e *Experiment) *Experiment {
	if !slices.Contains(order, e.Name) {
		panic("experiment " + e.Name + " has no place in the order")
	}
	registry = append(registry, e)
	slices.SortFunc(registry, func(a, b *Experiment) int { return slices.Index(order, a.Name) - slices.Index(order, b.Name) })
	return e
}

// All returns the experiments in report order.
func All() []*Experiment { return slices.Clone(registry) }

// Synthetic returns the experiments `omega bench all` runs: those on the
// synthetic workload (the ones on a trace need the user's trace).
func Synthetic() []*Experiment {
	return slices.DeleteFunc(All(), (*Experiment).NeedsTrace)
}

// Names lists the experiments' names, and "all".
func Names() []string {
	var n []string
	for _, e := range registry {
		n = append(n, e.Name)
	}
	return append(n, "all")
}

// Lookup finds an experiment by name.
func Lookup(name string) (*Experiment, error) {
	for _, e := range registry {
		if e.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("experiment %q: want one of %s", name, strings.Join(Names(), ", "))
}

// gridCell is a cell as an experiment lays it out: its axes' values
// (labels, for its directory, the report and the analysis) and the flags
// that make it; maxDays, if set, caps its simulated days whatever the
// common flags and the user's overrides say (the paper's two-level runs
// simulate one day where the others simulate seven).
type gridCell struct {
	axes, flags []Param
	maxDays     float64
}

// Cells returns the experiment's grid at size, with the user's overrides
// (flags of `omega sim` or `omega replay`, applied to every cell after the experiment's
// common ones). Overriding an axis is an error naming it.
func (e *Experiment) Cells(size Size, overrides []Param) ([]Cell, error) {
	common, grid := e.grid(size)
	var cells []Cell
	seen := map[string]bool{}
	for _, g := range grid {
		for _, o := range overrides {
			for _, f := range g.flags {
				if f.Name == o.Name {
					return nil, fmt.Errorf("--%s: %s sets it in its grid (%s)", o.Name, e.Name, strings.Join(e.Axes, ", "))
				}
			}
		}
		c := Cell{Axes: g.axes, replay: e.NeedsTrace()}
		var id []string
		for _, a := range g.axes {
			id = append(id, a.Name+"="+a.Value)
		}
		c.ID = strings.Join(id, "_")
		if seen[c.ID] {
			panic(fmt.Sprintf("experiment %s: cell %s twice", e.Name, c.ID))
		}
		seen[c.ID] = true
		c.Flags = mergeFlags(common, overrides, g.flags)
		if d, err := strconv.ParseFloat(c.Flag("days"), 64); g.maxDays > 0 && err == nil && d > g.maxDays {
			c.Flags = mergeFlags(c.Flags, []Param{p("days", strconv.FormatFloat(g.maxDays, 'g', -1, 64))})
		}
		cells = append(cells, c)
	}
	return cells, nil
}

// mergeFlags returns the flags of layers, a later layer's value replacing
// an earlier one's in place, new names appended in order.
func mergeFlags(layers ...[]Param) []Param {
	var out []Param
	for _, l := range layers {
	next:
		for _, p := range l {
			for i := range out {
				if out[i].Name == p.Name {
					out[i].Value = p.Value
					continue next
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// p is a Param.
func p(name, value string) Param { return Param{name, value} }
