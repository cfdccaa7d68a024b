package google2019

import (
	"bufio"
	"compress/gzip"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Synthetic describes a synthetic 2019-format trace, for scale tests of
// the reader and of omega replay (TestWriteSynthetic writes one; none is
// committed), as BigQuery exports the tables (JSON lines, 64-bit integers
// as strings, each table in time order): Machines of capacity (0.5, 0.5)
// added at time 0; collections (jobs) arriving with exponential gaps from
// 600 s, each of 1 + Geometric instances, a collection_events SUBMIT at
// its arrival and FINISH when its last instance ends; each instance
// submitted, scheduled on a random machine a second later and finished
// after an exponential runtime, three instance events per instance;
// requests about 1/25 of a machine; a tenth of the collections at
// production priority (200, the trace's production tier is 120 and up),
// the rest in the free and best-effort batch tiers (0..115). The arrival
// rate keeps about half the cell's CPU requested. The same parameters
// write the same bytes.
type Synthetic struct {
	Machines  int
	Events    int // instance events, about (three per instance)
	Seed      uint64
	MeanTasks float64 // instances per collection
	MeanRun   float64 // seconds
	// ShardLines: instance events per numbered file of instance_events/
	// (as BigQuery's export splits a table); 0 writes one
	// instance_events.json.
	ShardLines int
	// Gzip writes .json.gz files.
	Gzip bool
}

// synthItem is an instance's pending SCHEDULE or FINISH, or a
// collection's FINISH, ordered by time, then by when it was queued.
type synthItem struct {
	t, seq  int64
	typ     EventType // Schedule or Finish
	coll    *synthColl
	index   int64 // -1: the collection's own FINISH
	machine int64
	run     int64 // a SCHEDULE's runtime, µs
}

// synthColl is what a collection's rows share.
type synthColl struct {
	id          int64
	prio, class int
	user, name  int
	cpu, mem    float64
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

// jsonFiles writes a table's rows: one file TABLE.json[.gz] when per is 0,
// else TABLE/TABLE-NNNNNNNNNNNN.json[.gz] of per rows each.
type jsonFiles struct {
	dir, table string
	gzip       bool
	per, lines int
	n          int
	f          *os.File
	zw         *gzip.Writer
	bw         *bufio.Writer
}

func (w *jsonFiles) ext() string {
	if w.gzip {
		return ".json.gz"
	}
	return ".json"
}

func (w *jsonFiles) open() error {
	if err := w.close(); err != nil {
		return err
	}
	name := filepath.Join(w.dir, w.table+w.ext())
	if w.per > 0 {
		if w.n == 0 {
			if err := os.MkdirAll(filepath.Join(w.dir, w.table), 0o755); err != nil {
				return err
			}
		}
		name = filepath.Join(w.dir, w.table, fmt.Sprintf("%s-%012d%s", w.table, w.n, w.ext()))
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	var out io.Writer = f
	w.f, w.zw = f, nil
	if w.gzip {
		w.zw = gzip.NewWriter(f)
		out = w.zw
	}
	w.bw = bufio.NewWriterSize(out, 1<<16)
	w.n, w.lines = w.n+1, 0
	return nil
}

// row gives the writer for the next row.
func (w *jsonFiles) row() (*bufio.Writer, error) {
	if w.bw == nil || w.per > 0 && w.lines >= w.per {
		if err := w.open(); err != nil {
			return nil, err
		}
	}
	w.lines++
	return w.bw, nil
}

func (w *jsonFiles) close() error {
	if w.bw == nil {
		return nil
	}
	err := w.bw.Flush()
	if w.zw != nil {
		err = errors.Join(err, w.zw.Close())
	}
	err = errors.Join(err, w.f.Close())
	w.bw = nil
	return err
}

// geometric is 1 + a geometric count, with mean m (at least 1).
func geometric(rng *rand.Rand, m float64) int {
	if m <= 1 {
		return 1
	}
	return 1 + int(math.Floor(math.Log(1-rng.Float64())/math.Log(1-1/m)))
}

// Write writes the trace into dir: machine_events, collection_events and
// instance_events.
func (sy Synthetic) Write(dir string) error {
	if sy.Machines < 1 || sy.MeanRun <= 0 {
		return fmt.Errorf("google2019.Synthetic: want Machines ≥ 1 and MeanRun > 0, have %d and %g", sy.Machines, sy.MeanRun)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(sy.Seed, 2019))
	mw := &jsonFiles{dir: dir, table: TableMachineEvents, gzip: sy.Gzip}
	machineIDs := make([]int64, sy.Machines)
	for i := range machineIDs {
		machineIDs[i] = int64(100_000_000 + i*7919)
		w, err := mw.row()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, `{"time":"0","machine_id":"%d","type":"1","switch_id":"Sw%d","capacity":{"cpus":0.5,"memory":0.5},"platform_id":"Pl%d","missing_data_reason":null}`+"\n",
			machineIDs[i], i/40, i%3)
	}
	if err := mw.close(); err != nil {
		return err
	}
	cw := &jsonFiles{dir: dir, table: TableCollectionEvents, gzip: sy.Gzip}
	iw := &jsonFiles{dir: dir, table: TableInstanceEvents, gzip: sy.Gzip, per: sy.ShardLines}
	collRow := func(t int64, typ EventType, c *synthColl) error {
		w, err := cw.row()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, `{"time":"%d","type":"%d","collection_id":"%d","scheduling_class":"%d","missing_type":null,"collection_type":"0","priority":"%d","alloc_collection_id":"0","user":"u%d","collection_name":"n%d","collection_logical_name":"l%d","parent_collection_id":null,"start_after_collection_ids":[],"max_per_machine":null,"max_per_switch":null,"vertical_scaling":"1","scheduler":"0"}`+"\n",
			t, typ, c.id, c.class, c.prio, c.user, c.name, c.name)
		return err
	}
	instRow := func(t int64, typ EventType, c *synthColl, index, machine int64) error {
		w, err := iw.row()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, `{"time":"%d","type":"%d","collection_id":"%d","scheduling_class":"%d","missing_type":null,"collection_type":"0","priority":"%d","alloc_collection_id":"0","instance_index":"%d","machine_id":"%d","alloc_instance_index":"-1","resource_request":{"cpus":%.5f,"memory":%.5f},"constraint":[]}`+"\n",
			t, typ, c.id, c.class, c.prio, index, machine, c.cpu, c.mem)
		return err
	}
	// Half the cell's CPU requested: instances/s x runtime x request = 0.5
	// x machines x 0.5.
	const req = 0.02
	rate := 0.25 * float64(sy.Machines) / (req * sy.MeanRun)
	gap := max(sy.MeanTasks, 1) / rate // seconds between collections
	pending := &synthHeap{}
	var seq int64
	push := func(it synthItem) {
		seq++
		it.seq = seq
		heap.Push(pending, it)
	}
	flush := func(upTo int64) error {
		for pending.Len() > 0 && (*pending)[0].t <= upTo {
			it := heap.Pop(pending).(synthItem)
			switch {
			case it.index < 0:
				if err := collRow(it.t, Finish, it.coll); err != nil {
					return err
				}
			case it.typ == Schedule:
				if err := instRow(it.t, Schedule, it.coll, it.index, it.machine); err != nil {
					return err
				}
				push(synthItem{t: it.t + it.run, typ: Finish, coll: it.coll, index: it.index, machine: it.machine})
			default:
				if err := instRow(it.t, Finish, it.coll, it.index, it.machine); err != nil {
					return err
				}
			}
		}
		return nil
	}
	batchPrios := [...]int{0, 0, 25, 100, 101, 103, 107, 110, 115}
	t := 600.0 // as in Google's traces, the first events after time 0 come at 600 s
	written := 0
	for job := int64(1); written < sy.Events; job++ {
		t += rng.ExpFloat64() * gap
		at := int64(t * 1e6)
		if err := flush(at); err != nil {
			return err
		}
		n := geometric(rng, sy.MeanTasks)
		c := &synthColl{id: 300_000_000_000 + job, prio: batchPrios[rng.IntN(len(batchPrios))], class: rng.IntN(2),
			user: int(job % 500), name: rng.IntN(1 << 20), cpu: req * (0.5 + rng.Float64()), mem: req * (0.5 + rng.Float64())}
		if rng.IntN(10) == 0 {
			c.prio, c.class = 200, 2+rng.IntN(2)
		}
		if err := collRow(at, Submit, c); err != nil {
			return err
		}
		for i := range n {
			if err := instRow(at, Submit, c, int64(i), NoMachine); err != nil {
				return err
			}
		}
		var last int64
		for i := range n {
			run := int64(max(1, rng.ExpFloat64()*sy.MeanRun) * 1e6)
			last = max(last, at+1_000_000+run)
			push(synthItem{t: at + 1_000_000, typ: Schedule, coll: c, index: int64(i), machine: machineIDs[rng.IntN(len(machineIDs))], run: run})
		}
		push(synthItem{t: last, typ: Finish, coll: c, index: -1})
		written += 3 * n
	}
	if err := flush(math.MaxInt64); err != nil {
		return err
	}
	return errors.Join(cw.close(), iw.close())
}
