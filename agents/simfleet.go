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

// tracked is a task the fleet knows is placed on one of its machines.
type tracked struct {
	machine  uuid.UUID
	version  uint64 // the task's version as last watched: a report expects it
	assigned int64  // the claim's time: with machine, names the placement
	finish   int64  // assigned + duration, Unix nanoseconds; 0: runs until evicted or lost
	gen      uint64 // the placement's entry in the finish queue
	inHeap   bool   // that entry is still queued
}

// failure is a machine failure the fleet is reporting.
type failure struct {
	at      int64 // when it happened, Unix nanoseconds (at or before the tick)
	machine uuid.UUID
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
	uid  uuid.UUID // the task, or the machine
	at   int64     // roleFail: the failure's time
}

// plan is one tick's status transaction as the fleet builds it, with what
// it took off its queues (put back if the commit fails).
type plan struct {
	ops     []txn.Op
	roles   []role
	popped  []finishEntry
	repairs []repairEntry
}

// SimFleet simulates every machine of a cell behind one client. It learns
// about placements by watching the cell: a task that becomes ASSIGNED is
// tracked (its machine, the version the claim gave it, and its finish time:
// the claim's time plus the task's Spec.DurationMillis; 0 runs forever), and
// a task that leaves ASSIGNED/RUNNING (evicted, finished, lost, deleted) is
// forgotten. At each Tick it reports, in one incremental transaction,
// SUCCEEDED for the tracked tasks whose finish time has come, and the
// machine failures and repairs that fell due: a failed machine is written
// DOWN and its tasks LOST, a repaired one UP. Every release goes through
// the store's commit path; the fleet frees nothing beside it.
//
// A SimFleet belongs to one goroutine (the engine's). It reads no clock,
// starts no goroutine and never sleeps: time is the now passed to Tick, and
// randomness is FleetConfig.Rand, so the same history and seed give the
// same transactions, operation for operation.
type SimFleet struct {
	scratch plan // reused by plan
	c       *client.Client
	cfg     FleetConfig
	w       client.Watch
	rev     uint64 // the revision the fleet's knowledge is at

	tasks     map[uuid.UUID]tracked
	onMachine map[uuid.UUID]map[uuid.UUID]struct{} // machine → tracked tasks on it (sets kept when empty)
	finishes  minHeap[finishEntry]
	stale     int    // queued finish entries whose placement is no longer tracked
	gen       uint64 // last placement generation handed out

	machines map[uuid.UUID]*txn.Machine // as last watched
	up       uidSet                     // UP machines the fleet may fail, in history order

	failArmed    bool
	nextFail     int64 // Unix nanoseconds
	pendingFails []failure
	repairs      minHeap[repairEntry]
	failed       map[uuid.UUID]uint64 // machines the fleet holds DOWN → the version its DOWN write gave them
	strays       []uuid.UUID          // tasks watched onto a machine the fleet holds DOWN, to report LOST

	lastTick time.Time
	counters FleetCounters
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
	f := &SimFleet{
		c:        c,
		cfg:      cfg,
		failed:   map[uuid.UUID]uint64{},
		finishes: minHeap[finishEntry]{less: finishLess},
		repairs:  minHeap[repairEntry]{less: repairLess},
	}
	if err := f.list(ctx); err != nil {
		return nil, fmt.Errorf("new sim fleet (%s): %w", c.Component(), err)
	}
	if cfg.FailuresPerDay > 0 && !cfg.Start.IsZero() {
		f.armFailures(cfg.Start.UnixNano())
	}
	return f, nil
}

// Config returns the fleet's configuration, defaults filled in.
func (f *SimFleet) Config() FleetConfig { return f.cfg }

// Counters returns the counts so far.
func (f *SimFleet) Counters() FleetCounters { return f.counters }

// Revision is the revision the fleet has watched up to.
func (f *SimFleet) Revision() uint64 { return f.rev }

// Tracked returns how many placed tasks the fleet is tracking.
func (f *SimFleet) Tracked() int { return len(f.tasks) }

// Close stops watching. The fleet must not be used afterwards.
func (f *SimFleet) Close() {
	if f.w != nil {
		f.w.Close()
	}
}

// list takes a fresh view, rebuilds what the fleet tracks from it, and
// watches from its revision. Machines the fleet holds DOWN and their
// repairs survive it.
func (f *SimFleet) list(ctx context.Context) error {
	st, w, err := f.c.ListAndWatch(ctx)
	if err != nil {
		return err
	}
	if f.w != nil {
		f.w.Close()
	}
	f.w = w
	f.reset(st)
	return nil
}

func (f *SimFleet) reset(s *txn.State) {
	f.tasks = make(map[uuid.UUID]tracked, s.NumTasks()/4)
	f.onMachine = make(map[uuid.UUID]map[uuid.UUID]struct{}, s.NumMachines())
	f.finishes.Filter(func(finishEntry) bool { return false })
	f.stale = 0
	f.machines = make(map[uuid.UUID]*txn.Machine, s.NumMachines())
	f.up = newUIDSet()
	f.strays = f.strays[:0]
	// Range orders depend only on the sets of uids: the same state rebuilds
	// the same fleet.
	s.RangeMachines(func(m *txn.Machine) bool {
		f.noteMachine(m)
		return true
	})
	for u, v := range f.failed { // deletes only: order does not matter
		if m, ok := f.machines[u]; !ok || m.Version > v {
			delete(f.failed, u)
		}
	}
	s.RangeTasks(func(t *txn.Task) bool {
		if t.Placed() {
			f.track(t)
		}
		return true
	})
	f.rev = s.Revision()
}

// Poll takes in what the watch has delivered since the last call, without
// blocking, so that NextEvent sees the newest placements. Tick polls
// itself. An error means the watch failed (the store closed, say); a watch
// that fell behind the retained history is not an error: the fleet takes a
// fresh view.
func (f *SimFleet) Poll(ctx context.Context) error {
	sets, err := f.w.Poll(0)
	if errors.Is(err, client.ErrCompacted) {
		f.counters.Relists++
		return f.list(ctx)
	}
	if err != nil {
		return fmt.Errorf("fleet watch after revision %d: %w", f.rev, err)
	}
	for _, ws := range sets {
		if ws.Revision > f.rev {
			f.ingest(ws)
		}
	}
	f.compact()
	return nil
}

func (f *SimFleet) ingest(ws *txn.WriteSet) {
	for i := range ws.Changes {
		ch := &ws.Changes[i]
		switch {
		case ch.Task != nil:
			if ch.Deleted || !ch.Task.Placed() {
				f.forget(ch.Task.UID)
			} else {
				f.track(ch.Task)
			}
		case ch.Machine != nil:
			if ch.Deleted {
				f.dropMachine(ch.Machine.UID)
			} else {
				f.noteMachine(ch.Machine)
			}
		}
	}
	f.rev = ws.Revision
}

// track notes a placed task. A newer version of the same placement (a
// RUNNING report, say) only updates the version a report will expect.
func (f *SimFleet) track(t *txn.Task) {
	if cur, ok := f.tasks[t.UID]; ok {
		if cur.machine == t.Machine && cur.assigned == t.Assigned {
			cur.version = t.Version
			f.tasks[t.UID] = cur
			return
		}
		f.forget(t.UID)
	}
	f.gen++
	tr := tracked{machine: t.Machine, version: t.Version, assigned: t.Assigned, gen: f.gen}
	if d := t.Spec.GetDurationMillis(); d > 0 && d <= (math.MaxInt64-t.Assigned)/int64(time.Millisecond) {
		tr.finish = t.Assigned + d*int64(time.Millisecond)
		tr.inHeap = true
		f.finishes.Push(finishEntry{at: tr.finish, uid: t.UID, gen: tr.gen})
	} // a duration beyond year 2262 runs forever
	f.tasks[t.UID] = tr
	if f.cfg.FailuresPerDay > 0 { // only failures need tasks by machine
		set := f.onMachine[t.Machine]
		if set == nil {
			set = map[uuid.UUID]struct{}{}
			f.onMachine[t.Machine] = set
		}
		set[t.UID] = struct{}{}
	}
	if _, down := f.failed[t.Machine]; down {
		// Placed on a machine the fleet failed by a claim its failure did not
		// see: it is lost too.
		f.strays = append(f.strays, t.UID)
	}
}

func (f *SimFleet) forget(uid uuid.UUID) {
	tr, ok := f.tasks[uid]
	if !ok {
		return
	}
	delete(f.tasks, uid)
	// An emptied set stays: the machine will hold tasks again, and a map per
	// machine is cheaper kept than made anew for every placement.
	delete(f.onMachine[tr.machine], uid)
	if tr.inHeap {
		f.stale++
	}
}

// live returns the tracked task a finish entry stands for, if it is still
// tracked at that placement.
func (f *SimFleet) live(e finishEntry) (tracked, bool) {
	tr, ok := f.tasks[e.uid]
	if !ok || tr.gen != e.gen {
		return tracked{}, false
	}
	return tr, true
}

// compact drops the stale finish entries once they are most of the queue.
func (f *SimFleet) compact() {
	if f.stale < 1024 || 2*f.stale < f.finishes.Len() {
		return
	}
	f.finishes.Filter(func(e finishEntry) bool {
		_, ok := f.live(e)
		return ok
	})
	f.stale = 0
}

func (f *SimFleet) noteMachine(m *txn.Machine) {
	f.machines[m.UID] = m
	v, held := f.failed[m.UID]
	if held && m.Version > v {
		// Someone else changed the machine since the fleet wrote it DOWN: its
		// repair is no longer the fleet's to make.
		delete(f.failed, m.UID)
		held = false
	}
	if m.State == stateUp && !held {
		f.up.Add(m.UID)
	} else {
		f.up.Remove(m.UID)
	}
}

func (f *SimFleet) dropMachine(uid uuid.UUID) {
	delete(f.machines, uid)
	delete(f.failed, uid)
	f.up.Remove(uid)
}

// armFailures starts the failure process at from.
func (f *SimFleet) armFailures(from int64) {
	if f.failArmed || f.cfg.FailuresPerDay <= 0 {
		return
	}
	f.failArmed = true
	f.nextFail = addSat(from, f.failureGap())
}

// failureGap draws the time to the next failure in the cell: exponential
// with mean one day / FailuresPerDay.
func (f *SimFleet) failureGap() int64 {
	g := f.cfg.Rand.ExpFloat64() * float64(24*time.Hour) / f.cfg.FailuresPerDay
	switch {
	case g >= 1<<62:
		return 1 << 62
	case g < 1:
		return 1
	}
	return int64(g)
}

func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
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
	f.armFailures(at)
	p := f.plan(at)
	if len(p.ops) == 0 {
		return txn.Result{}, nil
	}
	tx := &txn.Txn{
		ViewRevision: f.rev, // everything the reports expect was watched at or before it
		Conflict:     omegav1.ConflictMode_CONFLICT_MODE_FINE,
		Commit:       omegav1.CommitMode_COMMIT_MODE_INCREMENTAL,
		Component:    f.c.Component(),
		UnixNanos:    at,
		Ops:          p.ops,
	}
	res, err := f.c.Commit(ctx, tx)
	if err != nil {
		f.restore(p)
		return res, fmt.Errorf("fleet status transaction at %s (%d operations): %w", now.UTC().Format(time.RFC3339Nano), len(p.ops), err)
	}
	f.settle(p, &res, at)
	return res, nil
}

// plan builds the status transaction for time at, taking what it reports
// off the queues.
func (f *SimFleet) plan(at int64) *plan {
	// One plan, reused tick after tick: nothing keeps it past Tick (the
	// store does not retain a transaction's operations).
	p := &f.scratch
	p.ops, p.roles, p.popped, p.repairs = p.ops[:0], p.roles[:0], p.popped[:0], p.repairs[:0]

	// Failures due: retried ones first, then the Poisson process.
	var fails []failure
	for _, fl := range f.pendingFails {
		if f.up.Has(fl.machine) {
			f.up.Remove(fl.machine)
			fails = append(fails, fl)
		}
	}
	f.pendingFails = nil
	for f.failArmed && f.nextFail <= at {
		t := f.nextFail
		f.nextFail = addSat(t, f.failureGap())
		if f.up.Len() == 0 {
			continue // nothing left to fail
		}
		m := f.up.At(f.cfg.Rand.IntN(f.up.Len()))
		f.up.Remove(m)
		fails = append(fails, failure{at: t, machine: m})
	}
	var failAt map[uuid.UUID]int64 // lookups only
	if len(fails) > 0 {
		failAt = make(map[uuid.UUID]int64, len(fails))
		for _, fl := range fails {
			failAt[fl.machine] = fl.at
		}
	}
	var reported map[uuid.UUID]struct{} // lookups only

	// Tasks finished, in (finish time, uid) order.
	for f.finishes.Len() > 0 && f.finishes.Peek().at <= at {
		e := f.finishes.Pop()
		tr, ok := f.live(e)
		if !ok {
			f.stale--
			continue
		}
		tr.inHeap = false
		f.tasks[e.uid] = tr
		p.popped = append(p.popped, e)
		if _, down := f.failed[tr.machine]; down {
			continue // a stray on a failed machine: lost below
		}
		if ft, failing := failAt[tr.machine]; failing && ft < e.at {
			continue // its machine failed before it finished: lost below
		}
		p.add(txn.SetStatus(e.uid, taskSucceeded, tr.version, MessageFinished), role{kind: roleFinish, uid: e.uid})
		if reported == nil {
			reported = map[uuid.UUID]struct{}{}
		}
		reported[e.uid] = struct{}{}
	}

	// Machines failed: DOWN, and their tasks LOST, in uid order.
	for _, fl := range fails {
		on := f.onMachine[fl.machine]
		versions := make(map[uuid.UUID]uint64, len(on))
		for u := range on {
			if _, done := reported[u]; !done {
				versions[u] = f.tasks[u].version
			}
		}
		ops := MachineDown(f.machines[fl.machine], versions, MessageMachineFailed)
		p.add(ops[0], role{kind: roleFail, uid: fl.machine, at: fl.at})
		for _, op := range ops[1:] {
			p.add(op, role{kind: roleLost, uid: op.Task})
		}
	}

	// Tasks watched onto machines the fleet holds DOWN, in the order seen.
	for _, u := range f.strays {
		tr, ok := f.tasks[u]
		if !ok {
			continue
		}
		if _, down := f.failed[tr.machine]; !down {
			continue
		}
		if _, done := reported[u]; done {
			continue
		}
		if reported == nil {
			reported = map[uuid.UUID]struct{}{}
		}
		reported[u] = struct{}{}
		p.add(txn.SetStatus(u, taskLost, tr.version, MessageMachineFailed), role{kind: roleLost, uid: u})
	}

	// Machines repaired: UP again.
	var later []repairEntry
	for f.repairs.Len() > 0 && f.repairs.Peek().at <= at {
		r := f.repairs.Pop()
		if v, held := f.failed[r.machine]; !held || v != r.version {
			continue // someone else changed the machine: not the fleet's to repair
		}
		m, ok := f.machines[r.machine]
		if !ok {
			delete(f.failed, r.machine)
			continue
		}
		if m.Version < r.version {
			later = append(later, r) // the DOWN write is not watched yet
			continue
		}
		pm := m.Proto()
		pm.Status.State = stateUp
		p.add(txn.PutMachine(pm, r.version), role{kind: roleRepair, uid: r.machine})
		p.repairs = append(p.repairs, r)
	}
	for _, r := range later {
		f.repairs.Push(r)
	}
	return p
}

func (p *plan) add(op txn.Op, r role) {
	p.ops = append(p.ops, op)
	p.roles = append(p.roles, r)
}

// settle reads a committed status transaction's outcomes.
func (f *SimFleet) settle(p *plan, res *txn.Result, at int64) {
	f.counters.StatusTxns++
	if res.Conflicted() {
		f.counters.ConflictedTxns++
	}
	for i, r := range p.roles {
		ok := res.Outcomes[i].Committed()
		if !ok {
			f.counters.Conflicts++
		}
		switch r.kind {
		case roleFinish:
			f.forget(r.uid)
			if ok {
				f.counters.TasksFinished++
			}
		case roleLost:
			f.forget(r.uid)
			if ok {
				f.counters.TasksLost++
			}
		case roleFail:
			if ok {
				f.counters.MachinesFailed++
				f.failed[r.uid] = res.Revision
				f.repairs.Push(repairEntry{at: addSat(at, int64(f.cfg.RepairTime)), machine: r.uid, version: res.Revision})
			}
		case roleRepair:
			delete(f.failed, r.uid)
			if ok {
				f.counters.MachinesRepaired++
			}
		}
	}
	f.strays = f.strays[:0]
}

// restore puts back what a plan took off the queues, after a commit error.
func (f *SimFleet) restore(p *plan) {
	for _, e := range p.popped {
		if tr, ok := f.live(e); ok {
			tr.inHeap = true
			f.tasks[e.uid] = tr
			f.finishes.Push(e)
		}
	}
	for _, r := range p.roles {
		if r.kind == roleFail {
			if m, ok := f.machines[r.uid]; ok && m.State == stateUp {
				f.up.Add(r.uid)
				f.pendingFails = append(f.pendingFails, failure{at: r.at, machine: r.uid})
			}
		}
	}
	for _, r := range p.repairs {
		f.repairs.Push(r)
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
	consider := func(t int64) {
		best, found = min(best, t), true
	}
	for f.finishes.Len() > 0 {
		e := f.finishes.Peek()
		if _, ok := f.live(e); ok {
			consider(e.at)
			break
		}
		f.finishes.Pop()
		f.stale--
	}
	if f.failArmed {
		consider(f.nextFail)
	}
	if f.repairs.Len() > 0 {
		consider(f.repairs.Peek().at)
	}
	if len(f.strays) > 0 || len(f.pendingFails) > 0 {
		consider(f.lastTick.UnixNano())
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
