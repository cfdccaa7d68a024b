package alibaba2018

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Synthetic describes a synthetic cluster-trace-v2018 trace, for scale
// tests of the reader and of omega replay (TestWriteSynthetic writes one;
// none is committed): machine_meta.csv, batch_task.csv,
// batch_instance.csv and container_meta.csv with the reader's columns,
// each in time order as the reader needs them (the sort commands of
// docs/REPLAY.md leave the published tables so; machine_meta is in
// machine order, as published). Machines of 96 cores and 100% memory in
// service at time 0; work arriving with exponential gaps: nine tenths
// batch jobs, each a chain of 1 + Geometric tasks (M1, R2_1, R3_2, ...,
// each starting when every instance of the one before has ended), each
// task of 1 + Geometric instances that start a second after it on random
// machines and end Terminated after an exponential runtime; a tenth
// online services, an app (app_du) of containers started on random
// machines and stopped after an exponential runtime. A batch instance is
// one row and three events (submission, placement, end); a container two
// rows (started, stopped) and three events. Requests are about 1/25 of a
// machine (plan_cpu and cpu_request in hundredths of a core, 200 to 550;
// memory about 4%). The arrival rate would keep about half the cell's
// CPU requested once the chains are in a steady state (a short trace,
// whose arrivals stop before its jobs' chains have run, requests less:
// a 1M-event one peaks at 30%). The same parameters write the same bytes.
type Synthetic struct {
	Machines      int
	Events        int // batch instance and container events, about (three each)
	Seed          uint64
	MeanTasks     float64 // tasks per batch job
	MeanInstances float64 // instances per batch task; an app has MeanTasks x MeanInstances containers on average
	MeanRun       float64 // seconds
}

// synthJob is a batch job whose chain of tasks is under way.
type synthJob struct {
	id     int64
	typ    int
	counts []int // instances per task
}

// synthItem is a batch task's start or a container's stop, ordered by
// time (seconds), then by when it was queued.
type synthItem struct {
	t, seq int64
	job    *synthJob // a task's start: task (1-based) of job
	task   int
	stop   string // a container's stopped row, when job is nil
}

type synthHeap []synthItem

func (h synthHeap) Len() int { return len(h) }
func (h synthHeap) Less(i, j int) bool {
	return h[i].t < h[j].t || h[i].t == h[j].t && h[i].seq < h[j].seq
}
func (h synthHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *synthHeap) Push(x any)   { *h = append(*h, x.(synthItem)) }
func (h *synthHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type csvFile struct {
	f  *os.File
	bw *bufio.Writer
}

func createCSV(dir, table string) (*csvFile, error) {
	f, err := os.Create(filepath.Join(dir, table+".csv"))
	if err != nil {
		return nil, err
	}
	return &csvFile{f, bufio.NewWriterSize(f, 1<<16)}, nil
}

func (c *csvFile) close() error {
	if c == nil {
		return nil
	}
	return errors.Join(c.bw.Flush(), c.f.Close())
}

// geometric is 1 + a geometric count, with mean m (at least 1).
func geometric(rng *rand.Rand, m float64) int {
	if m <= 1 {
		return 1
	}
	return 1 + int(math.Floor(math.Log(1-rng.Float64())/math.Log(1-1/m)))
}

// Write writes the trace into dir.
func (sy Synthetic) Write(dir string) (err error) {
	if sy.Machines < 1 || sy.MeanRun <= 0 {
		return fmt.Errorf("alibaba2018.Synthetic: want Machines ≥ 1 and MeanRun > 0, have %d and %g", sy.Machines, sy.MeanRun)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]*csvFile{}
	defer func() {
		for _, t := range []string{TableMachineMeta, TableBatchTask, TableBatchInstance, TableContainerMeta} {
			err = errors.Join(err, files[t].close())
		}
	}()
	for _, t := range []string{TableMachineMeta, TableBatchTask, TableBatchInstance, TableContainerMeta} {
		f, err := createCSV(dir, t)
		if err != nil {
			return err
		}
		files[t] = f
	}
	mw, tw, iw, cw := files[TableMachineMeta].bw, files[TableBatchTask].bw, files[TableBatchInstance].bw, files[TableContainerMeta].bw
	rng := rand.New(rand.NewPCG(sy.Seed, 2018))
	for i := 1; i <= sy.Machines; i++ {
		fmt.Fprintf(mw, "m_%d,0,%d,%d,96,100,USING\n", i, 1+(i-1)/40, 1+(i-1)%50)
	}
	machine := func() int { return 1 + rng.IntN(sy.Machines) }
	// Half the cell's CPU requested: instances/s x runtime x 1/25 = 0.5 x
	// machines.
	rate := 12.5 * float64(sy.Machines) / sy.MeanRun
	perJob := max(sy.MeanTasks, 1) * max(sy.MeanInstances, 1)
	gap := perJob / rate // seconds between arrivals
	runtime := func() int64 { return int64(max(1, math.Round(rng.ExpFloat64()*sy.MeanRun))) }
	pending := &synthHeap{}
	var seq, instance, container int64
	push := func(it synthItem) {
		seq++
		it.seq = seq
		heap.Push(pending, it)
	}
	// startTask writes task k of job j, starting at t, and its instances,
	// and queues the next task of the chain at this one's end.
	startTask := func(j *synthJob, k int, t int64) error {
		name := "M1"
		if k > 1 {
			name = fmt.Sprintf("R%d_%d", k, k-1)
		}
		n := j.counts[k-1]
		cpu := 50 * (4 + rng.IntN(8))
		mem := 4 * (0.5 + rng.Float64())
		end := t + 1
		for range n {
			instance++
			run := runtime()
			end = max(end, t+1+run)
			u, v := 0.3+0.6*rng.Float64(), 0.3+0.6*rng.Float64()
			fmt.Fprintf(iw, "ins_%d,%s,j_%d,%d,Terminated,%d,%d,m_%d,1,1,%.2f,%.2f,%.2f,%.2f\n",
				instance, name, j.id, j.typ, t+1, t+1+run, machine(), float64(cpu)*u, float64(cpu)*min(1, 1.3*u), mem*v, mem*min(1, 1.2*v))
		}
		if _, err := fmt.Fprintf(tw, "%s,%d,j_%d,%d,Terminated,%d,%d,%d,%.2f\n", name, n, j.id, j.typ, t, end, cpu, mem); err != nil {
			return err
		}
		if k < len(j.counts) {
			push(synthItem{t: end, job: j, task: k + 1})
		}
		return nil
	}
	flush := func(upTo int64) error {
		for pending.Len() > 0 && (*pending)[0].t <= upTo {
			it := heap.Pop(pending).(synthItem)
			if it.job == nil {
				if _, err := cw.WriteString(it.stop); err != nil {
					return err
				}
				continue
			}
			if err := startTask(it.job, it.task, it.t); err != nil {
				return err
			}
		}
		return nil
	}
	t := 0.0
	written := 0
	for id := int64(1); written < sy.Events; id++ {
		t += rng.ExpFloat64() * gap
		at := int64(t)
		if err := flush(at); err != nil {
			return err
		}
		if rng.IntN(10) == 0 {
			// An online service: an app of containers.
			n := geometric(rng, perJob)
			for range n {
				container++
				m, cpu, mem := machine(), 100*(2+rng.IntN(5)), 4*(0.5+rng.Float64())
				row := fmt.Sprintf("c_%d,m_%d,%%d,app_%d,%%s,%d,%d,%.2f\n", container, m, id, cpu, 2*cpu, mem)
				fmt.Fprintf(cw, row, at, "started")
				stop := at + runtime()
				push(synthItem{t: stop, stop: fmt.Sprintf(row, stop, "stopped")})
			}
			written += 3 * n
			continue
		}
		j := &synthJob{id: id, typ: 1 + rng.IntN(12), counts: make([]int, geometric(rng, sy.MeanTasks))}
		for i := range j.counts {
			j.counts[i] = geometric(rng, sy.MeanInstances)
			written += 3 * j.counts[i]
		}
		if err := startTask(j, 1, at); err != nil {
			return err
		}
	}
	return flush(math.MaxInt64)
}
