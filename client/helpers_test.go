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
			if ok, _ := txn.Fits(m.Capacity, used[i], t.Request()); ok {
				used[i] = used[i].Add(t.Request())
				ops = append(ops, txn.Claim(t.UID, m.UID, t.Request(), t.Version))
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
// client relies on (testkit.DiffStates, without the wire forms: the store
// may be encoding them while a test reads).
func diffStates(want, got *txn.State) error { return testkit.DiffStates(want, got, testkit.Compare{}) }

// diffStatesSeq is diffStates that compares the machines' coarse-conflict
// sequence numbers only if seq: a reopened store does not store them and
// restarts them at its revision (conservatively), see txn.Restorer.
func diffStatesSeq(want, got *txn.State, seq bool) error {
	return testkit.DiffStates(want, got, testkit.Compare{IgnoreSeq: !seq})
}

func fingerprint(s *txn.State) testkit.Fingerprint { return testkit.FingerprintOf(s) }

// --- workload ---------------------------------------------------------------

// driver is the kit's randomized history (storekit.Driver).
type driver struct{ *storekit.Driver }

func newDriver(t testing.TB, st *store.Store, seed uint64) *driver {
	return &driver{storekit.NewDriver(t, st, seed)}
}

func (d *driver) step() uint64             { return d.Step() }
func (d *driver) tryStep() (uint64, error) { return d.TryStep() }

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
