package replay

import (
	"encoding/csv"
	"image/color"
	"io"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/trace"
	"github.com/omega-cell/omega/schedulers"
)

// Summary is omega replay's summary.json: the simulation's summary (the
// contract of omega sim, DESIGN.md "summary.json") and a replay section.
type Summary struct {
	sim.Summary
	Replay Section `json:"replay"`
}

// Section is what the replay adds to the simulation's summary: the trace,
// the window, how it was mapped onto the cell, what the reader read and
// skipped, what the replay did with it, and the comparison of waits.
type Section struct {
	Format          string     `json:"format"`
	Trace           string     `json:"trace"`
	FromS           float64    `json:"from_s"`
	ToS             float64    `json:"to_s"` // 0: the trace's end
	Sample          float64    `json:"sample"`
	MachinesKept    int        `json:"machines_kept"` // --machines (0: every machine)
	MachineCPU      float64    `json:"machine_cpu"`
	MachineMemory   int64      `json:"machine_memory_bytes"`
	Overcommit      float64    `json:"overcommit"`
	ServicePriority int32      `json:"service_priority"`
	Evictions       string     `json:"evictions"`
	Fidelity        bool       `json:"fidelity"`
	CoalesceS       float64    `json:"coalesce_s"`
	Reader          Reader     `json:"reader"`
	Stats           Stats      `json:"stats"`
	Comparison      Comparison `json:"comparison"`
}

// Reader is the reader's counts: rows per table, events, rows skipped by
// cause (with an example row of each), rows ignored and warnings.
type Reader struct {
	Rows     map[string]int64    `json:"rows"`
	Events   int64               `json:"events"`
	Skipped  map[string]int64    `json:"skipped"`
	Examples map[string][]string `json:"skipped_examples,omitempty"`
	Ignored  map[string]int64    `json:"ignored,omitempty"`
	Warnings []string            `json:"warnings,omitempty"`
}

// Comparison sets the cell's waits beside the trace's, over the jobs
// submitted after the window opened that the trace placed whole within it:
// submission to every task placed, in the production cluster and in the
// replay.
type Comparison struct {
	Jobs          int     `json:"jobs"` // jobs compared
	OursP50S      float64 `json:"ours_wait_p50_s"`
	OursP90S      float64 `json:"ours_wait_p90_s"`
	TraceP50S     float64 `json:"trace_wait_p50_s"`
	TraceP90S     float64 `json:"trace_wait_p90_s"`
	TraceFirstP50 float64 `json:"trace_first_placement_p50_s"`
	TraceFirstP90 float64 `json:"trace_first_placement_p90_s"`
	// OursUnplaced: jobs the trace placed whole that the replay did not
	// (pending at the end, or abandoned).
	OursUnplaced int `json:"ours_unplaced"`
	// Utilisation: the mean over the run of the cell's allocated share of
	// its capacity, CPU and memory, under our placements and under the
	// trace's (the requests of the runs it had placed, over the same
	// machines); the series are in utilization.csv.
	OursCPUMean     float64 `json:"ours_cpu_utilization_mean"`
	TraceCPUMean    float64 `json:"trace_cpu_utilization_mean"`
	OursMemoryMean  float64 `json:"ours_memory_utilization_mean"`
	TraceMemoryMean float64 `json:"trace_memory_utilization_mean"`
}

// Summarize is the run's summary.json.
func (r *Replay) Summarize() Summary {
	st := r.Stats()
	sum := r.Sim.Summarize(r.cfg.Sim.Workload.Seed, int(st.MachinesAdded))
	ts := r.TraceStats()
	c := r.cfg
	return Summary{Summary: sum, Replay: Section{
		Format: c.Format, Trace: c.Trace, FromS: c.From.Seconds(), ToS: c.To.Seconds(), Sample: c.Sample, MachinesKept: c.Machines,
		MachineCPU: c.MachineCPU, MachineMemory: c.MachineMemory, Overcommit: c.Overcommit, ServicePriority: c.ServicePriority,
		Evictions: c.Evictions, Fidelity: c.Fidelity, CoalesceS: c.Coalesce.Seconds(),
		Reader: Reader{Rows: ts.Rows, Events: ts.Events, Skipped: ts.Skipped, Examples: examples(ts.Examples), Ignored: ts.Ignored, Warnings: ts.Warnings},
		Stats:  st, Comparison: r.compare(),
	}}
}

// jobRow is one job of jobs.csv.
type jobRow struct {
	name                        string
	scheduler, kind             string
	traceJob                    int64
	tasks                       int32
	submitted, firstAt, placed  time.Time
	traceFirst, traceAll        int64
	attempts, placedN, conflict int
	abandoned, opening          bool // opening: submitted when the window opened (placed as the trace had it)
}

// row is the jobs.csv row of a job of runner run, from its record and
// what the trace says of it.
func (r *Replay) row(run *schedulers.Runner, j schedulers.JobRecord, info *jobInfo) jobRow {
	x := jobRow{name: strconv.FormatInt(info.traceJob, 10) + "." + strconv.FormatInt(info.group, 10),
		scheduler: run.Name(), kind: sim.KindName(j.Kind), traceJob: info.traceJob, tasks: info.tasks,
		submitted: j.Submitted, firstAt: j.FirstAttempt, placed: j.Placed,
		traceFirst: info.tracePlaced - info.submitted, traceAll: info.traceAll - info.submitted,
		attempts: j.Attempts, placedN: j.TasksPlaced, conflict: j.Conflicted, abandoned: j.Abandoned,
		opening: info.submitted <= r.cfg.From.Microseconds()}
	if info.tracePlaced < 0 {
		x.traceFirst = -1
	}
	if info.traceAll < 0 {
		x.traceAll = -1
	}
	return x
}

// liveRows are the rows of the jobs still in the cell (the runners hold
// their records), by submission.
func (r *Replay) liveRows() []jobRow {
	var rows []jobRow
	for _, run := range r.Sim.Runners() {
		for _, j := range run.Records() {
			if info := r.actor.jobs[j.UID]; info != nil {
				rows = append(rows, r.row(run, j, info))
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b jobRow) int { return a.submitted.Compare(b.submitted) })
	return rows
}

// waits is what the comparison keeps of the jobs that left the cell: a
// wait or two per job, for the quantiles (not a record of the job).
type waits struct {
	jobs, unplaced      int
	ours, theirs, first []float64
}

func (w *waits) add(x jobRow) {
	if x.traceAll < 0 || x.opening {
		return
	}
	w.jobs++
	w.theirs = append(w.theirs, float64(x.traceAll)/1e6)
	w.first = append(w.first, float64(x.traceFirst)/1e6)
	if x.placed.IsZero() {
		w.unplaced++
		return
	}
	w.ours = append(w.ours, x.placed.Sub(x.submitted).Seconds())
}

// retire is a job that left the cell: its row goes to jobs.csv and its
// waits to the comparison, and nothing else of it is kept.
func (r *Replay) retire(run *schedulers.Runner, j schedulers.JobRecord) {
	info := r.actor.jobs[j.UID]
	if info == nil {
		return
	}
	delete(r.actor.jobs, j.UID)
	x := r.row(run, j, info)
	r.waits.add(x)
	if r.jobs != nil {
		r.writeRow(x)
	}
}

func (r *Replay) compare() Comparison {
	w := r.waits
	w.ours, w.theirs, w.first = slices.Clone(w.ours), slices.Clone(w.theirs), slices.Clone(w.first)
	for _, x := range r.liveRows() {
		w.add(x)
	}
	c := Comparison{Jobs: w.jobs, OursUnplaced: w.unplaced}
	c.OursP50S, c.OursP90S = sim.Quantile(w.ours, 0.5), sim.Quantile(w.ours, 0.9)
	c.TraceP50S, c.TraceP90S = sim.Quantile(w.theirs, 0.5), sim.Quantile(w.theirs, 0.9)
	c.TraceFirstP50, c.TraceFirstP90 = sim.Quantile(w.first, 0.5), sim.Quantile(w.first, 0.9)
	var n int
	for _, x := range r.utilization() {
		n++
		c.OursCPUMean += x.ours.CPU
		c.OursMemoryMean += x.ours.Memory
		c.TraceCPUMean += x.trace.CPU
		c.TraceMemoryMean += x.trace.Memory
	}
	if n > 0 {
		c.OursCPUMean /= float64(n)
		c.OursMemoryMean /= float64(n)
		c.TraceCPUMean /= float64(n)
		c.TraceMemoryMean /= float64(n)
	}
	return c
}

// utilPoint is one sample time: the cell's utilisation under our
// placements and under the trace's.
type utilPoint struct {
	at          time.Duration
	ours, trace sim.Sample
}

// utilization pairs each of the engine's samples with the trace's sample
// at the same time (both every minute of simulated time from 0).
func (r *Replay) utilization() []utilPoint {
	ours, theirs := r.Sim.Samples(), r.actor.samples
	var out []utilPoint
	j := 0
	for _, o := range ours {
		for j+1 < len(theirs) && theirs[j+1].At <= o.At {
			j++
		}
		p := utilPoint{at: o.At, ours: o}
		if j < len(theirs) && theirs[j].At <= o.At {
			p.trace = theirs[j]
		}
		out = append(out, p)
	}
	return out
}

// WriteUtilizationCSV writes utilization.csv: per minute of simulated
// time, the cell's CPU and memory allocated over capacity under our
// placements and under the trace's.
func (r *Replay) WriteUtilizationCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"sim_seconds", "cpu", "memory", "trace_cpu", "trace_memory"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	for _, p := range r.utilization() {
		cw.Write([]string{strconv.FormatFloat(p.at.Seconds(), 'f', 0, 64), f(p.ours.CPU), f(p.ours.Memory), f(p.trace.CPU), f(p.trace.Memory)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteUtilizationPNG draws the two series, CPU and memory, ours and the
// trace's, against trace time in hours.
func (r *Replay) WriteUtilizationPNG(w io.Writer) error {
	p := plot.New()
	p.Title.Text = "Cell utilisation: omega's schedulers against the trace's"
	p.X.Label.Text, p.Y.Label.Text = "trace time (hours)", "allocated / capacity"
	pts := r.utilization()
	from := r.cfg.From.Hours()
	for i, s := range []struct {
		label  string
		get    func(utilPoint) float64
		dashed bool
	}{
		{"CPU, omega", func(p utilPoint) float64 { return p.ours.CPU }, false},
		{"CPU, trace", func(p utilPoint) float64 { return p.trace.CPU }, true},
		{"memory, omega", func(p utilPoint) float64 { return p.ours.Memory }, false},
		{"memory, trace", func(p utilPoint) float64 { return p.trace.Memory }, true},
	} {
		xy := make(plotter.XYs, len(pts))
		for k, x := range pts {
			xy[k] = plotter.XY{X: from + x.at.Hours(), Y: s.get(x)}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0x1f, 0x77, 0xb4, 0xff},
			color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}}[i]
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(s.label, l)
	}
	p.Legend.Top, p.Legend.Left = false, false // bottom right, below the lines of a busy cell
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max, 1)
	wt, err := p.WriterTo(16*vg.Centimeter, 11*vg.Centimeter, "png")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// jobsHeader is jobs.csv's header: per job of the cell (a trace job's
// tasks submitted together), the replay's outcome beside the trace's: our
// wait until every task was placed, and the trace's until its first and
// its last task was placed (empty where the trace did not within the
// window); at_opening marks the jobs that ran when the window opened.
var jobsHeader = []string{"job", "trace_job", "scheduler", "kind", "tasks", "submitted_s", "first_attempt_s", "placed_s",
	"wait_s", "trace_first_placement_wait_s", "trace_wait_s", "attempts", "conflicted_attempts", "tasks_placed", "abandoned", "at_opening"}

func (r *Replay) writeRow(x jobRow) {
	secs := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatFloat(t.Sub(sim.Epoch).Seconds(), 'f', 3, 64)
	}
	us := func(d int64) string {
		if d < 0 {
			return ""
		}
		return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64)
	}
	wait := ""
	if !x.placed.IsZero() {
		wait = strconv.FormatFloat(x.placed.Sub(x.submitted).Seconds(), 'f', 3, 64)
	}
	r.jobs.Write([]string{x.name, strconv.FormatInt(x.traceJob, 10), x.scheduler, x.kind, strconv.Itoa(int(x.tasks)),
		secs(x.submitted), secs(x.firstAt), secs(x.placed), wait, us(x.traceFirst), us(x.traceAll),
		strconv.Itoa(x.attempts), strconv.Itoa(x.conflict), strconv.Itoa(x.placedN), strconv.FormatBool(x.abandoned), strconv.FormatBool(x.opening)})
}

// FinishJobsCSV writes the rows of the jobs still in the cell after those
// that left it during the run (Config.JobsCSV), and flushes: jobs.csv has
// the jobs in the order they left the cell, then the rest by submission.
func (r *Replay) FinishJobsCSV() error {
	if r.jobs == nil {
		return nil
	}
	for _, x := range r.liveRows() {
		r.writeRow(x)
	}
	r.jobs.Flush()
	return r.jobs.Error()
}

// examples are the reader's example places, as "file:line".
func examples(in map[string][]trace.Pos) map[string][]string {
	if len(in) == 0 {
		return nil
	}
	out := map[string][]string{}
	for cause, ps := range in {
		for _, p := range ps {
			out[cause] = append(out[cause], p.String())
		}
	}
	return out
}
