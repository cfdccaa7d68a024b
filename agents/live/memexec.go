package live

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// ExecEventKind is what a MemExecutor was asked to do.
type ExecEventKind string

// What a MemExecutor records, in the order it was asked.
const (
	EvRun     ExecEventKind = "run"     // a new process started (Run)
	EvClaim   ExecEventKind = "claim"   // Run claimed a process it knew (adopted, or re-listed)
	EvRestart ExecEventKind = "restart" // Restart ran the process again
	EvRefuse  ExecEventKind = "refuse"  // Restart found nothing to run again
	EvKill    ExecEventKind = "kill"    // Kill signalled a running process
	EvStop    ExecEventKind = "stop"    // Stop (or Sweep) ended a placement
)

// ExecEvent is one thing a MemExecutor was asked and did.
type ExecEvent struct {
	Kind    ExecEventKind
	Task    uuid.UUID
	Address string // EvRun, EvClaim: the process's address
	Running bool   // EvStop: its process was still running (it was signalled)
}

// memProc is one placement's process.
type memProc struct {
	assigned int64
	gen      uint64 // the claiming placement; 0: none
	address  string
	task     *txn.Task // what runs; nil for an adopted process until Run claims it
	runs     int       // processes started for the placement
	killed   bool      // Kill signalled it; it ends when the test says
	exited   *omegav1.ExitStatus
	at       int64
	reported bool // its exit was queued (under its gen): nothing more about it
}

// MemProc is what a MemExecutor knows of a task's process.
type MemProc struct {
	Address string
	// Runs counts the processes started for the placement (1 + restarts);
	// 0 for an adopted process.
	Runs int
	// Running: its process runs; otherwise Exit says how it ended.
	Running bool
	Exit    *omegav1.ExitStatus
	// Killed: Kill signalled it.
	Killed bool
	// Claimed: a placement claimed it (Run).
	Claimed bool
}

// MemExecutor is an Executor whose processes live in memory and end when
// its owner says (Exit), at a virtual time: the live core's executor in
// tests and scripted scenarios, standing for the process executor without
// a process, a clock or a goroutine. It behaves as the process executor
// does where the core can tell — a placement Run again at the same claim
// time is claimed, not started anew; an exit is handed out once per claim;
// Reopen stands for a new agent over the same directory, adopting every
// process. A task's process can be told to refuse its next Restart
// (RefuseRestart), as a process executor with nothing left of it to run.
// It records what it is asked (Events). It belongs to one goroutine.
type MemExecutor struct {
	procs  map[uuid.UUID]*memProc
	exits  []agents.Exit
	refuse map[uuid.UUID]bool
	events []ExecEvent
}

var _ Executor = (*MemExecutor)(nil)

// NewMemExecutor makes an executor with no processes.
func NewMemExecutor() *MemExecutor {
	return &MemExecutor{procs: map[uuid.UUID]*memProc{}, refuse: map[uuid.UUID]bool{}}
}

func (x *MemExecutor) note(e ExecEvent) { x.events = append(x.events, e) }

// Events returns what the executor was asked since the last call, in
// order (the slice is the caller's).
func (x *MemExecutor) Events() []ExecEvent {
	out := x.events
	x.events = nil
	return out
}

// Run implements Executor.
func (x *MemExecutor) Run(t *txn.Task, pl agents.Placement, address string) {
	if p, ok := x.procs[t.UID]; ok {
		if p.assigned == t.Assigned {
			p.gen, p.task = pl.Gen, t
			if p.exited != nil {
				p.reported = false
				x.dropExits(t.UID)
			}
			x.note(ExecEvent{Kind: EvClaim, Task: t.UID, Address: p.address})
			x.emit(t.UID, p)
			return
		}
		x.Stop(t.UID, pl)
	}
	x.procs[t.UID] = &memProc{assigned: t.Assigned, gen: pl.Gen, address: address, task: t, runs: 1}
	x.note(ExecEvent{Kind: EvRun, Task: t.UID, Address: address})
}

// emit queues p's exit once it ended, is claimed and was not handed out.
func (x *MemExecutor) emit(uid uuid.UUID, p *memProc) {
	if p.exited == nil || p.gen == 0 || p.reported {
		return
	}
	st := process.ExitStatus{Code: int(p.exited.GetCode()), Signal: p.exited.GetSignal(), Error: p.exited.GetError()}
	state := omegav1.TaskState_TASK_STATE_SUCCEEDED
	if !st.Success() {
		state = omegav1.TaskState_TASK_STATE_FAILED
	}
	x.exits = append(x.exits, agents.Exit{Task: uid, Gen: p.gen, At: p.at, State: state, Message: st.String(), Status: st.Proto()})
	p.reported = true
}

func (x *MemExecutor) dropExits(uid uuid.UUID) {
	x.exits = slices.DeleteFunc(x.exits, func(e agents.Exit) bool { return e.Task == uid })
}

// Exit ends uid's running process at virtual time at with status st (nil:
// exit code 0). It fails if uid has no running process.
func (x *MemExecutor) Exit(uid uuid.UUID, st *omegav1.ExitStatus, at int64) error {
	p, ok := x.procs[uid]
	if !ok || p.exited != nil {
		return fmt.Errorf("mem executor: task %s has no running process", uid)
	}
	if st == nil {
		st = &omegav1.ExitStatus{}
	}
	p.exited, p.at = st, at
	x.emit(uid, p)
	return nil
}

// RefuseRestart makes the next Restart of uid fail, as a process executor's
// does when nothing of the task is left to run again.
func (x *MemExecutor) RefuseRestart(uid uuid.UUID) { x.refuse[uid] = true }

// Restart implements Executor.
func (x *MemExecutor) Restart(uid uuid.UUID) bool {
	p, ok := x.procs[uid]
	if !ok || p.exited == nil || p.task == nil || p.gen == 0 || x.refuse[uid] {
		delete(x.refuse, uid)
		x.note(ExecEvent{Kind: EvRefuse, Task: uid})
		return false
	}
	x.dropExits(uid)
	p.exited, p.at, p.reported, p.killed = nil, 0, false, false
	p.runs++
	x.note(ExecEvent{Kind: EvRestart, Task: uid, Address: p.address})
	return true
}

// Stop implements Executor.
func (x *MemExecutor) Stop(uid uuid.UUID, _ agents.Placement) {
	p, ok := x.procs[uid]
	if !ok {
		return
	}
	delete(x.procs, uid)
	x.note(ExecEvent{Kind: EvStop, Task: uid, Running: p.exited == nil})
}

// Kill implements Executor: the process is marked killed and runs on until
// Exit ends it (its grace period is the test's to play out).
func (x *MemExecutor) Kill(uid uuid.UUID) {
	if p, ok := x.procs[uid]; ok && p.exited == nil {
		p.killed = true
		x.note(ExecEvent{Kind: EvKill, Task: uid})
	}
}

// Unclaim implements Executor.
func (x *MemExecutor) Unclaim() {
	for _, p := range x.procs {
		p.gen = 0
	}
}

// Sweep implements Executor, stopping in uid order.
func (x *MemExecutor) Sweep() {
	for _, u := range x.sorted() {
		if x.procs[u].gen == 0 {
			x.Stop(u, agents.Placement{})
		}
	}
}

// Address implements Executor.
func (x *MemExecutor) Address(uid uuid.UUID, assigned int64) string {
	if p, ok := x.procs[uid]; ok && p.assigned == assigned {
		return p.address
	}
	return ""
}

// Addresses implements Executor (in uid order).
func (x *MemExecutor) Addresses() []string {
	var out []string
	for _, u := range x.sorted() {
		if a := x.procs[u].address; a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Exits implements Executor: the exits at or before now, in (At, task)
// order.
func (x *MemExecutor) Exits(now int64, into []agents.Exit) []agents.Exit {
	slices.SortStableFunc(x.exits, func(a, b agents.Exit) int {
		if a.At != b.At {
			if a.At < b.At {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.Task[:], b.Task[:])
	})
	kept := x.exits[:0]
	for _, e := range x.exits {
		if e.At <= now {
			into = append(into, e)
		} else {
			kept = append(kept, e)
		}
	}
	x.exits = kept
	return into
}

// Unsent implements Executor.
func (x *MemExecutor) Unsent(e agents.Exit) { x.exits = append(x.exits, e) }

// Running implements Executor.
func (x *MemExecutor) Running() int {
	n := 0
	for _, p := range x.procs {
		if p.exited == nil {
			n++
		}
	}
	return n
}

// Reopen stands for the agent's restart: a new process executor over the
// same directory adopts every process it finds — unclaimed, its task
// unknown until a Run claims it, running or with its exit recorded (to
// hand out once claimed) — and the exits queued in the old one's memory
// are gone.
func (x *MemExecutor) Reopen() {
	x.exits = nil
	for _, p := range x.procs {
		p.gen, p.task, p.reported, p.runs = 0, nil, false, 0
	}
}

// Proc returns what the executor knows of uid's process.
func (x *MemExecutor) Proc(uid uuid.UUID) (MemProc, bool) {
	p, ok := x.procs[uid]
	if !ok {
		return MemProc{}, false
	}
	return MemProc{Address: p.address, Runs: p.runs, Running: p.exited == nil, Exit: p.exited, Killed: p.killed, Claimed: p.gen != 0}, true
}

// Tasks returns the tasks the executor has a process of, in uid order.
func (x *MemExecutor) Tasks() []uuid.UUID { return x.sorted() }

func (x *MemExecutor) sorted() []uuid.UUID {
	out := make([]uuid.UUID, 0, len(x.procs))
	for u := range x.procs {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}
