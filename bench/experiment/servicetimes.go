package experiment

import (
	"fmt"
	"strconv"
)

var _ = register(&Experiment{
	Name:    "service-times",
	Title:   "the service scheduler's busyness over t_job(service) and t_task(service)",
	Figures: "Figure 10",
	Axes:    []string{"t_job_service", "t_task_service"},
	grid: func(sz Size) ([]Param, []gridCell) {
		common := append(base(sz), p("schedulers", "batch=1,service=1"), p("mapreduce-share", "0"))
		var cells []gridCell
		for _, tj := range pick(sz, []string{"0.1", "10"}, []string{"0.01", "0.1", "1", "10", "100"}) {
			for _, tt := range pick(sz, []string{"0.005", "0.5"}, []string{"0.001", "0.01", "0.1", "1"}) {
				cells = append(cells, gridCell{axes: []Param{p("t_job_service", tj), p("t_task_service", tt)},
					flags: []Param{p("t-job", "batch=0.1s,service="+secs(tj)), p("t-task", "batch=5ms,service="+secs(tt))}})
			}
		}
		return common, cells
	},
	analyze: func(res *Results) Analysis {
		var an Analysis
		an.Columns = []string{"sched_service_busyness_median", "service_wait_mean_s", "service_jobs_pending", "service_jobs_abandoned", "sched_service_conflict_fraction"}
		tjs, tts := axisValues(res, "t_job_service"), axisValues(res, "t_task_service")
		h := heatMap{title: "Service scheduler busyness", xlabel: "t_job(service) [s]", ylabel: "t_task(service) [s]", markLabel: "work left unscheduled"}
		monotone, marked, closed := true, 0, true
		for _, tj := range tjs {
			x, _ := strconv.ParseFloat(tj, 64)
			h.xs = append(h.xs, x)
		}
		for _, tt := range tts {
			y, _ := strconv.ParseFloat(tt, 64)
			h.ys = append(h.ys, y)
		}
		for ci, tj := range tjs {
			var zs []float64
			var ms []bool
			for ri, tt := range tts {
				c := res.Cell("t_job_service", tj, "t_task_service", tt)
				z, m := 0.0, false
				if c != nil {
					z = res.Median(c.ID, "sched_service_busyness_median")
					sub := res.Median(c.ID, "service_jobs_submitted")
					m = res.Median(c.ID, "service_jobs_abandoned") > 0 || sub > 0 && res.Median(c.ID, "service_jobs_pending")/sub >= unscheduledShare
				}
				zs, ms = append(zs, z), append(ms, m)
				if m {
					marked++
				}
				if ri > 0 && z < zs[ri-1]-0.02 || ci > 0 && z < h.z[ci-1][ri]-0.02 {
					monotone = false
				}
				if ri > 0 && ms[ri-1] && !m || ci > 0 && h.marked[ci-1][ri] && !m {
					closed = false
				}
			}
			h.z, h.marked = append(h.z, zs), append(h.marked, ms)
		}
		f := Finding{ID: "service-times/busyness-grows", Published: "Service busyness grows with both t_job(service) and t_task(service); where both are large the scheduler saturates and work goes unscheduled",
			Measured: fmt.Sprintf("busyness from %s (smallest times) to %s (largest); %d of %d cells left work unscheduled",
				fmtNum(h.z[0][0]), fmtNum(h.z[len(h.z)-1][len(h.ys)-1]), marked, len(tjs)*len(tts))}
		switch {
		case monotone && closed && marked > 0:
			f.Verdict = Reproduced
		case monotone:
			f.Verdict = Partly
			f.Why = "busyness grows with both, but no cell (or not only the slow corner) left work unscheduled"
		default:
			f.Verdict = NotReproduced
			f.Why = "busyness falls somewhere along an axis"
		}
		an.Findings = append(an.Findings, f)
		an.Figures = []Figure{{File: "service-times-busyness.png", Caption: "Service scheduler busyness (median day) over t_job(service) and t_task(service), pale (idle) to red (busy), each cell's value printed in it; crosses mark cells that left work unscheduled (paper Figure 10).",
			make: h.plot}}
		return an
	},
})
