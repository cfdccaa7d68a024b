package experiment

// Each experiment is a file of its own (arch.go, batchload.go, nbatch.go,
// servicetimes.go, conflictmodes.go, mapreduce.go, rawvsmediated.go,
// replay.go): its grid, its analysis and its plots, registered in the
// catalogue by a register call there. This file holds what they share:
// the base flags, the grid's pick, the thresholds they judge by.

import "slices"

// base are the flags of every experiment: the paper's cell (10,000
// machines, 7 simulated days) and the trace's own arrival gaps, which the
// paper's simulator samples; --quick shrinks the cell and the horizon.
func base(sz Size) []Param {
	if sz.Quick {
		return []Param{p("machines", "1000"), p("days", "0.25"), p("arrivals", "empirical"), p("placement", "random-first-fit")}
	}
	return []Param{p("machines", "10000"), p("days", "7"), p("arrivals", "empirical"), p("placement", "random-first-fit")}
}

func pick(sz Size, quick, full []string) []string {
	if sz.Quick {
		return quick
	}
	return full
}

// The thresholds of "keeps up": a scheduler busy at least this share of its
// median day, or a tenth of its jobs not scheduled at the end, no longer
// keeps up with its load (the simulation's own saturation warnings).
const (
	saturatedBusy    = 0.8
	unscheduledShare = 0.1
)

// sloWait is the paper's job wait SLO line (Figures 5 and 6).
const sloWait = 30.0

func secs(v string) string { return v + "s" }

// axisValues are an axis's values in grid order, each once.
func axisValues(res *Results, axis string) []string {
	var out []string
	for _, c := range res.Sweep.Cells {
		if v := c.Axis(axis); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
