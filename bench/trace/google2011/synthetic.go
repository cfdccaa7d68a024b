package google2011

import (
	"bufio"
	"compress/gzip"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Synthetic describes a synthetic 2011-format trace, for scale tests of
// the readers and of omega replay (TestWriteSynthetic writes one; none is
// committed): Machines of
// capacity (0.5, 0.5) added at time 0; jobs arriving with exponential
// gaps, each of 1 + Geometric tasks; each task submitted, scheduled on a
// random machine a second later and finished after an exponential
// runtime, three events per task; requests about 1/25 of a machine; a
// tenth of the jobs at the production priorities (9-11). The arrival rate
// keeps about half the cell's CPU requested.
type Synthetic struct {
	Machines   int
	Events     int // task events, about
	Seed       uint64
	MeanTasks  float64 // tasks per job
	MeanRun    float64 // seconds
	ShardLines int     // task events per shard
}

// endItem is a task's pending SCHEDULE or FINISH, ordered by time, then
// by when it was queued.
type endItem struct {
	t, seq     int64
	kind       int   // 1 SCHEDULE, 4 FINISH
	run        int64 // a SCHEDULE's runtime, µs
	job, index int64
	machine    int64
	line       string // the rest of the row after the machine and type
}

type endHeap []endItem

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(i, j int) bool {
	return h[i].t < h[j].t || h[i].t == h[j].t && h[i].seq < h[j].seq
}
func (h endHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(endItem)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// shardWriter writes task_events rows into numbered gzipped shards.
type shardWriter struct {
	dir        string
	per, lines int
	n          int
	f          *os.File
	zw         *gzip.Writer
	bw         *bufio.Writer
	names      []string
}

func (s *shardWriter) write(line string) error {
	if s.bw == nil || s.lines >= s.per {
		if err := s.close(); err != nil {
			return err
		}
		name := filepath.Join(s.dir, fmt.Sprintf("part-%05d.tmp", s.n))
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		s.f, s.zw = f, gzip.NewWriter(f)
		s.bw = bufio.NewWriterSize(s.zw, 1<<16)
		s.names = append(s.names, name)
		s.n, s.lines = s.n+1, 0
	}
	s.lines++
	_, err := s.bw.WriteString(line)
	return err
}

func (s *shardWriter) close() error {
	if s.bw == nil {
		return nil
	}
	err := errors.Join(s.bw.Flush(), s.zw.Close(), s.f.Close())
	s.bw = nil
	return err
}

// finish renames the shards part-NNNNN-of-TOTAL.csv.gz, now that their
// number is known.
func (s *shardWriter) finish() error {
	if err := s.close(); err != nil {
		return err
	}
	for i, name := range s.names {
		if err := os.Rename(name, filepath.Join(s.dir, fmt.Sprintf("part-%05d-of-%05d.csv.gz", i, len(s.names)))); err != nil {
			return err
		}
	}
	return nil
}

// Write writes the trace into dir.
func (sy Synthetic) Write(dir string) error {
	rng := rand.New(rand.NewPCG(sy.Seed, 2011))
	machineIDs := make([]int64, sy.Machines)
	me := filepath.Join(dir, TableMachineEvents)
	te := filepath.Join(dir, TableTaskEvents)
	for _, d := range []string{me, te} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	mf, err := os.Create(filepath.Join(me, "part-00000-of-00001.csv.gz"))
	if err != nil {
		return err
	}
	mz := gzip.NewWriter(mf)
	for i := range machineIDs {
		machineIDs[i] = int64(1000 + i*7)
		fmt.Fprintf(mz, "0,%d,0,P,0.5,0.5\n", machineIDs[i])
	}
	if err := errors.Join(mz.Close(), mf.Close()); err != nil {
		return err
	}
	// Half the cell's CPU requested: tasks/s x runtime x request = 0.5 x
	// machines x 0.5.
	const req = 0.02
	taskRate := 0.25 * float64(sy.Machines) / (req * sy.MeanRun)
	jobGap := sy.MeanTasks / taskRate // seconds between jobs
	sw := &shardWriter{dir: te, per: sy.ShardLines}
	ends := &endHeap{}
	var seq int64
	push := func(e endItem) {
		seq++
		e.seq = seq
		heap.Push(ends, e)
	}
	flushEnds := func(upTo int64) error {
		for ends.Len() > 0 && (*ends)[0].t <= upTo {
			e := heap.Pop(ends).(endItem)
			if err := sw.write(fmt.Sprintf("%d,,%d,%d,%d,%d,%s", e.t, e.job, e.index, e.machine, e.kind, e.line)); err != nil {
				return err
			}
			if e.kind == 1 {
				push(endItem{t: e.t + e.run, kind: 4, job: e.job, index: e.index, machine: e.machine, line: e.line})
			}
		}
		return nil
	}
	var t float64 = 600 // the 2011 trace's first events after time 0 come at 600 s
	written := 0
	for job := int64(1); written < sy.Events; job++ {
		t += rng.ExpFloat64() * jobGap
		at := int64(t * 1e6)
		if err := flushEnds(at); err != nil {
			return err
		}
		tasks := 1 + int(math.Floor(math.Log(1-rng.Float64())/math.Log(1-1/sy.MeanTasks)))
		prio := rng.IntN(9)
		if rng.IntN(10) == 0 {
			prio = 9 + rng.IntN(3)
		}
		cpu, mem := req*(0.5+rng.Float64()), req*(0.5+rng.Float64())
		rest := fmt.Sprintf("u%d,%d,%d,%.5f,%.5f,0.0001,0\n", job%500, rng.IntN(4), prio, cpu, mem)
		for i := range tasks {
			if err := sw.write(fmt.Sprintf("%d,,%d,%d,,0,%s", at, job, i, rest)); err != nil {
				return err
			}
		}
		for i := range tasks {
			m := machineIDs[rng.IntN(len(machineIDs))]
			run := int64(max(1, rng.ExpFloat64()*sy.MeanRun) * 1e6)
			push(endItem{t: at + 1_000_000, kind: 1, run: run, job: job, index: int64(i), machine: m, line: rest})
		}
		written += 3 * tasks
	}
	if err := flushEnds(math.MaxInt64); err != nil {
		return err
	}
	return sw.finish()
}
