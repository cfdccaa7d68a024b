package schedulers

// Fixtures shared by the package's tests: a real in-memory store that checks
// its invariants after every commit, seeded object builders, clients on a
// virtual clock, a transport that records every transaction, and helpers
// to take a decision the way the Runner does. Nothing here sleeps or reads
// the wall clock.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

const (
	gib = int64(1) << 30

	pendingState  = omegav1.TaskState_TASK_STATE_PENDING
	assignedState = omegav1.TaskState_TASK_STATE_ASSIGNED

	batchKind     = omegav1.JobKind_JOB_KIND_BATCH
	serviceKind   = omegav1.JobKind_JOB_KIND_SERVICE
	mapreduceKind = omegav1.JobKind_JOB_KIND_MAPREDUCE
)

// t0 is the virtual epoch of every test.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// logSeed prints the seed if the test fails, so any failure reproduces.
func logSeed(t testing.TB, seed uint64) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d", seed)
		}
	})
}

// --- clock -----------------------------------------------------------------

// fakeClock is the kit's virtual clock: tests set it; Sleep advances it
// and returns at once. Only client.Transact sleeps, and these tests never
// call it.
type fakeClock = testkit.Clock

// --- ids -------------------------------------------------------------------

// ids hands out deterministic uids from a seed.
type ids struct{ *testkit.IDs }

func newIDs(seed uint64) *ids { return &ids{testkit.NewIDs(seed, 0x5eed)} }

func (g *ids) next() uuid.UUID { return g.Next() }

// --- cell ------------------------------------------------------------------

// testCell is a real in-memory store with helpers to fill it.
type testCell struct {
	t   testing.TB
	st  *store.Store
	ids *ids
}

// newCell opens an in-memory store that checks txn.CheckInvariants after
// every commit (a broken invariant panics the commit path).
func newCell(t testing.TB, seed uint64) *testCell {
	t.Helper()
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	return &testCell{t: t, st: st, ids: newIDs(seed)}
}

// commit commits ops straight to the store against its newest state and
// fails the test unless every operation committed.
func (c *testCell) commit(ops ...txn.Op) txn.Result {
	c.t.Helper()
	res, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.st.Revision(), Component: "setup", UnixNanos: t0.UnixNano(), Ops: ops})
	if err != nil {
		c.t.Fatalf("setup commit: %v", err)
	}
	if res.Conflicted() {
		c.t.Fatalf("setup commit conflicted: %+v", res.Outcomes)
	}
	return res
}

func (c *testCell) state() *txn.State { return c.st.Snapshot() }

// checkInvariants fails the test if the store's state breaks them.
func (c *testCell) checkInvariants() {
	c.t.Helper()
	if err := txn.CheckInvariants(c.state()); err != nil {
		c.t.Fatalf("invariants: %v", err)
	}
}

// machineSpec describes a machine to create.
type machineSpec struct {
	cpu, mem int64
	domain   string
	attrs    map[string]string
	state    omegav1.MachineState // zero: UP
}

// addMachines creates the machines in one transaction and returns their uids
// in the order given.
func (c *testCell) addMachines(specs ...machineSpec) []uuid.UUID {
	c.t.Helper()
	var ops []txn.Op
	var out []uuid.UUID
	for i, s := range specs {
		u := c.ids.next()
		out = append(out, u)
		m := &omegav1.Machine{
			Meta: &omegav1.ObjectMeta{Uid: u.String(), Name: fmt.Sprintf("m%03d", i)},
			Spec: &omegav1.MachineSpec{
				Capacity:      &omegav1.Resources{CpuMillis: s.cpu, MemoryBytes: s.mem},
				FailureDomain: s.domain,
				Attributes:    s.attrs,
			},
		}
		if s.state != omegav1.MachineState_MACHINE_STATE_UNSPECIFIED {
			m.Status = &omegav1.MachineStatus{State: s.state}
		}
		ops = append(ops, txn.CreateMachine(m))
	}
	c.commit(ops...)
	return out
}

// uniform returns n specs of one shape, in domains "d0".."d{domains-1}"
// round robin (no domain when domains is 0).
func uniform(n int, cpu, mem int64, domains int) []machineSpec {
	out := make([]machineSpec, n)
	for i := range out {
		out[i] = machineSpec{cpu: cpu, mem: mem}
		if domains > 0 {
			out[i].domain = fmt.Sprintf("d%d", i%domains)
		}
	}
	return out
}

// jobSpec describes a job to create with its PENDING tasks.
type jobSpec struct {
	kind        omegav1.JobKind
	scheduler   string
	tasks       int // PENDING tasks created with the job
	replicas    int // Spec.Replicas; default tasks
	cpu, mem    int64
	gang        bool
	constraints []*omegav1.Constraint
	duration    int64 // template duration millis
	mapreduce   *omegav1.MapReduceParams
}

func (s jobSpec) proto(uid uuid.UUID, name string) *omegav1.Job {
	replicas := s.replicas
	if replicas == 0 {
		replicas = s.tasks
	}
	return &omegav1.Job{
		Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: name},
		Spec: &omegav1.JobSpec{
			Kind:      s.kind,
			Scheduler: s.scheduler,
			Replicas:  int32(replicas),
			Gang:      s.gang,
			Template: &omegav1.TaskTemplate{
				Resources:      &omegav1.Resources{CpuMillis: s.cpu, MemoryBytes: s.mem},
				Constraints:    s.constraints,
				DurationMillis: s.duration,
			},
			Mapreduce: s.mapreduce,
		},
	}
}

func taskProto(uid, job uuid.UUID, name string, s jobSpec) *omegav1.Task {
	return &omegav1.Task{
		Meta: &omegav1.ObjectMeta{
			Uid:             uid.String(),
			Name:            name,
			OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: job.String(), Controller: true}},
		},
		Spec: &omegav1.TaskSpec{
			Resources:      &omegav1.Resources{CpuMillis: s.cpu, MemoryBytes: s.mem},
			Constraints:    s.constraints,
			DurationMillis: s.duration,
		},
	}
}

// addJob creates a job and its PENDING tasks in one transaction, as a
// submitter does, and returns the job's uid and its tasks' uids.
func (c *testCell) addJob(name string, s jobSpec) (uuid.UUID, []uuid.UUID) {
	c.t.Helper()
	j := c.ids.next()
	ops := []txn.Op{txn.CreateJob(s.proto(j, name))}
	var tasks []uuid.UUID
	for i := range s.tasks {
		u := c.ids.next()
		tasks = append(tasks, u)
		ops = append(ops, txn.CreateTask(taskProto(u, j, fmt.Sprintf("%s-%03d", name, i), s)))
	}
	c.commit(ops...)
	return j, tasks
}

// fill places a one-task filler job of cpu and mem on each machine (claimed
// straight through the store), so the view shows those machines partly
// used by someone else.
func (c *testCell) fill(cpu, mem int64, machines ...uuid.UUID) {
	c.t.Helper()
	spec := jobSpec{kind: batchKind, scheduler: "other", tasks: len(machines), cpu: cpu, mem: mem}
	_, tasks := c.addJob("filler", spec)
	var ops []txn.Op
	for i, m := range machines {
		ops = append(ops, txn.Claim(tasks[i], m, txn.Resources{CPU: cpu, Memory: mem}, c.state().Revision()))
	}
	// The tasks were created at the newest revision: that is their version.
	c.commit(ops...)
}

// task returns a task of the newest state.
func (c *testCell) task(uid uuid.UUID) *txn.Task {
	c.t.Helper()
	t, ok := c.state().Task(uid)
	if !ok {
		c.t.Fatalf("task %s not found", uid)
	}
	return t
}

// machine returns a machine of the newest state.
func (c *testCell) machine(uid uuid.UUID) *txn.Machine {
	c.t.Helper()
	m, ok := c.state().Machine(uid)
	if !ok {
		c.t.Fatalf("machine %s not found", uid)
	}
	return m
}

// client connects a client named component, seeded with seed, through an
// in-process transport (wrapped by wrap, if given).
func (c *testCell) client(component string, seed uint64, clk *fakeClock, wrap func(client.Transport) client.Transport) *client.Client {
	c.t.Helper()
	tr := inproc.New(c.st)
	if wrap != nil {
		tr = wrap(tr)
	}
	cl, err := client.New(context.Background(), tr, client.Config{Component: component, Clock: clk, Rand: rand.New(rand.NewPCG(seed, 1))})
	if err != nil {
		c.t.Fatalf("client %s: %v", component, err)
	}
	c.t.Cleanup(cl.Cell().Close)
	return cl
}

// runner makes a Runner for sched on a fresh client.
func (c *testCell) runner(sched Scheduler, component string, seed uint64, cfg RunnerConfig, wrap func(client.Transport) client.Transport) *Runner {
	c.t.Helper()
	cl := c.client(component, seed, testkit.NewClock(t0), wrap)
	r, err := NewRunner(sched, cl, rand.New(rand.NewPCG(seed, 2)), cfg)
	if err != nil {
		c.t.Fatalf("runner %s: %v", component, err)
	}
	return r
}

// --- deciding without a Runner ---------------------------------------------

// request builds the Request the Runner would for job on v: its PENDING
// tasks sorted by uid, and placed (tasks of the view) as Placed.
func request(t testing.TB, v client.View, job uuid.UUID, placed ...uuid.UUID) Request {
	t.Helper()
	j, ok := v.Job(job)
	if !ok {
		t.Fatalf("job %s not in view", job)
	}
	req := Request{Job: j}
	v.RangePendingTasks(job, func(tk *txn.Task) bool { req.Pending = append(req.Pending, tk); return true })
	slices.SortFunc(req.Pending, func(a, b *txn.Task) int { return bytes.Compare(a.UID[:], b.UID[:]) })
	for _, u := range placed {
		tk, ok := v.Task(u)
		if !ok || !tk.Placed() {
			t.Fatalf("task %s is not placed in the view", u)
		}
		req.Placed = append(req.Placed, tk)
	}
	return req
}

// env is an Env seeded with seed, whose uids come from a source of their
// own.
func env(seed uint64) Env {
	g := newIDs(seed ^ 0xabcdef)
	return Env{Now: t0, Rand: rand.New(rand.NewPCG(seed, 2)), NewUID: g.next, Component: "test-0"}
}

// view returns the store's newest state as a client view.
func (c *testCell) view() client.View { return client.View{State: c.state()} }

// commitDecision commits d against v as component and returns the result.
func (c *testCell) commitDecision(v client.View, d Decision) txn.Result {
	c.t.Helper()
	tx := &txn.Txn{ViewRevision: v.Revision(), Component: "test-0", UnixNanos: t0.UnixNano(), Ops: d.Ops}
	if d.AllOrNothing {
		tx.Commit = omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING
	}
	res, err := c.st.Commit(context.Background(), tx)
	if err != nil {
		c.t.Fatalf("commit decision: %v", err)
	}
	return res
}

// claims returns the decision's claims.
func claims(d Decision) []txn.Op {
	var out []txn.Op
	for _, op := range d.Ops {
		if op.Kind == txn.OpClaim {
			out = append(out, op)
		}
	}
	return out
}

// perMachine counts a decision's claims per machine.
func perMachine(d Decision) map[uuid.UUID]int {
	out := map[uuid.UUID]int{}
	for _, op := range claims(d) {
		out[op.Machine]++
	}
	return out
}

// checkClaimsFit fails unless, on every machine, what the view shows
// allocated plus what d claims fits its capacity, every claim declares its
// task's request at the version the view shows, and no task is claimed
// twice.
func checkClaimsFit(t testing.TB, v client.View, d Decision) {
	t.Helper()
	used := map[uuid.UUID]txn.Resources{}
	seen := map[uuid.UUID]bool{}
	for _, op := range claims(d) {
		if seen[op.Task] {
			t.Fatalf("task %s claimed twice", op.Task)
		}
		seen[op.Task] = true
		if tk, ok := v.Task(op.Task); ok {
			if op.ExpectVersion != tk.Version || !op.Resources.Equal(tk.Request()) {
				t.Fatalf("claim of %s: version %d resources %v, the view has %d and %v", op.Task, op.ExpectVersion, op.Resources, tk.Version, tk.Request())
			}
		}
		m, ok := v.Machine(op.Machine)
		if !ok {
			t.Fatalf("claim on unknown machine %s", op.Machine)
		}
		u, ok := used[m.UID]
		if !ok {
			u = m.Allocated
		}
		if fit, dim := txn.Fits(m.Capacity, u, op.Resources); !fit {
			t.Fatalf("decision overfills machine %s (%s): capacity %v, view allocated %v, decision adds up to %v", m.Meta.GetName(), dim, m.Capacity, m.Allocated, u.Add(op.Resources).Sub(m.Allocated))
		}
		used[m.UID] = u.Add(op.Resources)
	}
}

// --- recording transport ---------------------------------------------------

// txLog is a log of transactions, shared by the recorders of several
// clients so it keeps the order in which the store saw them.
type txLog struct {
	mu  sync.Mutex
	log []string
}

func (l *txLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.log)
}

// recorder wraps a transport and logs every transaction it sends, as a
// string that names everything in it, and its result.
type recorder struct {
	client.Transport
	log *txLog
}

type recordingSharer struct {
	*recorder
	client.SnapshotSharer
}

// recordInto returns a wrap function that records into l, keeping snapshot
// sharing if the transport has it.
func recordInto(l *txLog) func(client.Transport) client.Transport {
	return func(tr client.Transport) client.Transport {
		r := &recorder{Transport: tr, log: l}
		if s, ok := tr.(client.SnapshotSharer); ok {
			return recordingSharer{r, s}
		}
		return r
	}
}

func (r *recorder) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	line := txnString(tx) // before the store owns the objects
	res, err := r.Transport.Commit(ctx, tx)
	line += fmt.Sprintf(" => rev=%d committed=%d conflicts=%d claims_conflicted=%d err=%v", res.Revision, res.Committed, res.Conflicts, res.ClaimsConflicted, err)
	for _, o := range res.Outcomes {
		line += " " + o.Code.String()
	}
	r.log.mu.Lock()
	r.log.log = append(r.log.log, line)
	r.log.mu.Unlock()
	return res, err
}

// txnString names everything a transaction carries.
func txnString(tx *txn.Txn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s view=%d conflict=%s commit=%s at=%d:", tx.Component, tx.ViewRevision, tx.Conflict, tx.Commit, tx.UnixNanos)
	for _, op := range tx.Ops {
		b.WriteString(" " + opString(op))
	}
	return b.String()
}

// opString names everything an operation carries; created objects as their
// deterministic wire encoding.
func opString(op txn.Op) string {
	s := fmt.Sprintf("[%s task=%s machine=%s res=%v v=%d state=%s prio=%d force=%t msg=%q", op.Kind, op.Task, op.Machine, op.Resources, op.ExpectVersion, op.State, op.ForPriority, op.Force, op.Message)
	var m proto.Message
	switch {
	case op.NewTask != nil:
		m = op.NewTask
	case op.NewJob != nil:
		m = op.NewJob
	case op.NewMachine != nil:
		m = op.NewMachine
	}
	if m != nil {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			panic(err)
		}
		s += fmt.Sprintf(" obj=%x", b)
	}
	return s + "]"
}

// opsString is opString over a list.
func opsString(ops []txn.Op) string {
	var parts []string
	for _, op := range ops {
		parts = append(parts, opString(op))
	}
	return strings.Join(parts, "\n")
}

// forSeeds runs f as a subtest for seeds 1..n, printing the seed of a
// failing one.
func forSeeds(t *testing.T, n uint64, f func(t *testing.T, seed uint64)) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logSeed(t, seed)
			f(t, seed)
		})
	}
}
