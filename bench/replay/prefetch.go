package replay

import (
	"errors"
	"io"
	"sync"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/trace"
)

// prefetcher reads the trace in a goroutine of its own, ahead of the
// replay: it decompresses and parses the tables, merges them in time
// order, cuts the window's end, and works out each run's runtime from the
// trace's own schedule and end (what reading ahead is for), so that the
// simulation's thread only applies what it hands over. It is the replay's
// I/O, not a decision: it hands over exactly the events, in exactly the
// order, that reading in the simulation's thread would, so a replay is the
// same either way (and the same for the same seed and trace).
//
// The goroutine owns the source and its Stats until it has stopped: at the
// end of the trace, at an error, or at stop.
type prefetcher struct {
	src       trace.Source
	to        int64 // the window's end in trace µs (0: none)
	evictions string

	out  chan *batch
	free chan *batch
	stop chan struct{}
	done chan struct{}
	once sync.Once

	// The reader's state (the goroutine's): per task, the trace's run
	// count, the schedule time of its run in flight, whether an eviction
	// the replay ignores keeps that run going.
	rSched   map[key]int64
	rRun     map[key]int32
	rEvicted map[key]bool

	// The consumer's.
	cur *batch
	pos int
}

// item is one event read ahead, with what reading it taught.
type item struct {
	e trace.Event
	// learn: the event ends run k of a task, which ran r in the trace.
	learn bool
	k     runKey
	r     runtime
	// task: a task event of the trace's own (it moves the horizon).
	task bool
}

// batch is a run of items; after them, the reader met the end (eof) or an
// error (err) and stopped.
type batch struct {
	items []item
	eof   bool
	err   error
}

const (
	prefetchBatch = 1024 // events a batch
	prefetchDepth = 4    // batches queued ahead of the consumer
)

func newPrefetcher(src trace.Source, cfg *Config) *prefetcher {
	p := &prefetcher{src: src, to: cfg.To.Microseconds(), evictions: cfg.Evictions,
		out: make(chan *batch, prefetchDepth), free: make(chan *batch, prefetchDepth+2),
		stop: make(chan struct{}), done: make(chan struct{}),
		rSched: map[key]int64{}, rRun: map[key]int32{}, rEvicted: map[key]bool{}}
	go p.run()
	return p
}

func (p *prefetcher) run() {
	defer close(p.done)
	for {
		var b *batch
		select {
		case b = <-p.free:
			b.items, b.eof, b.err = b.items[:0], false, nil
		default:
			b = &batch{items: make([]item, 0, prefetchBatch)}
		}
		for len(b.items) < prefetchBatch {
			e, err := p.src.Next()
			if errors.Is(err, io.EOF) {
				b.eof = true
				break
			}
			if err != nil {
				b.err = err
				break
			}
			if p.to > 0 && e.Time > p.to {
				b.eof = true
				break
			}
			if e.Time == workloadAfterTrace {
				continue // after the trace's window (Google's 2^63-1)
			}
			b.items = append(b.items, p.read(e))
			if p.src.TasksDone() {
				// The horizon is known: what follows (a machine table
				// that runs on past the task excerpt, say) is after it.
				b.eof = true
				break
			}
		}
		select {
		case p.out <- b:
		case <-p.stop:
			return
		}
		if b.eof || b.err != nil {
			return
		}
	}
}

// read works out what event e teaches: the runtime of the run it ends
// (from the trace's schedule of it), with the evictions the replay ignores
// left out of the run's time.
func (p *prefetcher) read(e trace.Event) item {
	it := item{e: e}
	k := key{e.Job, e.Task}
	switch e.Kind {
	case trace.TaskSubmit:
		if p.rEvicted[k] {
			return it // the run goes on: this submission is its own again
		}
		p.rRun[k]++
	case trace.TaskSchedule:
		if p.rEvicted[k] {
			return it
		}
		p.rSched[k] = e.Time
	case trace.TaskEnd:
		if e.End == trace.EndEvict && p.evictions == "ignore" {
			if _, ok := p.rSched[k]; ok {
				p.rEvicted[k] = true
			}
			return it
		}
		delete(p.rEvicted, k)
		if t, ok := p.rSched[k]; ok {
			delete(p.rSched, k)
			it.learn, it.k, it.r = true, runKey{e.Job, e.Task, p.rRun[k]}, runtimeOf(e, e.Time-t)
		}
		if e.End != trace.EndEvict {
			delete(p.rRun, k)
		}
	}
	it.task = e.Kind.Task()
	return it
}

// next hands over the next item; io.EOF after the last, or the error the
// reader stopped at (again at every call).
func (p *prefetcher) next() (item, error) {
	for {
		if b := p.cur; b != nil {
			if p.pos < len(b.items) {
				p.pos++
				return b.items[p.pos-1], nil
			}
			switch {
			case b.err != nil:
				return item{}, b.err
			case b.eof:
				return item{}, io.EOF
			}
			select {
			case p.free <- b:
			default:
			}
			p.cur = nil
		}
		b, ok := <-p.out
		if !ok {
			return item{}, io.EOF
		}
		p.cur, p.pos = b, 0
	}
}

// finish stops the reader, if it has not stopped, and waits for it: the
// source and its stats are the caller's again.
func (p *prefetcher) finish() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

// runtimeOf is how a run the trace ended with e ran: d µs on its machine,
// and the state and message its end gives the cell.
func runtimeOf(e trace.Event, d int64) runtime {
	r := runtime{d: time.Duration(d) * time.Microsecond}
	switch e.End {
	case trace.EndFinish:
		r.state, r.msg = omegav1.TaskState_TASK_STATE_SUCCEEDED, "finished (its runtime in the trace)"
	case trace.EndFail:
		r.state, r.msg = omegav1.TaskState_TASK_STATE_FAILED, "failed in the trace"
	case trace.EndKill:
		r.state, r.msg = omegav1.TaskState_TASK_STATE_KILLED, "killed in the trace"
	case trace.EndEvict:
		r.state, r.msg = omegav1.TaskState_TASK_STATE_KILLED, "evicted in the trace"
	default:
		r.state, r.msg = omegav1.TaskState_TASK_STATE_KILLED, "lost in the trace"
	}
	return r
}
