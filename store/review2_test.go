package store

// Second independent review (adversarial). Each test asserts a promise;
// a failing test is a finding.

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// review2Commit commits ops to a fresh durable store, then reports: the
// commit error, the state before close, and the reopen error / diff. It
// also feeds the committed write sets through the wire as a remote watcher
// would (WriteSet.Proto, marshal, WriteSetFromProto, Apply) and lists the
// state in chunks (SnapshotChunks / SnapshotReader), checking invariants.
func review2Commit(t *testing.T, setup, ops []txn.Op) {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	ctx := context.Background()
	if len(setup) > 0 {
		mustCommitAll(t, s, &txn.Txn{Ops: setup})
	}
	remote := s.Snapshot() // a remote client's copy, at the setup revision
	w, err := s.Watch(remote.Revision())
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Commit(ctx, &txn.Txn{ViewRevision: s.Revision(), Ops: ops})
	if err != nil {
		t.Logf("refused (fine if typed): %v", err)
		if !reviewTyped(err) {
			t.Errorf("untyped error %v", err)
		}
		s.Close()
		return
	}
	t.Logf("acknowledged: %d committed at revision %d", r.Committed, r.Revision)
	after := s.Snapshot()

	// The remote watcher.
	sets, _, err := w.Poll(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range sets {
		b, err := proto.Marshal(ws.Proto())
		if err != nil {
			t.Fatalf("write set does not marshal: %v", err)
		}
		p := &omegav1.RevisionChanges{}
		if err := proto.Unmarshal(b, p); err != nil {
			t.Fatal(err)
		}
		got, err := txn.WriteSetFromProto(p)
		if err != nil {
			t.Errorf("watcher: WriteSetFromProto: %v", err)
			break
		}
		remote = remote.Apply(got)
	}
	if err := txn.CheckInvariants(remote); err != nil {
		t.Errorf("BROKEN: a remote watcher's copy of an acknowledged state violates the invariants: %v", err)
	}
	// The remote lister.
	var sr txn.SnapshotReader
	if err := txn.SnapshotChunks(after, 0, func(c *omegav1.SnapshotChunk) error {
		b, err := proto.Marshal(c)
		if err != nil {
			return err
		}
		p := &omegav1.SnapshotChunk{}
		if err := proto.Unmarshal(b, p); err != nil {
			return err
		}
		return sr.Add(p)
	}); err != nil {
		t.Errorf("BROKEN: listing an acknowledged state: %v", err)
	} else if _, err := sr.Finish(); err != nil {
		t.Errorf("BROKEN: a remote client cannot list an acknowledged state: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(dir)
	o.Logger = quietLogger()
	s2, err := Open(o)
	if err != nil {
		t.Fatalf("BROKEN: acknowledged commit, the store no longer opens: %v", err)
	}
	defer s2.Close()
	if d := diffStates(after, s2.Snapshot(), true); d != "" {
		t.Errorf("BROKEN: acknowledged state reopens different: %s", d)
	}
}

// Unknown fields that encode a known proto3 scalar field at its zero value
// ("" / 0 / false) decode into a fresh message as an *unset* field, so
// checker.msg's fresh.Range sees nothing and lets them through. They are
// stored after the known fields; on reopen (and on the wire to watchers and
// listers) they decode as the known field, last one wins: the checked value
// is overwritten with zero.
func TestReview2UnknownZeroShadowsKnown(t *testing.T) {
	m0 := testUID(uidMachine, 200, 0)
	t0 := testUID(uidTask, 200, 0)
	j0 := testUID(uidJob, 200, 0)

	t.Run("capacity cpu zeroed under a placed task: store unopenable", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 0))) // cpu_millis = 0
		review2Commit(t, nil, []txn.Op{
			txn.CreateMachine(p),
			txn.CreateTask(taskProto(t0, uuid.Nil, 500, 500)),
			txn.Claim(t0, m0, res(500, 500), 0),
		})
	})
	t.Run("capacity zeroed by a put under a placed task", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(2, 0))) // memory_bytes = 0
		review2Commit(t, []txn.Op{
			txn.CreateMachine(machineProto(m0, 1000, 1000)),
			txn.CreateTask(taskProto(t0, uuid.Nil, 500, 500)),
			txn.Claim(t0, m0, res(500, 500), 0),
		}, []txn.Op{txn.PutMachine(p, 0)})
	})
	t.Run("owner reference uid emptied: store unopenable", func(t *testing.T) {
		p := taskProto(t0, j0, 1, 1)
		p.Meta.OwnerReferences[0].ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(2, nil))) // uid = ""
		review2Commit(t, []txn.Op{txn.CreateJob(jobProto(j0, "j", 1))}, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("owner reference controller cleared: task changes owner", func(t *testing.T) {
		j1 := testUID(uidJob, 200, 1)
		p := taskProto(t0, j0, 1, 1)
		p.Meta.OwnerReferences = append(p.Meta.OwnerReferences, &omegav1.OwnerReference{Kind: "Job", Uid: j1.String()})
		p.Meta.OwnerReferences[0].ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(4, 0))) // controller = false
		review2Commit(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("finished job's phase zeroed: no longer finished after reopen", func(t *testing.T) {
		p := jobProto(j0, "j", 1)
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_SUCCEEDED}
		p.Status.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 0)))
		review2Commit(t, nil, []txn.Op{txn.CreateJob(p)})
	})
	t.Run("task request zeroed", func(t *testing.T) {
		p := taskProto(t0, uuid.Nil, 700, 700)
		p.Spec.Resources.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 0)))
		review2Commit(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("failure domain emptied", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(2, nil)))
		review2Commit(t, nil, []txn.Op{txn.CreateMachine(p)})
	})
}

// Retention against a model, on virtual times (no monotonic reading):
// random finishes (tasks and jobs, jobs re-put), deletes, random Expire
// times that go forward and back, reopens. Promise: an object is deleted
// by Expire exactly when the store's clock has advanced Retention past the
// first Expire that saw it terminal at its current version — never before,
// never missed.
func TestReview2RetentionModel(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		review2RetentionRun(t, seed)
	}
}

func review2RetentionRun(t *testing.T, seed uint64) {
	const window = 10 * time.Second
	rng := rand.New(rand.NewPCG(seed, 99))
	dir := t.TempDir()
	mod := func(o *Options) { o.Retention = window; o.Limits.MaxOps = 3 } // several expiry txns per Expire
	s := openTest(t, dir, mod)
	defer func() { s.Close() }()
	ctx := context.Background()

	type key struct {
		kind omegav1.ObjectKind
		uid  uuid.UUID
	}
	// Model: for each terminal object at its current version, the store
	// clock at the first Expire that saw it (nil: not yet seen).
	seen := map[key]*int64{}
	var clock int64
	started := false
	var prev time.Time
	tickModel := func(now time.Time) {
		if !started {
			clock, started = now.UnixNano(), true
		} else if d := now.Sub(prev); d > 0 {
			clock += int64(d)
		}
		prev = now
	}
	wall := time.Unix(1_800_000_000, 0)
	nextID := uint32(0)
	var liveJobs []uuid.UUID
	totalDeleted := 0
	defer func() { t.Logf("seed %d: %d deleted by Expire", seed, totalDeleted) }()
	for step := 0; step < 300; step++ {
		switch rng.IntN(8) {
		case 7: // a client deletes a terminal task and recreates it (same uid), finished
			var cands []uuid.UUID
			s.Snapshot().RangeTasks(func(x *txn.Task) bool { cands = append(cands, x.UID); return true })
			if len(cands) == 0 {
				continue
			}
			sort.Slice(cands, func(i, j int) bool { return cands[i].String() < cands[j].String() })
			u := cands[rng.IntN(len(cands))]
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, u, 0)}})
			delete(seen, key{omegav1.ObjectKind_OBJECT_KIND_TASK, u})
			if rng.IntN(2) == 0 {
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1))}})
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 0, "")}})
				seen[key{omegav1.ObjectKind_OBJECT_KIND_TASK, u}] = nil
			}
		case 0, 1: // a task finishes
			u := testUID(uidTask, 201, nextID)
			nextID++
			mustCommitAll(t, s, &txn.Txn{UnixNanos: rng.Int64(), Ops: []txn.Op{
				txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
				txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
			}})
			seen[key{omegav1.ObjectKind_OBJECT_KIND_TASK, u}] = nil
		case 2: // a job is created finished, or an existing one put again
			var u uuid.UUID
			var op txn.Op
			finished := rng.IntN(2) == 0
			p := func(u uuid.UUID) *omegav1.Job {
				j := jobProto(u, "j", 1)
				if finished {
					j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_KILLED}
				}
				return j
			}
			if len(liveJobs) > 0 && rng.IntN(2) == 0 {
				u = liveJobs[rng.IntN(len(liveJobs))]
				if _, ok := s.Snapshot().Job(u); !ok {
					continue
				}
				op = txn.PutJob(p(u), 0)
			} else {
				u = testUID(uidJob, 201, nextID)
				nextID++
				liveJobs = append(liveJobs, u)
				op = txn.CreateJob(p(u))
			}
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{op}})
			k := key{omegav1.ObjectKind_OBJECT_KIND_JOB, u}
			if finished {
				seen[k] = nil // a new version: seen anew
			} else {
				delete(seen, k)
			}
		case 3: // wall time goes forward by up to 3 windows, or back a little
			if rng.IntN(4) == 0 {
				wall = wall.Add(-time.Duration(rng.IntN(20)) * time.Second)
			} else {
				wall = wall.Add(time.Duration(rng.Int64N(int64(3 * window))))
			}
			fallthrough
		case 4, 5:
			now := wall
			tickModel(now)
			for _, v := range seen {
				if v == nil {
					continue
				}
			}
			for k, v := range seen {
				if v == nil {
					c := clock
					seen[k] = &c
				}
			}
			n, err := s.Expire(ctx, now)
			if err != nil {
				t.Fatalf("seed %d step %d: Expire: %v", seed, step, err)
			}
			want := 0
			snap := s.Snapshot()
			keys := make([]key, 0, len(seen))
			for k := range seen {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool { return keys[i].uid.String() < keys[j].uid.String() })
			for _, k := range keys {
				at := seen[k]
				due := clock-*at >= int64(window)
				var present bool
				if k.kind == omegav1.ObjectKind_OBJECT_KIND_TASK {
					_, present = snap.Task(k.uid)
				} else {
					_, present = snap.Job(k.uid)
				}
				switch {
				case due && present:
					t.Errorf("seed %d step %d: %s %s seen at %d, clock %d: due but not expired", seed, step, k.kind, k.uid, *at, clock)
				case !due && !present:
					t.Errorf("seed %d step %d: %s %s seen at %d, clock %d: expired EARLY", seed, step, k.kind, k.uid, *at, clock)
				}
				if due {
					want++
					delete(seen, k)
				}
			}
			totalDeleted += n
			if n != want {
				t.Errorf("seed %d step %d: Expire deleted %d, model %d", seed, step, n, want)
			}
			if t.Failed() {
				return
			}
		case 6: // reopen: everything terminal is seen anew; the clock restarts
			if rng.IntN(5) != 0 {
				continue
			}
			s.Close()
			s = openTest(t, dir, mod)
			started = false
			for k := range seen {
				seen[k] = nil
			}
		}
	}
}

// Expire's transactions are bounded by MaxTxnBytes with a per-deletion
// estimate: at the smallest limits the store accepts, every expiry
// transaction must still be accepted (it would otherwise fail forever).
func TestReview2RetentionSmallestLimits(t *testing.T) {
	mod := func(o *Options) {
		o.Retention = 0
		o.Limits = txn.Limits{MaxOps: 1 << 20, MaxStringBytes: txn.MinStringBytes, MaxObjectBytes: txn.MinObjectBytes, MaxTxnBytes: txn.MinObjectBytes}
	}
	s := openTest(t, t.TempDir(), mod)
	defer s.Close()
	var ops []txn.Op
	for i := range 200 {
		u := testUID(uidTask, 202, uint32(i))
		p := &omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: u.String()}}
		ops = append(ops, txn.CreateTask(p), txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 0, ""))
		if len(ops) >= 8 {
			mustCommitAll(t, s, &txn.Txn{Ops: ops})
			ops = nil
		}
	}
	// A store clock near the end of int64 time: the expiry transactions
	// carry it (UnixNanos: ten-byte varint) and a large view revision.
	n, err := s.Expire(context.Background(), time.Unix(0, 1<<63-1))
	if err != nil || n != 200 {
		t.Fatalf("Expire at the smallest limits: %d, %v", n, err)
	}
}

// errors are typed: keep errors imported.
var _ = errors.Is

// The store's commit path: a PutMachine that conflicts (new capacity below
// the allocation) is answered with a detail that prints the machine's
// allocation, every extended resource name in full. The cost is paid under
// the commit lock, per operation, up to MaxOps (100,000) times ~1 MiB.
func TestReview2CommitResultAmplification(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	lim := txn.DefaultLimits()
	m0, tk := testUID(uidMachine, 203, 0), testUID(uidTask, 203, 0)
	ext := map[string]int64{}
	for i := range 15 {
		ext[string(rune('a'+i))+string(make([]byte, lim.MaxStringBytes-1))] = 1
	}
	mp := machineProto(m0, 1, 1)
	mp.Spec.Capacity.Extended = ext
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(mp), txn.CreateTask(taskProto(tk, uuid.Nil, 0, 0))}})
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.Claim(tk, m0, txn.Resources{CPU: 1, Memory: 1, Ext: ext}, version(t, s, tk))}})
	const n = 40
	var ops []txn.Op
	for range n {
		ops = append(ops, txn.PutMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: m0.String()}, Spec: &omegav1.MachineSpec{}}, 0))
	}
	tx := &txn.Txn{Ops: ops}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := s.Commit(context.Background(), tx)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	detail := 0
	for _, o := range r.Outcomes {
		detail += len(o.Detail)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte transaction: %d bytes of outcome details, %d bytes allocated by Commit; at MaxOps %d: ~%d GiB",
		tx.WireSize(), detail, alloc, lim.MaxOps, uint64(detail)/n*uint64(lim.MaxOps)>>30)
	if detail > txn.MaxWireBytes {
		t.Errorf("BROKEN: a %d-byte transaction gets %d bytes of result (MaxWireBytes %d)", tx.WireSize(), detail, txn.MaxWireBytes)
	}
}
