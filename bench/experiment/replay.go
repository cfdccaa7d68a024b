package experiment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/omega-cell/omega/bench/sim"
)

// The experiments on a trace replay a window of a public cluster trace
// (`omega replay`) instead of simulating the synthetic workload: the
// user names the trace (--format, --trace) and may cut it (--from, --to,
// --machines); the experiment sweeps the schedulers over the same window.

// replayArchitectures are the replay experiment's architectures: every
// registered one, in the arch experiment's order.
func replayArchitectures() []string { return sim.ArchitectureNames() }

var _ = register(&Experiment{
	Name:    "replay",
	Command: "replay",
	Title:   "monolithic single-path and multi-path schedulers, two-level offers and shared state on one trace window, against the production cluster's own waits",
	Axes:    []string{"architecture", "t_job_service"},
	grid: func(sz Size) ([]Param, []gridCell) {
		common := []Param{p("schedulers", "batch=1,service=1")}
		if sz.Quick {
			// A twelfth of the 2011 cell's machines (and as large a share
			// of its jobs) for half an hour of trace.
			common = append(common, p("machines", "1000"), p("to", "30m"))
		}
		var cells []gridCell
		for _, a := range replayArchitectures() {
			for _, tj := range pick(sz, []string{"0.1", "10"}, []string{"0.1", "1", "10", "100"}) {
				cells = append(cells, gridCell{axes: []Param{p("architecture", a), p("t_job_service", tj)},
					flags: []Param{p("architecture", a), p("t-job", "batch=0.1s,service="+secs(tj))}})
			}
		}
		return common, cells
	},
	analyze: analyzeReplay,
})

// Within a factor of waitFactor of the trace's wait, a replay's waits
// reproduce the production cluster's; within utilPoints percentage points,
// its allocation does.
const (
	waitFactor = 3.0
	utilPoints = 0.10
)

func analyzeReplay(res *Results) Analysis {
	const ax = "t_job_service"
	an := analyzeArch(res, "replay")
	an.Columns = []string{"replay_wait_p50_s", "replay_wait_p90_s", "replay_unplaced", "batch_wait_mean_s", "service_wait_mean_s",
		"sched_monolithic_busyness_median", "sched_batch_busyness_median", "sched_service_busyness_median", "replay_cpu_utilization_mean"}
	if len(res.Rows) == 0 || res.Rows[0].Replay == nil {
		return an
	}
	// The trace's own figures are the same in every run of the window (the
	// same jobs, cut by the same seeded hash); the first run's are the
	// reference.
	ref := res.Rows[0]
	tp50, tp90 := ref.Metrics["trace_wait_p50_s"], ref.Metrics["trace_wait_p90_s"]
	x := ref.Replay
	window := fmt.Sprintf("%s trace %s", x.Format, x.Trace)
	if x.FromS > 0 || x.ToS > 0 {
		end := "its end"
		if x.ToS > 0 {
			end = fmtNum(x.ToS) + " s"
		}
		window += fmt.Sprintf(", window %s s to %s", fmtNum(x.FromS), end)
	}
	if x.MachinesKept > 0 {
		window += fmt.Sprintf(", %d of its machines kept", x.MachinesKept)
	}

	// The waits at the smallest t_job(service), the closest to a cell
	// whose schedulers keep up, by architecture.
	smallest := ""
	for _, c := range res.Sweep.Cells {
		if v := c.Axis(ax); smallest == "" || num(v) < num(smallest) {
			smallest = v
		}
	}
	var parts []string
	var shared *Cell
	for _, a := range replayArchitectures() {
		c := res.Cell("architecture", a, ax, smallest)
		if c == nil {
			continue
		}
		if a == "shared" {
			shared = c
		}
		parts = append(parts, fmt.Sprintf("%s p50 %ss p90 %ss (%s not placed)", a, fmtNum(res.Median(c.ID, "replay_wait_p50_s")),
			fmtNum(res.Median(c.ID, "replay_wait_p90_s")), fmtNum(res.Median(c.ID, "replay_unplaced"))))
	}
	f := Finding{ID: "replay/production-wait", Published: fmt.Sprintf("The production cluster (the trace, %s jobs placed whole in the window): wait from submission to every task placed p50 %ss, p90 %ss",
		fmtNum(ref.Metrics["replay_jobs_compared"]), fmtNum(tp50), fmtNum(tp90)),
		Measured: fmt.Sprintf("at t_job(service) = %ss: %s", smallest, strings.Join(parts, "; "))}
	if shared == nil {
		f.Verdict = NotMeasured
	} else {
		near := func(ours, theirs float64) bool {
			return ours <= waitFactor*max(theirs, 0.1) && ours >= max(theirs, 0.1)/waitFactor
		}
		p50, p90 := res.Median(shared.ID, "replay_wait_p50_s"), res.Median(shared.ID, "replay_wait_p90_s")
		switch ok50, ok90 := near(p50, tp50), near(p90, tp90); {
		case ok50 && ok90:
			f.Verdict = Reproduced
		case ok50 || ok90:
			f.Verdict = Partly
		default:
			f.Verdict = NotReproduced
		}
		if f.Verdict != Reproduced {
			f.Why = replayWaitWhy(res, shared, p50, p90, tp50, tp90)
		}
	}
	an.Findings = append([]Finding{f}, an.Findings...)

	if shared != nil {
		ours, theirs := res.Median(shared.ID, "replay_cpu_utilization_mean"), ref.Metrics["trace_cpu_utilization_mean"]
		u := Finding{ID: "replay/production-allocation", Published: fmt.Sprintf("The production cluster's allocation: mean CPU requested by its running tasks %s of the machines' capacity", pct(theirs)),
			Measured: fmt.Sprintf("shared state at t_job(service) = %ss: %s", smallest, pct(ours)),
			Verdict:  verdict(ours >= theirs-utilPoints && ours <= theirs+utilPoints)}
		switch {
		case u.Verdict == Reproduced:
		case theirs > 1:
			u.Why = fmt.Sprintf("the trace's own tasks asked for more than the replayed machines' capacities (%s of them): a cell that holds its tasks to its capacities cannot place them all; replay with --overcommit %s or more to give it the room the production cluster took", pct(theirs), strconv.FormatFloat(math.Ceil(theirs*max(x.Overcommit, 1)*100)/100, 'f', -1, 64))
		default:
			u.Why = fmt.Sprintf("more than %s points apart: the replay's cell holds what its schedulers placed, which differs from the trace's placements where the trace placed beyond its recorded capacities (see the runs' replay.stats.placements_refused) or where tasks waited", fmtNum(100*utilPoints))
		}
		an.Findings = slices.Insert(an.Findings, 1, u)
	}

	// Figures: the waits against the trace's, and the allocation over time.
	var waits []series
	for _, a := range replayArchitectures() {
		for _, q := range []string{"p50", "p90"} {
			s := res.line(a+" "+q, ax, "replay_wait_"+q+"_s", "architecture", a)
			s.dashed = q == "p90"
			waits = append(waits, s)
		}
	}
	var util []series
	if first := res.Rows[0]; len(first.TraceUtilization) > 0 {
		util = append(util, timeSeries("the trace", first.TraceUtilization))
	}
	for _, a := range replayArchitectures() {
		c := res.Cell("architecture", a, ax, smallest)
		if c == nil {
			continue
		}
		for _, r := range res.Rows {
			if r.Run.Cell.ID == c.ID {
				util = append(util, timeSeries(a, r.Utilization))
				break
			}
		}
	}
	an.Figures = append([]Figure{
		{File: "replay-trace-waits.png", Caption: "Wait from submission to every task placed, p50 (solid) and p90 (dashed), of the jobs the trace placed whole, by architecture; the production cluster's, dotted lines.",
			make: lineChart{title: "Job wait on the trace window", xlabel: "t_job(service) [s]", ylabel: "wait [s]", logX: true, logY: true, series: waits,
				hlines: []hline{{tp50, "the trace's p50"}, {tp90, "the trace's p90"}}}.plot},
		{File: "replay-utilization.png", Caption: fmt.Sprintf("CPU allocated over capacity through the window, at t_job(service) = %ss (first seed), and the trace's own placements over the same machines.", smallest),
			make: lineChart{title: "CPU allocation", xlabel: "hours from the window's start", ylabel: "allocated / capacity", series: util}.plot},
	}, an.Figures...)
	an.Notes = append(an.Notes,
		"Replayed: "+window+". Every cell replays the same window with the same seed's sampling, so the trace's figures are the same in every run.",
		"The first finding's waits are submission to every task placed (jobs.csv's wait_s) over the jobs submitted after the window opened that the trace placed whole within it; the architecture findings and replay-wait.png use each kind's mean wait to its first attempt, as the paper's figures do.")
	return an
}

// replayWaitWhy says what kept the replay's waits from the trace's.
func replayWaitWhy(res *Results, c *Cell, p50, p90, tp50, tp90 float64) string {
	var why []string
	if u := res.Median(c.ID, "replay_unplaced"); u > 0 {
		why = append(why, fmt.Sprintf("%s of the jobs the trace placed whole were never placed by shared state within the window", fmtNum(u)))
	}
	if p90 > waitFactor*tp90 {
		why = append(why, fmt.Sprintf("the tail is longer (p90 %ss against %ss): jobs wait for room where the cell is full at its recorded capacities, which the trace's own cluster exceeded (replay.stats.placements_refused counts its placements that did not fit; --overcommit gives the cell that room)", fmtNum(p90), fmtNum(tp90)))
	}
	if p50 < tp50/waitFactor {
		why = append(why, fmt.Sprintf("the median is shorter (%ss against %ss): the replay's schedulers decide in their modelled decision times, with none of the production scheduler's other work", fmtNum(p50), fmtNum(tp50)))
	}
	if p50 > waitFactor*tp50 {
		why = append(why, fmt.Sprintf("the median is longer (%ss against %ss)", fmtNum(p50), fmtNum(tp50)))
	}
	return strings.Join(why, "; ")
}

// timeSeries is a utilisation series against trace hours.
func timeSeries(label string, pts [][2]float64) series {
	s := series{label: label}
	for _, p := range pts {
		s.x, s.y = append(s.x, p[0]/3600), append(s.y, p[1])
	}
	return s
}

func num(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
