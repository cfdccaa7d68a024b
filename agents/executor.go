package agents

import (
	"math"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Exit is a task's end as its executor saw it.
type Exit struct {
	Task uuid.UUID
	// Gen names the placement that ended (Placement.Gen).
	Gen uint64
	// At is when it ended, Unix nanoseconds.
	At int64
	// State is SUCCEEDED or FAILED; Message says why, for the task's status.
	State   omegav1.TaskState
	Message string
	// Status is how the process ended (nil from the simulation's executor).
	Status *omegav1.ExitStatus
}

// Executor runs the tasks placed on an agent's machines and says when they
// end. The agent core calls it on its own goroutine: Start and Stop as the
// tracker sees placements begin and end, Exits when it builds a report. The
// simulation's executor (SimExecutor) finishes a task after its duration in
// virtual time; a process executor (the live cell's) runs each task as a
// process and collects exits from the goroutines that wait on them, handing
// them out here. After a re-list Start comes again for every placement
// still in the cell (with a new Gen): an executor that already runs the
// task at that machine and claim time keeps it running.
type Executor interface {
	// Start runs a new placement.
	Start(t *txn.Task, p Placement)
	// Stop says a placement ended in the cell (evicted, lost, finished,
	// deleted): stop running it, report nothing more about it.
	Stop(uid uuid.UUID, p Placement)
	// Exits appends the exits at or before now not handed out yet, in (At,
	// task) order, to into and returns it.
	Exits(now int64, into []Exit) []Exit
	// Unsent takes back an exit whose report failed to commit, to hand out
	// again.
	Unsent(e Exit)
	// Next is the time of the next exit the executor foresees; ok is false
	// when it foresees none (a process executor learns of exits as they
	// happen).
	Next() (at int64, ok bool)
}

// SimExecutor is the simulation's executor: a placement claimed at T with
// Spec.DurationMillis D succeeds at T+D (D of 0, or one that ends beyond
// year 2262, runs until evicted or lost). It keeps a finish queue keyed by
// (time, task, placement), so exits leave in an order fixed by the keys
// alone; an entry whose placement the tracker no longer follows is stale
// and skipped.
type SimExecutor struct {
	tr       *Tracker
	finishes *finishQueue
}

// NewSimExecutor makes the simulation's executor for the placements tr
// follows.
func NewSimExecutor(tr *Tracker) *SimExecutor {
	return &SimExecutor{tr: tr, finishes: newFinishQueue()}
}

// Start queues the placement's finish.
func (x *SimExecutor) Start(t *txn.Task, p Placement) {
	d := t.DurationMillis()
	if d <= 0 || d > (math.MaxInt64-t.Assigned)/int64(time.Millisecond) {
		return // runs forever
	}
	x.finishes.Push(finishEntry{at: t.Assigned + d*int64(time.Millisecond), uid: t.UID, gen: p.Gen})
	x.compact()
}

// Stop does nothing: the finish queued for the placement becomes stale.
func (x *SimExecutor) Stop(uuid.UUID, Placement) {}

// Exits hands out the finishes due by now.
func (x *SimExecutor) Exits(now int64, into []Exit) []Exit {
	for {
		e, ok := x.finishes.popDue(now)
		if !ok {
			break
		}
		if _, ok := x.tr.Current(e.uid, e.gen); !ok {
			continue
		}
		into = append(into, Exit{Task: e.uid, Gen: e.gen, At: e.at, State: taskSucceeded, Message: MessageFinished})
	}
	return into
}

// Unsent queues an exit again if its placement is still followed.
func (x *SimExecutor) Unsent(e Exit) {
	if _, ok := x.tr.Current(e.Task, e.Gen); ok {
		x.finishes.Push(finishEntry{at: e.At, uid: e.Task, gen: e.Gen})
	}
}

// Next is the earliest finish still current.
func (x *SimExecutor) Next() (int64, bool) {
	e, ok := x.finishes.first(func(e finishEntry) bool {
		_, ok := x.tr.Current(e.uid, e.gen)
		return ok
	})
	return e.at, ok
}

// compact drops the stale entries once they are surely most of the queue:
// each followed placement has at most one entry, so entries beyond
// twice the placements followed are at least half stale.
func (x *SimExecutor) compact() {
	n := x.finishes.Len()
	if stale := n - x.tr.Len(); stale < 1024 || 2*stale < n {
		return
	}
	x.finishes.Filter(func(e finishEntry) bool {
		_, ok := x.tr.Current(e.uid, e.gen)
		return ok
	})
}
