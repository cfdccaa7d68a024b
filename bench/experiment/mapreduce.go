package experiment

import (
	"fmt"
	"slices"
)

var _ = register(&Experiment{
	Name:    "mapreduce",
	Title:   "the MapReduce scheduler's elastic policies",
	Figures: "Figures 15–16",
	Axes:    []string{"mapreduce_policy"},
	grid: func(sz Size) ([]Param, []gridCell) {
		common := append(base(sz), p("mapreduce-share", "0.2"))
		var cells []gridCell
		for _, pol := range []string{"none", "max-parallelism", "global-cap", "relative-size"} {
			cells = append(cells, gridCell{axes: []Param{p("mapreduce_policy", pol)},
				flags: []Param{p("schedulers", "batch=1,mapreduce=1,service=1"), p("mapreduce-policy", pol)}})
		}
		return common, cells
	},
	analyze: func(res *Results) Analysis {
		var an Analysis
		an.Columns = []string{"mapreduce_jobs_scheduled", "mapreduce_benefit_share", "mapreduce_speedup_p50", "mapreduce_speedup_p80", "utilization_mean", "batch_wait_mean_s"}
		mp := res.Cell("mapreduce_policy", "max-parallelism")
		share, p80 := 0.0, 0.0
		if mp != nil {
			share, p80 = res.Median(mp.ID, "mapreduce_benefit_share"), res.Median(mp.ID, "mapreduce_speedup_p80")
		}
		f := Finding{ID: "mapreduce/benefit-share", Published: "50–70% of MapReduce jobs benefit from extra resources", Measured: fmt.Sprintf("%s benefit under max-parallelism", pct(share))}
		switch {
		case share >= 0.5 && share <= 0.7:
			f.Verdict = Reproduced
		case share >= 0.35 && share <= 0.85:
			f.Verdict, f.Why = Partly, "close to the published range: how many jobs can grow depends on how much of the cell is idle when they start, which the fitted workload's utilisation sets"
		default:
			f.Verdict, f.Why = NotReproduced, "how many jobs can grow depends on how much of the cell is idle when they start, which the fitted workload's utilisation sets"
		}
		an.Findings = append(an.Findings, f)
		f = Finding{ID: "mapreduce/speedup-p80", Published: "Max-parallelism speeds jobs up 3–4x at the 80th percentile", Measured: fmt.Sprintf("%sx at the 80th percentile", fmtNum(p80))}
		switch {
		case p80 >= 3 && p80 <= 4:
			f.Verdict = Reproduced
		case p80 >= 2 && p80 <= 6:
			f.Verdict, f.Why = Partly, "within a factor 1.5 of the range: a job's speedup is bounded by its map tasks (16 per requested worker here, a parameter the public trace lacks)"
		default:
			f.Verdict, f.Why = NotReproduced, "a job's speedup is bounded by its map tasks (16 per requested worker here, a parameter the public trace lacks) and the idle cell"
		}
		an.Findings = append(an.Findings, f)
		none := res.Cell("mapreduce_policy", "none")
		if none != nil {
			x := res.Median(none.ID, "mapreduce_speedup_p80")
			an.Findings = append(an.Findings, Finding{ID: "mapreduce/baseline", Published: "Without an elastic policy MapReduce jobs get what they ask for (the baseline)",
				Measured: fmt.Sprintf("%sx at the 80th percentile under --mapreduce-policy none", fmtNum(x)), Verdict: verdict(x == 1)})
		}
		var cdfs, util []series
		for i := range res.Sweep.Cells {
			c := &res.Sweep.Cells[i]
			var xs []float64
			var first *Row
			for k := range res.Rows {
				if r := &res.Rows[k]; r.Run.Cell.ID == c.ID {
					xs = append(xs, r.Speedups...)
					if first == nil {
						first = r
					}
				}
			}
			cdfs = append(cdfs, cdf(c.Axis("mapreduce_policy"), xs))
			if first != nil {
				u := series{label: c.Axis("mapreduce_policy")}
				for _, s := range first.Utilization {
					u.x, u.y = append(u.x, s[0]/3600), append(u.y, s[1])
				}
				util = append(util, u)
			}
		}
		an.Figures = []Figure{
			{File: "mapreduce-speedup-cdf.png", Caption: "CDF of MapReduce job speedup (workers placed over workers requested), all seeds (paper Figure 15).",
				make: lineChart{title: "MapReduce speedup", xlabel: "speedup", ylabel: "share of jobs", logX: true, series: cdfs}.plot},
			{File: "mapreduce-utilization.png", Caption: "The cell's CPU utilisation over time, first seed (paper Figure 16).",
				make: lineChart{title: "CPU utilisation", xlabel: "simulated hours", ylabel: "utilisation", series: util}.plot},
		}
		return an
	},
})

// cdf is the empirical CDF of xs as a series (a step per distinct value).
func cdf(label string, xs []float64) series {
	s := series{label: label}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	for i, x := range sorted {
		if i+1 < len(sorted) && sorted[i+1] == x {
			continue
		}
		s.x, s.y = append(s.x, x), append(s.y, float64(i+1)/float64(len(sorted)))
	}
	if len(s.x) == 0 {
		s.x, s.y = []float64{1}, []float64{0}
	}
	return s
}
