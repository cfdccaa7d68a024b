package store

// The store's promises about hostile input: unknown fields that shadow known
// ones, strings past the limit carried in unknown bytes, nil elements,
// options at their extremes, the size of a result. Each commits, then checks
// the typed error, the snapshot, watchers, invariants, and a reopen.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

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

// The error, if any, must be typed.
func typedErr(err error) bool {
	for _, e := range append(badInput, ErrRejected) {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// acceptedReopensEqual commits ops (accepted or rejected, either is
// fine), then reopens and compares.
func acceptedReopensEqual(t *testing.T, setup []txn.Op, ops []txn.Op) {
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
	d, err := reopenDiff(t, s, dir, s.Snapshot())
	if err != nil {
		t.Fatalf("acknowledged commit, reopen fails: %v", err)
	}
	if d != "" {
		t.Fatalf("reopened state differs from the acknowledged one: %s", d)
	}
}

// commitThenWatchListReopen commits ops to a fresh durable store, then reports: the
// commit error, the state before close, and the reopen error / diff. It
// also feeds the committed write sets through the wire as a remote watcher
// would (WriteSet.Proto, marshal, WriteSetFromProto, Apply) and lists the
// state in chunks (SnapshotChunks / SnapshotReader), checking invariants.
func commitThenWatchListReopen(t *testing.T, setup, ops []txn.Op) {
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
		if !typedErr(err) {
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
		t.Errorf("a remote watcher's copy of an acknowledged state violates the invariants: %v", err)
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
		t.Errorf("listing an acknowledged state: %v", err)
	} else if _, err := sr.Finish(); err != nil {
		t.Errorf("a remote client cannot list an acknowledged state: %v", err)
	}

	d, err := reopenDiff(t, s, dir, after)
	if err != nil {
		t.Fatalf("acknowledged commit, the store no longer opens: %v", err)
	}
	if d != "" {
		t.Errorf("acknowledged state reopens different: %s", d)
	}
}

// TestUnknownFieldsShadowingKnownOnes: unknown bytes that decode as a known
// field of their message (a negative capacity, a smaller spec, a phase) are
// refused, or stored so that a reopen reads the state the commit
// acknowledged: they are never merged into the checked fields on reopen.
func TestUnknownFieldsShadowingKnownOnes(t *testing.T) {
	m0 := testUID(uidMachine, 50, 0)
	t0u := testUID(uidTask, 50, 0)
	j0 := testUID(uidJob, 50, 0)

	t.Run("machine capacity cpu negative via unknown on Resources", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, -1)))
		acceptedReopensEqual(t, nil, []txn.Op{txn.CreateMachine(p)})
	})
	t.Run("machine capacity shrunk via unknown on MachineSpec, task placed", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		small, _ := proto.Marshal(&omegav1.Resources{CpuMillis: 1, MemoryBytes: 1})
		p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(1, small)))
		acceptedReopensEqual(t, nil, []txn.Op{
			txn.CreateMachine(p),
			txn.CreateTask(taskProto(t0u, uuid.Nil, 500, 500)),
			txn.Claim(t0u, m0, res(500, 500), 0),
		})
	})
	t.Run("task spec resources negative via unknown", func(t *testing.T) {
		p := taskProto(t0u, uuid.Nil, 1, 1)
		p.Spec.Resources.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(2, -5)))
		acceptedReopensEqual(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("task owner reference uid not a uuid via unknown", func(t *testing.T) {
		p := taskProto(t0u, j0, 1, 1)
		p.Meta.OwnerReferences[0].ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(2, []byte("zzz"))))
		acceptedReopensEqual(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("job replicas negative via unknown", func(t *testing.T) {
		p := jobProto(j0, "j", 1)
		p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(5, -1)))
		acceptedReopensEqual(t, nil, []txn.Op{txn.CreateJob(p)})
	})
	t.Run("job phase changed via unknown", func(t *testing.T) {
		p := jobProto(j0, "j", 1)
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING}
		p.Status.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, int64(omegav1.JobPhase_JOB_PHASE_SUCCEEDED))))
		acceptedReopensEqual(t, nil, []txn.Op{txn.CreateJob(p)})
	})
	t.Run("machine put with capacity via unknown", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 1)))
		acceptedReopensEqual(t, []txn.Op{
			txn.CreateMachine(machineProto(m0, 1000, 1000)),
			txn.CreateTask(taskProto(t0u, uuid.Nil, 500, 500)),
			txn.Claim(t0u, m0, res(500, 500), 0),
		}, []txn.Op{txn.PutMachine(p, 0)})
	})
	t.Run("extended negative via unknown map entry", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		entry := append(bytesField(1, []byte("gpu")), varintField(2, -3)...)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(3, entry)))
		acceptedReopensEqual(t, nil, []txn.Op{txn.CreateMachine(p)})
	})
}

// TestUnknownZeroShadowingAKnownField: unknown bytes that encode a known
// proto3 scalar field at its zero value ("" / 0 / false) decode into a fresh
// message as an unset field, yet on reopen, and on the wire to watchers and
// listers, they would decode as the known field (last one wins). The store
// refuses them with a typed error, or what it acknowledges reopens, crosses
// the watch and lists with its invariants whole.
func TestUnknownZeroShadowingAKnownField(t *testing.T) {
	m0 := testUID(uidMachine, 200, 0)
	t0 := testUID(uidTask, 200, 0)
	j0 := testUID(uidJob, 200, 0)

	t.Run("capacity cpu zeroed under a placed task", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 0))) // cpu_millis = 0
		commitThenWatchListReopen(t, nil, []txn.Op{
			txn.CreateMachine(p),
			txn.CreateTask(taskProto(t0, uuid.Nil, 500, 500)),
			txn.Claim(t0, m0, res(500, 500), 0),
		})
	})
	t.Run("capacity zeroed by a put under a placed task", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(2, 0))) // memory_bytes = 0
		commitThenWatchListReopen(t, []txn.Op{
			txn.CreateMachine(machineProto(m0, 1000, 1000)),
			txn.CreateTask(taskProto(t0, uuid.Nil, 500, 500)),
			txn.Claim(t0, m0, res(500, 500), 0),
		}, []txn.Op{txn.PutMachine(p, 0)})
	})
	t.Run("owner reference uid emptied", func(t *testing.T) {
		p := taskProto(t0, j0, 1, 1)
		p.Meta.OwnerReferences[0].ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(2, nil))) // uid = ""
		commitThenWatchListReopen(t, []txn.Op{txn.CreateJob(jobProto(j0, "j", 1))}, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("owner reference controller cleared", func(t *testing.T) {
		j1 := testUID(uidJob, 200, 1)
		p := taskProto(t0, j0, 1, 1)
		p.Meta.OwnerReferences = append(p.Meta.OwnerReferences, &omegav1.OwnerReference{Kind: "Job", Uid: j1.String()})
		p.Meta.OwnerReferences[0].ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(4, 0))) // controller = false
		commitThenWatchListReopen(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("finished job's phase zeroed", func(t *testing.T) {
		p := jobProto(j0, "j", 1)
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_SUCCEEDED}
		p.Status.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 0)))
		commitThenWatchListReopen(t, nil, []txn.Op{txn.CreateJob(p)})
	})
	t.Run("task request zeroed", func(t *testing.T) {
		p := taskProto(t0, uuid.Nil, 700, 700)
		p.Spec.Resources.ProtoReflect().SetUnknown(protoreflect.RawFields(varintField(1, 0)))
		commitThenWatchListReopen(t, nil, []txn.Op{txn.CreateTask(p)})
	})
	t.Run("failure domain emptied", func(t *testing.T) {
		p := machineProto(m0, 1000, 1000)
		p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(bytesField(2, nil)))
		commitThenWatchListReopen(t, nil, []txn.Op{txn.CreateMachine(p)})
	})
}

// TestStringLimitCoversUnknownBytes: MaxStringBytes is "the longest string
// anywhere in a transaction", a string carried in unknown bytes that decode
// as a known string field included: such a task is refused, so no reopen
// finds a known field over the limit.
func TestStringLimitCoversUnknownBytes(t *testing.T) {
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
		t.Errorf("accepted; after reopen spec.command.path is %d bytes, MaxStringBytes 100", len(got.Spec.GetCommand().GetPath()))
	} else {
		s.Close()
	}
}

// TestNilElementsInRepeatedFields: a nil element in a repeated message
// field panics neither the transaction's encoding (WireSize agrees with
// proto.Size) nor Commit nor a reopen.
func TestNilElementsInRepeatedFields(t *testing.T) {
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
				acceptedReopensEqual(t, nil, []txn.Op{op})
			}()
		})
	}
}

// TestOptionsAtTheirExtremes: Options{} keeps its zero Retention (not the
// default, as documented: everything expires at the first Expire that sees
// it), and options at their extremes neither panic Validate nor Open: what
// Validate refuses Open refuses with the same message, and what it takes
// Open takes, bar a Dir that is a file, which only opening finds.
func TestOptionsAtTheirExtremes(t *testing.T) {
	o := Options{Durability: DurabilityNone, Logger: quietLogger()}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	tk := testUID(uidTask, 55, 0)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1))}})
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.SetStatus(tk, omegav1.TaskState_TASK_STATE_FAILED, 0, "")}})
	if n, err := s.Expire(context.Background(), time.Unix(1_700_000_000, 0)); n != 1 || err != nil {
		t.Errorf("Options{} (Retention 0): first Expire deleted %d (err %v), want the finished task", n, err)
	}
	s.Close()

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		mod   func(*Options)
		valid bool // Validate takes it
		opens bool // Open takes it
	}{
		{"MemTableSize 1<<62", func(o *Options) { o.MemTableSize = 1 << 62 }, false, false},
		{"MaxTxnBytes 1", func(o *Options) { o.Limits.MaxTxnBytes = 1 }, false, false},
		{"MaxObjectBytes > MaxTxnBytes", func(o *Options) { o.Limits.MaxObjectBytes = 30 << 20 }, false, false},
		{"HistoryChanges MaxInt", func(o *Options) { o.HistoryChanges = int(^uint(0) >> 1) }, true, true},
		{"Retention max", func(o *Options) { o.Retention = time.Duration(1<<63 - 1) }, true, true},
		{"Durability negative", func(o *Options) { o.Durability = -1 }, false, false},
		{"Dir is a file", func(o *Options) { o.Dir = file }, true, false},
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
						t.Fatalf("Open panics: %v", r)
					}
				}()
				s, err := Open(o)
				oerr = err
				if err == nil {
					s.Close()
				}
			}()
			t.Logf("Validate: %v; Open: %v", verr, oerr)
			if (verr == nil) != tc.valid || (oerr == nil) != tc.opens {
				t.Fatalf("Validate: %v; Open: %v; want valid %t, opens %t", verr, oerr, tc.valid, tc.opens)
			}
			if verr != nil && oerr.Error() != verr.Error() {
				t.Errorf("Open refuses with %q, Validate with %q", oerr, verr)
			}
		})
	}
}

// TestCommitResultFitsTheWire: forty PutMachines that each conflict (a
// capacity below the allocation, on a machine with fifteen extended resources
// of the longest name) are answered with details that together stay within
// MaxWireBytes: a result grows with the transaction, not with the state
// (its cost is paid under the commit lock, per operation, up to MaxOps).
func TestCommitResultFitsTheWire(t *testing.T) {
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
		t.Errorf("a %d-byte transaction gets %d bytes of result (MaxWireBytes %d)", tx.WireSize(), detail, txn.MaxWireBytes)
	}
}
