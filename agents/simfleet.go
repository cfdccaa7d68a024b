package agents

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

const (
	stateUp   = omegav1.MachineState_MACHINE_STATE_UP
	stateDown = omegav1.MachineState_MACHINE_STATE_DOWN

	taskSucceeded = omegav1.TaskState_TASK_STATE_SUCCEEDED
	taskLost      = omegav1.TaskState_TASK_STATE_LOST
)

// The messages the fleet writes on the tasks it reports.
const (
	MessageFinished      = "finished after its duration"
	MessageMachineFailed = "machine failed"
)

// FleetCounters are what a SimFleet counts.
type FleetCounters struct {
	// TasksFinished and TasksLost count the SUCCEEDED and LOST reports the
	// store committed.
	TasksFinished, TasksLost int64
	// MachinesFailed and MachinesRepaired count the DOWN and UP writes the
	// store committed.
	MachinesFailed, MachinesRepaired int64
	// StatusTxns counts the status transactions the store evaluated: one per
	// tick that had something to report.
	StatusTxns int64
	// ConflictedTxns counts the status transactions with at least one
	// conflicting operation; Conflicts counts those operations. A conflicting
	// report means its task or machine moved on meanwhile: the fleet drops
	// it and follows the change through the watch.
	ConflictedTxns, Conflicts int64
	// Relists counts how often the fleet fell behind the store's retained
	// history and took a fresh view.
	Relists int64
}

type roleKind uint8

const (
	roleFinish roleKind = iota + 1
	roleLost
	roleFail
	roleRepair
)

// role says what an operation of a status transaction stands for, to read
// its outcome.
type role struct {
	kind roleKind
	uid  uuid.UUID   // roleFinish, roleLost: the task
	ev   MemberEvent // roleFail, roleRepair
}

// SimFleet simulates every machine of a cell behind one client, assembled
// from the agent core: a Tracker follows the placements by watching the
// cell, a SimExecutor finishes each after the task's Spec.DurationMillis
// (0 runs forever), a SimMembership fails machines at a configured rate and
// repairs them, and a Reporter sends what fell due at each Tick in one
// incremental transaction: SUCCEEDED for the finished tasks, a failed
// machine DOWN and its tasks LOST (MachineDown), a repaired one UP. Every
// release goes through the store's commit path; the fleet frees nothing
// beside it.
//
// A SimFleet belongs to one goroutine (the engine's). It reads no clock,
// starts no goroutine and never sleeps: time is the now passed to Tick, and
// randomness is FleetConfig.Rand, so the same history and seed give the
// same transactions, operation for operation.
type SimFleet struct {
	c       *client.Client
	cfg     FleetConfig
	tr      *Tracker
	exec    Executor
	members *SimMembership
	rep     *Reporter[role]

	strays []uuid.UUID // tasks watched onto a machine held DOWN, to report LOST
	exits  []Exit      // this tick's exits (put back if the commit fails)
	events []MemberEvent

	lastTick time.Time
	counters FleetCounters
}

// fleetEvents routes the tracker's events to the fleet's parts.
type fleetEvents struct{ f *SimFleet }

func (e fleetEvents) Relisted(s *txn.State) {
	e.f.members.Relisted(s)
	e.f.strays = e.f.strays[:0]
}

func (e fleetEvents) MachineChanged(m *txn.Machine)       { e.f.members.MachineChanged(m) }
func (e fleetEvents) MachineDeleted(uid uuid.UUID)        { e.f.members.MachineDeleted(uid) }
func (e fleetEvents) Unplaced(uid uuid.UUID, p Placement) { e.f.exec.Stop(uid, p) }

func (e fleetEvents) Placed(t *txn.Task, p Placement) {
	e.f.exec.Start(t, p)
	if e.f.members.Down(t.Machine) {
		// Placed on a machine the fleet failed, by a claim its failure did
		// not see: it is lost too.
		e.f.strays = append(e.f.strays, t.UID)
	}
}

// NewSimFleet starts a fleet over c: it takes c's view of the cell, tracks
// the tasks already placed in it (as an agent that starts lists before it
// watches), and watches the cell from that view's revision through c. The
// status transactions carry c's component name. The fleet owns the watch;
// Close releases it. c should be the fleet's own client: the fleet's
// commits count in c's counters.
func NewSimFleet(ctx context.Context, c *client.Client, cfg FleetConfig) (*SimFleet, error) {
	if c == nil {
		return nil, errors.New("new sim fleet: client is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &SimFleet{c: c, cfg: cfg, rep: NewReporter[role](c)}
	// Only failures need tasks by machine.
	tr, err := NewTracker(c, TrackerConfig{ByMachine: cfg.FailuresPerDay > 0}, fleetEvents{f})
	if err != nil {
		return nil, fmt.Errorf("new sim fleet: %w", err)
	}
	f.tr, f.members = tr, NewSimMembership(tr, cfg)
	if cfg.NewExecutor != nil {
		f.exec = cfg.NewExecutor(tr)
	} else {
		f.exec = NewSimExecutor(tr)
	}
	if err := tr.List(ctx); err != nil {
		return nil, fmt.Errorf("new sim fleet (%s): %w", c.Component(), err)
	}
	if !cfg.Start.IsZero() {
		f.members.Arm(cfg.Start.UnixNano())
	}
	return f, nil
}

// Config returns the fleet's configuration, defaults filled in.
func (f *SimFleet) Config() FleetConfig { return f.cfg }

// Counters returns the counts so far.
func (f *SimFleet) Counters() FleetCounters {
	c, rc := f.counters, f.rep.Counters()
	c.StatusTxns, c.ConflictedTxns, c.Conflicts = rc.Txns, rc.ConflictedTxns, rc.Conflicts
	c.Relists = f.tr.Relists()
	return c
}

// Revision is the revision the fleet has watched up to.
func (f *SimFleet) Revision() uint64 { return f.tr.Revision() }

// Tracked returns how many placed tasks the fleet is tracking.
func (f *SimFleet) Tracked() int { return f.tr.Len() }

// Close stops watching. The fleet must not be used afterwards.
func (f *SimFleet) Close() { f.tr.Close() }

// Poll takes in what the watch has delivered since the last call, without
// blocking, so that NextEvent sees the newest placements. Tick polls
// itself. An error means the watch failed (the store closed, say); a watch
// that fell behind the retained history is not an error: the fleet takes a
// fresh view.
func (f *SimFleet) Poll(ctx context.Context) error {
	if err := f.tr.Poll(ctx); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}

// Tick reports what fell due at virtual time now: it polls the watch, then
// commits one incremental status transaction holding SUCCEEDED (expecting
// the version last watched) for every tracked task whose finish time is at
// or before now; for every machine failure due, the machine written DOWN
// and its tracked tasks LOST (a task that finished before the failure is
// reported SUCCEEDED instead); and the repairs due, machines written UP.
// The transaction is stamped with now.
//
// It returns the store's result; Revision 0 and no outcomes when nothing
// was due (then nothing was sent). An operation that conflicts (its task or
// machine moved on since the fleet watched it) is dropped: the fleet
// follows the change through the watch. (So a failure whose DOWN write
// conflicts — someone else wrote the machine since the fleet watched it —
// still commits its LOST reports: the tasks are lost, the machine stays as
// the other writer left it.) An error comes from the watch or
// the commit; on a commit error nothing changed in the store, the fleet
// keeps what it had to report and tries again at the next tick.
func (f *SimFleet) Tick(ctx context.Context, now time.Time) (txn.Result, error) {
	if err := f.Poll(ctx); err != nil {
		return txn.Result{}, err
	}
	at := now.UnixNano()
	f.lastTick = now
	f.members.Arm(at)
	f.plan(at)
	if f.rep.Len() == 0 {
		return txn.Result{}, nil
	}
	res, err := f.rep.Commit(ctx, f.tr.Revision(), at)
	if err != nil {
		f.restore()
		return res, fmt.Errorf("fleet status transaction at %s (%d operations): %w", now.UTC().Format(time.RFC3339Nano), f.rep.Len(), err)
	}
	f.settle(&res, at)
	return res, nil
}

// plan builds the status transaction for time at in the reporter, taking
// what it reports from the executor and the membership.
func (f *SimFleet) plan(at int64) {
	f.rep.Reset()
	f.events = f.members.Due(at, f.events[:0])
	var failAt map[uuid.UUID]int64 // lookups only
	for _, ev := range f.events {
		if !ev.Up {
			if failAt == nil {
				failAt = make(map[uuid.UUID]int64, len(f.events))
			}
			failAt[ev.Machine] = ev.At
		}
	}
	var reported map[uuid.UUID]struct{} // lookups only
	note := func(u uuid.UUID) {
		if reported == nil {
			reported = map[uuid.UUID]struct{}{}
		}
		reported[u] = struct{}{}
	}

	// Tasks finished, in (finish time, uid) order.
	f.exits = f.exec.Exits(at, f.exits[:0])
	for _, e := range f.exits {
		p, _ := f.tr.Current(e.Task, e.Gen) // the executor hands out current placements only
		if f.members.Down(p.Machine) {
			continue // a stray on a failed machine: lost below
		}
		if ft, failing := failAt[p.Machine]; failing && ft < e.At {
			continue // its machine failed before it finished: lost below
		}
		f.rep.Add(txn.SetStatus(e.Task, e.State, p.Version, e.Message), role{kind: roleFinish, uid: e.Task})
		note(e.Task)
	}

	// Machines failed: DOWN, and their tasks LOST, in uid order.
	for _, ev := range f.events {
		if ev.Up {
			continue
		}
		on := f.tr.On(ev.Machine)
		versions := make(map[uuid.UUID]uint64, len(on))
		for u := range on {
			if _, done := reported[u]; !done {
				p, _ := f.tr.Task(u)
				versions[u] = p.Version
			}
		}
		m, _ := f.tr.Machine(ev.Machine) // the membership fails only machines it watched UP
		ops := MachineDown(m, versions, MessageMachineFailed)
		f.rep.Add(ops[0], role{kind: roleFail, ev: ev})
		for _, op := range ops[1:] {
			f.rep.Add(op, role{kind: roleLost, uid: op.Task})
		}
	}

	// Tasks watched onto machines the fleet holds DOWN, in the order seen.
	for _, u := range f.strays {
		p, ok := f.tr.Task(u)
		if !ok || !f.members.Down(p.Machine) {
			continue
		}
		if _, done := reported[u]; done {
			continue
		}
		note(u)
		f.rep.Add(txn.SetStatus(u, taskLost, p.Version, MessageMachineFailed), role{kind: roleLost, uid: u})
	}

	// Machines repaired: UP again.
	for _, ev := range f.events {
		if !ev.Up {
			continue
		}
		m, _ := f.tr.Machine(ev.Machine) // the membership repairs only machines it watched
		pm := m.Proto()
		pm.Status.State = stateUp
		f.rep.Add(txn.PutMachine(pm, ev.Version), role{kind: roleRepair, ev: ev})
	}
}

// settle reads a committed status transaction's outcomes.
func (f *SimFleet) settle(res *txn.Result, at int64) {
	for i, r := range f.rep.Roles() {
		ok := res.Outcomes[i].Committed()
		switch r.kind {
		case roleFinish:
			f.tr.Forget(r.uid)
			if ok {
				f.counters.TasksFinished++
			}
		case roleLost:
			f.tr.Forget(r.uid)
			if ok {
				f.counters.TasksLost++
			}
		case roleFail:
			f.members.Settled(r.ev, ok, res.Revision, at)
			if ok {
				f.counters.MachinesFailed++
			}
		case roleRepair:
			f.members.Settled(r.ev, ok, res.Revision, at)
			if ok {
				f.counters.MachinesRepaired++
			}
		}
	}
	f.strays = f.strays[:0]
}

// restore puts back what a plan took, after a commit error.
func (f *SimFleet) restore() {
	for _, e := range f.exits {
		f.exec.Unsent(e)
	}
	for _, ev := range f.events {
		f.members.Unsent(ev)
	}
}

// NextEvent returns the earliest virtual time at which the fleet has
// something to report — a tracked task's finish, a machine failure or
// repair — as of what it has watched (call Poll first to see the newest
// placements), or the zero Time when nothing is scheduled (only tasks that
// run forever, no failures). Reports already due give the time of the last
// tick. A repair the fleet will not make after all may still show here:
// waking for it is harmless.
func (f *SimFleet) NextEvent() time.Time {
	best, found := int64(math.MaxInt64), false
	if t, ok := f.exec.Next(); ok {
		best, found = t, true
	}
	if t, ok := f.members.Next(); ok {
		best, found = min(best, t), true
	}
	if len(f.strays) > 0 {
		best, found = min(best, f.lastTick.UnixNano()), true
	}
	if !found {
		return time.Time{}
	}
	return time.Unix(0, best).UTC()
}

// NextTick returns when an engine that skips idle ticks should tick next,
// given the time of the last tick: the first time last + k*Tick (k ≥ 1) at
// or after NextEvent, or the zero Time when nothing is scheduled. It is only
// as good as what the fleet has watched: after a commit by anyone else, Poll
// and ask again.
func (f *SimFleet) NextTick(last time.Time) time.Time {
	next := f.NextEvent()
	if next.IsZero() {
		return time.Time{}
	}
	d := next.Sub(last)
	switch {
	case d <= f.cfg.Tick:
		return last.Add(f.cfg.Tick)
	case d >= 1<<62:
		return next
	}
	k := (d + f.cfg.Tick - 1) / f.cfg.Tick
	return last.Add(k * f.cfg.Tick)
}
