package workload

import (
	"errors"
	"github.com/omega-cell/omega/client"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testConfig(days float64) Config {
	c := Default()
	c.Days = days
	return c
}

func drain(t testing.TB, g *Generator) []JobArrival {
	t.Helper()
	var out []JobArrival
	for {
		j, ok := g.Next()
		if !ok {
			return out
		}
		out = append(out, j)
	}
}

func mustNew(t testing.TB, c Config) *Generator {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDefaultConfig(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Machines != 10000 || c.MachineCPUMillis != 4000 || c.MachineMemoryBytes != 16<<30 ||
		c.PrefillUtilization != 0.6 || c.MapReduceShare != 0.2 || c.Days != 7 {
		t.Errorf("defaults are not the paper's setup: %+v", c)
	}
	near := func(d time.Duration, s float64) bool { return math.Abs(d.Seconds()-s) < 1e-3 }
	if !near(c.BatchInterarrival, 6.059) || !near(c.ServiceInterarrival, 55.945) {
		t.Errorf("interarrivals %v, %v are not the fitted ones", c.BatchInterarrival, c.ServiceInterarrival)
	}
}

// TestValidateNamesTheField: every bad value of every field is refused by
// a *FieldError naming the field by its Go name and quoting the value, and
// New refuses it too.
func TestValidateNamesTheField(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		field, value string
		mutate       func(*Config)
	}{
		{"Machines", "0", func(c *Config) { c.Machines = 0 }},
		{"Machines", "-1", func(c *Config) { c.Machines = -1 }},
		{"Machines", "1000001", func(c *Config) { c.Machines = MaxMachines + 1 }},
		{"MachineCPUMillis", "0", func(c *Config) { c.MachineCPUMillis = 0 }},
		{"MachineCPUMillis", "-1", func(c *Config) { c.MachineCPUMillis = -1 }},
		{"MachineCPUMillis", "1073741825", func(c *Config) { c.MachineCPUMillis = MaxMachineCPUMillis + 1 }},
		{"MachineMemoryBytes", "0", func(c *Config) { c.MachineMemoryBytes = 0 }},
		{"MachineMemoryBytes", "1", func(c *Config) { c.MachineMemoryBytes = 1 }},
		{"MachineMemoryBytes", "-1", func(c *Config) { c.MachineMemoryBytes = -1 }},
		{"MachineMemoryBytes", "8796093022209", func(c *Config) { c.MachineMemoryBytes = MaxMachineMemoryBytes + 1 }},
		{"MachinesPerFailureDomain", "0", func(c *Config) { c.MachinesPerFailureDomain = 0 }},
		{"MachinesPerFailureDomain", "-3", func(c *Config) { c.MachinesPerFailureDomain = -3 }},
		{"MachinesPerFailureDomain", "1000001", func(c *Config) { c.MachinesPerFailureDomain = MaxMachines + 1 }},
		{"PrefillUtilization", "NaN", func(c *Config) { c.PrefillUtilization = nan }},
		{"PrefillUtilization", "+Inf", func(c *Config) { c.PrefillUtilization = inf }},
		{"PrefillUtilization", "-Inf", func(c *Config) { c.PrefillUtilization = -inf }},
		{"PrefillUtilization", "-0.1", func(c *Config) { c.PrefillUtilization = -0.1 }},
		{"PrefillUtilization", "1", func(c *Config) { c.PrefillUtilization = 1 }},
		{"Days", "NaN", func(c *Config) { c.Days = nan }},
		{"Days", "+Inf", func(c *Config) { c.Days = inf }},
		{"Days", "-Inf", func(c *Config) { c.Days = -inf }},
		{"Days", "0", func(c *Config) { c.Days = 0 }},
		{"Load", "NaN", func(c *Config) { c.Load = nan }},
		{"Load", "+Inf", func(c *Config) { c.Load = inf }},
		{"Load", "0", func(c *Config) { c.Load = 0 }},
		{"Load", "1e-300", func(c *Config) { c.Load = 1e-300 }},
		{"Load", "1000", func(c *Config) { c.Load = 1000 }},
		{"Load", "100", func(c *Config) { c.Machines, c.Load, c.BatchInterarrival = MaxMachines, MaxLoad, time.Millisecond }}, // a gap below MinInterarrival
		{"TraceMachines", "0", func(c *Config) { c.TraceMachines = 0 }},
		{"Days", "-1", func(c *Config) { c.Days = -1 }},
		{"Days", "1e-300", func(c *Config) { c.Days = 1e-300 }},
		{"Days", "0.0009", func(c *Config) { c.Days = 0.0009 }},
		{"Days", "3651", func(c *Config) { c.Days = 3651 }},
		{"BatchInterarrival", "0s", func(c *Config) { c.BatchInterarrival = 0 }},
		{"BatchInterarrival", "-1s", func(c *Config) { c.BatchInterarrival = -time.Second }},
		{"BatchInterarrival", "1ns", func(c *Config) { c.BatchInterarrival = 1 }},
		{"BatchInterarrival", "87601h0m0s", func(c *Config) { c.BatchInterarrival = MaxInterarrival + time.Hour }},
		{"ServiceInterarrival", "0s", func(c *Config) { c.ServiceInterarrival = 0 }},
		{"ServiceInterarrival", "-1s", func(c *Config) { c.ServiceInterarrival = -time.Second }},
		{"ServiceInterarrival", "2562047h47m16.854775807s", func(c *Config) { c.ServiceInterarrival = math.MaxInt64 }},
		{"MapReduceShare", "NaN", func(c *Config) { c.MapReduceShare = nan }},
		{"MapReduceShare", "+Inf", func(c *Config) { c.MapReduceShare = inf }},
		{"MapReduceShare", "-Inf", func(c *Config) { c.MapReduceShare = -inf }},
		{"MapReduceShare", "-0.1", func(c *Config) { c.MapReduceShare = -0.1 }},
		{"MapReduceShare", "1.5", func(c *Config) { c.MapReduceShare = 1.5 }},
		{"MapTasksPerWorker", "0", func(c *Config) { c.MapTasksPerWorker = 0 }},
		{"MapTasksPerWorker", "-1", func(c *Config) { c.MapTasksPerWorker = -1 }},
		{"MapTasksPerWorker", "1001", func(c *Config) { c.MapTasksPerWorker = MaxMapTasksPerWorker + 1 }},
		{"BatchRuntime.Median", "NaN", func(c *Config) { c.BatchRuntime.Median = nan }},
		{"BatchRuntime.Median", "+Inf", func(c *Config) { c.BatchRuntime.Median = inf }},
		{"BatchRuntime.Median", "0", func(c *Config) { c.BatchRuntime.Median = 0 }},
		{"BatchRuntime.Median", "-1", func(c *Config) { c.BatchRuntime.Median = -1 }},
		{"BatchRuntime.Sigma", "0", func(c *Config) { c.BatchRuntime.Sigma = 0 }},
		{"BatchRuntime.Sigma", "NaN", func(c *Config) { c.BatchRuntime.Sigma = nan }},
		{"BatchRuntime.Sigma", "-Inf", func(c *Config) { c.BatchRuntime.Sigma = -inf }},
		{"BatchRuntime.Sigma", "1000", func(c *Config) { c.BatchRuntime.Sigma = 1000 }},
		{"BatchRuntime.TailFrom", "NaN", func(c *Config) { c.BatchRuntime.TailFrom = nan }},
		{"BatchRuntime.TailFrom", "0.4", func(c *Config) { c.BatchRuntime.TailFrom = 0.4 }},
		{"BatchRuntime.TailFrom", "1", func(c *Config) { c.BatchRuntime.TailFrom = 1 }},
		{"BatchRuntime.Alpha", "0", func(c *Config) { c.BatchRuntime.Alpha = 0 }},
		{"BatchRuntime.Alpha", "+Inf", func(c *Config) { c.BatchRuntime.Alpha = inf }},
		{"BatchRuntime.Alpha", "NaN", func(c *Config) { c.BatchRuntime.Alpha = nan }},
		{"BatchRuntime.Min", "-1", func(c *Config) { c.BatchRuntime.Min = -1 }},
		{"BatchRuntime.Min", "NaN", func(c *Config) { c.BatchRuntime.Min = nan }},
		{"BatchRuntime.Min", "1000", func(c *Config) { c.BatchRuntime.Min = 1000 }},
		{"ServiceRuntime.Max", "1", func(c *Config) { c.ServiceRuntime.Max = 1 }},
		{"ServiceRuntime.Max", "NaN", func(c *Config) { c.ServiceRuntime.Max = nan }},
		{"ServiceRuntime.Max", "+Inf", func(c *Config) { c.ServiceRuntime.Max = inf }},
		{"ServiceRuntime.Max", "1e+09", func(c *Config) { c.ServiceRuntime.Max = 1e9 }},
	} {
		c := Default()
		tc.mutate(&c)
		err := c.Validate()
		var fe *FieldError
		want := "workload.Config." + tc.field + " = " + tc.value + ":"
		if !errors.Is(err, ErrConfig) || !errors.As(err, &fe) || fe.Name() != "workload.Config."+tc.field || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %s: error %v, want a *FieldError containing %q", tc.field, tc.value, err, want)
		}
		if _, err := New(c); err == nil {
			t.Errorf("%s = %s: New accepted an invalid config", tc.field, tc.value)
		}
	}
}

// TestValidateAcceptsBounds: the bounds themselves are valid.
func TestValidateAcceptsBounds(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"min days":          func(c *Config) { c.Days = MinDays },
		"max days":          func(c *Config) { c.Days = MaxDays },
		"one machine":       func(c *Config) { c.Machines, c.MachinesPerFailureDomain = 1, 1 },
		"max machines":      func(c *Config) { c.Machines = MaxMachines },
		"largest machine":   func(c *Config) { c.MachineCPUMillis, c.MachineMemoryBytes = MaxMachineCPUMillis, MaxMachineMemoryBytes },
		"smallest machine":  func(c *Config) { c.MachineCPUMillis, c.MachineMemoryBytes = MinTaskCPUMillis, MinTaskMemoryBytes },
		"no prefill":        func(c *Config) { c.PrefillUtilization = 0 },
		"interarrival min":  func(c *Config) { c.BatchInterarrival, c.ServiceInterarrival = MinInterarrival, MinInterarrival },
		"interarrival max":  func(c *Config) { c.BatchInterarrival, c.ServiceInterarrival = MaxInterarrival, MaxInterarrival },
		"share 0":           func(c *Config) { c.MapReduceShare = 0 },
		"share 1":           func(c *Config) { c.MapReduceShare = 1 },
		"map tasks max":     func(c *Config) { c.MapTasksPerWorker = MaxMapTasksPerWorker },
		"runtime max":       func(c *Config) { c.BatchRuntime.Max = MaxRuntimeSeconds },
		"runtime min 0":     func(c *Config) { c.ServiceRuntime.Min = 0 },
		"runtime tail half": func(c *Config) { c.ServiceRuntime.TailFrom = 0.5 },
	} {
		c := Default()
		mutate(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestLognormalParetoValidateNamesTheField: on its own, the model's
// errors name its type.
func TestLognormalParetoValidateNamesTheField(t *testing.T) {
	d := DefaultBatchRuntime
	d.Alpha = math.NaN()
	var fe *FieldError
	if err := d.Validate(); !errors.As(err, &fe) || fe.Name() != "workload.LognormalPareto.Alpha" || !strings.Contains(err.Error(), "Alpha = NaN") {
		t.Errorf("err %v", err)
	}
}

// TestArrivalPastTheLastDuration: a gap beyond the largest Duration
// arrives never, instead of overflowing to a time before the start.
func TestArrivalPastTheLastDuration(t *testing.T) {
	a := arrivals{r: rand.New(rand.NewPCG(1, 1)), gap: Exponential{1e12}}
	a.advance()
	if a.next != math.MaxInt64 {
		t.Errorf("next %v, want the largest Duration", a.next)
	}
}

// TestGeneratorDeterministic: one seed, one cell: the same machines,
// pre-fill and arrival stream; another seed, another stream.
func TestGeneratorDeterministic(t *testing.T) {
	c := testConfig(1)
	a, b := mustNew(t, c), mustNew(t, c)
	if !reflect.DeepEqual(a.Machines(), b.Machines()) {
		t.Error("machines differ")
	}
	pa, pb := a.Prefill(), b.Prefill()
	if !reflect.DeepEqual(pa, pb) || !reflect.DeepEqual(pa, a.Prefill()) {
		t.Error("pre-fill differs")
	}
	sa, sb := drain(t, a), drain(t, b)
	if len(sa) < 1000 || !reflect.DeepEqual(sa, sb) {
		t.Fatalf("streams differ (%d and %d arrivals)", len(sa), len(sb))
	}
	c.Seed = 2
	if sc := drain(t, mustNew(t, c)); reflect.DeepEqual(sa[:100], sc[:100]) {
		t.Error("seeds 1 and 2 give the same stream")
	}
}

// TestStreamsAreIndependent: each class draws from its own stream, so
// changing the service rate leaves the batch arrivals as they were.
func TestStreamsAreIndependent(t *testing.T) {
	c := testConfig(0.5)
	batchOnly := func(js []JobArrival) []JobArrival {
		var out []JobArrival
		for _, j := range js {
			if j.Kind != KindService {
				j.Seq, j.Name = 0, ""
				out = append(out, j)
			}
		}
		return out
	}
	a := batchOnly(drain(t, mustNew(t, c)))
	c.ServiceInterarrival /= 3
	b := batchOnly(drain(t, mustNew(t, c)))
	if !reflect.DeepEqual(a, b) {
		t.Error("the service rate changed the batch arrivals")
	}
}

func TestArrivals(t *testing.T) {
	c := testConfig(7)
	g := mustNew(t, c)
	js := drain(t, g)
	names := map[string]bool{}
	var prev time.Duration
	var last [4]time.Duration
	var gaps [4]float64
	var stream, kinds, tasks [4]int // arrivals per stream (batch and MapReduce share one) and per kind; tasks per kind
	prios := map[Kind]map[int32]bool{}
	for i, j := range js {
		if j.Submit < prev || j.Submit >= g.End() {
			t.Fatalf("arrival %d at %v: previous %v, end %v", i, j.Submit, prev, g.End())
		}
		prev = j.Submit
		if names[j.Name] || j.Seq != int64(i+1) {
			t.Fatalf("arrival %d: name %s seq %d", i, j.Name, j.Seq)
		}
		names[j.Name] = true
		if j.Tasks < 1 || j.CPUMillis < MinTaskCPUMillis || j.CPUMillis > c.MachineCPUMillis ||
			j.MemoryBytes < MinTaskMemoryBytes || j.MemoryBytes > c.MachineMemoryBytes || j.Duration < time.Millisecond {
			t.Fatalf("arrival %d out of range: %+v", i, j)
		}
		if (j.Kind == KindMapReduce) != (j.Workers > 0) || (j.Kind == KindMapReduce && (j.Workers != j.Tasks || j.MapTasks != 16*j.Tasks)) {
			t.Fatalf("arrival %d: %+v", i, j)
		}
		class := j.Kind
		if class == KindMapReduce {
			class = KindBatch
		}
		if stream[class] > 0 {
			gaps[class] += (j.Submit - last[class]).Seconds()
		}
		last[class] = j.Submit
		stream[class]++
		kinds[j.Kind]++
		tasks[j.Kind] += j.Tasks
		if prios[class] == nil {
			prios[class] = map[int32]bool{}
		}
		prios[class][j.Priority] = true
	}
	share := float64(kinds[KindMapReduce]) / float64(stream[KindBatch])
	t.Logf("7 days: %d arrivals: %d batch, %d MapReduce (%.3f of the batch stream), %d service; tasks (MapReduce: workers requested): %d, %d, %d",
		len(js), kinds[KindBatch], kinds[KindMapReduce], share, kinds[KindService], tasks[KindBatch], tasks[KindMapReduce], tasks[KindService])
	if math.Abs(share-0.2) > 0.01 {
		t.Errorf("MapReduce share of batch %v, want 0.2", share)
	}
	for _, k := range []struct {
		kind Kind
		want time.Duration
	}{{KindBatch, time.Duration(float64(c.BatchInterarrival) * c.arrivalScale())}, {KindService, time.Duration(float64(c.ServiceInterarrival) * c.arrivalScale())}} {
		m := gaps[k.kind] / float64(stream[k.kind]-1)
		if math.Abs(m-k.want.Seconds()) > 0.03*k.want.Seconds() {
			t.Errorf("%s interarrival mean %.3f s, want %.3f", k.kind, m, k.want.Seconds())
		}
	}
	if !reflect.DeepEqual(prios[KindBatch], map[int32]bool{0: true, 1: true, 2: true, 8: true}) ||
		!reflect.DeepEqual(prios[KindService], map[int32]bool{9: true}) {
		t.Errorf("priorities %v", prios)
	}
}

// TestPrefill: long-running service jobs requesting 60% of the cell's CPU,
// to within one task, and no more than 60% of its memory.
func TestPrefill(t *testing.T) {
	c := Default()
	g := mustNew(t, c)
	pre := g.Prefill()
	var cpu, mem int64
	tasks := 0
	for i, j := range pre {
		if j.Kind != KindService || j.Submit != 0 || j.Duration != 0 || j.Priority < 9 || j.Tasks < 1 ||
			j.Name != "prefill-"+strconv.Itoa(i+1) {
			t.Fatalf("pre-fill job %d: %+v", i, j)
		}
		cpu += int64(j.Tasks) * j.CPUMillis
		mem += int64(j.Tasks) * j.MemoryBytes
		tasks += j.Tasks
	}
	cellCPU := int64(c.Machines) * c.MachineCPUMillis
	cellMem := int64(c.Machines) * c.MachineMemoryBytes
	target := int64(0.6 * float64(cellCPU))
	if cpu > target || cpu < target-c.MachineCPUMillis {
		t.Errorf("pre-fill CPU %d millis, want %d to within a machine", cpu, target)
	}
	if mem > int64(0.6*float64(cellMem)) {
		t.Errorf("pre-fill memory %d over 60%%", mem)
	}
	t.Logf("pre-fill: %d jobs, %d tasks, CPU %.3f, memory %.3f of the cell", len(pre), tasks,
		float64(cpu)/float64(cellCPU), float64(mem)/float64(cellMem))
	c.PrefillUtilization = 0
	if p := mustNew(t, c).Prefill(); len(p) != 0 {
		t.Errorf("no pre-fill asked, got %d jobs", len(p))
	}
}

// TestOfferedLoad logs the load the default arrivals offer (what
// docs/WORKLOADS.md quotes): CPU-seconds requested per second, as a share
// of the cell, by class. It checks only that the cell is not flooded.
func TestOfferedLoad(t *testing.T) {
	c := testConfig(7)
	g := mustNew(t, c)
	var load [4]float64
	for {
		j, ok := g.Next()
		if !ok {
			break
		}
		load[j.Kind] += float64(j.Tasks) * float64(j.CPUMillis) * j.Duration.Seconds()
	}
	cell := float64(c.Machines) * float64(c.MachineCPUMillis) * g.End().Seconds()
	total := 0.0
	for _, k := range []Kind{KindBatch, KindMapReduce, KindService} {
		t.Logf("%-9s offers %.1f%% of the cell's CPU", k, 100*load[k]/cell)
		total += load[k] / cell
	}
	if total < 0.01 || total > 0.4 {
		t.Errorf("arrivals offer %.1f%% of the cell: the cell would be idle or flooded beside a 60%% pre-fill", 100*total)
	}
}

func TestMachines(t *testing.T) {
	c := Default()
	c.Machines = 85
	ms := mustNew(t, c).Machines()
	if len(ms) != 85 || ms[0].Name != "m00000" || ms[84].Name != "m00084" ||
		ms[39].FailureDomain != "fd0000" || ms[40].FailureDomain != "fd0001" || ms[84].FailureDomain != "fd0002" {
		t.Errorf("machines: %v ... %v", ms[0], ms[84])
	}
	for _, m := range ms {
		if m.CPUMillis != 4000 || m.MemoryBytes != 16<<30 {
			t.Fatalf("machine %+v", m)
		}
	}
}

// TestNextIsLazy: a ten-year stream costs nothing until it is read.
func TestNextIsLazy(t *testing.T) {
	c := testConfig(3650)
	g := mustNew(t, c)
	for range 10 {
		if _, ok := g.Next(); !ok {
			t.Fatal("stream ended early")
		}
	}
	c.Days = MinDays
	g = mustNew(t, c)
	for _, j := range drain(t, g) {
		if j.Submit >= g.End() {
			t.Fatalf("%s arrives at %v, after the end %v", j.Name, j.Submit, g.End())
		}
	}
}

func BenchmarkNext(b *testing.B) {
	g := mustNew(b, testConfig(3650))
	for b.Loop() {
		if _, ok := g.Next(); !ok {
			b.Fatal("stream ended")
		}
	}
}

// TestLoadIsPerMachine: at the same Load a cell of half the machines gets
// half the arrivals (the trace's rate scaled to its size), and twice the
// Load twice as many: --load means the same busyness at every size.
func TestLoadIsPerMachine(t *testing.T) {
	count := func(machines int, load float64) int {
		c := Default()
		c.Machines, c.Load, c.Days = machines, load, 2
		g, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			if _, ok := g.Next(); !ok {
				return n
			}
			n++
		}
	}
	full, half, double := count(10000, 1), count(5000, 1), count(5000, 2)
	if r := float64(half) / float64(full); math.Abs(r-0.5) > 0.03 {
		t.Errorf("half the machines: %d arrivals vs %d (ratio %.3f), want half", half, full, r)
	}
	if r := float64(double) / float64(full); math.Abs(r-1) > 0.03 {
		t.Errorf("half the machines at twice the load: %d arrivals vs %d (ratio %.3f), want the same", double, full, r)
	}
}

// TestArrivalModels: both models keep the class's mean gap; the empirical
// one keeps the trace's burstiness (the fitted gaps' coefficient of
// variation) where the Poisson one has 1. A model out of range is refused
// by name, and the names parse back.
func TestArrivalModels(t *testing.T) {
	const n = 200_000
	for _, m := range []ArrivalModel{PoissonArrivals, EmpiricalArrivals} {
		const gap = 3.5 // seconds: a scaled class's mean
		d, err := m.gaps(Google2011Fit.Batch, gap)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, 7))
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = d.Sample(r)
			if xs[i] < 0 {
				t.Fatalf("%s: a negative gap %v", m, xs[i])
			}
		}
		got := mean(xs)
		cv := stddev(xs, got) / got
		if math.Abs(got-gap)/gap > 0.02 || math.Abs(d.Mean()-gap) > 1e-9 {
			t.Errorf("%s: sampled mean %v, Mean() %v, want %v", m, got, d.Mean(), gap)
		}
		want := 1.0
		if m == EmpiricalArrivals {
			want = Google2011Fit.Batch.InterarrivalCV
		}
		if math.Abs(cv-want)/want > 0.1 {
			t.Errorf("%s: coefficient of variation %.3f, want about %.3f", m, cv, want)
		}
		if back, err := ParseArrivalModel(m.String()); err != nil || back != m {
			t.Errorf("ParseArrivalModel(%q) = %v, %v", m.String(), back, err)
		}
	}
	if _, err := ParseArrivalModel("bursty"); err == nil {
		t.Error("ParseArrivalModel took bursty")
	}
	cfg := Default()
	cfg.Arrivals = ArrivalModel(9)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Arrivals") {
		t.Errorf("Validate of arrivals 9: %v", err)
	}
}

// GPUs: a share of the machines carry them, spread evenly; a share of the
// batch jobs ask for one a task, at most a tenth of the cell's a job; the
// job and task objects carry the "gpu" dimension; every other draw of the
// workload is what it is without GPUs.
func TestGPUWorkload(t *testing.T) {
	plain := Default()
	plain.Machines, plain.Days, plain.Load = 400, 0.2, 5
	gpu := plain
	gpu.GPUMachineShare, gpu.GPUJobShare = 0.125, 0.3
	g0, err := New(plain)
	if err != nil {
		t.Fatal(err)
	}
	g1, err := New(gpu)
	if err != nil {
		t.Fatal(err)
	}
	with := 0
	for i, m := range g1.Machines() {
		if m.GPUs != 0 && m.GPUs != 8 {
			t.Fatalf("machine %d has %d GPUs", i, m.GPUs)
		}
		if m.GPUs > 0 {
			with++
		}
		if i%8 == 7 && m.GPUs == 0 || i%8 != 7 && m.GPUs != 0 {
			t.Fatalf("machine %d: %d GPUs, not spread one in eight", i, m.GPUs)
		}
	}
	if with != 50 || gpu.gpus() != 400 {
		t.Fatalf("%d GPU machines, %d GPUs; want 50 and 400", with, gpu.gpus())
	}
	batch, asking := 0, 0
	for {
		a, ok0 := g0.Next()
		b, ok1 := g1.Next()
		if ok0 != ok1 {
			t.Fatal("the two workloads end apart")
		}
		if !ok0 {
			break
		}
		if a.Submit != b.Submit || a.Kind != b.Kind || a.CPUMillis != b.CPUMillis || a.MemoryBytes != b.MemoryBytes || a.Duration != b.Duration || a.Priority != b.Priority {
			t.Fatalf("arrival %s differs beyond its GPUs: %+v against %+v", a.Name, a, b)
		}
		if a.GPUs != 0 {
			t.Fatalf("a GPU in the plain workload: %+v", a)
		}
		if b.Kind == KindBatch {
			batch++
		}
		if b.GPUs > 0 {
			asking++
			if b.Kind != KindBatch || b.GPUs != 1 || b.Tasks > 40 || b.Tasks != min(a.Tasks, 40) {
				t.Fatalf("GPU job %+v (without GPUs %d tasks)", b, a.Tasks)
			}
			job, tasks, err := b.Objects(client.RandReader(rand.New(rand.NewPCG(1, 1))), 0)
			if err != nil {
				t.Fatal(err)
			}
			if job.Spec.Template.Resources.Extended[GPU] != 1 || tasks[0].Spec.Resources.Extended[GPU] != 1 {
				t.Fatalf("GPU job objects: template %v, task %v", job.Spec.Template.Resources, tasks[0].Spec.Resources)
			}
		} else if b.Tasks != a.Tasks {
			t.Fatalf("job %s: %d tasks, %d without GPUs", b.Name, b.Tasks, a.Tasks)
		}
	}
	if share := float64(asking) / float64(batch); batch < 200 || share < 0.2 || share > 0.4 {
		t.Fatalf("%d of %d batch jobs ask for GPUs, want about 30%%", asking, batch)
	}
	bad := plain
	bad.GPUJobShare = 0.1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "GPUJobShare") {
		t.Fatalf("GPU jobs without GPU machines: %v", err)
	}
}
