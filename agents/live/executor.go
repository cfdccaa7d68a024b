package live

import (
	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/agents/process"
	"github.com/omega-cell/omega/txn"
)

// Executor is what the live agent's core asks of the processes it runs: more
// than agents.Executor (which the simulated fleet's finishes satisfy), since
// a live task has an address of its own, is restarted in place by its
// restart policy, is killed when it fails its health checks, and survives
// the agent (a new core adopts it). The process executor (agents/process)
// is the real one; MemExecutor runs processes in memory that end when a test
// says, in virtual time.
//
// The core calls every method from its own goroutine and never at once; an
// implementation whose processes end on goroutines of their own (the process
// executor) hands their exits in under a lock. No method blocks on a
// process: starting one waits at most for it to be started, stopping one
// only signals it. Errors are not returned: what fails to start or to
// restart shows as an exit (Exits) or as Restart's false, and the task's
// status says so.
type Executor interface {
	// Run runs a placement's process with address as its own IP ("" for
	// none). A process the executor already knows at the same placement
	// (uid and pl.Assigned: adopted after the agent restarted, or told again
	// by a re-list) is claimed by pl.Gen and nothing new runs; an exit it had
	// is handed out again under pl.Gen (its first report may not have
	// committed). A process of another placement of the task is stopped
	// first. A process that cannot start ends at once: its exit, FAILED and
	// saying why, comes out of Exits. t is kept (the caller must not modify
	// it).
	Run(t *txn.Task, pl agents.Placement, address string)
	// Restart runs again, in place, the process of a claimed placement whose
	// process ended (the restart policy said so), at the same address. It
	// returns false, changing nothing, if uid is no placement of the
	// executor's, its process still runs, or nothing of it is left to run
	// (an adopted process no Run claimed).
	Restart(uid uuid.UUID) bool
	// Stop ends a placement the cell ended (evicted, lost, finished,
	// deleted): its process is stopped with its grace period and forgotten,
	// and nothing more is reported about it (a queued exit is kept; the
	// core drops exits of placements it no longer tracks).
	Stop(uid uuid.UUID, pl agents.Placement)
	// Kill stops a placement's process (it failed its health checks) with
	// its grace period; unlike Stop the placement stays, and the process's
	// end comes out of Exits like any other. A process not running is left
	// alone.
	Kill(uid uuid.UUID)
	// Unclaim marks every process as claimed by no placement, before a
	// re-list tells the placements again (Run); Sweep after it stops those
	// no Run claimed.
	Unclaim()
	// Sweep stops (as Stop) the processes no placement claimed: call it
	// after a listing, once every placement was Run.
	Sweep()
	// Address is the address the process of placement (uid, assigned) was
	// given, "" if it has none or the executor knows no such process. An
	// adopted process keeps its own.
	Address(uid uuid.UUID, assigned int64) string
	// Addresses are the addresses of every process the executor knows,
	// running or ended, in no order (a new slice: the caller's).
	Addresses() []string
	// Exits appends the exits not handed out yet, seen at or before now
	// (the process executor hands out every exit it has seen, whatever
	// now), to into and returns it.
	Exits(now int64, into []agents.Exit) []agents.Exit
	// Unsent takes back an exit whose report did not commit, to hand out
	// again by the next Exits.
	Unsent(e agents.Exit)
	// Running counts the processes running.
	Running() int
}

// The process executor is the real one.
var _ Executor = (*process.Executor)(nil)
