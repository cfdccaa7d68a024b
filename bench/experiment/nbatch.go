package experiment

import (
	"fmt"
)

var _ = register(&Experiment{
	Name:    "n-batch",
	Title:   "several batch schedulers sharing the batch load by hashing",
	Figures: "Figure 9",
	Axes:    []string{"batch_schedulers", "batch_load"},
	grid: func(sz Size) ([]Param, []gridCell) {
		common := append(base(sz), p("mapreduce-share", "0"))
		var cells []gridCell
		for _, l := range pick(sz, []string{"1", "10"}, []string{"1", "4", "10"}) {
			for _, n := range pick(sz, []string{"1", "4"}, []string{"1", "2", "4", "8", "16", "32"}) {
				cells = append(cells, gridCell{axes: []Param{p("batch_schedulers", n), p("batch_load", l)},
					flags: []Param{p("schedulers", "batch="+n+",service=1"), p("batch-load", l)}})
			}
		}
		return common, cells
	},
	analyze: func(res *Results) Analysis {
		var an Analysis
		an.Columns = []string{"sched_batch_conflict_fraction", "sched_batch_busyness_median", "sched_batch_busyness_max", "batch_wait_mean_s", "batch_jobs_abandoned"}
		loads := axisValues(res, "batch_load")
		top := loads[len(loads)-1]
		cf := res.line("load "+top+"x", "batch_schedulers", "sched_batch_conflict_fraction", "batch_load", top)
		busy := res.line("load "+top+"x", "batch_schedulers", "sched_batch_busyness_median", "batch_load", top)
		an.Findings = append(an.Findings, Finding{
			ID:        "n-batch/conflicts-rise",
			Published: "Conflicts rise with the number of batch schedulers",
			Measured:  fmt.Sprintf("conflict fraction at %sx by schedulers: %s", top, cf.points("", 1)),
			Verdict:   verdict(cf.last() > cf.first() && cf.nonDecreasing(0.25)),
		}, Finding{
			ID:        "n-batch/busyness-compensates",
			Published: "Each scheduler's busyness falls enough to compensate for the conflicts, up to at least 32 schedulers",
			Measured:  fmt.Sprintf("per-scheduler busyness at %sx by schedulers: %s", top, busy.points("", 1)),
			Verdict:   verdict(busy.last() < busy.first() && busy.last() < saturatedBusy),
		})
		var cfs, busys []series
		for _, l := range loads {
			cfs = append(cfs, res.line("load "+l+"x", "batch_schedulers", "sched_batch_conflict_fraction", "batch_load", l))
			busys = append(busys, res.line("load "+l+"x", "batch_schedulers", "sched_batch_busyness_median", "batch_load", l))
		}
		an.Figures = []Figure{
			{File: "n-batch-conflicts.png", Caption: "Batch conflict fraction against the number of batch schedulers, one line per batch load (paper Figure 9a).",
				make: lineChart{title: "Batch conflict fraction", xlabel: "batch schedulers", ylabel: "conflict fraction", logX: true, series: cfs}.plot},
			{File: "n-batch-busyness.png", Caption: "Mean per-scheduler busyness of the batch schedulers (paper Figure 9b).",
				make: lineChart{title: "Batch scheduler busyness", xlabel: "batch schedulers", ylabel: "busyness (median day)", logX: true, series: busys}.plot},
		}
		return an
	},
})
