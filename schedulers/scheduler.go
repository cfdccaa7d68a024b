// Package schedulers is omega's extension point: the Scheduler interface a
// placement policy implements, the Runner that owns a scheduler's optimistic
// loop through the client library, a placement toolkit in the style of Borg
// (feasibility, then scoring; equivalence classes; relaxed randomization),
// and the three schedulers of the Omega paper: batch, service and
// mapreduce.
//
// # Writing a scheduler
//
// A scheduler is one Go type implementing Scheduler. The Runner calls Decide
// with an immutable view of the cell (client.View, a consistent revision)
// and one job with its PENDING tasks; the scheduler returns the operations to
// attempt:
//
//   - txn.Claim for pending tasks (at the version the view shows them), on
//     machines it chose in the view;
//   - txn.CreateTask for new tasks its policy calls for (a mapreduce
//     scheduler's extra workers), usually claimed in the same decision
//     (expect version 0);
//   - txn.Evict of lower-priority tasks whose room it needs (evictions must
//     come before the claims that use the room).
//
// # What Decide sees
//
// The view answers queries (Machine, Task, Job by uid; RangeMachines,
// RangePendingTasks and the like, in orders that depend only on the sets
// of uids; Capacity, Allocated, Revision). Its objects are read through
// their value fields — UID, Version, Request, Capacity, Allocated, State,
// Machine — and their methods (Name, FailureDomain, Attributes,
// Constraints, Priority, Replicas, Gang, ...; txn/access.go), never
// through the protobuf messages they keep in Meta, Spec and Status: those
// are the store's wire form, and may leave the objects when the store's
// heap is flattened, while the methods stay. A task the decision creates
// and claims at once is built with txn.PlannedTask. (A lint test holds
// this package, the agents, the job controller and the examples to it.)
//
// It must not do I/O, read a clock, start goroutines or keep pointers into
// the view beyond the call: time, randomness and ids come in Env, so the same
// scheduler runs in a live cell and, deterministically, in the simulator. It
// may keep state between decisions (Borg's score cache keyed by machine
// version, say): the Runner calls one scheduler from one goroutine.
//
// The Runner commits the decision through the shared client library. Claims
// that conflict (another scheduler got there first) come back to the
// scheduler in a later Decide with a fresh view; a job the scheduler cannot
// finish is abandoned after the Runner's bounds.
package schedulers

import (
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Scheduler is a placement policy. See the package documentation for the
// contract.
type Scheduler interface {
	// Kind names the policy ("batch", "service", "mapreduce", or a custom
	// one); jobs name the kind that places them in Spec.Scheduler.
	Kind() string
	// Decide returns the operations to attempt for one job. It must not
	// modify the view, the request or anything they point to.
	Decide(v client.View, req Request, env Env) Decision
}

// Grower is what a scheduler implements if it may create tasks for a job
// itself (MapReduce's extra workers): the Runner then attempts a job that
// has no PENDING task while WantsMore says the job wants more. placed is
// how many of its tasks the scheduler placed so far.
type Grower interface {
	WantsMore(job *txn.Job, placed int) bool
}

// placedReader is implemented by a scheduler of this package that reads
// Request.Placed for some decisions only: the Runner looks the job's
// placed tasks up only for those. (A large job's placed tasks, looked up on
// every attempt while it waits for room, were a tenth of a saturated
// replay's time, for a batch decision that never reads them.)
type placedReader interface {
	readsPlaced(req Request) bool
}

// Request is one job to place.
type Request struct {
	Job *txn.Job
	// Pending holds the job's PENDING tasks in the view, in a deterministic
	// order.
	Pending []*txn.Task
	// Placed holds the job's tasks this scheduler placed that the view still
	// shows placed (for spreading and DIFFERENT_MACHINES constraints). The
	// batch scheduler, which reads them for DIFFERENT_MACHINES only, is
	// given them only for a job with such a constraint.
	Placed []*txn.Task
	// PlacedTotal counts the job's tasks this scheduler ever placed,
	// finished ones included (lost ones excluded): what a job that sizes its
	// own workers has already had.
	PlacedTotal int
	// Attempt counts the Runner's earlier attempts at this job (0 the
	// first time).
	Attempt int
}

// Env is what a decision may use besides the view.
type Env struct {
	Now       time.Time        // the decision's time (virtual in the simulator)
	Rand      *rand.Rand       // the scheduler's seeded source
	NewUID    func() uuid.UUID // ids for objects the decision creates
	Component string           // the scheduler instance's name (e.g. "batch-0")
	// Machines, if set, is a MachineIndex shared by the schedulers of one
	// process that decide one at a time on one line of views (the
	// simulation's runners on loops of their own): each change to the
	// cell's machines is then taken in once, not once per scheduler. A
	// built-in scheduler uses it instead of its own; the decisions are the
	// same (the index holds each view's machines exactly). nil: its own.
	Machines *MachineIndex
}

// index is the MachineIndex a scheduler decides with: env's shared one, or
// its own.
func (env Env) index(own *MachineIndex) *MachineIndex {
	if env.Machines != nil {
		return env.Machines
	}
	return own
}

// Decision is what a scheduler asks for.
type Decision struct {
	// Ops to commit, in order.
	Ops []txn.Op
	// AllOrNothing commits the operations as a gang.
	AllOrNothing bool
	// Considered is how many tasks the decision looked at: the decision
	// time model is t_job + t_task × Considered.
	Considered int
	// Unplaceable counts the pending tasks the scheduler found no machine
	// for in this view (they stay pending; the Runner retries the job later).
	Unplaceable int
}
