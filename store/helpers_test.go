package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// Test helpers shared by the store's tests: deterministic uids, object
// builders, a state digest, a deep state comparison and a randomized
// committer that drives a realistic mix of operations.

// Kinds of test uid (the first byte), so uids of different kinds never
// collide.
const (
	uidMachine byte = 'M'
	uidJob     byte = 'J'
	uidTask    byte = 'T'
)

// testUID returns a deterministic, non-nil uid for (kind, a, b), a < 2^24
// (testkit.UID: the first 8 bytes vary, as the state's maps hash them).
func testUID(kind byte, a, b uint32) uuid.UUID { return testkit.UID(kind, a, b) }

func machineProto(uid uuid.UUID, cpu, mem int64) *omegav1.Machine {
	m := testkit.Machine(uid, "m-"+uid.String()[:8], testkit.Res(cpu, mem))
	m.Meta.Labels = map[string]string{"rack": "r1"}
	m.Spec.FailureDomain, m.Spec.Attributes = "fd-1", map[string]string{"arch": "amd64"}
	m.Status = &omegav1.MachineStatus{AgentAddress: "10.0.0.1:7946"}
	return m
}

func jobProto(uid uuid.UUID, name string, replicas int32) *omegav1.Job {
	j := testkit.Job(uid, name, "batch")
	j.Meta.Annotations = map[string]string{"owner": "test"}
	j.Spec.Priority, j.Spec.Replicas = 10, replicas
	j.Spec.Template = &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 100, MemoryBytes: 1 << 20}}
	return j
}

func taskProto(uid, job uuid.UUID, cpu, mem int64) *omegav1.Task {
	t := testkit.Task(uid, job, "t-"+uid.String()[:8], testkit.Res(cpu, mem))
	t.Meta.Labels = map[string]string{"app": "x"}
	t.Spec.Command, t.Spec.Priority = &omegav1.Command{Path: "/bin/true"}, 5
	return t
}

func res(cpu, mem int64) txn.Resources { return testkit.Res(cpu, mem) }

// quietLogger drops the store's and pebble's logs (a test that expects an
// error would otherwise print it).
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// reopenDiff closes s and opens dir again with the default options: how
// the reopened state differs from after ("" if not at all), or why the
// store no longer opens.
func reopenDiff(t testing.TB, s *Store, dir string, after *txn.State) (string, error) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(dir)
	o.Logger = quietLogger()
	s2, err := Open(o)
	if err != nil {
		return "", err
	}
	defer s2.Close()
	return diffStates(after, s2.Snapshot(), true), nil
}

// openTest opens a durable store in dir with test options.
func openTest(t testing.TB, dir string, mod func(*Options)) *Store {
	t.Helper()
	o := DefaultOptions(dir)
	o.Logger = quietLogger()
	o.MemTableSize = 4 << 20
	o.CheckInvariants = true
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatalf("open store in %s: %v", dir, err)
	}
	return s
}

// mustCommit commits tx and fails the test on an error.
func mustCommit(t testing.TB, s *Store, tx *txn.Txn) txn.Result {
	t.Helper()
	r, err := s.Commit(context.Background(), tx)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return r
}

// mustCommitAll commits tx and fails the test unless every operation committed.
func mustCommitAll(t testing.TB, s *Store, tx *txn.Txn) txn.Result {
	t.Helper()
	r := mustCommit(t, s, tx)
	if r.Committed != len(tx.Ops) {
		for i, o := range r.Outcomes {
			if !o.Committed() {
				t.Fatalf("op %d (%s) did not commit: %s %s", i, tx.Ops[i].Kind, o.Code, o.Detail)
			}
		}
	}
	return r
}

// digest summarises a state: object counts, tasks by state, the total
// allocation, and an order-independent hash of every object's identity,
// version and store-visible fields (not the machines' coarse sequence
// numbers, which a reopen resets). Two states with equal digests are, for
// the crash tests' purposes, the same state.
func digest(s *txn.State) string {
	var d digestAcc
	s.RangeTasks(func(t *txn.Task) bool { d.task(t, 1); return true })
	s.RangeMachines(func(m *txn.Machine) bool { d.machine(m, 1); return true })
	s.RangeJobs(func(j *txn.Job) bool { d.job(j, 1); return true })
	return d.format(s)
}

// digestAcc accumulates a digest: a sum of per-object hashes (commutative,
// so it is independent of iteration order and can be kept up to date
// change by change) and the tasks counted by state.
type digestAcc struct {
	h       uint64
	byState [8]int
}

func objHash(parts ...any) uint64 {
	f := fnv.New64a()
	fmt.Fprint(f, parts...)
	return f.Sum64()
}

func (d *digestAcc) task(t *txn.Task, sign int) {
	d.byState[t.State] += sign
	d.h += uint64(sign) * objHash("t", t.UID, t.Version, t.State, t.Machine, t.Claimed.String(), t.Evictions, t.Finished, t.Message())
}

func (d *digestAcc) machine(m *txn.Machine, sign int) {
	d.h += uint64(sign) * objHash("m", m.UID, m.Version, m.State, m.Allocated.String(), m.Tasks)
}

func (d *digestAcc) job(j *txn.Job, sign int) {
	d.h += uint64(sign) * objHash("j", j.UID, j.Version, j.Status.GetPhase())
}

// update moves the digest of prev to the digest of the state after ws.
func (d *digestAcc) update(prev *txn.State, ws *txn.WriteSet) {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		switch {
		case c.Task != nil:
			if old, ok := prev.Task(c.Task.UID); ok {
				d.task(old, -1)
			}
			if !c.Deleted {
				d.task(c.Task, 1)
			}
		case c.Machine != nil:
			if old, ok := prev.Machine(c.Machine.UID); ok {
				d.machine(old, -1)
			}
			if !c.Deleted {
				d.machine(c.Machine, 1)
			}
		case c.Job != nil:
			if old, ok := prev.Job(c.Job.UID); ok {
				d.job(old, -1)
			}
			if !c.Deleted {
				d.job(c.Job, 1)
			}
		}
	}
}

func (d *digestAcc) format(s *txn.State) string {
	b := &d.byState
	return fmt.Sprintf("r%d m%d j%d t%d p%d a%d run%d ok%d f%d alloc=%dm/%d h=%016x",
		s.Revision(), s.NumMachines(), s.NumJobs(), s.NumTasks(),
		b[omegav1.TaskState_TASK_STATE_PENDING], b[omegav1.TaskState_TASK_STATE_ASSIGNED],
		b[omegav1.TaskState_TASK_STATE_RUNNING], b[omegav1.TaskState_TASK_STATE_SUCCEEDED],
		b[omegav1.TaskState_TASK_STATE_FAILED]+b[omegav1.TaskState_TASK_STATE_LOST]+b[omegav1.TaskState_TASK_STATE_KILLED],
		s.Allocated().CPU, s.Allocated().Memory, d.h)
}

// diffStates returns the first difference between two states, every
// object field by field and by wire form (testkit.DiffStates), or "" if
// they are equal. If ignoreSeq, the machines' coarse sequence numbers are
// not compared.
func diffStates(a, b *txn.State, ignoreSeq bool) string {
	if err := testkit.DiffStates(a, b, testkit.Compare{IgnoreSeq: ignoreSeq, Protos: true}); err != nil {
		return err.Error()
	}
	return ""
}

// ---------------------------------------------------------------------------
// A randomized committer: the workload of the crash, watch and concurrency
// tests. Each committer owns one job and the tasks it creates (uids
// (g, 0), (g, 1), ...), so it knows every version without reading the
// store, and commits transactions that create tasks, claim them (some
// claims conflict when the machines are full), start them, finish the older
// ones (releasing their resources), evict some, and update its job.

type taskRef struct {
	uid     uuid.UUID
	version uint64
	state   omegav1.TaskState
	cpu     int64
}

type committer struct {
	g        uint32
	rng      *rand.Rand
	machines []uuid.UUID
	job      uuid.UUID
	jobVer   uint64
	created  uint32 // tasks (g, 0..created-1) exist once the last commit is acknowledged
	pending  []taskRef
	placed   []taskRef
	finished int
	clock    int64
}

func newCommitter(g uint32, seed uint64, machines []uuid.UUID) *committer {
	return &committer{
		g:        g,
		rng:      rand.New(rand.NewPCG(seed, uint64(g)+1)),
		machines: machines,
		job:      testUID(uidJob, g, 0),
		clock:    time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(),
	}
}

// action says what an operation of the committer's transaction does to its
// bookkeeping if it commits.
type action struct {
	kind   txn.OpKind
	ref    taskRef
	to     omegav1.TaskState
	jobPut bool
}

// next builds the committer's next transaction. Every transaction creates
// at least one task, so every commit yields a revision.
func (c *committer) next() (*txn.Txn, []action) {
	c.clock += int64(time.Millisecond)
	tx := &txn.Txn{Component: fmt.Sprintf("committer-%d", c.g), UnixNanos: c.clock}
	var acts []action
	add := func(op txn.Op, a action) {
		tx.Ops = append(tx.Ops, op)
		acts = append(acts, a)
	}
	if c.jobVer == 0 {
		add(txn.CreateJob(jobProto(c.job, fmt.Sprintf("job-%d", c.g), 0)), action{kind: txn.OpCreate, jobPut: true})
	}
	// New tasks, claimed in the same transaction.
	for range 1 + c.rng.IntN(3) {
		uid := testUID(uidTask, c.g, c.created)
		c.created++
		cpu := 100 + 100*c.rng.Int64N(5)
		ref := taskRef{uid: uid, state: omegav1.TaskState_TASK_STATE_PENDING, cpu: cpu}
		add(txn.CreateTask(taskProto(uid, c.job, cpu, cpu<<20)), action{kind: txn.OpCreate, ref: ref})
		m := c.machines[c.rng.IntN(len(c.machines))]
		add(txn.Claim(uid, m, res(cpu, cpu<<20), 0), action{kind: txn.OpClaim, ref: ref})
	}
	// Retry a pending task from an earlier conflict.
	if len(c.pending) > 0 {
		ref := c.pending[0]
		m := c.machines[c.rng.IntN(len(c.machines))]
		add(txn.Claim(ref.uid, m, res(ref.cpu, ref.cpu<<20), ref.version), action{kind: txn.OpClaim, ref: ref})
	}
	// Start, finish or evict placed tasks.
	for i, ref := range c.placed {
		switch {
		case i < len(c.placed)-4:
			st := omegav1.TaskState_TASK_STATE_SUCCEEDED
			if c.rng.IntN(8) == 0 {
				st = omegav1.TaskState_TASK_STATE_FAILED
			}
			add(txn.SetStatus(ref.uid, st, ref.version, "done"), action{kind: txn.OpSetStatus, ref: ref, to: st})
		case ref.state == omegav1.TaskState_TASK_STATE_ASSIGNED && c.rng.IntN(2) == 0:
			add(txn.SetStatus(ref.uid, omegav1.TaskState_TASK_STATE_RUNNING, ref.version, "started"),
				action{kind: txn.OpSetStatus, ref: ref, to: omegav1.TaskState_TASK_STATE_RUNNING})
		case c.rng.IntN(16) == 0:
			add(txn.ForceEvict(ref.uid, ref.version, "drain"), action{kind: txn.OpEvict, ref: ref})
		}
	}
	if c.jobVer != 0 && c.rng.IntN(4) == 0 {
		j := jobProto(c.job, fmt.Sprintf("job-%d", c.g), int32(c.created))
		j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING, Running: int32(len(c.placed)), Succeeded: int32(c.finished)}
		add(txn.PutJob(j, c.jobVer), action{kind: txn.OpPut, jobPut: true})
	}
	return tx, acts
}

// done updates the bookkeeping after a commit: every committed operation's
// object is now at r.Revision.
func (c *committer) done(r txn.Result, acts []action) error {
	rev := r.Revision
	if rev == 0 {
		return fmt.Errorf("committer %d: nothing committed: %+v", c.g, r.Outcomes)
	}
	drop := func(list []taskRef, uid uuid.UUID) []taskRef {
		for i := range list {
			if list[i].uid == uid {
				return append(list[:i:i], list[i+1:]...)
			}
		}
		return list
	}
	for i, a := range acts {
		o := r.Outcomes[i]
		if !o.Committed() {
			switch {
			case a.kind == txn.OpClaim && o.Code == omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES:
				if a.ref.version == 0 { // created in this transaction
					ref := a.ref
					ref.version = rev
					c.pending = append(c.pending, ref)
				}
				continue
			}
			return fmt.Errorf("committer %d: op %d (%s) conflicted: %s %s", c.g, i, a.kind, o.Code, o.Detail)
		}
		ref := a.ref
		ref.version = rev
		switch a.kind {
		case txn.OpCreate, txn.OpPut:
			if a.jobPut {
				c.jobVer = rev
			}
		case txn.OpClaim:
			c.pending = drop(c.pending, ref.uid)
			ref.state = omegav1.TaskState_TASK_STATE_ASSIGNED
			c.placed = append(c.placed, ref)
		case txn.OpSetStatus:
			c.placed = drop(c.placed, ref.uid)
			if a.to == omegav1.TaskState_TASK_STATE_RUNNING {
				ref.state = a.to
				c.placed = append(c.placed, ref)
			} else {
				c.finished++
			}
		case txn.OpEvict:
			c.placed = drop(c.placed, ref.uid)
			ref.state = omegav1.TaskState_TASK_STATE_PENDING
			c.pending = append(c.pending, ref)
		}
	}
	return nil
}

// step builds, commits and books one transaction; it returns the result.
func (c *committer) step(ctx context.Context, s *Store) (txn.Result, error) {
	tx, acts := c.next()
	r, err := s.Commit(ctx, tx)
	if err != nil {
		return r, fmt.Errorf("committer %d: %w", c.g, err)
	}
	return r, c.done(r, acts)
}

// registerMachines creates n machines (uids (0, i)) in one transaction.
func registerMachines(ctx context.Context, s *Store, n int, cpu, mem int64) ([]uuid.UUID, error) {
	tx := &txn.Txn{Component: "test"}
	uids := make([]uuid.UUID, n)
	for i := range uids {
		uids[i] = testUID(uidMachine, 0, uint32(i))
		tx.Ops = append(tx.Ops, txn.CreateMachine(machineProto(uids[i], cpu, mem)))
	}
	r, err := s.Commit(ctx, tx)
	if err != nil {
		return nil, err
	}
	if r.Committed != n {
		return nil, fmt.Errorf("register machines: %d of %d committed", r.Committed, n)
	}
	return uids, nil
}

// stateRecorder follows a store through Watch from snapshot st, applying
// every write set to its own copy of the state, and calls onRev with the
// state at every revision, in order, and its digest (kept up to date change
// by change, so following a fast store stays cheap). It checks the
// revisions are consecutive. It returns when ctx is done, the store is
// closed or the watch fails.
func stateRecorder(ctx context.Context, s *Store, st *txn.State, onRev func(st *txn.State, digest string)) error {
	w, err := s.Watch(st.Revision())
	if err != nil {
		return err
	}
	var d digestAcc
	st.RangeTasks(func(t *txn.Task) bool { d.task(t, 1); return true })
	st.RangeMachines(func(m *txn.Machine) bool { d.machine(m, 1); return true })
	st.RangeJobs(func(j *txn.Job) bool { d.job(j, 1); return true })
	onRev(st, d.format(st))
	for {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			return err
		}
		for _, ws := range sets {
			if ws.Revision != st.Revision()+1 {
				return fmt.Errorf("watch delivered revision %d after %d", ws.Revision, st.Revision())
			}
			d.update(st, ws)
			st = st.Apply(ws)
			onRev(st, d.format(st))
		}
	}
}

// noLink hides a filesystem's hard links, so pebble's ingestion copies a
// checkpoint's tables instead of linking them. The tests on pebble's
// crashable MemFS run on it: MemFS.Link read-locks the filesystem's
// crash-clone lock twice, and deadlocks against a CrashClone that asks for
// it between the two (pebble v2, vfs/mem_fs.go), as TestCrashCloneFS does
// while the checkpointer ingests.
type noLink struct{ vfs.FS }

func (noLink) Link(oldname, newname string) error { return errNoLink }

var errNoLink = errors.New("no hard links on this filesystem (a test's)")
