package client

// Test doubles and fixtures shared by the client's tests: a fake clock that
// records pauses instead of sleeping, a recording (and optionally
// rewriting) transport, a barrier that lets two clients decide in lockstep,
// object builders, a seeded workload driver that commits straight to the
// store, and a field-by-field state comparison.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

const (
	pending  = omegav1.TaskState_TASK_STATE_PENDING
	assigned = omegav1.TaskState_TASK_STATE_ASSIGNED
	running  = omegav1.TaskState_TASK_STATE_RUNNING

	up       = omegav1.MachineState_MACHINE_STATE_UP
	draining = omegav1.MachineState_MACHINE_STATE_DRAINING

	allOrNothing = omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING

	gib = int64(1) << 30
)

// --- clock -----------------------------------------------------------------

// fakeClock is the kit's virtual clock: Now is virtual, and Sleep records
// the pause, advances virtual time and returns at once.
type fakeClock = testkit.Clock

func newFakeClock() *fakeClock { return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

// --- store -----------------------------------------------------------------

var durabilities = []store.Durability{store.DurabilityNone, store.DurabilitySync}

// openStore opens a store that checks its invariants after every commit.
// historyChanges 0 keeps the default history (200,000 changes).
func openStore(t testing.TB, d store.Durability, historyChanges int) *store.Store {
	t.Helper()
	st, _ := openStoreOpts(t, d, historyChanges)
	return st
}

// openStoreOpts is openStore that also returns the options, to reopen the
// store.
func openStoreOpts(t testing.TB, d store.Durability, historyChanges int) (*store.Store, store.Options) {
	t.Helper()
	opts := storekit.Options(t, d)
	opts.HistoryChanges = 200_000
	if historyChanges > 0 {
		opts.HistoryChanges = historyChanges
	}
	return storekit.Open(t, opts), opts
}

// mustCommit commits ops straight to the store against its newest state and
// fails the test unless every operation committed.
func mustCommit(t testing.TB, st *store.Store, ops ...txn.Op) txn.Result {
	t.Helper()
	res, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "setup", Ops: ops})
	if err != nil {
		t.Fatalf("setup commit: %v", err)
	}
	if res.Conflicted() {
		t.Fatalf("setup commit conflicted: %+v", res.Outcomes)
	}
	return res
}

// --- objects ---------------------------------------------------------------

// ids hands out deterministic uids from a seed.
type ids struct {
	*testkit.IDs
	r *rand.Rand
}

func newIDs(seed uint64) *ids {
	r := rand.New(rand.NewPCG(seed, 0x1d5))
	return &ids{r: r, IDs: testkit.IDsFrom(r)}
}

func (g *ids) next() uuid.UUID { return g.Next() }

func machineProto(uid uuid.UUID, name string, cpu, mem int64) *omegav1.Machine {
	return testkit.Machine(uid, name, testkit.Res(cpu, mem))
}

func jobProto(uid uuid.UUID, name, scheduler string) *omegav1.Job {
	return testkit.Job(uid, name, scheduler)
}

func taskProto(uid, job uuid.UUID, name string, cpu, mem int64) *omegav1.Task {
	return testkit.Task(uid, job, name, testkit.Res(cpu, mem))
}

// cluster builds machines and jobs of pending tasks in the store.
type cluster struct {
	machines []uuid.UUID          // in name order
	jobs     map[string]uuid.UUID // by scheduler name
	tasks    map[string][]uuid.UUID
}

// buildCluster creates machines (each cpu millis and memory bytes) and, per
// scheduler name, one job with n tasks of taskCPU millis and 1 GiB.
func buildCluster(t testing.TB, st *store.Store, g *ids, machines int, cpu, mem int64, n int, taskCPU int64, schedulers ...string) *cluster {
	t.Helper()
	c := &cluster{jobs: map[string]uuid.UUID{}, tasks: map[string][]uuid.UUID{}}
	var ops []txn.Op
	for i := range machines {
		u := g.next()
		c.machines = append(c.machines, u)
		ops = append(ops, txn.CreateMachine(machineProto(u, fmt.Sprintf("m%02d", i), cpu, mem)))
	}
	for _, s := range schedulers {
		j := g.next()
		c.jobs[s] = j
		ops = append(ops, txn.CreateJob(jobProto(j, "job-"+s, s)))
		for i := range n {
			u := g.next()
			c.tasks[s] = append(c.tasks[s], u)
			ops = append(ops, txn.CreateTask(taskProto(u, j, fmt.Sprintf("%s-%03d", s, i), taskCPU, gib)))
		}
	}
	mustCommit(t, st, ops...)
	return c
}

// firstFit is a scheduler's decision as the tests make it: up to batch of
// the job's PENDING tasks in the view (in name order), each on the first
// machine in name order that is UP and still fits it in the view after the
// earlier picks. It returns nil when nothing fits.
func firstFit(c *Client, v View, job uuid.UUID, batch int) *txn.Txn {
	var tasks []*txn.Task
	v.RangePendingTasks(job, func(t *txn.Task) bool {
		tasks = append(tasks, t)
		return true
	})
	slices.SortFunc(tasks, func(a, b *txn.Task) int { return compareStrings(a.Meta.GetName(), b.Meta.GetName()) })
	var machines []*txn.Machine
	v.RangeMachines(func(m *txn.Machine) bool {
		if m.State == up {
			machines = append(machines, m)
		}
		return true
	})
	slices.SortFunc(machines, func(a, b *txn.Machine) int { return compareStrings(a.Meta.GetName(), b.Meta.GetName()) })
	used := make([]txn.Resources, len(machines))
	for i, m := range machines {
		used[i] = m.Allocated
	}
	var ops []txn.Op
	for _, t := range tasks {
		if len(ops) == batch {
			break
		}
		for i, m := range machines {
			if ok, _ := txn.Fits(m.Capacity, used[i], t.Request); ok {
				used[i] = used[i].Add(t.Request)
				ops = append(ops, txn.Claim(t.UID, m.UID, t.Request, t.Version))
				break
			}
		}
	}
	if len(ops) == 0 {
		return nil
	}
	tx := c.NewTxn(v)
	tx.Ops = ops
	return tx
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// --- transport -------------------------------------------------------------

// attempt is one Commit call as the transport saw it.
type attempt struct {
	Component    string
	ViewRevision uint64
	Claims       int
	Res          txn.Result
	Err          error
}

// recorder wraps a Transport and logs every Commit. Hooks, all optional:
// before runs before the commit is sent; rewrite may answer in the store's
// place (ok true) — a transport "told to reject plans"; after runs once the
// answer is known (the race test waits on a barrier there).
type recorder struct {
	Transport
	before  func(ctx context.Context, n int, tx *txn.Txn)
	rewrite func(ctx context.Context, n int, tx *txn.Txn) (txn.Result, error, bool)
	after   func(ctx context.Context, a attempt)

	mu  sync.Mutex
	log []attempt
}

// recordingSharer is a recorder over a transport that shares snapshots, so
// wrapping does not silently switch a Cell to the watch path.
type recordingSharer struct {
	*recorder
	SnapshotSharer
}

// record wraps tr; the returned Transport shares snapshots iff tr does.
func record(tr Transport) (*recorder, Transport) {
	r := &recorder{Transport: tr}
	if s, ok := tr.(SnapshotSharer); ok {
		return r, recordingSharer{r, s}
	}
	return r, r
}

func (r *recorder) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	a := attempt{Component: tx.Component, ViewRevision: tx.ViewRevision}
	for i := range tx.Ops {
		if tx.Ops[i].Kind == txn.OpClaim {
			a.Claims++
		}
	}
	r.mu.Lock()
	n := len(r.log)
	r.mu.Unlock()
	if r.before != nil {
		r.before(ctx, n, tx)
	}
	var res txn.Result
	var err error
	rewritten := false
	if r.rewrite != nil {
		res, err, rewritten = r.rewrite(ctx, n, tx)
	}
	if !rewritten {
		res, err = r.Transport.Commit(ctx, tx)
	}
	a.Res, a.Err = res, err
	r.mu.Lock()
	r.log = append(r.log, a)
	r.mu.Unlock()
	if r.after != nil {
		r.after(ctx, a)
	}
	return res, err
}

func (r *recorder) attempts() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// expectedCounters derives, from what the transport saw, the counters a
// client must report (DESIGN.md "Counting").
func expectedCounters(log []attempt) Counters {
	var c Counters
	for _, a := range log {
		if a.Err != nil {
			c.Errors++
			continue
		}
		c.Attempts++
		c.ClaimsAttempted += int64(a.Claims)
		c.ClaimsConflicted += int64(a.Res.ClaimsConflicted)
		if a.Res.Revision != 0 {
			c.ClaimsCommitted += int64(a.Claims - a.Res.ClaimsConflicted)
		}
		if a.Res.Conflicts > 0 {
			c.Conflicted++
			if a.Res.Committed > 0 {
				c.Partial++
			}
		}
	}
	return c
}

// checkResync checks the loop's re-sync rule on a client's consecutive
// attempts: an attempt never decides on a view older than the previous
// attempt's own commit, nor, after a conflict, older than the state it
// conflicted with.
func checkResync(log []attempt) error {
	for i := 1; i < len(log); i++ {
		prev, cur := log[i-1], log[i]
		if prev.Err != nil {
			continue
		}
		need := prev.Res.Revision
		if prev.Res.Conflicted() {
			need = max(need, prev.Res.Base)
		}
		if cur.ViewRevision < need {
			return fmt.Errorf("attempt %d decided on revision %d, but attempt %d committed at %d with base %d (conflicted %v)",
				i, cur.ViewRevision, i-1, prev.Res.Revision, prev.Res.Base, prev.Res.Conflicted())
		}
	}
	return nil
}

// conflictAll is the answer of a transport that rejects tx outright: every
// operation conflicts, nothing commits, evaluated against base.
func conflictAll(tx *txn.Txn, base uint64) txn.Result {
	res := txn.Result{Base: base, Outcomes: make([]txn.Outcome, len(tx.Ops))}
	for i := range tx.Ops {
		res.Outcomes[i] = txn.Outcome{Code: omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED, Detail: "rejected by the test transport"}
		res.Conflicts++
		if tx.Ops[i].Kind == txn.OpClaim {
			res.ClaimsConflicted++
		}
	}
	return res
}

// --- barrier ---------------------------------------------------------------

// barrier is a cyclic barrier for a shrinking set of parties: Wait returns
// once every party still present has called it; Leave drops a party for
// good (and releases the others if they were only waiting for it).
type barrier struct {
	mu      sync.Mutex
	parties int
	arrived int
	release chan struct{}
}

func newBarrier(parties int) *barrier {
	return &barrier{parties: parties, release: make(chan struct{})}
}

func (b *barrier) Wait(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived >= b.parties {
		b.openLocked()
		b.mu.Unlock()
		return nil
	}
	ch := b.release
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("barrier: %w", ctx.Err())
	}
}

func (b *barrier) Leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parties--
	if b.arrived > 0 && b.arrived >= b.parties {
		b.openLocked()
	}
}

func (b *barrier) openLocked() {
	close(b.release)
	b.release = make(chan struct{})
	b.arrived = 0
}

// --- state comparison ------------------------------------------------------

// diffStates reports the first difference between want and got in what a
// client relies on: revision, objects, versions, states, placements and
// derived allocations.
func diffStates(want, got *txn.State) error { return diffStatesSeq(want, got, true) }

// diffStatesSeq is diffStates that compares the machines' coarse-conflict
// sequence numbers only if seq: a reopened store does not store them and
// restarts them at its revision (conservatively), see txn.Restorer.
func diffStatesSeq(want, got *txn.State, seq bool) error {
	if want.Revision() != got.Revision() {
		return fmt.Errorf("revision %d, want %d", got.Revision(), want.Revision())
	}
	if want.NumMachines() != got.NumMachines() || want.NumTasks() != got.NumTasks() || want.NumJobs() != got.NumJobs() {
		return fmt.Errorf("holds %d machines %d tasks %d jobs, want %d %d %d",
			got.NumMachines(), got.NumTasks(), got.NumJobs(), want.NumMachines(), want.NumTasks(), want.NumJobs())
	}
	if !want.Capacity().Equal(got.Capacity()) || !want.Allocated().Equal(got.Allocated()) {
		return fmt.Errorf("totals capacity %v allocated %v, want %v %v", got.Capacity(), got.Allocated(), want.Capacity(), want.Allocated())
	}
	var err error
	want.RangeMachines(func(w *txn.Machine) bool {
		g, ok := got.Machine(w.UID)
		if !ok {
			err = fmt.Errorf("machine %s missing", w.UID)
			return false
		}
		gf, wf := machineFP(g), machineFP(w)
		if !seq {
			gf.Seq, wf.Seq = 0, 0
		}
		if gf != wf {
			err = fmt.Errorf("machine %s is %+v, want %+v", w.UID, machineFP(g), machineFP(w))
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	want.RangeTasks(func(w *txn.Task) bool {
		g, ok := got.Task(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("task %s missing", w.UID)
		case taskFP(g) != taskFP(w):
			err = fmt.Errorf("task %s is %+v, want %+v", w.UID, taskFP(g), taskFP(w))
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	want.RangeJobs(func(w *txn.Job) bool {
		g, ok := got.Job(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("job %s missing", w.UID)
		case g.Version != w.Version:
			err = fmt.Errorf("job %s at version %d, want %d", w.UID, g.Version, w.Version)
		}
		return err == nil
	})
	return err
}

// The comparable parts of objects (no protos: the store may be encoding
// them while a test reads).
type machineFingerprint struct {
	Version, Seq       uint64
	State              omegav1.MachineState
	CapCPU, CapMem     int64
	AllocCPU, AllocMem int64
	Tasks              int32
}

type taskFingerprint struct {
	Version            uint64
	State              omegav1.TaskState
	Machine, Job       uuid.UUID
	ClaimCPU, ClaimMem int64
	Scheduler          string
	Evictions          int32
}

func machineFP(m *txn.Machine) machineFingerprint {
	return machineFingerprint{m.Version, m.Seq, m.State, m.Capacity.CPU, m.Capacity.Memory, m.Allocated.CPU, m.Allocated.Memory, m.Tasks}
}

func taskFP(t *txn.Task) taskFingerprint {
	return taskFingerprint{t.Version, t.State, t.Machine, t.Job, t.Claimed.CPU, t.Claimed.Memory, t.Scheduler, t.Evictions}
}

// stateFingerprint is a deep copy of what diffStates compares, to check
// later that a View has not changed.
type stateFingerprint struct {
	rev      uint64
	machines map[uuid.UUID]machineFingerprint
	tasks    map[uuid.UUID]taskFingerprint
	jobs     map[uuid.UUID]uint64
	alloc    [2]int64
}

func fingerprint(s *txn.State) stateFingerprint {
	f := stateFingerprint{rev: s.Revision(), machines: map[uuid.UUID]machineFingerprint{}, tasks: map[uuid.UUID]taskFingerprint{}, jobs: map[uuid.UUID]uint64{},
		alloc: [2]int64{s.Allocated().CPU, s.Allocated().Memory}}
	s.RangeMachines(func(m *txn.Machine) bool { f.machines[m.UID] = machineFP(m); return true })
	s.RangeTasks(func(t *txn.Task) bool { f.tasks[t.UID] = taskFP(t); return true })
	s.RangeJobs(func(j *txn.Job) bool { f.jobs[j.UID] = j.Version; return true })
	return f
}

func (f stateFingerprint) diff(g stateFingerprint) error {
	if f.rev != g.rev || f.alloc != g.alloc || len(f.machines) != len(g.machines) || len(f.tasks) != len(g.tasks) || len(f.jobs) != len(g.jobs) {
		return fmt.Errorf("revision %d alloc %v sizes %d/%d/%d, was %d %v %d/%d/%d",
			g.rev, g.alloc, len(g.machines), len(g.tasks), len(g.jobs), f.rev, f.alloc, len(f.machines), len(f.tasks), len(f.jobs))
	}
	for k, v := range f.machines {
		if g.machines[k] != v {
			return fmt.Errorf("machine %s is %+v, was %+v", k, g.machines[k], v)
		}
	}
	for k, v := range f.tasks {
		if g.tasks[k] != v {
			return fmt.Errorf("task %s is %+v, was %+v", k, g.tasks[k], v)
		}
	}
	for k, v := range f.jobs {
		if g.jobs[k] != v {
			return fmt.Errorf("job %s at version %d, was %d", k, g.jobs[k], v)
		}
	}
	return nil
}

// --- workload --------------------------------------------------------------

// driver commits a seeded mix of realistic transactions straight to the
// store, each decided on the store's newest state so none conflicts:
// machines come and go and drain, jobs arrive with tasks, tasks are
// claimed (several per transaction), start, finish, get evicted and
// deleted.
type driver struct {
	t   testing.TB
	st  *store.Store
	rng *rand.Rand
	g   *ids
	n   int
}

func newDriver(t testing.TB, st *store.Store, seed uint64) *driver {
	return &driver{t: t, st: st, rng: rand.New(rand.NewPCG(seed, 0xd1)), g: newIDs(seed ^ 0xabc)}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// step commits one transaction and returns its revision.
func (d *driver) step() uint64 {
	d.t.Helper()
	rev, err := d.tryStep()
	if err != nil {
		d.t.Fatal(err)
	}
	return rev
}

// tryStep is step for a goroutine other than the test's.
func (d *driver) tryStep() (uint64, error) {
	s := d.st.Snapshot()
	var upMachines, emptyMachines, allMachines []*txn.Machine
	s.RangeMachines(func(m *txn.Machine) bool {
		allMachines = append(allMachines, m)
		if m.State == up {
			upMachines = append(upMachines, m)
		}
		if m.Tasks == 0 {
			emptyMachines = append(emptyMachines, m)
		}
		return true
	})
	var pend, placed, terminal []*txn.Task
	s.RangeTasks(func(t *txn.Task) bool {
		switch {
		case t.State == pending:
			pend = append(pend, t)
		case t.Placed():
			placed = append(placed, t)
		case t.Terminal():
			terminal = append(terminal, t)
		}
		return true
	})
	var ops []txn.Op
	for len(ops) == 0 {
		switch k := d.rng.IntN(12); {
		case k == 0 || len(allMachines) < 3:
			d.n++
			ops = append(ops, txn.CreateMachine(machineProto(d.g.next(), fmt.Sprintf("w%03d", d.n), 4000+int64(d.rng.IntN(8))*1000, 16*gib)))
		case k <= 2:
			j := d.g.next()
			d.n++
			ops = append(ops, txn.CreateJob(jobProto(j, fmt.Sprintf("j%03d", d.n), "driver")))
			for i := range 1 + d.rng.IntN(4) {
				ops = append(ops, txn.CreateTask(taskProto(d.g.next(), j, fmt.Sprintf("j%03d-%d", d.n, i), int64(1+d.rng.IntN(3))*500, gib)))
			}
		case k <= 5 && len(pend) > 0 && len(upMachines) > 0:
			used := map[uuid.UUID]txn.Resources{}
			for range 1 + d.rng.IntN(3) {
				t := pick(d.rng, pend)
				m := pick(d.rng, upMachines)
				u, seen := used[m.UID]
				if !seen {
					u = m.Allocated
				}
				if ok, _ := txn.Fits(m.Capacity, u, t.Request); !ok || slices.ContainsFunc(ops, func(o txn.Op) bool { return o.Task == t.UID }) {
					continue
				}
				used[m.UID] = u.Add(t.Request)
				ops = append(ops, txn.Claim(t.UID, m.UID, t.Request, t.Version))
			}
		case k == 6 && len(placed) > 0:
			t := pick(d.rng, placed)
			if t.State == assigned {
				ops = append(ops, txn.SetStatus(t.UID, running, t.Version, "started"))
			}
		case k == 7 && len(placed) > 0:
			t := pick(d.rng, placed)
			st := pick(d.rng, []omegav1.TaskState{omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_LOST})
			ops = append(ops, txn.SetStatus(t.UID, st, t.Version, "finished"))
		case k == 8 && len(placed) > 0:
			t := pick(d.rng, placed)
			ops = append(ops, txn.ForceEvict(t.UID, t.Version, "drain"))
		case k == 9 && len(terminal)+len(pend) > 0:
			t := pick(d.rng, append(terminal, pend...))
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, t.UID, t.Version))
		case k == 10 && len(allMachines) > 0:
			m := pick(d.rng, allMachines)
			p := machineProto(m.UID, m.Meta.GetName(), m.Capacity.CPU, m.Capacity.Memory)
			p.Status = &omegav1.MachineStatus{State: up}
			if m.State == up {
				p.Status.State = draining
			}
			ops = append(ops, txn.PutMachine(p, m.Version))
		case k == 11 && len(emptyMachines) > 0 && len(allMachines) > 3:
			m := pick(d.rng, emptyMachines)
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m.UID, m.Version))
		}
	}
	res, err := d.st.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Component: "driver", Ops: ops})
	if err != nil {
		return 0, fmt.Errorf("driver commit at revision %d: %w", s.Revision(), err)
	}
	if res.Conflicted() {
		return 0, fmt.Errorf("driver commit at revision %d conflicted: %+v", s.Revision(), res.Outcomes)
	}
	return res.Revision, nil
}

// --- misc ------------------------------------------------------------------

// newClient builds a client over tr with a fake clock and a seeded source.
func newClient(t testing.TB, tr Transport, component string, seed uint64, retry RetryPolicy) (*Client, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	c, err := New(context.Background(), tr, Config{
		Component: component,
		Clock:     clk,
		Rand:      rand.New(rand.NewPCG(seed, binary.BigEndian.Uint64([]byte(component+"\x00\x00\x00\x00\x00\x00\x00\x00")))),
		Retry:     retry,
	})
	if err != nil {
		t.Fatalf("new client %s: %v", component, err)
	}
	return c, clk
}

// logSeed prints the seed if the test fails, so the run can be repeated.
func logSeed(t *testing.T, seed uint64) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with -run '%s')", seed, t.Name())
		}
	})
}

var errDecide = errors.New("decide failed on purpose")
