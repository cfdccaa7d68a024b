package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Kind is a job's kind; its String is also the name of the scheduler kind
// that places it.
type Kind uint8

const (
	KindBatch Kind = iota + 1
	KindService
	KindMapReduce
)

func (k Kind) String() string {
	switch k {
	case KindBatch:
		return "batch"
	case KindService:
		return "service"
	case KindMapReduce:
		return "mapreduce"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Unit conversion. The 2011 trace normalises every resource so that the
// largest machine of the cell has 1.0 of it. Its most common machines
// (about 92% of the cell) have 0.5 CPU, and 0.5 (the commonest) or 0.25
// memory; omega's default machine (4 cores, 16 GiB) stands for the
// commonest one, 0.5 CPU and 0.5 memory. A request of r is therefore
// r / 0.5 of a Config machine: with the defaults 1.0 CPU is 8 cores (8,000
// millis) and 1.0 memory 32 GiB. A task so takes the same share of a machine
// as it did in the trace.
const (
	TraceReferenceCPU    = 0.5
	TraceReferenceMemory = 0.5
)

// Floors of a generated request: the trace has jobs requesting 0 CPU (8% of
// batch arrivals, 47% of service ones); every task declares at least this.
const (
	MinTaskCPUMillis   = 1
	MinTaskMemoryBytes = 1 << 20
)

// Config describes a synthetic cell: the paper's lightweight setup. The zero
// value is not valid; start from Default. Every field's default says where
// it comes from.
type Config struct {
	// Machines in the cell. Default 10,000 (the paper's lightweight
	// simulator; Google's trace cell had about 12,500).
	Machines int
	// MachineCPUMillis and MachineMemoryBytes: every machine's capacity
	// (the setup is homogeneous). Default 4 cores and 16 GiB, the paper's.
	MachineCPUMillis   int64
	MachineMemoryBytes int64
	// MachinesPerFailureDomain groups consecutive machines into failure
	// domains (racks) for the service scheduler to spread over. Default 40,
	// a rack.
	MachinesPerFailureDomain int
	// PrefillUtilization is the share of the cell's CPU the pre-fill's
	// long-running service tasks request (memory follows from their
	// requests). Default 0.6, the paper's; in the trace, service tasks hold
	// 66% of the CPU requested by the tasks running when the window opens.
	PrefillUtilization float64
	// Days of arrivals, from MinDays (86.4 simulated seconds) to MaxDays.
	// Default 7, the paper's runs.
	Days float64
	// BatchInterarrival and ServiceInterarrival are the means of the
	// exponential time between arrivals of each class (Poisson arrivals) in
	// a cell of TraceMachines machines at Load 1. Defaults: fitted to the
	// trace (Google2011Fit).
	BatchInterarrival   time.Duration
	ServiceInterarrival time.Duration
	// Arrivals is how the time between a class's arrivals is drawn, with
	// the means above: PoissonArrivals (exponential gaps, the default) or
	// EmpiricalArrivals (the trace's own gaps, scaled to the mean).
	Arrivals ArrivalModel
	// TraceMachines is the size of the cell the interarrivals were measured
	// in. Default 12,500, the fitted trace's cell. Set it to Machines when
	// the interarrivals are for the simulated cell itself.
	TraceMachines int
	// Load is the offered load per machine, as a multiple of the trace
	// cell's: the arrival rates are the interarrivals' scaled by
	// Load × Machines / TraceMachines, so a cell of any size at Load 1 is
	// as busy as the trace's (a smaller cell gets fewer jobs, not a
	// saturating share of the trace's). From MinLoad to MaxLoad; default 1.
	Load float64
	// MapReduceShare is the share of batch arrivals that are MapReduce jobs.
	// Default 0.2, as the paper reports.
	MapReduceShare float64
	// MapTasksPerWorker sets a MapReduce job's map tasks (the most workers
	// it can use) to this multiple of the workers it requests. The trace
	// has no such figure; default 16, the mapreduce scheduler's own default
	// for a job without map tasks.
	MapTasksPerWorker int
	// GPUMachineShare of the machines (spread evenly over the cell) carry
	// GPUsPerMachine GPUs each, the extended resource "gpu"; GPUJobShare of
	// the batch jobs (not MapReduce) ask for one GPU per task, at most a
	// tenth of the cell's GPUs a job. All default 0 (GPUsPerMachine 8 once
	// GPUMachineShare is set): the workload has no GPUs, and its other
	// draws are the same either way (the GPU draws have a stream of their
	// own). A newer resource dimension, for a scheduler that does not know
	// it (issue 10's faults).
	GPUMachineShare float64
	GPUsPerMachine  int
	GPUJobShare     float64
	// BatchRuntime and ServiceRuntime model a job's runtime in seconds
	// (every task of the job runs that long; MapReduce jobs use
	// BatchRuntime). Defaults: DefaultBatchRuntime, DefaultServiceRuntime.
	BatchRuntime, ServiceRuntime LognormalPareto
	// Seed seeds every random stream. Default 1.
	Seed uint64
}

// Default runtime models (seconds); see docs/WORKLOADS.md. Their bodies
// follow the trace excerpt's Kaplan–Meier runtime estimates, which the
// 1.5-hour window observes up to about an hour; the Pareto tails beyond are
// a model, cut at 29 days (the whole trace's length).
var (
	// Batch: median 175 s, a quarter over about 9 min, 10% over 26 min,
	// then a Pareto tail of shape 1.1. Mean about 20 min.
	DefaultBatchRuntime = LognormalPareto{Median: 175, Sigma: 1.7, TailFrom: 0.9, Alpha: 1.1, Min: 1, Max: 29 * 86400}
	// Service: the production-priority arrivals are mostly short (median
	// 73 s) but 5% outlive 23 min and then hardly end: a very heavy tail
	// (shape 0.3), 0.5% running for all 29 days. Mean about 5.3 h.
	DefaultServiceRuntime = LognormalPareto{Median: 73, Sigma: 1.8, TailFrom: 0.95, Alpha: 0.3, Min: 1, Max: 29 * 86400}
)

// Default returns the paper's lightweight setup with the trace's fitted
// figures.
func Default() Config {
	return Config{
		Machines:                 10000,
		MachineCPUMillis:         4000,
		MachineMemoryBytes:       16 << 30,
		MachinesPerFailureDomain: 40,
		PrefillUtilization:       0.6,
		Days:                     7,
		BatchInterarrival:        seconds(Google2011Fit.Batch.InterarrivalMean),
		ServiceInterarrival:      seconds(Google2011Fit.Service.InterarrivalMean),
		TraceMachines:            TraceCellMachines,
		Load:                     1,
		MapReduceShare:           0.2,
		MapTasksPerWorker:        16,
		BatchRuntime:             DefaultBatchRuntime,
		ServiceRuntime:           DefaultServiceRuntime,
		Seed:                     1,
	}
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// TraceCellMachines is the size of the fitted trace's cell (Google 2011,
// cluster C: about 12,500 machines), for which the default interarrivals
// hold.
const TraceCellMachines = 12500

// arrivalScale is what the interarrivals are multiplied by: the cell's
// size and the offered load per machine relative to the trace cell's.
func (c *Config) arrivalScale() float64 {
	return float64(c.TraceMachines) / (float64(c.Machines) * c.Load)
}

// ErrConfig is wrapped by every Validate error.
var ErrConfig = errors.New("invalid workload config")

// FieldError is the error of Config.Validate and LognormalPareto.Validate:
// the field, by its Go name, its value and what it may be. It wraps
// ErrConfig.
type FieldError struct {
	// In is what was validated: its Go type ("workload.Config"), or its
	// path from an enclosing config that checked it ("sim.Config.Workload").
	In string
	// Field is the field's path within In: "Days", "BatchRuntime.Median".
	Field string
	Value any
	Want  string
}

// Name is the field's full Go name: In.Field.
func (e *FieldError) Name() string { return e.In + "." + e.Field }

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s = %v: want %s", ErrConfig, e.Name(), e.Value, e.Want)
}

func (e *FieldError) Unwrap() error { return ErrConfig }

// The bounds Config.Validate checks. Each is far beyond what a simulated
// cell needs; past them a run only exhausts memory or overflows a counter.
const (
	// MaxMachines: the store and the fleet hold every machine and its
	// tasks in memory; a million is 80 times the trace's cell.
	MaxMachines = 1_000_000
	// MaxMachineCPUMillis and MaxMachineMemoryBytes bound a machine
	// (about a million cores, 8 TiB): MaxMachines of them still total
	// less than 2^63 of either.
	MaxMachineCPUMillis   = 1 << 30
	MaxMachineMemoryBytes = 1 << 43
	// MinDays is 86.4 simulated seconds (the engine samples utilisation
	// once a minute; a shorter run measures nothing); MaxDays is ten years.
	MinDays, MaxDays = 0.001, 3650
	// MinInterarrival and MaxInterarrival bound the mean time between two
	// arrivals of a class: 10,000 jobs a second (more than any cell of
	// MaxMachines places), and ten years (none in the longest run).
	MinInterarrival = 100 * time.Microsecond
	MaxInterarrival = MaxDays * 24 * time.Hour
	// MinLoad and MaxLoad bound the offered load per machine: at 0.01 a
	// trace-sized cell gets a batch job every 10 minutes (a week still sees
	// about a thousand); at 100, 16 a second, far past what any cell places.
	MinLoad, MaxLoad = 0.01, 100
	// MaxMapTasksPerWorker: map tasks per requested worker.
	MaxMapTasksPerWorker = 1000
	// MaxRuntimeSeconds bounds LognormalPareto.Max where it models
	// runtimes: ten years, the longest run.
	MaxRuntimeSeconds = MaxDays * 86400
)

// Validate reports the first field out of range, as a *FieldError naming
// it (workload.Config.Days): floats must be finite, counts and capacities
// positive and every value within the bounds above.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return &FieldError{In: "workload.Config", Field: field, Value: v, Want: want}
	}
	switch {
	case c.Machines < 1 || c.Machines > MaxMachines:
		return bad("Machines", c.Machines, fmt.Sprintf("a whole number of machines from 1 to %d", MaxMachines))
	case c.MachineCPUMillis < MinTaskCPUMillis || c.MachineCPUMillis > MaxMachineCPUMillis:
		return bad("MachineCPUMillis", c.MachineCPUMillis, fmt.Sprintf("a machine's CPU in millicores, from %d to %d", MinTaskCPUMillis, MaxMachineCPUMillis))
	case c.MachineMemoryBytes < MinTaskMemoryBytes || c.MachineMemoryBytes > MaxMachineMemoryBytes:
		return bad("MachineMemoryBytes", c.MachineMemoryBytes, fmt.Sprintf("a machine's memory in bytes, from %d to %d", MinTaskMemoryBytes, int64(MaxMachineMemoryBytes)))
	case c.MachinesPerFailureDomain < 1 || c.MachinesPerFailureDomain > MaxMachines:
		return bad("MachinesPerFailureDomain", c.MachinesPerFailureDomain, fmt.Sprintf("a whole number from 1 to %d", MaxMachines))
	case !(c.PrefillUtilization >= 0 && c.PrefillUtilization < 1): // also NaN
		return bad("PrefillUtilization", c.PrefillUtilization, "a share of the cell's CPU, at least 0 and less than 1")
	case !(c.Days >= MinDays && c.Days <= MaxDays): // also NaN
		return bad("Days", c.Days, fmt.Sprintf("a finite number of simulated days from %v to %v", MinDays, MaxDays))
	case c.BatchInterarrival < MinInterarrival || c.BatchInterarrival > MaxInterarrival:
		return bad("BatchInterarrival", c.BatchInterarrival, fmt.Sprintf("a mean time between arrivals from %v to %v", MinInterarrival, MaxInterarrival))
	case c.ServiceInterarrival < MinInterarrival || c.ServiceInterarrival > MaxInterarrival:
		return bad("ServiceInterarrival", c.ServiceInterarrival, fmt.Sprintf("a mean time between arrivals from %v to %v", MinInterarrival, MaxInterarrival))
	case c.TraceMachines < 1 || c.TraceMachines > MaxMachines:
		return bad("TraceMachines", c.TraceMachines, fmt.Sprintf("the machines of the cell the interarrivals are for, from 1 to %d", MaxMachines))
	case c.Arrivals != PoissonArrivals && c.Arrivals != EmpiricalArrivals:
		return bad("Arrivals", c.Arrivals, "poisson or empirical")
	case !(c.Load >= MinLoad && c.Load <= MaxLoad): // also NaN
		return bad("Load", c.Load, fmt.Sprintf("the offered load per machine as a multiple of the trace cell's, from %v to %v", MinLoad, MaxLoad))
	case !(float64(c.BatchInterarrival)*c.arrivalScale() >= float64(MinInterarrival)):
		return bad("Load", c.Load, fmt.Sprintf("a load at which %d machines get at most one batch job every %v (the mean gap would be %v)",
			c.Machines, MinInterarrival, time.Duration(float64(c.BatchInterarrival)*c.arrivalScale())))
	case !(float64(c.ServiceInterarrival)*c.arrivalScale() >= float64(MinInterarrival)):
		return bad("Load", c.Load, fmt.Sprintf("a load at which %d machines get at most one service job every %v", c.Machines, MinInterarrival))
	case !(c.MapReduceShare >= 0 && c.MapReduceShare <= 1): // also NaN
		return bad("MapReduceShare", c.MapReduceShare, "a share of batch arrivals from 0 to 1")
	case !(c.GPUMachineShare >= 0 && c.GPUMachineShare <= 1): // also NaN
		return bad("GPUMachineShare", c.GPUMachineShare, "a share of the machines from 0 to 1")
	case c.GPUsPerMachine < 0 || c.GPUsPerMachine > MaxGPUsPerMachine:
		return bad("GPUsPerMachine", c.GPUsPerMachine, fmt.Sprintf("a whole number from 0 to %d", MaxGPUsPerMachine))
	case !(c.GPUJobShare >= 0 && c.GPUJobShare <= 1):
		return bad("GPUJobShare", c.GPUJobShare, "a share of the batch jobs from 0 to 1")
	case c.GPUJobShare > 0 && c.gpus() == 0:
		return bad("GPUJobShare", c.GPUJobShare, "0, or GPU machines (GPUMachineShare) for the jobs to use")
	case c.MapTasksPerWorker < 1 || c.MapTasksPerWorker > MaxMapTasksPerWorker:
		return bad("MapTasksPerWorker", c.MapTasksPerWorker, fmt.Sprintf("a whole number from 1 to %d", MaxMapTasksPerWorker))
	}
	for _, m := range []struct {
		field string
		d     LognormalPareto
	}{{"BatchRuntime", c.BatchRuntime}, {"ServiceRuntime", c.ServiceRuntime}} {
		err := m.d.Validate()
		if err == nil && m.d.Max > MaxRuntimeSeconds {
			err = &FieldError{Field: "Max", Value: m.d.Max, Want: fmt.Sprintf("a runtime in seconds up to %d (ten years)", MaxRuntimeSeconds)}
		}
		if fe, ok := err.(*FieldError); ok {
			return &FieldError{In: "workload.Config", Field: m.field + "." + fe.Field, Value: fe.Value, Want: fe.Want}
		}
		if err != nil {
			return fmt.Errorf("%w: workload.Config.%s: %v", ErrConfig, m.field, err)
		}
	}
	return nil
}

// Machine is one machine of the synthetic cell.
type Machine struct {
	Name          string
	CPUMillis     int64
	MemoryBytes   int64
	FailureDomain string
	GPUs          int64 // the extended resource "gpu"; 0: none
}

// JobArrival is one job of the workload, in plain values (see Objects for
// the store's form).
type JobArrival struct {
	// Seq numbers the jobs of a stream from 1 in order; pre-fill jobs have
	// their own numbering.
	Seq  int64
	Name string // unique within a Generator: kind and Seq ("batch-12", "prefill-3")
	Kind Kind
	// Submit is the virtual time since the start of the simulation.
	Submit time.Duration
	// Tasks is the number of tasks (for MapReduce, the workers requested).
	Tasks int
	// Per-task request.
	CPUMillis   int64
	MemoryBytes int64
	GPUs        int64 // the extended resource "gpu"; 0: none
	// Duration is every task's runtime; 0 means "runs until stopped" (the
	// pre-fill).
	Duration time.Duration
	Priority int32
	// Workers is what a MapReduce job requests (= Tasks), MapTasks the most
	// workers it can use; both 0 for other kinds.
	Workers, MapTasks int
}

// class holds what one class draws from.
type class struct {
	tasks, cpu, mem *Empirical
	prios           []PriorityCount
	prioTotal       int
}

func newClass(f ClassFit) (class, error) {
	var c class
	var err error
	if c.tasks, err = f.Tasks.Empirical(); err != nil {
		return c, fmt.Errorf("tasks: %w", err)
	}
	if c.cpu, err = f.CPU.Empirical(); err != nil {
		return c, fmt.Errorf("cpu: %w", err)
	}
	if c.mem, err = f.Memory.Empirical(); err != nil {
		return c, fmt.Errorf("memory: %w", err)
	}
	c.prios = f.Priorities
	for _, p := range f.Priorities {
		c.prioTotal += p.Jobs
	}
	if c.prioTotal <= 0 {
		return c, errors.New("no priorities")
	}
	return c, nil
}

// The random streams, one per use, so that changing one class's parameters
// leaves the others' draws alone.
const (
	streamBatch uint64 = iota + 1
	streamService
	streamPrefill
	streamGPU
)

// MaxGPUsPerMachine bounds Config.GPUsPerMachine.
const MaxGPUsPerMachine = 64

// gpuMachine reports whether machine i of the cell carries GPUs: a
// GPUMachineShare of them, spread evenly.
func (c Config) gpuMachine(i int) bool {
	return math.Floor(float64(i+1)*c.GPUMachineShare) > math.Floor(float64(i)*c.GPUMachineShare)
}

// gpusPerMachine is GPUsPerMachine, 8 when unset.
func (c Config) gpusPerMachine() int64 {
	if c.GPUsPerMachine == 0 {
		return 8
	}
	return int64(c.GPUsPerMachine)
}

// gpus is how many GPUs the cell has.
func (c Config) gpus() int64 {
	return int64(math.Floor(float64(c.Machines)*c.GPUMachineShare)) * c.gpusPerMachine()
}

// Generator produces a synthetic cell from a Config: its machines, its
// pre-fill, and a lazily generated stream of job arrivals in time order.
// The same Config gives the same machines, pre-fill and stream. Not safe
// for concurrent use.
type Generator struct {
	cfg                     Config
	end                     time.Duration
	cpuScale, memScale      float64 // per normalised unit
	batch, service, prefill class
	bs, ss                  arrivals
	gpu                     *rand.Rand // which batch jobs ask for GPUs
	seq                     int64
}

// arrivals is one Poisson stream.
type arrivals struct {
	r     *rand.Rand
	gap   Dist // seconds
	next  time.Duration
	clock float64 // seconds, exact sum of the gaps
}

func (a *arrivals) advance() {
	a.clock += a.gap.Sample(a.r)
	// A draw far in the exponential's tail may pass the largest Duration
	// (whose conversion from a float would then be undefined): it arrives
	// never, after every run's end.
	if ns := a.clock * float64(time.Second); ns < math.MaxInt64 {
		a.next = time.Duration(ns)
	} else {
		a.next = math.MaxInt64
	}
}

// New validates cfg and returns its generator.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:      cfg,
		end:      time.Duration(cfg.Days * 24 * float64(time.Hour)),
		cpuScale: float64(cfg.MachineCPUMillis) / TraceReferenceCPU,
		memScale: float64(cfg.MachineMemoryBytes) / TraceReferenceMemory,
	}
	var err error
	if g.batch, err = newClass(Google2011Fit.Batch); err != nil {
		return nil, fmt.Errorf("fitted batch class: %w", err)
	}
	if g.service, err = newClass(Google2011Fit.Service); err != nil {
		return nil, fmt.Errorf("fitted service class: %w", err)
	}
	if g.prefill, err = newClass(Google2011Fit.Prefill); err != nil {
		return nil, fmt.Errorf("fitted prefill class: %w", err)
	}
	scale := cfg.arrivalScale()
	bgap, err := cfg.Arrivals.gaps(Google2011Fit.Batch, cfg.BatchInterarrival.Seconds()*scale)
	if err != nil {
		return nil, fmt.Errorf("fitted batch gaps: %w", err)
	}
	sgap, err := cfg.Arrivals.gaps(Google2011Fit.Service, cfg.ServiceInterarrival.Seconds()*scale)
	if err != nil {
		return nil, fmt.Errorf("fitted service gaps: %w", err)
	}
	g.gpu = g.rand(streamGPU)
	g.bs = arrivals{r: g.rand(streamBatch), gap: bgap}
	g.ss = arrivals{r: g.rand(streamService), gap: sgap}
	g.bs.advance()
	g.ss.advance()
	return g, nil
}

func (g *Generator) rand(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed, stream))
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// End returns the virtual time after which no job arrives.
func (g *Generator) End() time.Duration { return g.end }

// Machines returns the cell's machines, named m00000, m00001, ... in
// failure domains fd0000, fd0001, ... of MachinesPerFailureDomain each.
func (g *Generator) Machines() []Machine {
	out := make([]Machine, g.cfg.Machines)
	for i := range out {
		out[i] = Machine{
			Name:          fmt.Sprintf("m%05d", i),
			CPUMillis:     g.cfg.MachineCPUMillis,
			MemoryBytes:   g.cfg.MachineMemoryBytes,
			FailureDomain: fmt.Sprintf("fd%04d", i/g.cfg.MachinesPerFailureDomain),
		}
		if g.cfg.gpuMachine(i) {
			out[i].GPUs = g.cfg.gpusPerMachine()
		}
	}
	return out
}

// Prefill returns the long-running service jobs that fill the cell before
// the first arrival: jobs drawn from the trace's time-0 service jobs until
// their CPU requests reach PrefillUtilization of the cell's CPU (the last
// job is cut short so that neither the CPU nor the memory requested exceeds
// that share). They are submitted at 0 and run until stopped. Each call
// returns the same jobs.
func (g *Generator) Prefill() []JobArrival {
	r := g.rand(streamPrefill)
	cpuRoom := int64(g.cfg.PrefillUtilization * float64(g.cfg.Machines) * float64(g.cfg.MachineCPUMillis))
	memRoom := int64(g.cfg.PrefillUtilization * float64(g.cfg.Machines) * float64(g.cfg.MachineMemoryBytes))
	var out []JobArrival
	for {
		j := g.draw(r, &g.prefill)
		n := min(int64(j.Tasks), cpuRoom/j.CPUMillis, memRoom/j.MemoryBytes)
		if n <= 0 {
			return out
		}
		j.Tasks = int(n)
		cpuRoom -= n * j.CPUMillis
		memRoom -= n * j.MemoryBytes
		j.Seq = int64(len(out) + 1)
		j.Name = fmt.Sprintf("prefill-%d", j.Seq)
		j.Kind = KindService
		out = append(out, j)
	}
}

// Next returns the next arrival, in non-decreasing Submit order, and false
// once the next one would come after End.
func (g *Generator) Next() (JobArrival, bool) {
	s := &g.bs
	if g.ss.next < g.bs.next {
		s = &g.ss
	}
	if s.next >= g.end {
		return JobArrival{}, false
	}
	var j JobArrival
	if s == &g.bs {
		j = g.draw(s.r, &g.batch)
		j.Kind = KindBatch
		j.Duration = g.runtime(s.r, g.cfg.BatchRuntime)
		if s.r.Float64() < g.cfg.MapReduceShare {
			j.Kind = KindMapReduce
			j.Workers = j.Tasks
			j.MapTasks = int(min(int64(j.Tasks)*int64(g.cfg.MapTasksPerWorker), math.MaxInt32))
		} else if g.cfg.GPUJobShare > 0 && g.gpu.Float64() < g.cfg.GPUJobShare {
			j.GPUs = 1
			j.Tasks = int(min(int64(j.Tasks), max(g.cfg.gpus()/10, 1)))
		}
	} else {
		j = g.draw(s.r, &g.service)
		j.Kind = KindService
		j.Duration = g.runtime(s.r, g.cfg.ServiceRuntime)
	}
	j.Submit = s.next
	g.seq++
	j.Seq = g.seq
	j.Name = fmt.Sprintf("%s-%d", j.Kind, j.Seq)
	s.advance()
	return j, true
}

// draw samples a job's shape (tasks, per-task request, priority) from c.
func (g *Generator) draw(r *rand.Rand, c *class) JobArrival {
	tasks := int(min(max(math.Round(c.tasks.Sample(r)), 1), math.MaxInt32))
	cpu := int64(math.Round(c.cpu.Sample(r) * g.cpuScale))
	mem := int64(math.Round(c.mem.Sample(r) * g.memScale))
	k := r.IntN(c.prioTotal)
	prio := c.prios[len(c.prios)-1].Priority
	for _, p := range c.prios {
		if k < p.Jobs {
			prio = p.Priority
			break
		}
		k -= p.Jobs
	}
	return JobArrival{
		Tasks:       tasks,
		CPUMillis:   min(max(cpu, MinTaskCPUMillis), g.cfg.MachineCPUMillis),
		MemoryBytes: min(max(mem, MinTaskMemoryBytes), g.cfg.MachineMemoryBytes),
		Priority:    int32(prio),
	}
}

// runtime samples a task duration, whole milliseconds, at least 1 ms.
func (g *Generator) runtime(r *rand.Rand, m LognormalPareto) time.Duration {
	ms := math.Round(m.Sample(r) * 1000)
	return time.Duration(max(ms, 1)) * time.Millisecond
}

// ArrivalModel is how the time between a class's arrivals is drawn.
type ArrivalModel int

const (
	// PoissonArrivals draws exponential gaps with the class's mean: a Poisson
	// process, far smoother than the trace (coefficient of variation 1).
	PoissonArrivals ArrivalModel = iota
	// EmpiricalArrivals draws the trace's own gaps (ClassFit.Gaps), scaled to the
	// class's mean, as the Omega paper's simulator samples its arrivals
	// from the trace: burstier (the batch gaps' coefficient of variation
	// is 1.6), and job wait times depend on it.
	EmpiricalArrivals
)

func (m ArrivalModel) String() string {
	switch m {
	case PoissonArrivals:
		return "poisson"
	case EmpiricalArrivals:
		return "empirical"
	}
	return fmt.Sprintf("ArrivalModel(%d)", int(m))
}

// ParseArrivalModel reads poisson or empirical.
func ParseArrivalModel(s string) (ArrivalModel, error) {
	switch s {
	case "poisson":
		return PoissonArrivals, nil
	case "empirical":
		return EmpiricalArrivals, nil
	}
	return 0, fmt.Errorf("arrivals %q: want poisson or empirical", s)
}

// gaps is the distribution of the time between a class's arrivals, in
// seconds, with the given mean.
func (m ArrivalModel) gaps(fit ClassFit, mean float64) (Dist, error) {
	if m == PoissonArrivals {
		return Exponential{mean}, nil
	}
	e, err := fit.Gaps.Empirical()
	if err != nil {
		return nil, err
	}
	if !(e.Mean() > 0) {
		return nil, fmt.Errorf("the fitted gaps have mean %v", e.Mean())
	}
	return scaled{e, mean / e.Mean()}, nil
}

// scaled is a distribution's values times k.
type scaled struct {
	d Dist
	k float64
}

func (s scaled) Sample(r *rand.Rand) float64 { return s.k * s.d.Sample(r) }
func (s scaled) Mean() float64               { return s.k * s.d.Mean() }
