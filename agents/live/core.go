package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Probe is a health probe the core asks its driver to run: the driver runs
// it (with the check's timeout, agents.ProbeTimeout) and hands the answer
// back to a later Step.
type Probe struct {
	Task uuid.UUID
	// Probe names the probe (agents.Action.Probe): the answer carries it,
	// so an answer to an earlier run's probe is told apart.
	Probe uint64
	// Check is the task's health check (the task's: read it, do not modify
	// it).
	Check *omegav1.HealthCheck
}

// ProbeAnswer is a probe's answer.
type ProbeAnswer struct {
	Task  uuid.UUID
	Probe uint64
	// Err is nil for a healthy answer, and says why not otherwise.
	Err error
	// At is when the probe answered, Unix nanoseconds.
	At int64
}

// CoreConfig is what a Core runs with.
type CoreConfig struct {
	// Machine is the agent's machine: the core follows the tasks placed on
	// it. Required.
	Machine uuid.UUID
	// Executor runs the tasks' processes. Required. The core reserves the
	// addresses of the processes it has already (adopted) in Pool.
	Executor Executor
	// Pool hands out the tasks' addresses. Required; the core's from then
	// on.
	Pool *agents.AddressPool
	// Logger says what the core does (started, restarted, ended...). nil:
	// nothing is said.
	Logger *slog.Logger
}

// report is what a status report stands for.
type report struct {
	uid  uuid.UUID
	exit *agents.Exit // nil: RUNNING
}

// Core is the live agent's decision code: it follows the tasks the cell
// places on the agent's machine (agents.Tracker), runs and stops their
// processes through an Executor, decides restarts and health with an
// agents.Supervisor, and reports to the cell through an agents.Reporter.
// Its driver calls Step — on a tick, when the executor has exits, when a
// probe answered — with the time and the probes' answers, and runs the
// probes Step returns; the core reads no clock and starts no goroutine, so
// the same code runs on the process executor under the wall clock (Run) and
// on a MemExecutor in virtual time (its tests). It belongs to one
// goroutine.
//
// A Core over an executor that adopted the processes of an earlier agent
// (its restart) reconciles them with the cell at NewCore: the placements
// still on the machine claim theirs (keeping their addresses), an exit
// seen meanwhile is reported, and the processes the cell no longer places
// here are stopped.
type Core struct {
	exec Executor
	sup  *agents.Supervisor
	pool *agents.AddressPool
	trk  *agents.Tracker
	rep  *agents.Reporter[report]
	log  *slog.Logger

	now      int64       // the time of the step under way
	started  []uuid.UUID // to report RUNNING
	relisted bool        // a re-list since the last sweep

	exits   []agents.Exit
	actions []agents.Action
	dirty   []uuid.UUID
	probes  []Probe
}

// NewCore makes the core over c (a client of the cell whose transport may
// see only the machine's part of it), lists the cell at now, runs (or
// claims) the placements on the machine and stops the executor's processes
// no placement claimed. It does not report: the first Step does. The
// caller closes the core; on an error nothing is left to close.
func NewCore(ctx context.Context, c *client.Client, cfg CoreConfig, now int64) (*Core, error) {
	switch {
	case c == nil:
		return nil, errors.New("live core: client is nil")
	case cfg.Machine == uuid.Nil:
		return nil, errors.New("live core: no machine")
	case cfg.Executor == nil:
		return nil, errors.New("live core: executor is nil")
	case cfg.Pool == nil:
		return nil, errors.New("live core: address pool is nil")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var adopted []netip.Addr
	for _, a := range cfg.Executor.Addresses() { // adopted tasks keep theirs
		if ip, err := netip.ParseAddr(a); err == nil && cfg.Pool.Reserve(ip) {
			adopted = append(adopted, ip)
		}
	}
	core := &Core{exec: cfg.Executor, sup: agents.NewSupervisor(), pool: cfg.Pool, log: log, rep: agents.NewReporter[report](c), now: now}
	machine := cfg.Machine
	trk, err := agents.NewTracker(c, agents.TrackerConfig{Machines: func(u uuid.UUID) bool { return u == machine }}, (*coreEvents)(core))
	if err != nil {
		return nil, fmt.Errorf("live core: %w", err)
	}
	core.trk = trk
	if err := trk.List(ctx); err != nil {
		trk.Close()
		return nil, fmt.Errorf("live core: list the machine's tasks: %w", err)
	}
	core.relisted = false
	core.sweep()
	// The processes the sweep stopped were never supervised: their
	// addresses go back to the range (the range hands a released address
	// out as late as it can, after the process's grace period).
	kept := map[netip.Addr]bool{}
	for _, u := range core.sup.Tasks(nil) {
		if ip, err := netip.ParseAddr(core.sup.Address(u)); err == nil {
			kept[ip] = true
		}
	}
	for _, ip := range adopted {
		if !kept[ip] {
			cfg.Pool.Release(ip)
		}
	}
	return core, nil
}

// Close stops following the cell. The processes go on.
func (c *Core) Close() { c.trk.Close() }

// coreEvents is the core as its tracker's events: a placement starts a
// process with an address of its own, its end in the cell stops it.
type coreEvents Core

func (e *coreEvents) Relisted(*txn.State) {
	e.exec.Unclaim() // the re-list's placements claim theirs again; the next sweep stops the rest
	e.relisted = true
}
func (e *coreEvents) MachineChanged(*txn.Machine) {}
func (e *coreEvents) MachineDeleted(uuid.UUID)    {}
func (e *coreEvents) Placed(t *txn.Task, p agents.Placement) {
	addr := e.sup.Address(t.UID)
	if addr == "" {
		addr = e.exec.Address(t.UID, t.Assigned) // adopted: it keeps its own
	}
	if addr == "" {
		if ip, ok := e.pool.Take(); ok {
			addr = ip.String()
		} else {
			e.log.Warn("the task range is used up: the task runs without an address of its own", "task", t.Name(), "range", e.pool.Prefix())
		}
	}
	e.exec.Run(t, p, addr)
	e.sup.Begin(t, addr, e.now)
	if t.State == omegav1.TaskState_TASK_STATE_ASSIGNED {
		e.started = append(e.started, t.UID)
	}
	e.log.Info("started", "task", t.Name(), "uid", t.UID, "address", addr)
}
func (e *coreEvents) Unplaced(u uuid.UUID, p agents.Placement) {
	e.exec.Stop(u, p)
	(*Core)(e).end(u)
}

// end forgets a task's supervision and lets its address go.
func (c *Core) end(u uuid.UUID) {
	if ip, err := netip.ParseAddr(c.sup.Address(u)); err == nil {
		c.pool.Release(ip)
	}
	c.sup.End(u)
}

// sweep stops the processes the cell no longer places on the machine and
// forgets their supervision.
func (c *Core) sweep() {
	c.exec.Sweep()
	for _, u := range c.sup.Tasks(nil) {
		if _, ok := c.trk.Task(u); !ok {
			c.end(u)
		}
	}
}

// Step does one pass of the agent at now (Unix nanoseconds): it takes in
// what the cell's watch delivered (placements start and stop processes),
// stops the processes a re-list no longer places, takes the probes'
// answers (a task that just became unhealthy is killed, and its end goes
// through its restart policy as a failure), restarts the processes due,
// collects the exits, and reports to the cell in one transaction: RUNNING
// for the tasks started, SUCCEEDED or FAILED for those that ended for good,
// the run (restarts, last exit, health) of those whose run changed. A
// report that did not commit (its task moved on meanwhile, or the commit
// failed) is taken back and sent again by a later Step, if its task is
// still placed here.
//
// It returns the probes due, for the driver to run and answer in a later
// Step (the slice is the core's until the next Step). An error means the
// cell's watch failed (the store closed, say): the core cannot go on; a
// failed report is not an error. Step is Plan, then Report.
func (c *Core) Step(ctx context.Context, now int64, answers []ProbeAnswer) ([]Probe, error) {
	probes, err := c.Plan(ctx, now, answers)
	if err != nil {
		return nil, err
	}
	c.Report(ctx, now)
	return probes, nil
}

// Plan is Step up to its report: everything but the commit. A live driver
// starts the probes it returns before it calls Report, so that a slow or
// unreachable cell (a report's commit waits for its deadline) does not
// hold the health checks back. The slice is the core's until the next
// Plan.
func (c *Core) Plan(ctx context.Context, now int64, answers []ProbeAnswer) ([]Probe, error) {
	c.now = now
	if err := c.trk.Poll(ctx); err != nil {
		return nil, fmt.Errorf("live core: %w", err)
	}
	if c.relisted { // placements the re-list no longer told of end here
		c.relisted = false
		c.sweep()
	}
	for _, a := range answers {
		if c.sup.Probed(a.Task, a.Probe, a.Err == nil, a.At) {
			c.log.Warn("unhealthy: stopping", "uid", a.Task, "why", a.Err)
			c.exec.Kill(a.Task)
		}
	}
	c.probes = c.probes[:0]
	c.actions = c.sup.Due(now, c.actions[:0])
	for _, a := range c.actions {
		switch a.Kind {
		case agents.ActRestart:
			c.restart(a.Task, now)
		case agents.ActProbe:
			c.probes = append(c.probes, Probe{Task: a.Task, Probe: a.Probe, Check: c.sup.Check(a.Task)})
		}
	}
	return c.probes, nil
}

// Report is Step's report at now, after Plan: the exits collected, the
// tasks started, the runs changed, in one transaction; what did not commit
// is taken back for a later Report.
func (c *Core) Report(ctx context.Context, now int64) { c.report(ctx, now) }

// restart runs a task's process again (its restart is due).
func (c *Core) restart(u uuid.UUID, now int64) {
	if c.exec.Restart(u) {
		c.sup.Restarted(u, now)
		c.log.Info("restarted", "uid", u)
		return
	}
	c.sup.End(u)
	if p, ok := c.trk.Task(u); ok {
		// Nothing of it to run again: the task ends FAILED, once, rather
		// than be asked for every step.
		c.log.Error("the task could not be restarted: it fails", "uid", u)
		c.exec.Unsent(agents.Exit{Task: u, Gen: p.Gen, At: now, State: omegav1.TaskState_TASK_STATE_FAILED, Message: MessageNotRestarted})
	}
}

// MessageNotRestarted is the message of a task that ended FAILED because
// its restart found nothing to run again.
const MessageNotRestarted = "could not be restarted"

// report builds the step's reports, commits them, and takes back those
// that did not commit.
func (c *Core) report(ctx context.Context, now int64) {
	c.rep.Reset()
	c.exits = c.exec.Exits(now, c.exits[:0])
	ending := map[uuid.UUID]bool{}
	for i := range c.exits {
		e := &c.exits[i]
		p, ok := c.trk.Current(e.Task, e.Gen)
		if !ok {
			continue // a placement the cell ended: nothing more about it
		}
		v, ok := c.sup.Exited(e.Task, e.Status, e.At)
		switch {
		case !ok && c.sup.Supervised(e.Task):
			continue // told twice; already waiting to restart
		case !ok:
			v = agents.Verdict{Final: true, State: e.State} // no longer supervised: as it ended
		}
		if !v.Final {
			c.log.Info("exited: restarting", "uid", e.Task, "how", e.Message, "in", time.Duration(v.RestartAt-now).Round(time.Millisecond))
			continue // the run report (its last exit) goes out below
		}
		e.State = v.State
		c.rep.Add(txn.SetStatus(e.Task, e.State, p.Version, e.Message).WithRun(c.sup.Report(e.Task)), report{uid: e.Task, exit: e})
		ending[e.Task] = true
	}
	for _, u := range c.started {
		if p, ok := c.trk.Task(u); ok && !ending[u] {
			c.rep.Add(txn.SetStatus(u, omegav1.TaskState_TASK_STATE_RUNNING, p.Version, "started").WithRun(c.sup.Report(u)), report{uid: u})
			ending[u] = true
		}
	}
	c.started = c.started[:0]
	c.dirty = c.sup.Dirty(c.dirty[:0])
	for _, u := range c.dirty {
		if p, ok := c.trk.Task(u); ok && !ending[u] {
			r := c.sup.Report(u)
			c.rep.Add(txn.SetStatus(u, omegav1.TaskState_TASK_STATE_RUNNING, p.Version, runMessage(r)).WithRun(r), report{uid: u})
		}
	}
	res, err := c.rep.Commit(ctx, c.trk.Revision(), now)
	if err != nil {
		c.log.Warn("status report", "err", err)
		for _, r := range c.rep.Roles() {
			c.unsent(r)
		}
		return
	}
	for i, r := range c.rep.Roles() {
		if res.Outcomes[i].Committed() {
			if r.exit != nil {
				c.log.Info("ended", "uid", r.uid, "state", r.exit.State, "how", r.exit.Message)
			}
			continue
		}
		c.unsent(r) // its version moved (our own RUNNING, say): again after the next poll
	}
}

// unsent takes back a report that did not commit.
func (c *Core) unsent(r report) {
	if r.exit != nil {
		c.exec.Unsent(*r.exit)
	} else {
		c.sup.Unreported(r.uid) // RUNNING again, if still placed
	}
}

// Reports returns the counts of the core's status transactions.
func (c *Core) Reports() agents.ReporterCounters { return c.rep.Counters() }

// Tracking reports whether the core follows a placement of uid on its
// machine.
func (c *Core) Tracking(uid uuid.UUID) bool { _, ok := c.trk.Task(uid); return ok }

// Supervised reports whether the core supervises uid's process (it is
// placed here and has not ended for good).
func (c *Core) Supervised(uid uuid.UUID) bool { return c.sup.Supervised(uid) }

// Running counts the processes the executor runs.
func (c *Core) Running() int { return c.exec.Running() }

// runMessage is the message of a RUNNING report that updates the run.
func runMessage(r *omegav1.TaskRun) string {
	switch {
	case r.GetHealth() == omegav1.HealthState_HEALTH_STATE_UNHEALTHY:
		return "unhealthy: stopping"
	case r.GetLastExit() != nil && r.GetRestarts() == 0:
		return "exited (" + ExitText(r.GetLastExit()) + "): restarting"
	case r.GetRestarts() > 0:
		return fmt.Sprintf("restarted %d times, last exit: %s", r.GetRestarts(), ExitText(r.GetLastExit()))
	}
	return "running"
}

// ExitText says how a process ended, as the agent's messages do ("exit
// status 1", "signal: terminated").
func ExitText(e *omegav1.ExitStatus) string {
	return process.ExitStatus{Code: int(e.GetCode()), Signal: e.GetSignal(), Error: e.GetError()}.String()
}
