package store

// Commits checked one by one: sequences of good and bad transactions (every
// error typed and leaving nothing behind, invariants, reopen), bad input
// before a crash, bad and good committers at once, and the ErrInUse a
// machine's deletion meets when the view saw its tasks.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// commitHarness commits transactions to a durable store and after each one
// checks: typed error + nothing changed + nothing for watchers, or a good
// commit; invariants; reopen equals.
type commitHarness struct {
	t   *testing.T
	dir string
	mod func(*Options)
	s   *Store
}

func (h *commitHarness) reopen() {
	t := h.t
	t.Helper()
	before := h.s.Snapshot()
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	h.s = openTest(t, h.dir, h.mod)
	if d := diffStates(before, h.s.Snapshot(), true); d != "" {
		t.Fatalf("reopen differs: %s", d)
	}
}

// do commits tx; wantErr nil means no error expected. Returns the result.
func (h *commitHarness) do(name string, tx *txn.Txn, wantErr error) txn.Result {
	t := h.t
	t.Helper()
	before := h.s.Snapshot()
	w, err := h.s.Watch(before.Revision())
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.s.Commit(context.Background(), tx)
	switch {
	case err != nil:
		if !typedErr(err) {
			t.Fatalf("%s: untyped error %v", name, err)
		}
		if wantErr != nil && !errors.Is(err, wantErr) {
			t.Errorf("%s: err %v, want %v", name, err, wantErr)
		}
		if wantErr == nil {
			t.Errorf("%s: unexpected err %v", name, err)
		}
		if h.s.Snapshot() != before {
			t.Fatalf("%s: error changed the snapshot", name)
		}
		if sets, _, _ := w.Poll(0); len(sets) != 0 {
			t.Fatalf("%s: watcher got %d sets on error", name, len(sets))
		}
	default:
		if wantErr != nil {
			t.Errorf("%s: no error (outcomes %+v), want %v", name, r.Outcomes, wantErr)
		}
		if r.Revision == 0 && h.s.Snapshot() != before {
			t.Fatalf("%s: nothing committed but snapshot changed", name)
		}
	}
	if err := txn.CheckInvariants(h.s.Snapshot()); err != nil {
		t.Fatalf("%s: invariants: %v", name, err)
	}
	h.reopen()
	return r
}

func (h *commitHarness) ver(u uuid.UUID) uint64 {
	x, ok := h.s.Snapshot().Task(u)
	if !ok {
		return 0
	}
	return x.Version
}

func newCommitHarness(t *testing.T, mod func(*Options)) *commitHarness {
	h := &commitHarness{t: t, dir: t.TempDir(), mod: mod}
	h.s = openTest(t, h.dir, mod)
	t.Cleanup(func() { h.s.Close() })
	return h
}

// TestCommitSequences: a sequence of good and bad transactions at the ends
// of the ranges (MaxInt64 machines, a uid created twice or deleted and
// created again in one transaction, all-or-nothing and coarse conflicts,
// errors after good operations); each holds its outcome, and the harness
// checks every commit.
func TestCommitSequences(t *testing.T) {
	const maxI = int64(^uint64(0) >> 1)
	h := newCommitHarness(t, nil)
	m0, m1 := testUID(uidMachine, 60, 0), testUID(uidMachine, 60, 1)
	j0 := testUID(uidJob, 60, 0)
	tk := func(i uint32) uuid.UUID { return testUID(uidTask, 60, i) }

	big := func(u uuid.UUID) *omegav1.Machine { return machineProto(u, maxI, maxI) }
	h.do("two MaxInt64 machines", &txn.Txn{Ops: []txn.Op{txn.CreateMachine(big(m0)), txn.CreateMachine(big(m1)),
		txn.CreateJob(jobProto(j0, "j", 3))}}, nil)
	if c := h.s.Snapshot().Capacity(); c.CPU != maxI {
		t.Errorf("capacity %v", c)
	}
	// Same uid twice in one txn.
	h.do("task created twice", &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk(0), j0, 1, 1)), txn.CreateTask(taskProto(tk(0), j0, 1, 1))}}, txn.ErrAlreadyExists)
	shared := taskProto(tk(0), j0, 1, 1)
	h.do("same message twice", &txn.Txn{Ops: []txn.Op{txn.CreateTask(shared), txn.CreateTask(shared)}}, txn.ErrAlreadyExists)
	h.do("job created twice", &txn.Txn{Ops: []txn.Op{txn.CreateJob(jobProto(testUID(uidJob, 60, 1), "a", 1)), txn.CreateJob(jobProto(testUID(uidJob, 60, 1), "b", 1))}}, txn.ErrAlreadyExists)
	h.do("machine created twice", &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machineProto(testUID(uidMachine, 60, 9), 1, 1)), txn.CreateMachine(machineProto(testUID(uidMachine, 60, 9), 1, 1))}}, txn.ErrAlreadyExists)
	// Create, delete, create again in one txn (task never stored).
	h.do("task create-delete-create", &txn.Txn{Ops: []txn.Op{
		txn.CreateTask(taskProto(tk(1), j0, 1, 1)),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk(1), 0),
		txn.CreateTask(taskProto(tk(1), uuid.Nil, 2, 2)),
		txn.Claim(tk(1), m0, res(maxI, maxI), 0),
	}}, nil)
	// A second claim on a full MaxInt64 machine: 0 fits, 1 does not.
	h.do("tasks", &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk(2), j0, 1, 1)), txn.CreateTask(taskProto(tk(3), j0, 1, 1)),
		txn.CreateTask(taskProto(tk(4), j0, 1, 1))}}, nil)
	r := h.do("second claim of 1", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.Claim(tk(2), m0, res(1, 0), h.ver(tk(2)))}}, nil)
	if r.Committed != 0 {
		t.Errorf("claim of 1 on a full MaxInt64 machine committed")
	}
	h.do("second claim of 0", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.Claim(tk(2), m0, res(0, 0), h.ver(tk(2)))}}, nil)
	h.do("MaxInt64 on the other machine", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.Claim(tk(3), m1, res(maxI, maxI), h.ver(tk(3)))}}, nil)
	if a := h.s.Snapshot().Allocated(); a.CPU != maxI {
		t.Errorf("allocated %v, want saturated", a)
	}
	// Evict frees for a later claim; all-or-nothing abort when a later op conflicts.
	view := h.s.Revision()
	r = h.do("AoN evict+claim+conflict", &txn.Txn{ViewRevision: view, Commit: omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, Ops: []txn.Op{
		txn.ForceEvict(tk(3), h.ver(tk(3)), "x"),
		txn.Claim(tk(4), m1, res(maxI, maxI), h.ver(tk(4))),
		txn.Claim(tk(3), m1, res(1, 1), h.ver(tk(3))), // no room: conflict → abort
	}}, nil)
	if r.Committed != 0 || r.Revision != 0 {
		t.Errorf("AoN committed %d", r.Committed)
	}
	// Coarse: evict + claim, own changes do not count; then someone else's change does.
	h.do("coarse evict+claim", &txn.Txn{ViewRevision: view, Conflict: omegav1.ConflictMode_CONFLICT_MODE_COARSE, Ops: []txn.Op{
		txn.ForceEvict(tk(3), h.ver(tk(3)), "x"),
		txn.Claim(tk(4), m1, res(maxI, maxI), h.ver(tk(4))),
	}}, nil)
	r = h.do("coarse stale", &txn.Txn{ViewRevision: view, Conflict: omegav1.ConflictMode_CONFLICT_MODE_COARSE, Ops: []txn.Op{
		txn.Claim(tk(3), m1, res(0, 0), h.ver(tk(3))),
	}}, nil)
	if r.Committed != 0 {
		t.Errorf("coarse claim with stale view committed")
	}
	// Delete a machine with a seen task: ErrInUse.
	h.do("delete in use", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m1, 0)}}, txn.ErrInUse)
	// A claim placed after the view: conflict.
	view = h.s.Revision()
	h.do("claim tk3 on m1 (0)", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.SetStatus(tk(4), omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "")}}, nil)
	h.do("place after view", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.Claim(tk(3), m1, res(0, 0), h.ver(tk(3)))}}, nil)
	r = h.do("delete with old view", &txn.Txn{ViewRevision: view, Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m1, 0)}}, nil)
	if r.Committed != 0 || r.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_CHANGED {
		t.Errorf("delete with old view: %+v", r.Outcomes)
	}
	// Free it, delete and recreate the machine (smaller) in one txn, with a
	// terminal task still naming it; and the job deleted and recreated.
	h.do("free", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{txn.SetStatus(tk(3), omegav1.TaskState_TASK_STATE_LOST, 0, "")}}, nil)
	h.do("machine delete+create, job delete+create", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m1, 0),
		txn.CreateMachine(machineProto(m1, 10, 10)),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, j0, 0),
		txn.CreateJob(jobProto(j0, "again", 1)),
		txn.Claim(tk(2), m1, res(0, 0), h.ver(tk(2))), // tk2 is ASSIGNED on m0
	}}, txn.ErrNotPending)
	h.do("machine delete+create, job delete+create (ok)", &txn.Txn{ViewRevision: h.s.Revision(), Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m1, 0),
		txn.CreateMachine(machineProto(m1, 10, 10)),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, j0, 0),
		txn.CreateJob(jobProto(j0, "again", 1)),
		txn.PutJob(jobProto(j0, "again-put", 2), 0),
		txn.CreateTask(taskProto(tk(5), j0, 1, 1)),
		txn.Claim(tk(5), m1, res(10, 10), 0),
	}}, nil)
	// Task deleted then recreated in one txn (uid in base): refused.
	h.do("base task delete+create", &txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk(5), 0), txn.CreateTask(taskProto(tk(5), j0, 1, 1))}}, txn.ErrAlreadyExists)
	// Delete placed task frees; recreate later under the same uid.
	h.do("delete placed", &txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk(5), 0)}}, nil)
	h.do("recreate later", &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk(5), j0, 1, 1)), txn.Claim(tk(5), m1, res(10, 10), 0)}}, nil)
	// Put of machine capacity below allocation: conflict.
	r = h.do("shrink below alloc", &txn.Txn{Ops: []txn.Op{txn.PutMachine(machineProto(m1, 9, 10), 0)}}, nil)
	if r.Committed != 0 {
		t.Errorf("shrink below allocation committed")
	}
	// Meta shared between a job and a task create (same uid string, different kinds).
	u := testUID(uidTask, 60, 77)
	meta := &omegav1.ObjectMeta{Uid: u.String(), Name: "shared"}
	h.do("meta shared task/job/machine", &txn.Txn{Ops: []txn.Op{
		txn.CreateTask(&omegav1.Task{Meta: meta}),
		txn.CreateJob(&omegav1.Job{Meta: meta, Spec: &omegav1.JobSpec{}}),
		txn.CreateMachine(&omegav1.Machine{Meta: meta, Spec: &omegav1.MachineSpec{}}),
	}}, nil)
	// Delete of a task claimed in the same txn, then delete of machine.
	h.do("claim then delete task then delete machine", &txn.Txn{Ops: []txn.Op{
		txn.Claim(u, u, res(0, 0), h.ver(u)),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, u, 0),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, u, 0),
	}}, nil)
	// Errors after good ops in every op kind, AoN and incremental.
	for _, mode := range []omegav1.CommitMode{0, 1} {
		h.do("good then error", &txn.Txn{Commit: mode, Ops: []txn.Op{
			txn.CreateTask(taskProto(tk(90), uuid.Nil, 1, 1)),
			txn.Claim(tk(90), m0, res(0, 0), 0),
			txn.SetStatus(tk(90), omegav1.TaskState_TASK_STATE_RUNNING, 0, ""),
			txn.ForceEvict(tk(90), 0, ""),
			txn.SetStatus(tk(90), omegav1.TaskState_TASK_STATE_RUNNING, 0, ""), // pending → RUNNING: blind → conflict
			txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, j0, 0),
			txn.PutJob(jobProto(j0, "x", 1), 0), // deleted in this txn: ErrNotFound
		}}, txn.ErrNotFound)
	}
}

// badTxns returns bad transactions (each refused with a typed error) against
// a machine m0 with a pending task and a placed one at versions pv and av,
// the state TestCrashAfterBadInput and TestConcurrentBadAndGood build.
func badTxns(m0, pending, placed uuid.UUID, pv, av, rev uint64) []*txn.Txn {
	bad := []*txn.Txn{
		{Ops: []txn.Op{txn.CreateTask(&omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString(), Name: "\xff"}})}},
		{Ops: []txn.Op{txn.CreateTask(&omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString()}, Spec: &omegav1.TaskSpec{Constraints: []*omegav1.Constraint{{Value: "\xc0"}}}})}},
		{Ops: []txn.Op{txn.CreateJob(&omegav1.Job{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString()}, Spec: &omegav1.JobSpec{Template: &omegav1.TaskTemplate{Labels: map[string]string{"\xfe": ""}}}})}},
		{Ops: []txn.Op{txn.CreateJob(&omegav1.Job{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString()}, Spec: &omegav1.JobSpec{Template: &omegav1.TaskTemplate{Command: &omegav1.Command{Env: map[string]string{"k": "\xfe"}}}}})}},
		{Ops: []txn.Op{txn.CreateMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString(), OwnerReferences: []*omegav1.OwnerReference{{Name: "\xff"}}}, Spec: &omegav1.MachineSpec{}})}},
		{Ops: []txn.Op{txn.CreateMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString()}, Spec: &omegav1.MachineSpec{}, Status: &omegav1.MachineStatus{Allocated: &omegav1.Resources{Extended: map[string]int64{"\xff": 1}}}})}},
		{Ops: []txn.Op{txn.CreateTask(&omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString()}, Status: &omegav1.TaskStatus{MachineUid: "\xff"}})}}, // ignored field, still checked
		{Ops: []txn.Op{txn.Claim(pending, m0, txn.Resources{Ext: map[string]int64{"\x80": 1}}, pv)}},
		{Ops: []txn.Op{txn.SetStatus(placed, omegav1.TaskState(99), av, "")}},
		{Ops: []txn.Op{txn.SetStatus(placed, omegav1.TaskState(-1), av, "")}},
		{Ops: []txn.Op{txn.Claim(pending, m0, res(-1<<63, 0), pv)}},
		{ViewRevision: ^uint64(0), Ops: []txn.Op{txn.Claim(pending, m0, res(1, 1), pv)}},
		{Conflict: -1, Ops: []txn.Op{txn.Claim(pending, m0, res(1, 1), pv)}},
		{Ops: []txn.Op{{Kind: 0}}},
		{Ops: []txn.Op{{Kind: txn.OpPut}}},
		{Ops: []txn.Op{{Kind: txn.OpPut, NewJob: &omegav1.Job{}, NewMachine: &omegav1.Machine{}}}},
		{Ops: []txn.Op{txn.CreateTask(&omegav1.Task{})}},
		{Ops: []txn.Op{txn.CreateMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: uuid.NewString()}, Spec: &omegav1.MachineSpec{}, Status: &omegav1.MachineStatus{State: -3}})}},
		{Ops: []txn.Op{txn.Claim(pending, m0, res(1, 1), pv), txn.Claim(pending, m0, res(1, 1), pv)}}, // claimed twice: 2nd ErrNotPending? (version check first)
		{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_UNSPECIFIED, m0, 0)}},
		{Ops: []txn.Op{txn.Claim(uuid.Nil, uuid.Nil, res(0, 0), 0)}},
		{Component: string(make([]byte, 70<<10)), Ops: []txn.Op{txn.Claim(pending, m0, res(1, 1), pv)}},
		{Ops: []txn.Op{txn.CreateTask(&omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: "{" + uuid.NewString() + "}", Annotations: map[string]string{"a": string(make([]byte, 65<<10))}}})}},
	}
	_ = rev
	return bad
}

// TestCrashAfterBadInput: bad transactions refused with typed errors leave
// nothing behind, for watchers or on disk: a crash after them (any share of
// unsynced data lost) reopens at the state before them.
func TestCrashAfterBadInput(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := DefaultOptions("db")
	o.FS = noLink{fs}
	o.Logger = quietLogger()
	o.CheckInvariants = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	m0 := testUID(uidMachine, 61, 0)
	pending, placed := testUID(uidTask, 61, 0), testUID(uidTask, 61, 1)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(machineProto(m0, 100, 100)),
		txn.CreateTask(taskProto(pending, uuid.Nil, 1, 1)), txn.CreateTask(taskProto(placed, uuid.Nil, 1, 1)),
		txn.Claim(placed, m0, res(1, 1), 0),
	}})
	before := s.Snapshot()
	pv, av := version(t, s, pending), version(t, s, placed)
	w, _ := s.Watch(before.Revision())
	for i, tx := range badTxns(m0, pending, placed, pv, av, before.Revision()) {
		r, err := s.Commit(context.Background(), tx)
		if err == nil {
			t.Errorf("bad txn %d: accepted: %+v", i, r.Outcomes)
			continue
		}
		if !typedErr(err) {
			t.Errorf("bad txn %d: untyped %v", i, err)
		}
		if s.Snapshot() != before {
			t.Fatalf("bad txn %d changed state", i)
		}
	}
	if sets, _, _ := w.Poll(0); len(sets) != 0 {
		t.Fatalf("watcher saw %d", len(sets))
	}
	for _, pct := range []int{0, 50, 100} {
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, uint64(pct)))})
		o2 := o
		o2.FS = noLink{clone}
		s2, err := Open(o2)
		if err != nil {
			t.Fatalf("open clone: %v", err)
		}
		if d := diffStates(before, s2.Snapshot(), true); d != "" {
			t.Fatalf("clone %d%%: %s", pct, d)
		}
		s2.Close()
	}
	s.Close()
}

// Good and bad committers at once; watchers see exactly the good revisions.
func TestConcurrentBadAndGood(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	ctx := context.Background()
	m0 := testUID(uidMachine, 62, 0)
	pending, placed := testUID(uidTask, 62, 0), testUID(uidTask, 62, 1)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(machineProto(m0, 1<<40, 1<<40)),
		txn.CreateTask(taskProto(pending, uuid.Nil, 1, 1)), txn.CreateTask(taskProto(placed, uuid.Nil, 1, 1)),
		txn.Claim(placed, m0, res(1, 1), 0),
	}})
	start := s.Snapshot()
	pv, av := version(t, s, pending), version(t, s, placed)
	w, _ := s.Watch(start.Revision())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var good []uint64
	errc := make(chan error, 100)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				u := testUID(uidTask, 62, uint32(1000*(g+1)+i))
				r, err := s.Commit(ctx, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)), txn.Claim(u, m0, res(1, 1), 0)}})
				if err != nil || r.Committed != 2 {
					errc <- fmt.Errorf("good: %v %+v", err, r.Outcomes)
					return
				}
				mu.Lock()
				good = append(good, r.Revision)
				mu.Unlock()
			}
		}()
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bad := badTxns(m0, pending, placed, pv, av, 0)
			for i := range 200 {
				tx := bad[(i+g)%len(bad)]
				if _, err := s.Commit(ctx, tx); err == nil || !typedErr(err) {
					errc <- fmt.Errorf("bad %d: %v", (i+g)%len(bad), err)
					return
				}
				s.Expire(ctx, time.Unix(0, int64(i)*int64(time.Hour)))
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	sets, _, err := w.Poll(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != len(good) {
		t.Fatalf("watcher saw %d revisions, %d good commits", len(sets), len(good))
	}
	if err := txn.CheckInvariants(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteMachineWithSeenTasksInUse: deleting a machine is ErrInUse "when
// the caller's view saw" its tasks, even when the machine changed after the
// view in a way that moved none of them (its agent address put again, or
// another task on it finished): ErrInUse, not a MACHINE_CHANGED conflict.
func TestDeleteMachineWithSeenTasksInUse(t *testing.T) {
	for _, variant := range []string{"put machine after view", "other task finished after view"} {
		t.Run(variant, func(t *testing.T) {
			s := openTest(t, t.TempDir(), nil)
			defer s.Close()
			m0 := testUID(uidMachine, 53, 0)
			t1, t2 := testUID(uidTask, 53, 1), testUID(uidTask, 53, 2)
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
				txn.CreateMachine(machineProto(m0, 1000, 1000)),
				txn.CreateTask(taskProto(t1, uuid.Nil, 1, 1)), txn.CreateTask(taskProto(t2, uuid.Nil, 1, 1)),
				txn.Claim(t1, m0, res(1, 1), 0), txn.Claim(t2, m0, res(1, 1), 0),
			}})
			view := s.Snapshot()
			mv, _ := view.Machine(m0)
			if variant == "put machine after view" {
				p := machineProto(m0, 1000, 1000)
				p.Status.AgentAddress = "10.0.0.2:1"
				mustCommitAll(t, s, &txn.Txn{ViewRevision: view.Revision(), Ops: []txn.Op{txn.PutMachine(p, 0)}})
				mv, _ = s.Snapshot().Machine(m0) // the caller even knows the new version
			} else {
				mustCommitAll(t, s, &txn.Txn{ViewRevision: view.Revision(), Ops: []txn.Op{txn.SetStatus(t2, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "")}})
			}
			r, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: view.Revision(), Ops: []txn.Op{
				txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m0, mv.Version)}})
			if !errors.Is(err, txn.ErrInUse) {
				t.Errorf("the view saw task %s on the machine (still placed, placed before the view); got err=%v outcomes=%+v, want ErrInUse", t1, err, r.Outcomes)
			}
		})
	}
}
