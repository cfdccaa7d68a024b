package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// buildHistory commits a varied history to s: machines (some with GPUs),
// jobs, tasks with and without an owner job, claims (some conflicting),
// starts, finishes, evictions, job and machine puts, deletions of tasks
// (placed and terminal), of a job and of a machine, a task created and
// deleted in one transaction, and a claim on a machine created in the same
// transaction.
func buildHistory(t *testing.T, s *Store, seed uint64) {
	t.Helper()
	ctx := context.Background()
	machines, err := registerMachines(ctx, s, 12, 4000, 4000<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Committers: creates, claims, RUNNING, SUCCEEDED/FAILED, evictions, job puts.
	cs := make([]*committer, 3)
	for g := range cs {
		cs[g] = newCommitter(uint32(g), seed, machines)
	}
	for range 40 {
		for _, c := range cs {
			if _, err := c.step(ctx, s); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	head := s.Snapshot()

	// A GPU machine and a task with an extended resource, claimed in the
	// transaction that creates both.
	gpuM := testUID(uidMachine, 2, 0)
	gm := machineProto(gpuM, 8000, 8<<30)
	gm.Spec.Capacity.Extended = map[string]int64{"gpu": 4}
	gpuT := testUID(uidTask, 100, 0)
	gt := taskProto(gpuT, uuid.Nil, 1000, 1<<30)
	gt.Spec.Resources.Extended = map[string]int64{"gpu": 2}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: head.Revision(), Component: "gpu", UnixNanos: 7, Ops: []txn.Op{
		txn.CreateMachine(gm),
		txn.CreateTask(gt),
		txn.Claim(gpuT, gpuM, txn.Resources{CPU: 1000, Memory: 1 << 30, Ext: map[string]int64{"gpu": 2}}, 0),
		txn.SetStatus(gpuT, omegav1.TaskState_TASK_STATE_RUNNING, 0, "up"),
	}})

	// A task created and deleted in one transaction leaves nothing behind.
	ghost := testUID(uidTask, 100, 1)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
		txn.CreateTask(taskProto(ghost, uuid.Nil, 10, 10)),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, ghost, 0),
		txn.CreateTask(taskProto(testUID(uidTask, 100, 2), uuid.Nil, 10, 10)), // a survivor, so the commit has a revision
	}})

	// Put a machine (drain it, relabel it): its allocation is kept.
	head = s.Snapshot()
	m0, _ := head.Machine(machines[0])
	pm := machineProto(machines[0], 4000, 4000<<20)
	pm.Meta.Labels = map[string]string{"rack": "r9"}
	pm.Status = &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_DRAINING, AgentAddress: "10.0.0.9:1"}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: head.Revision(), Ops: []txn.Op{txn.PutMachine(pm, m0.Version)}})

	// Delete some tasks: a placed one (frees its claim) and a terminal one.
	head = s.Snapshot()
	var placed, terminal []*txn.Task
	head.RangeTasks(func(x *txn.Task) bool {
		switch {
		case x.Placed() && x.UID != gpuT:
			placed = append(placed, x)
		case x.Terminal():
			terminal = append(terminal, x)
		}
		return true
	})
	if len(placed) == 0 || len(terminal) == 0 {
		t.Fatalf("seed %d: history has %d placed and %d terminal tasks; want some of each", seed, len(placed), len(terminal))
	}
	if len(placed) < 3 {
		t.Fatalf("seed %d: history has %d placed tasks; want 3", seed, len(placed))
	}
	rng.Shuffle(len(placed), func(i, j int) { placed[i], placed[j] = placed[j], placed[i] })
	dp, ev1, ev2 := placed[0], placed[1], placed[2]
	dt := terminal[rng.IntN(len(terminal))]
	mustCommitAll(t, s, &txn.Txn{ViewRevision: head.Revision(), UnixNanos: 99, Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, dp.UID, dp.Version),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, dt.UID, dt.Version),
		txn.ForceEvict(ev1.UID, ev1.Version, "drain"),
		txn.Evict(ev2.UID, ev2.Version, ev2.Spec.GetPriority()+1, "preempted"),
	}})
	if x, _ := s.Snapshot().Task(ev2.UID); x.Evictions == 0 || x.State != omegav1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("seed %d: evicted task is %s with %d evictions", seed, x.State, x.Evictions)
	}

	// A finished job, then a job deleted; a machine created and deleted.
	j := jobProto(testUID(uidJob, 50, 0), "finished", 1)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{txn.CreateJob(j)}})
	jf := jobProto(testUID(uidJob, 50, 0), "finished", 1)
	jf.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_SUCCEEDED, Succeeded: 1, FinishUnixNanos: 12345, Message: "ok"}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{txn.PutJob(jf, 0)}})
	jd := testUID(uidJob, 51, 0)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{txn.CreateJob(jobProto(jd, "doomed", 0))}})
	md := testUID(uidMachine, 3, 0)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{txn.CreateMachine(machineProto(md, 1, 1))}})
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, jd, 0),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, md, 0),
	}})
	// A quota on the committers (committer-0, ...), made and then put higher:
	// its use is counted from the placed tasks, not stored.
	quota := &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: testUID('Q', 0, 0).String(), Name: "g-cpu"},
		Spec: &omegav1.QuotaSpec{Scheduler: "committer", Limit: &omegav1.Resources{CpuMillis: 1 << 20}}}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "admin", Ops: []txn.Op{txn.CreateQuota(quota)}})
	quota.Spec = &omegav1.QuotaSpec{Scheduler: "committer", Limit: &omegav1.Resources{CpuMillis: 1 << 21, MemoryBytes: 1 << 40}}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "admin", Ops: []txn.Op{txn.PutQuota(quota, 0)}})
	// Two schedulers' leases, one renewed, one given back: the renewed one
	// reopens at its version.
	for _, name := range []string{"batch-0", "batch-1"} {
		l := &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID(name).String(), Name: name},
			Spec: &omegav1.LeaseSpec{Holder: "h-" + name, Role: "scheduler", SchedulerKind: "batch", DurationMillis: 15_000, RenewUnixNanos: 1}}
		mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "admin", Ops: []txn.Op{txn.CreateLease(l)}})
		l.Spec.RenewUnixNanos = 2
		mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "admin", Ops: []txn.Op{txn.PutLease(l, 0)}})
	}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "admin", Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, txn.LeaseUID("batch-1"), 0)}})
	if err := txn.CheckInvariants(s.Snapshot()); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
}

// TestReopen closes a store after a varied history and reopens it: the
// state is identical object by object (every task's fields, every machine's
// allocation, task count and version, every job), the revision is the same,
// and every machine's coarse sequence number is the reopened revision.
func TestReopen(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_REOPEN_SEED")
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	buildHistory(t, s, seed)
	before := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 2 { // reopening a reopened store changes nothing either
		s = openTest(t, dir, nil)
		after := s.Snapshot()
		if d := diffStates(before, after, true); d != "" {
			t.Fatalf("seed %d, reopen %d: state differs: %s", seed, round, d)
		}
		if got, want := digest(after), digest(before); got != want {
			t.Fatalf("seed %d, reopen %d: digest %s, want %s", seed, round, got, want)
		}
		after.RangeMachines(func(m *txn.Machine) bool {
			if m.Seq != after.Revision() {
				t.Errorf("seed %d: machine %s has seq %d after reopening at %d", seed, m.UID, m.Seq, after.Revision())
			}
			return true
		})
		if err := txn.CheckInvariants(after); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b0, _ := before.Lease(txn.LeaseUID("batch-0"))
		if l, ok := after.Lease(txn.LeaseUID("batch-0")); !ok || l.Version != b0.Version || l.RenewUnixNanos() != 2 || after.NumLeases() != 1 {
			t.Fatalf("seed %d, reopen %d: the renewed lease %+v (found %v), %d leases", seed, round, l, ok, after.NumLeases())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The reopened store continues the revision sequence.
	s = openTest(t, dir, nil)
	defer s.Close()
	r := mustCommitAll(t, s, &txn.Txn{ViewRevision: before.Revision(), Ops: []txn.Op{
		txn.CreateTask(taskProto(testUID(uidTask, 200, 0), uuid.Nil, 1, 1)),
	}})
	if r.Revision != before.Revision()+1 {
		t.Fatalf("first commit after reopen at %d got revision %d", before.Revision(), r.Revision)
	}
}

// TestReopenEmpty: a store with no commit reopens at revision 0, empty.
func TestReopenEmpty(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	defer s.Close()
	if st := s.Snapshot(); st.Revision() != 0 || st.NumTasks()+st.NumMachines()+st.NumJobs() != 0 {
		t.Fatalf("empty store reopened at %d with %d tasks %d machines %d jobs", st.Revision(), st.NumTasks(), st.NumMachines(), st.NumJobs())
	}
}

// TestOpenCorrupt: stored data the store cannot decode fails Open with
// ErrCorrupt (and an invalid stored object with an error), never with a
// half-built state.
func TestOpenCorrupt(t *testing.T) {
	base := func(t *testing.T) vfs.FS {
		fs := vfs.NewMem()
		o := DefaultOptions("db")
		o.FS, o.Logger = fs, quietLogger()
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		m := testUID(uidMachine, 0, 0)
		task := testUID(uidTask, 0, 0)
		mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
			txn.CreateMachine(machineProto(m, 1000, 1000)),
			txn.CreateTask(taskProto(task, uuid.Nil, 10, 10)),
			txn.Claim(task, m, res(10, 10), 0),
		}})
		// A change after creation, so the task has a status record too.
		mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
			txn.SetStatus(task, omegav1.TaskState_TASK_STATE_RUNNING, s.Revision(), ""),
		}})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	key := func(prefix byte, u uuid.UUID) []byte { k := recKey(prefix, u); return k[:] }
	for _, tc := range []struct {
		name    string
		edit    func(b *pebble.Batch)
		corrupt bool // errors.Is(err, ErrCorrupt); else just an error
	}{
		{"short revision record", func(b *pebble.Batch) { b.Set(revisionKey, []byte{1, 2, 3}, nil) }, true},
		{"machine garbage", func(b *pebble.Batch) {
			b.Set(key(prefixMachine, testUID(uidMachine, 0, 0)), []byte{0xff, 0xff, 0xff}, nil)
		}, true},
		{"task without status", func(b *pebble.Batch) {
			v, _ := proto.Marshal(&omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: testUID(uidTask, 0, 0).String()}})
			b.Set(key(prefixTask, testUID(uidTask, 0, 0)), v, nil)
		}, true},
		{"status without task", func(b *pebble.Batch) { b.Delete(key(prefixTask, testUID(uidTask, 0, 0)), nil) }, true},
		{"short status", func(b *pebble.Batch) { b.Set(key(prefixStatus, testUID(uidTask, 0, 0)), []byte{1}, nil) }, true},
		{"short key", func(b *pebble.Batch) { b.Set([]byte{prefixJob, 1, 2}, []byte{}, nil) }, true},
		{"task on a missing machine", func(b *pebble.Batch) { b.Delete(key(prefixMachine, testUID(uidMachine, 0, 0)), nil) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := base(t)
			po := (&Options{FS: fs, Logger: quietLogger()}).PebbleOptions()
			db, err := pebble.Open("db", po)
			if err != nil {
				t.Fatal(err)
			}
			b := db.NewBatch()
			tc.edit(b)
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions("db")
			o.FS, o.Logger = fs, quietLogger()
			s, err := Open(o)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded on a corrupt store")
			}
			if tc.corrupt && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			// The failed Open released the database: it opens again.
			db, err = pebble.Open("db", po)
			if err != nil {
				t.Fatalf("reopen after failed Open: %v", err)
			}
			db.Close()
		})
	}
}

// TestDurabilityNone: the in-memory store commits, publishes at once and
// keeps nothing on disk.
func TestDurabilityNone(t *testing.T) {
	o := DefaultOptions("")
	o.Durability = DurabilityNone
	o.CheckInvariants = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	machines, err := registerMachines(context.Background(), s, 3, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c := newCommitter(0, 1, machines)
	for range 20 {
		r, err := c.step(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if s.Revision() != r.Revision {
			t.Fatalf("durability none: committed %d, published %d", r.Revision, s.Revision())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), &txn.Txn{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v, want ErrClosed", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*Options)
		ok  bool
	}{
		{func(*Options) {}, true},
		{func(o *Options) { o.Dir = "" }, false},
		{func(o *Options) { o.Dir = ""; o.Durability = DurabilityNone }, true},
		{func(o *Options) { o.Durability = 7 }, false},
		{func(o *Options) { o.HistoryChanges = -1 }, false},
		{func(o *Options) { o.Retention = -1 }, false},
		{func(o *Options) { o.Limits.MaxOps = -1 }, false},
		{func(o *Options) { o.MemTableSize = 4 << 30 }, false},
		{func(o *Options) { o.MemTableSize = 4<<30 - 1 }, true},
		{func(o *Options) { o.Limits.MaxStringBytes = 35 }, false}, // no uid would fit
		{func(o *Options) { o.Limits.MaxTxnBytes = 1 }, false},
		{func(o *Options) { o.Limits.MaxTxnBytes = o.Limits.MaxObjectBytes - 1 }, false},
		{func(o *Options) { o.Limits.MaxTxnBytes = txn.MaxWireBytes + 1 }, false},
		{func(o *Options) {
			o.Limits = txn.Limits{MaxStringBytes: 64, MaxObjectBytes: 1024, MaxTxnBytes: 1024, MaxOps: 1}
		}, true},
	} {
		o := DefaultOptions("dir")
		tc.mod(&o)
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", o, err, tc.ok)
		}
		if !tc.ok {
			if _, err := Open(o); err == nil {
				t.Errorf("%+v: Open succeeded", o)
			}
		}
	}
	for _, d := range []Durability{DurabilitySync, DurabilityNone} {
		got, err := ParseDurability(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDurability(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDurability("fsync"); err == nil {
		t.Errorf("ParseDurability(fsync) succeeded")
	}
	_ = fmt.Sprint(Durability(9))
}
