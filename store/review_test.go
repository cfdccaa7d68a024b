package store

// Adversarial tests from an independent review of the bad-input promises
// (2026-12-01): each failed on the code before the fixes it names and now
// holds the store to the promise. They commit, check the typed error, the
// snapshot, watchers, invariants, and reopen.

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
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// varintField encodes field num as a varint of v (int64, two's complement).
func varintField(num protowire.Number, v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), uint64(v))
}

func bytesField(num protowire.Number, b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
}

// reopenCheck commits ops (must be accepted or rejected), then reopens and
// compares.
func reviewAcceptThenReopen(t *testing.T, setup []txn.Op, ops []txn.Op) {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	ctx := context.Background()
	if len(setup) > 0 {
		mustCommitAll(t, s, &txn.Txn{Ops: setup})
	}
	before := s.Snapshot()
	r, err := s.Commit(ctx, &txn.Txn{ViewRevision: before.Revision(), Ops: ops})
	if err != nil {
		t.Logf("rejected (fine): %v", err)
		if s.Snapshot() != before {
			t.Fatal("rejected but changed")
		}
		s.Close()
		return
	}
	t.Logf("accepted: %d committed at %d", r.Committed, r.Revision)
	after := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(dir)
	o.Logger = quietLogger()
	s2, err := Open(o)
	if err != nil {
		t.Fatalf("PROMISE 2 BROKEN: acknowledged commit, reopen fails: %v", err)
	}
	defer s2.Close()
	if d := diffStates(after, s2.Snapshot(), true); d != "" {
		t.Fatalf("PROMISE 2 BROKEN: reopened state differs: %s", d)
	}
}

// Unknown fields that decode as KNOWN fields of the message pass validation
// (they "decode"), are stored verbatim after the known fields, and on reopen
// are merged into the known fields.
func TestReviewUnknownShadowsKnown(t *testing.T) {
	m0 := testUID(uidMachine, 50, 0)
	t0u := testUID(uidTask, 50, 0)
	j0 := testUID(uidJob, 50, 0)

	t.Run("machine capacity cpu negative via unknown on Resources", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, -1)))
		reviewAcceptThenReopen(t, nil, []txn.Op{txn.CreateMachine(p)})
	})
	t.Run("machine capacity shrunk via unknown on MachineSpec, task placed", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		small, _ := proto.Marshal(&omegav1.Resources{CpuMillis: 1, MemoryBytes: 1})
		p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(1, small)))
		reviewAcceptThenReopen(t, nil, []txn.Op{
			txn.CreateMachine(p),
			txn.CreateTask(taskProto(t0u, uuid.Nil, 500, 500)),
			txn.Claim(t0u, m0, res(500, 500), 0),
		})
	})
	t.Run("task spec resources negative via unknown", func(t *testing.T) {
		p := taskProto(t0u, uuid.Nil, 1, 1)
		p.Spec.Resources.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(2, -5)))
		reviewAcceptThenReopen(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("task owner reference uid not a uuid via unknown", func(t *testing.T) {
		p := taskProto(t0u, j0, 1, 1)
		p.Meta.OwnerReferences[0].ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(2, []byte("zzz"))))
		reviewAcceptThenReopen(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("job replicas negative via unknown", func(t *testing.T) {
		p := jobProto(j0, "j", 1)
		p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(5, -1)))
		reviewAcceptThenReopen(t, nil, []txn.Op{txn.CreateJob(p)})
	})
	t.Run("job phase changed via unknown", func(t *testing.T) {
		p := jobProto(j0, "j", 1)
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING}
		p.Status.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, int64(omegav1.JobPhase_JOB_PHASE_SUCCEEDED))))
		reviewAcceptThenReopen(t, nil, []txn.Op{txn.CreateJob(p)})
	})
	t.Run("machine put with capacity via unknown", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 1)))
		reviewAcceptThenReopen(t, []txn.Op{
			txn.CreateMachine(machineProto(m0, 1000, 1000)),
			txn.CreateTask(taskProto(t0u, uuid.Nil, 500, 500)),
			txn.Claim(t0u, m0, res(500, 500), 0),
		}, []txn.Op{txn.PutMachine(p, 0)})
	})
	t.Run("extended negative via unknown map entry", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		entry := append(bytesField(1, []byte("gpu")), varintField(2, -3)...)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(3, entry)))
		reviewAcceptThenReopen(t, nil, []txn.Op{txn.CreateMachine(p)})
	})
}

// The error, if any, must be typed.
func reviewTyped(err error) bool {
	for _, e := range append(badInput, ErrRejected) {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// A Claim's Resources.Ext map is kept by reference in the committed task
// (Task.Claimed) and in the write set: the caller mutating its own map after
// Commit returns rewrites the store's state.
func TestReviewClaimExtMapShared(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, func(o *Options) { o.CheckInvariants = false })
	m0 := testUID(uidMachine, 51, 0)
	tk := testUID(uidTask, 51, 0)
	mp := machineProto(m0, 1000, 1000)
	mp.Spec.Capacity.Extended = map[string]int64{"gpu": 2}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(mp), txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1))}})
	ext := map[string]int64{"gpu": 1}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{txn.Claim(tk, m0, txn.Resources{CPU: 1, Ext: ext}, version(t, s, tk))}})
	snap := s.Snapshot()
	ext["gpu"] = 1000 // the caller reuses its map
	got, _ := snap.Task(tk)
	if got.Claimed.Ext["gpu"] != 1 {
		t.Errorf("SHARED: the published snapshot's task now claims gpu=%d (caller's later write)", got.Claimed.Ext["gpu"])
	}
	if err := txn.CheckInvariants(snap); err != nil {
		t.Errorf("PROMISE 4 BROKEN after caller mutation: %v", err)
	}
	// Freeing the task subtracts the mutated amount from the machine.
	r, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
		txn.SetStatus(tk, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "")}})
	t.Logf("set-status: %+v err=%v", r.Outcomes, err)
	m, _ := s.Snapshot().Machine(m0)
	t.Logf("machine allocation after release: %v", m.Allocated)
	if m.Allocated.Ext["gpu"] != 0 {
		t.Errorf("allocation drift: machine allocated gpu=%d after its only task finished", m.Allocated.Ext["gpu"])
	}
	if err := txn.CheckInvariants(s.Snapshot()); err != nil {
		t.Errorf("invariants after the release: %v", err)
	}
	// The drift is now free room: a task claiming 1001 GPUs fits on a 2-GPU machine.
	t2 := testUID(uidTask, 51, 1)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(t2, uuid.Nil, 1, 1))}})
	r, err = s.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
		txn.Claim(t2, m0, txn.Resources{Ext: map[string]int64{"gpu": 1001}}, version(t, s, t2))}})
	t.Logf("claim of 1001 gpus on a 2-gpu machine: %+v err=%v", r.Outcomes, err)
	if err == nil && r.Committed == 1 {
		t.Errorf("PROMISE 4 BROKEN: machine with gpu capacity 2 holds a task claiming 1001 gpus")
	}
	s.Close()
}

// MaxStringBytes is "the longest string anywhere in a transaction", but a
// string carried in unknown bytes that decode as a known string field is not
// measured; after a reopen it is a known field over the limit.
func TestReviewStringLimitViaUnknown(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.Limits.MaxStringBytes = 100 }
	s := openTest(t, dir, mod)
	tk := testUID(uidTask, 52, 0)
	p := taskProto(tk, uuid.Nil, 1, 1)
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'x'
	}
	p.Spec.Command.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(1, long))) // path
	_, err := s.Commit(context.Background(), &txn.Txn{Ops: []txn.Op{txn.CreateTask(p)}})
	if err == nil {
		s.Close()
		s = openTest(t, dir, mod)
		defer s.Close()
		got, _ := s.Snapshot().Task(tk)
		t.Errorf("PROMISE 5 BROKEN: accepted; after reopen spec.command.path is %d bytes, MaxStringBytes 100", len(got.Spec.GetCommand().GetPath()))
	} else {
		s.Close()
	}
}

// Promise 6: ErrInUse "when the caller's view saw them". The view saw the
// task on the machine; after the view only the machine's agent address
// changed (or another task on it finished). The delete is answered with a
// MACHINE_CHANGED conflict, not ErrInUse.
func TestReviewDeleteMachineSeenTasks(t *testing.T) {
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
				t.Errorf("PROMISE 6: the view saw task %s on the machine (still placed, placed before the view); got err=%v outcomes=%+v, want ErrInUse", t1, err, r.Outcomes)
			}
		})
	}
}

type flakyPolicy struct{ n *int }

func (flakyPolicy) Name() string { return "flaky" }
func (p flakyPolicy) Admit(_ *txn.State, tx *txn.Txn) error {
	if tx.Component == RetentionComponent {
		*p.n++
		if *p.n == 1 {
			return ErrRejected // a transient refusal (e.g. a quota check, a leader change)
		}
	}
	return nil
}

// Expire pops the due entries before committing their deletions: if that
// commit fails (a policy refusal, a limit that the expiry transaction
// exceeds), the entries are gone and the objects never expire (until a
// reopen).
func TestReviewRetentionLosesEntriesOnFailedCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(o *Options)
	}{
		{"policy refuses once", func(o *Options) { n := 0; o.Policy = flakyPolicy{&n} }},
		{"MaxTxnBytes below what 30 deletions need", func(o *Options) { o.Limits.MaxTxnBytes, o.Limits.MaxObjectBytes = 1024, 1024 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := func(o *Options) { o.Retention = time.Minute; tc.mod(o) }
			s := openTest(t, t.TempDir(), mod)
			defer s.Close()
			tk := testUID(uidTask, 54, 0)
			for i := range 30 {
				u := testUID(uidTask, 54, uint32(i))
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1))}})
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 0, "")}})
			}
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			if n, err := s.Expire(ctx, t0); err != nil || n != 0 {
				t.Fatalf("first Expire: %d %v", n, err)
			}
			n, err := s.Expire(ctx, t0.Add(2*time.Minute))
			t.Logf("Expire at +2m: %d, %v", n, err)
			for i := 3; i < 10; i++ {
				n, err = s.Expire(ctx, t0.Add(time.Duration(i)*time.Minute))
				if n > 0 {
					break
				}
			}
			if _, ok := s.Snapshot().Task(tk); ok {
				t.Errorf("PROMISE 3: terminal task still present at +9m with Retention 1m (last Expire: %d, %v)", n, err)
			}
		})
	}
}

func TestReviewOptions(t *testing.T) {
	// Zero Retention is documented as "Default 15 minutes", and Open fills
	// other zero fields (HistoryChanges, Limits) with their defaults; a zero
	// Retention is kept: everything expires at the first Expire that sees it.
	o := Options{Durability: DurabilityNone, Logger: quietLogger()}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	tk := testUID(uidTask, 55, 0)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1))}})
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.SetStatus(tk, omegav1.TaskState_TASK_STATE_FAILED, 0, "")}})
	n, err := s.Expire(context.Background(), time.Unix(1_700_000_000, 0))
	t.Logf("Options{} (Retention 0): first Expire deleted %d (err %v)", n, err)
	s.Close()

	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"MemTableSize 1<<62", func(o *Options) { o.MemTableSize = 1 << 62 }},
		{"MaxTxnBytes 1", func(o *Options) { o.Limits.MaxTxnBytes = 1 }},
		{"MaxObjectBytes > MaxTxnBytes", func(o *Options) { o.Limits.MaxObjectBytes = 30 << 20 }},
		{"HistoryChanges MaxInt", func(o *Options) { o.HistoryChanges = int(^uint(0) >> 1) }},
		{"Retention max", func(o *Options) { o.Retention = time.Duration(1<<63 - 1) }},
		{"Durability negative", func(o *Options) { o.Durability = -1 }},
		{"Dir is a file", func(o *Options) { o.Dir = "/etc/hostname" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions(t.TempDir())
			o.Logger = quietLogger()
			tc.mod(&o)
			verr := o.Validate()
			var oerr error
			func() {
				defer func() {
					if r := recover(); r != nil {
						oerr = errors.New("PANIC in Open: " + func() string { s, _ := r.(string); return s }())
					}
				}()
				s, err := Open(o)
				oerr = err
				if err == nil {
					s.Close()
				}
			}()
			t.Logf("Validate: %v; Open: %v", verr, oerr)
		})
	}
}

// One Expire with a zero time.Time (an uninitialised clock reading; its
// UnixNano wraps to about year 1754) between two good ones: the store's clock
// counts the way back up as time passed, so (a) what was seen one second ago
// expires at once, and (b) the clock saturates at the end of int64 time and
// stays there: nothing seen afterwards ever expires (until a reopen).
func TestReviewRetentionZeroTimeStallsForever(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	ctx := context.Background()
	finish := func(u uuid.UUID) {
		mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
			txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
			txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
		}})
	}
	T := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	a, b := testUID(uidTask, 56, 0), testUID(uidTask, 56, 1)
	finish(a)
	s.Expire(ctx, T) // sees a at T
	s.Expire(ctx, time.Time{})
	n, _ := s.Expire(ctx, T.Add(time.Second))
	if n != 0 {
		t.Errorf("PROMISE 3: task seen terminal 1s ago (window 1m) expired after a clock glitch (deleted %d)", n)
	}
	finish(b)
	s.Expire(ctx, T.Add(2*time.Second)) // sees b
	for _, d := range []time.Duration{time.Hour, 24 * time.Hour, 365 * 24 * time.Hour} {
		s.Expire(ctx, T.Add(d))
	}
	if _, ok := s.Snapshot().Task(b); ok {
		t.Errorf("PROMISE 3: retention stalled: task seen terminal at T+2s still present at T+1y (window 1m)")
	}
}

// reviewHarness commits transactions to a durable store and after each one
// checks: typed error + nothing changed + nothing for watchers, or a good
// commit; invariants; reopen equals.
type reviewHarness struct {
	t   *testing.T
	dir string
	mod func(*Options)
	s   *Store
}

func newReviewHarness(t *testing.T, mod func(*Options)) *reviewHarness {
	h := &reviewHarness{t: t, dir: t.TempDir(), mod: mod}
	h.s = openTest(t, h.dir, mod)
	t.Cleanup(func() { h.s.Close() })
	return h
}

func (h *reviewHarness) reopen() {
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
func (h *reviewHarness) do(name string, tx *txn.Txn, wantErr error) txn.Result {
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
		if !reviewTyped(err) {
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

func (h *reviewHarness) ver(u uuid.UUID) uint64 {
	x, ok := h.s.Snapshot().Task(u)
	if !ok {
		return 0
	}
	return x.Version
}

func TestReviewSequences(t *testing.T) {
	const maxI = int64(^uint64(0) >> 1)
	h := newReviewHarness(t, nil)
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

// reviewBadTxns returns bad transactions against the state built by
// reviewGoodSetup (typed errors expected).
func reviewBadTxns(m0, pending, placed uuid.UUID, pv, av, rev uint64) []*txn.Txn {
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

func TestReviewCrashAfterBadInput(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := DefaultOptions("db")
	o.FS = fs
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
	for i, tx := range reviewBadTxns(m0, pending, placed, pv, av, before.Revision()) {
		r, err := s.Commit(context.Background(), tx)
		if err == nil {
			t.Errorf("bad txn %d: accepted: %+v", i, r.Outcomes)
			continue
		}
		if !reviewTyped(err) {
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
		o2.FS = clone
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
func TestReviewConcurrentBadAndGood(t *testing.T) {
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
			bad := reviewBadTxns(m0, pending, placed, pv, av, 0)
			for i := range 200 {
				tx := bad[(i+g)%len(bad)]
				if _, err := s.Commit(ctx, tx); err == nil || !reviewTyped(err) {
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

// The caller reusing its claim's Ext map after Commit races with every
// reader of the store's snapshot (a watcher, a scheduler's view).
func TestReviewClaimExtMapRace(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.CheckInvariants = false })
	defer s.Close()
	m0 := testUID(uidMachine, 63, 0)
	tk := testUID(uidTask, 63, 0)
	mp := machineProto(m0, 1000, 1000)
	mp.Spec.Capacity.Extended = map[string]int64{"gpu": 8}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(mp), txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1))}})
	ext := map[string]int64{"gpu": 1}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.Claim(tk, m0, txn.Resources{Ext: ext}, version(t, s, tk))}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			x, _ := s.Snapshot().Task(tk)
			_ = x.Claimed.String() // a reader of the published state
		}
	}()
	for i := range 100 {
		ext["gpu"] = int64(i) // the caller, building its next claim in the same map
	}
	<-done
}

// nil elements in repeated message fields.
func TestReviewNilElements(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func() txn.Op
	}{
		{"task constraint nil", func() txn.Op {
			p := taskProto(testUID(uidTask, 64, 0), uuid.Nil, 1, 1)
			p.Spec.Constraints = []*omegav1.Constraint{nil}
			return txn.CreateTask(p)
		}},
		{"task owner ref nil", func() txn.Op {
			p := taskProto(testUID(uidTask, 64, 1), uuid.Nil, 1, 1)
			p.Meta.OwnerReferences = []*omegav1.OwnerReference{nil}
			return txn.CreateTask(p)
		}},
		{"job template constraint nil", func() txn.Op {
			p := jobProto(testUID(uidJob, 64, 0), "j", 1)
			p.Spec.Template.Constraints = []*omegav1.Constraint{nil}
			return txn.CreateJob(p)
		}},
		{"machine owner ref nil", func() txn.Op {
			p := machineProto(testUID(uidMachine, 64, 0), 1, 1)
			p.Meta.OwnerReferences = []*omegav1.OwnerReference{nil, {Kind: "x"}}
			return txn.CreateMachine(p)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var op txn.Op
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("PANIC building/validating: %v", r)
					}
				}()
				op = tc.op()
				tx := &txn.Txn{Ops: []txn.Op{op}}
				if ws, ps := tx.WireSize(), proto.Size(tx.Proto()); ws != ps {
					t.Errorf("WireSize %d != proto.Size %d", ws, ps)
				}
				_, merr := proto.Marshal(tx.Proto())
				t.Logf("proto.Marshal of the txn: %v", merr)
			}()
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("PANIC in Commit/reopen: %v", r)
					}
				}()
				reviewAcceptThenReopen(t, nil, []txn.Op{op})
			}()
		})
	}
}

func TestReviewRetentionExtremes(t *testing.T) {
	const maxD = time.Duration(1<<63 - 1)
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = maxD })
	defer s.Close()
	ctx := context.Background()
	u := testUID(uidTask, 65, 0)
	mustCommitAll(t, s, &txn.Txn{UnixNanos: -1 << 63, Ops: []txn.Op{
		txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)), txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, "")}})
	for _, now := range []time.Time{time.Unix(0, 0), time.Unix(0, 1<<62), time.Unix(0, 1<<63-2)} {
		n, err := s.Expire(ctx, now)
		t.Logf("Expire(%d): %d %v", now.UnixNano(), n, err)
	}
	// Clock started at 0: at MaxInt64-2 the elapsed is below MaxInt64: not due yet.
	if _, ok := s.Snapshot().Task(u); !ok {
		t.Errorf("expired before the window (max Duration) passed")
	}
	n, err := s.Expire(ctx, time.Unix(0, 1<<63-1))
	t.Logf("Expire(MaxInt64): %d %v", n, err)
	if _, ok := s.Snapshot().Task(u); ok {
		t.Errorf("not expired when exactly max Duration passed")
	}
}

// A wall clock stepped back one hour and corrected a minute later: the
// correction counts as an hour passed, so a task seen terminal 30s before
// the correction expires at once (window 15m).
func TestReviewRetentionStepBackThenCorrect(t *testing.T) {
	// Between times without a monotonic reading (a caller's own clock), a
	// step back then a correction ages everything by the step: documented
	// (retention.go). time.Now()'s readings carry one, and then a wall
	// clock stepped back and corrected is not seen at all: here the same
	// steps as Add on a monotonic reading, which Sub measures as they are.
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = 15 * time.Minute })
	defer s.Close()
	ctx := context.Background()
	T := time.Now()
	s.Expire(ctx, T)
	u := testUID(uidTask, 66, 0)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)), txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, "")}})
	s.Expire(ctx, T.Add(30*time.Second)) // sees u
	n, _ := s.Expire(ctx, T.Add(time.Minute))
	if n != 0 {
		t.Errorf("task seen terminal 30s ago expired with a 15m window")
	}
	if n, _ := s.Expire(ctx, T.Add(15*time.Minute+30*time.Second)); n != 1 {
		t.Errorf("task not expired a window after it was seen: %d", n)
	}
}
