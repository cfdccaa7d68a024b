package workload

import (
	"cmp"
	"github.com/omega-cell/omega/bench/trace/google2011"
	"math"
	"slices"
)

// This file derives the workload's distributions from the Google 2011 trace,
// as the Omega paper derives its lightweight simulator's inputs from Google's
// traces. The result is written into fitted.go as literals (see
// TestFittedLiteralsMatchTrace); nothing here runs when a workload is
// generated.
//
// The conventions, all documented in docs/WORKLOADS.md:
//   - A job's class is the priority of its first task event in file order:
//     service if it is in the production band (>= 9), batch otherwise.
//   - Arrivals are the jobs whose job SUBMIT event is after time 0; jobs
//     submitted at time 0 were already there when the window opened, and the
//     service ones among them are the pre-fill's model.
//   - A job's task count is the number of distinct task indices with a task
//     SUBMIT event in the file; its CPU and memory per task are the requests
//     on its first SCHEDULE event (else its first event that carries
//     requests): one value per job, as the generator gives every task of a
//     job the same request.
//   - A job's runtime is from its SUBMIT to its first terminal job event
//     (FAIL, FINISH, KILL, LOST), censored at the window's end; only its
//     Kaplan–Meier survival at a few durations is kept, to check the
//     runtime model against (the window is too short to fit a tail).

// ClassifyPriority returns the class of a 2011 job of priority p: service
// for the production band (p >= 9), batch otherwise.
func ClassifyPriority(p int) Kind {
	if p >= google2011.ProductionPriority {
		return KindService
	}
	return KindBatch
}

// ClassifyCMBPBB is the split Google's Omega simulator used ("CMB_PBB"):
// service only for production jobs whose scheduling class is 2 or 3. It is
// not the one the workload uses; the fit reports what it would give.
func ClassifyCMBPBB(p, schedulingClass int) Kind {
	if p >= google2011.ProductionPriority && schedulingClass >= 2 {
		return KindService
	}
	return KindBatch
}

// TableKnots is the number of knots of every fitted quantile table.
const TableKnots = 40

// SurvivalSeconds are the durations at which the runtime survival is
// estimated.
var SurvivalSeconds = []float64{30, 60, 120, 300, 600, 1200, 1800, 2400, 3600}

// Fitted is what the fit derives from the trace; fitted.go holds it as a
// literal (Google2011Fit).
type Fitted struct {
	// TaskRows and JobRows count the rows fitted.
	TaskRows, JobRows int
	// WindowEndSeconds is the last event time, in seconds.
	WindowEndSeconds float64
	// JobsWithoutTasks counts submitted jobs with no task event (skipped).
	JobsWithoutTasks int
	// Batch and Service are fitted to the jobs that arrive after time 0.
	Batch, Service ClassFit
	// Prefill is fitted to the service jobs already there at time 0.
	Prefill ClassFit
	// RunningAtZero sums the requests of the tasks scheduled at time 0
	// (running when the window opened), by class.
	RunningAtZero struct{ Batch, Service Snapshot }
	// CMBPBBServiceArrivals and CMBPBBServiceSpanSeconds: how many arrivals
	// Google's CMB_PBB split would call service, and the time between the
	// first and the last of them.
	CMBPBBServiceArrivals    int
	CMBPBBServiceSpanSeconds float64
}

// ClassFit describes one class of jobs. Resource amounts are normalised as
// in the trace (the largest machine has 1.0).
type ClassFit struct {
	Jobs int
	// Interarrival statistics of the SUBMIT times (seconds); zero for
	// Prefill. Gaps is their empirical distribution (the paper's simulator
	// samples arrivals from it: Config.Arrivals Empirical), empty for
	// Prefill.
	InterarrivalMean, InterarrivalCV float64
	Gaps                             QuantileTable
	// Tasks per job, CPU per task, memory per task: the fitted tables and
	// the means of the samples they were fitted to.
	Tasks, CPU, Memory             QuantileTable
	TasksMean, CPUMean, MemoryMean float64
	// TotalTasks is the sum of the jobs' task counts; TaskWeightedCPUMean
	// and TaskWeightedMemoryMean weigh each job's request by its tasks.
	TotalTasks                                  int
	TaskWeightedCPUMean, TaskWeightedMemoryMean float64
	// ZeroCPUJobs counts jobs requesting no CPU at all.
	ZeroCPUJobs int
	// Priorities counts the jobs at each priority, ascending.
	Priorities []PriorityCount
	// Survival is the Kaplan–Meier estimate of P(runtime > t) at
	// SurvivalSeconds (arrivals only).
	Survival []SurvivalPoint
}

// Snapshot is the number of tasks and the sums of their normalised CPU and
// memory requests.
type Snapshot struct {
	Tasks       int
	CPU, Memory float64
}

// PriorityCount is how many jobs of a class had one priority.
type PriorityCount struct {
	Priority int
	Jobs     int
}

// SurvivalPoint is one point of a survival curve: the estimated share of
// jobs still running Seconds after submission, and how many were observed
// that long (the rest had ended or the window closed on them).
type SurvivalPoint struct {
	Seconds  float64
	Survival float64
	AtRisk   int
}

// jobAgg is what the fit keeps per job from task events.
type jobAgg struct {
	priority, schedClass int8
	tasks                map[int64]struct{}
	cpu, mem             google2011.Optional[float64] // first event with requests
	schedCPU, schedMem   google2011.Optional[float64] // first SCHEDULE event with requests
}

// request returns the job's per-task request: at its first SCHEDULE (what
// its task held when placed; at time 0 it can differ from the SUBMIT row's,
// which gives the request before later updates), else at its first event
// with requests.
func (j *jobAgg) request() (cpu, mem google2011.Optional[float64]) {
	if j.schedCPU.Known {
		return j.schedCPU, j.schedMem
	}
	return j.cpu, j.mem
}

// Fitter accumulates trace rows (in any mix of the two tables) and fits.
// Memory grows with the jobs and distinct tasks seen.
type Fitter struct {
	jobs      map[int64]*jobAgg
	submit    map[int64]int64 // first job SUBMIT time
	submitIDs []int64         // in file order
	ended     map[int64]int64 // first terminal job event time
	end       int64
	running   [2]Snapshot // batch, service: tasks scheduled at time 0
	taskRows  int
	jobRows   int
}

// NewFitter returns an empty Fitter.
func NewFitter() *Fitter {
	return &Fitter{jobs: map[int64]*jobAgg{}, submit: map[int64]int64{}, ended: map[int64]int64{}}
}

func (f *Fitter) seeTime(t int64) {
	if t != google2011.AfterTrace && t > f.end {
		f.end = t
	}
}

// AddTaskEvent adds one task_events row.
func (f *Fitter) AddTaskEvent(e google2011.TaskEvent) {
	f.taskRows++
	f.seeTime(e.Time)
	j := f.jobs[e.JobID]
	if j == nil {
		j = &jobAgg{priority: e.Priority, schedClass: e.SchedulingClass, tasks: map[int64]struct{}{}}
		f.jobs[e.JobID] = j
	}
	if e.Type == google2011.Submit {
		j.tasks[e.TaskIndex] = struct{}{}
	}
	if e.Time == 0 && e.Type == google2011.Schedule && e.CPURequest.Known && e.MemoryRequest.Known {
		s := &f.running[0]
		if ClassifyPriority(int(j.priority)) == KindService {
			s = &f.running[1]
		}
		s.Tasks++
		s.CPU += e.CPURequest.Value
		s.Memory += e.MemoryRequest.Value
	}
	if e.CPURequest.Known && e.MemoryRequest.Known {
		if !j.cpu.Known {
			j.cpu, j.mem = e.CPURequest, e.MemoryRequest
		}
		if !j.schedCPU.Known && e.Type == google2011.Schedule {
			j.schedCPU, j.schedMem = e.CPURequest, e.MemoryRequest
		}
	}
}

// AddJobEvent adds one job_events row.
func (f *Fitter) AddJobEvent(e google2011.JobEvent) {
	f.jobRows++
	f.seeTime(e.Time)
	switch e.Type {
	case google2011.Submit:
		if _, ok := f.submit[e.JobID]; !ok {
			f.submit[e.JobID] = e.Time
			f.submitIDs = append(f.submitIDs, e.JobID)
		}
	case google2011.Fail, google2011.Finish, google2011.Kill, google2011.Lost:
		if _, ok := f.ended[e.JobID]; !ok {
			f.ended[e.JobID] = e.Time
		}
	}
}

// classSamples gathers one class's per-job samples.
type classSamples struct {
	submits                            []int64 // µs
	tasks, cpu, mem                    []float64
	weighted, weightedCPU, weightedMem float64 // task count, and CPU and memory times task count
	zeroCPU                            int
	prios                              map[int]int
	runtimes                           []runtimeObs
}

type runtimeObs struct {
	seconds float64
	ended   bool
}

// Fit returns the fitted figures. It can be called more than once.
func (f *Fitter) Fit() Fitted {
	out := Fitted{TaskRows: f.taskRows, JobRows: f.jobRows, WindowEndSeconds: float64(f.end) / 1e6}
	var batch, service, prefill classSamples
	var cmb []int64
	for _, id := range f.submitIDs {
		t := f.submit[id]
		j := f.jobs[id]
		if j == nil {
			out.JobsWithoutTasks++
			continue
		}
		kind := ClassifyPriority(int(j.priority))
		var c *classSamples
		switch {
		case t == 0 && kind == KindService:
			c = &prefill
		case t == 0:
			continue // batch already running: neither an arrival nor pre-fill
		case kind == KindService:
			c = &service
		default:
			c = &batch
		}
		if t > 0 && ClassifyCMBPBB(int(j.priority), int(j.schedClass)) == KindService {
			cmb = append(cmb, t)
		}
		c.submits = append(c.submits, t)
		n := float64(len(j.tasks))
		c.tasks = append(c.tasks, n)
		if cpu, mem := j.request(); cpu.Known {
			c.cpu = append(c.cpu, cpu.Value)
			c.mem = append(c.mem, mem.Value)
			c.weightedCPU += n * cpu.Value
			c.weightedMem += n * mem.Value
			c.weighted += n
			if cpu.Value == 0 {
				c.zeroCPU++
			}
		}
		if c.prios == nil {
			c.prios = map[int]int{}
		}
		c.prios[int(j.priority)]++
		if t > 0 {
			if end, ok := f.ended[id]; ok {
				c.runtimes = append(c.runtimes, runtimeObs{float64(end-t) / 1e6, true})
			} else {
				c.runtimes = append(c.runtimes, runtimeObs{float64(f.end-t) / 1e6, false})
			}
		}
	}
	out.Batch = batch.fit(true)
	out.Service = service.fit(true)
	out.Prefill = prefill.fit(false)
	out.RunningAtZero.Batch, out.RunningAtZero.Service = f.running[0], f.running[1]
	out.CMBPBBServiceArrivals = len(cmb)
	if len(cmb) > 1 {
		slices.Sort(cmb)
		out.CMBPBBServiceSpanSeconds = float64(cmb[len(cmb)-1]-cmb[0]) / 1e6
	}
	return out
}

func (c *classSamples) fit(arrivals bool) ClassFit {
	out := ClassFit{Jobs: len(c.tasks), ZeroCPUJobs: c.zeroCPU}
	if len(c.tasks) == 0 {
		return out
	}
	if arrivals && len(c.submits) > 1 {
		slices.Sort(c.submits)
		gaps := make([]float64, len(c.submits)-1)
		for i := range gaps {
			gaps[i] = float64(c.submits[i+1]-c.submits[i]) / 1e6
		}
		m := mean(gaps)
		out.InterarrivalMean = m
		out.InterarrivalCV = stddev(gaps, m) / m
		out.Gaps = FitQuantileTable(gaps, TableKnots)
	}
	out.Tasks, out.TasksMean = FitQuantileTable(c.tasks, TableKnots), mean(c.tasks)
	for _, n := range c.tasks {
		out.TotalTasks += int(n)
	}
	if len(c.cpu) > 0 {
		out.CPU, out.CPUMean = FitQuantileTable(c.cpu, TableKnots), mean(c.cpu)
		out.Memory, out.MemoryMean = FitQuantileTable(c.mem, TableKnots), mean(c.mem)
		out.TaskWeightedCPUMean = c.weightedCPU / c.weighted
		out.TaskWeightedMemoryMean = c.weightedMem / c.weighted
	}
	for p, n := range c.prios {
		out.Priorities = append(out.Priorities, PriorityCount{Priority: p, Jobs: n})
	}
	slices.SortFunc(out.Priorities, func(a, b PriorityCount) int { return cmp.Compare(a.Priority, b.Priority) })
	if arrivals {
		out.Survival = kaplanMeier(c.runtimes, SurvivalSeconds)
	}
	return out
}

// kaplanMeier estimates P(T > t) at each of ts from right-censored
// observations.
func kaplanMeier(obs []runtimeObs, ts []float64) []SurvivalPoint {
	obs = slices.Clone(obs)
	// Ends before censorings at equal times (the usual convention).
	slices.SortFunc(obs, func(a, b runtimeObs) int {
		if c := cmp.Compare(a.seconds, b.seconds); c != 0 {
			return c
		}
		switch {
		case a.ended == b.ended:
			return 0
		case a.ended:
			return -1
		}
		return 1
	})
	out := make([]SurvivalPoint, len(ts))
	s, atRisk, i := 1.0, len(obs), 0
	for k, t := range ts {
		for i < len(obs) && obs[i].seconds <= t {
			if obs[i].ended {
				s *= 1 - 1/float64(atRisk)
			}
			atRisk--
			i++
		}
		out[k] = SurvivalPoint{Seconds: t, Survival: s, AtRisk: atRisk}
	}
	return out
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func stddev(x []float64, m float64) float64 {
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(x)))
}

// FitQuantileTable approximates the empirical distribution of samples (see
// NewEmpirical) by a table of at most knots knots (>= 2): starting from the
// two ends, it repeatedly adds the sample knot that most reduces the area
// between the two inverse CDFs (the Wasserstein-1 distance between the
// distributions, which bounds the error of the mean), until the table has
// knots knots or is exact. It is deterministic. No samples give an empty
// (invalid) table.
func FitQuantileTable(samples []float64, knots int) QuantileTable {
	if len(samples) == 0 {
		return QuantileTable{}
	}
	knots = max(knots, 2)
	x := slices.Clone(samples)
	slices.Sort(x)
	p, v := hazenKnots(x)
	// Within a run of equal values only the run's ends matter.
	cp, cv := p[:1:1], v[:1:1]
	for i := 1; i < len(p); i++ {
		if i+1 < len(p) && v[i-1] == v[i] && v[i] == v[i+1] {
			continue
		}
		cp, cv = append(cp, p[i]), append(cv, v[i])
	}
	p, v = cp, cv
	type seg struct {
		a, b  int     // knot indices into p, v
		err   float64 // area between the full curve and the chord a-b
		split int     // best knot to add, or -1
		gain  float64
	}
	best := func(a, b int) seg {
		s := seg{a: a, b: b, err: chordError(p, v, a, b), split: -1}
		for k := a + 1; k < b; k++ {
			if g := s.err - chordError(p, v, a, k) - chordError(p, v, k, b); g > s.gain {
				s.gain, s.split = g, k
			}
		}
		return s
	}
	segs := []seg{best(0, len(p)-1)}
	for len(segs)+1 < knots {
		i := -1
		for j, s := range segs {
			if s.split >= 0 && (i < 0 || s.gain > segs[i].gain) {
				i = j
			}
		}
		if i < 0 {
			break // exact
		}
		s := segs[i]
		segs = slices.Replace(segs, i, i+1, best(s.a, s.split), best(s.split, s.b))
	}
	t := QuantileTable{P: make([]float64, 0, len(segs)+1), V: make([]float64, 0, len(segs)+1)}
	for _, s := range segs {
		t.P, t.V = append(t.P, p[s.a]), append(t.V, v[s.a])
	}
	last := segs[len(segs)-1].b
	t.P, t.V = append(t.P, p[last]), append(t.V, v[last])
	return t
}

// chordError is the area between the piecewise-linear curve through knots
// a..b and the straight line from knot a to knot b.
func chordError(p, v []float64, a, b int) float64 {
	if b-a < 2 {
		return 0
	}
	slope := (v[b] - v[a]) / (p[b] - p[a])
	area := 0.0
	d0 := 0.0 // the curve minus the chord at knot k
	for k := a; k < b; k++ {
		d1 := v[k+1] - (v[a] + slope*(p[k+1]-p[a]))
		w := p[k+1] - p[k]
		if (d0 >= 0) == (d1 >= 0) {
			area += w * math.Abs(d0+d1) / 2
		} else {
			area += w * (d0*d0 + d1*d1) / (2 * (math.Abs(d0) + math.Abs(d1)))
		}
		d0 = d1
	}
	return area
}

// wasserstein1 returns the area between the inverse CDFs of e and the empirical
// distribution of samples (the Wasserstein-1 distance), by integrating
// over a fine grid of probabilities.
func wasserstein1(e *Empirical, samples []float64) float64 {
	full, err := NewEmpirical(samples)
	if err != nil {
		return math.NaN()
	}
	const n = 200000
	s := 0.0
	for i := range n {
		u := (float64(i) + 0.5) / n
		s += math.Abs(e.Quantile(u) - full.Quantile(u))
	}
	return s / n
}
