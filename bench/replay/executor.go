package replay

import (
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/minheap"
	"github.com/omega-cell/omega/txn"
)

// runKey names one run of a trace task: its job, its index and which
// submission of it this is (a task the trace resubmits after it ended runs
// again, as a new task of the cell).
type runKey struct {
	job, task int64
	run       int32
}

// runtime is how a run ended in the trace: after how long on its machine,
// and how.
type runtime struct {
	d     time.Duration
	state omegav1.TaskState
	msg   string
}

// book holds what the trace says of the runs the replay has submitted: the
// runtimes read (ahead of the simulated time) and which task of the cell
// each run is. Its executor ends a task of the cell the trace's runtime
// after the cell placed it, not when the trace's own placement ended: the
// schedulers decide when a task starts, the trace how long it runs. An
// entry goes when its run ends in the cell or the trace drops it; the book
// is bounded by the runs in flight.
type book struct {
	runtimes map[runKey]runtime
	keys     map[uuid.UUID]runKey
	uids     map[runKey]uuid.UUID
	exec     *executor
	// Late counts runs whose runtime was read only after their end in the
	// cell should have come (placed more than the lookahead earlier than
	// the trace placed them), and Lateness sums by how much.
	Late     int64
	Lateness time.Duration
}

func newBook() *book {
	return &book{runtimes: map[runKey]runtime{}, keys: map[uuid.UUID]runKey{}, uids: map[runKey]uuid.UUID{}}
}

// learn records a run's runtime, read at now; a run already placed in the
// cell gets its end.
func (b *book) learn(k runKey, r runtime, now int64) {
	b.runtimes[k] = r
	if b.exec == nil {
		return
	}
	uid, ok := b.uids[k]
	if !ok {
		return
	}
	if p, ok := b.exec.waiting[uid]; ok {
		at := p.assigned + r.d.Nanoseconds()
		if at < now {
			b.Late++
			b.Lateness += time.Duration(now - at)
			at = now
		}
		b.exec.push(exitAt{at: at, uid: uid, gen: p.gen, r: r})
		delete(b.exec.waiting, uid)
	}
}

// submit says task uid of the cell is run k.
func (b *book) submit(uid uuid.UUID, k runKey) { b.keys[uid], b.uids[k] = k, uid }

// forget drops a task whose run the trace ended before the cell placed it.
func (b *book) forget(uid uuid.UUID) {
	b.ended(uid)
	if b.exec != nil {
		delete(b.exec.waiting, uid)
	}
}

type placed struct {
	assigned int64
	gen      uint64
}

type exitAt struct {
	at  int64
	uid uuid.UUID
	gen uint64
	r   runtime
}

// exitLess orders the ends by time, then task, then placement.
func exitLess(a, b exitAt) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if c := compareUUID(a.uid, b.uid); c != 0 {
		return c < 0
	}
	return a.gen < b.gen
}

func compareUUID(a, b uuid.UUID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// executor is the fleet's executor in a replay (agents.Executor): a
// placement ends the trace's runtime of its run after the cell placed it,
// as the trace ended it (SUCCEEDED, FAILED, KILLED); a placement whose
// runtime is not read yet waits in the book for it.
type executor struct {
	tr      *agents.Tracker
	b       *book
	q       minheap.Heap[exitAt]
	waiting map[uuid.UUID]placed
}

func newExecutor(tr *agents.Tracker, b *book) *executor {
	x := &executor{tr: tr, b: b, q: minheap.New(exitLess), waiting: map[uuid.UUID]placed{}}
	b.exec = x
	return x
}

func (x *executor) push(e exitAt) { x.q.Push(e) }

// Start queues the placement's end, or waits for its runtime.
func (x *executor) Start(t *txn.Task, p agents.Placement) {
	k, ok := x.b.keys[t.UID]
	if !ok {
		return // not the trace's (a pre-filled task the trace never ends)
	}
	if r, ok := x.b.runtimes[k]; ok {
		x.push(exitAt{at: t.Assigned + r.d.Nanoseconds(), uid: t.UID, gen: p.Gen, r: r})
		return
	}
	x.waiting[t.UID] = placed{assigned: t.Assigned, gen: p.Gen}
}

// Stop forgets a placement the cell ended (its queued end goes stale).
func (x *executor) Stop(uid uuid.UUID, _ agents.Placement) { delete(x.waiting, uid) }

// Exits hands out the ends due by now whose placements are current; a run
// that ended leaves the book.
func (x *executor) Exits(now int64, into []agents.Exit) []agents.Exit {
	for x.q.Len() > 0 && x.q.Peek().at <= now {
		e := x.q.Pop()
		if _, ok := x.tr.Current(e.uid, e.gen); !ok {
			continue
		}
		into = append(into, agents.Exit{Task: e.uid, Gen: e.gen, At: e.at, State: e.r.state, Message: e.r.msg})
		// The run ended in the cell. (Were this report to fail and the
		// task then be lost and placed again, it would run to the
		// horizon: a corner the replay does not chase.)
		x.b.ended(e.uid)
	}
	return into
}

// Unsent queues an end again if its placement is still current.
func (x *executor) Unsent(e agents.Exit) {
	if _, ok := x.tr.Current(e.Task, e.Gen); ok {
		x.push(exitAt{at: e.At, uid: e.Task, gen: e.Gen, r: runtime{state: e.State, msg: e.Message}})
	}
}

// Next is the earliest queued end still current.
func (x *executor) Next() (int64, bool) {
	for x.q.Len() > 0 {
		e := x.q.Peek()
		if _, ok := x.tr.Current(e.uid, e.gen); ok {
			return e.at, true
		}
		x.q.Pop()
	}
	return 0, false
}

// ended drops a run that ended in the cell from the book.
func (b *book) ended(uid uuid.UUID) {
	if k, ok := b.keys[uid]; ok {
		delete(b.keys, uid)
		delete(b.uids, k)
		delete(b.runtimes, k)
	}
}
