package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// rejectPolicy refuses transactions from one component.
type rejectPolicy struct{ component string }

func (rejectPolicy) Name() string { return "reject" }
func (p rejectPolicy) Admit(_ *txn.State, tx *txn.Txn) error {
	if tx.Component == p.component {
		return fmt.Errorf("%w: component %q may not commit", ErrRejected, tx.Component)
	}
	return nil
}

// TestBadInput: every kind of bad transaction gets a typed error (errors.Is
// with the txn.Err* sentinels, an *txn.OpError naming the operation where
// one operation is at fault) and changes nothing: same revision, the very
// same snapshot, nothing for watchers, and nothing durable (reopen and
// compare).
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	const maxOps, maxString = 8, 100
	mod := func(o *Options) {
		o.Limits = txn.Limits{MaxOps: maxOps, MaxStringBytes: maxString, MaxObjectBytes: 1024, MaxTxnBytes: 1100}
		o.Policy = rejectPolicy{component: "intruder"}
	}
	s := openTest(t, dir, mod)
	ctx := context.Background()

	m0 := testUID(uidMachine, 0, 0)
	pending := testUID(uidTask, 0, 0)
	placed := testUID(uidTask, 0, 1)
	job := testUID(uidJob, 0, 0)
	mustCommitAll(t, s, &txn.Txn{Component: "setup", Ops: []txn.Op{
		txn.CreateMachine(machineProto(m0, 1000, 1000)),
		txn.CreateJob(jobProto(job, "j", 2)),
		txn.CreateTask(taskProto(pending, job, 10, 10)),
		txn.CreateTask(taskProto(placed, job, 10, 10)),
		txn.Claim(placed, m0, res(10, 10), 0),
	}})
	before := s.Snapshot()
	rev := before.Revision()
	pt, _ := before.Task(pending)
	at, _ := before.Task(placed)
	mv, _ := before.Machine(m0)
	unknown := testUID(uidTask, 9, 9)
	unknownM := testUID(uidMachine, 9, 9)
	fresh := testUID(uidTask, 1, 0)

	badTask := func(mut func(*omegav1.Task)) *omegav1.Task {
		p := taskProto(fresh, uuid.Nil, 1, 1)
		mut(p)
		return p
	}
	badMachine := func(mut func(*omegav1.Machine)) *omegav1.Machine {
		p := machineProto(testUID(uidMachine, 1, 0), 1, 1)
		mut(p)
		return p
	}
	tooMany := make([]txn.Op, maxOps+1)
	for i := range tooMany {
		tooMany[i] = txn.CreateTask(taskProto(testUID(uidTask, 2, uint32(i)), uuid.Nil, 1, 1))
	}

	for _, tc := range []struct {
		name  string
		tx    txn.Txn
		want  error
		opIdx int // index of the bad operation (an *txn.OpError); -1: a whole-transaction error
	}{
		{"claim of an unknown task", txn.Txn{Ops: []txn.Op{txn.Claim(unknown, m0, res(1, 1), 0)}}, txn.ErrNotFound, 0},
		{"claim on an unknown machine", txn.Txn{Ops: []txn.Op{txn.Claim(pending, unknownM, res(1, 1), pt.Version)}}, txn.ErrNotFound, 0},
		{"status of an unknown task", txn.Txn{Ops: []txn.Op{txn.SetStatus(unknown, omegav1.TaskState_TASK_STATE_RUNNING, 0, "")}}, txn.ErrNotFound, 0},
		{"evict of an unknown task", txn.Txn{Ops: []txn.Op{txn.ForceEvict(unknown, 0, "")}}, txn.ErrNotFound, 0},
		{"delete of an unknown job", txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, testUID(uidJob, 9, 9), 0)}}, txn.ErrNotFound, 0},
		{"delete of an unknown machine", txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, unknownM, 0)}}, txn.ErrNotFound, 0},
		{"put of an unknown machine", txn.Txn{Ops: []txn.Op{txn.PutMachine(machineProto(unknownM, 1, 1), 0)}}, txn.ErrNotFound, 0},
		{"put of an unknown job", txn.Txn{Ops: []txn.Op{txn.PutJob(jobProto(testUID(uidJob, 9, 9), "x", 1), 0)}}, txn.ErrNotFound, 0},
		{"task with a bad uid", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Meta.Uid = "not-a-uuid" }))}}, txn.ErrInvalid, 0},
		{"task with the nil uid", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Meta.Uid = uuid.Nil.String() }))}}, txn.ErrInvalid, 0},
		{"task with no meta", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Meta = nil }))}}, txn.ErrInvalid, 0},
		{"task with a bad owner uid", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) {
			p.Meta.OwnerReferences = []*omegav1.OwnerReference{{Kind: "Job", Uid: "zzz", Controller: true}}
		}))}}, txn.ErrInvalid, 0},
		{"task with negative memory", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Spec.Resources.MemoryBytes = -1 }))}}, txn.ErrInvalid, 0},
		{"machine with no meta", txn.Txn{Ops: []txn.Op{txn.CreateMachine(badMachine(func(p *omegav1.Machine) { p.Meta = nil }))}}, txn.ErrInvalid, 0},
		{"machine with no spec", txn.Txn{Ops: []txn.Op{txn.CreateMachine(badMachine(func(p *omegav1.Machine) { p.Spec = nil }))}}, txn.ErrInvalid, 0},
		{"machine with negative cpu", txn.Txn{Ops: []txn.Op{txn.CreateMachine(badMachine(func(p *omegav1.Machine) { p.Spec.Capacity.CpuMillis = -5 }))}}, txn.ErrInvalid, 0},
		{"machine with a negative extended resource", txn.Txn{Ops: []txn.Op{txn.CreateMachine(badMachine(func(p *omegav1.Machine) {
			p.Spec.Capacity.Extended = map[string]int64{"gpu": -1}
		}))}}, txn.ErrInvalid, 0},
		{"machine with an unknown state", txn.Txn{Ops: []txn.Op{txn.CreateMachine(badMachine(func(p *omegav1.Machine) { p.Status.State = 42 }))}}, txn.ErrInvalid, 0},
		{"job with negative replicas", txn.Txn{Ops: []txn.Op{txn.CreateJob(func() *omegav1.Job {
			j := jobProto(testUID(uidJob, 1, 0), "neg", 1)
			j.Spec.Replicas = -1
			return j
		}())}}, txn.ErrInvalid, 0},
		{"create with no object", txn.Txn{Ops: []txn.Op{{Kind: txn.OpCreate}}}, txn.ErrInvalid, 0},
		{"create with two objects", txn.Txn{Ops: []txn.Op{{Kind: txn.OpCreate, NewTask: taskProto(fresh, uuid.Nil, 1, 1), NewJob: jobProto(testUID(uidJob, 1, 0), "x", 1)}}}, txn.ErrInvalid, 0},
		{"put of a task", txn.Txn{Ops: []txn.Op{{Kind: txn.OpPut, NewTask: taskProto(pending, uuid.Nil, 1, 1)}}}, txn.ErrInvalid, 0},
		{"unknown operation", txn.Txn{Ops: []txn.Op{{Kind: 99}}}, txn.ErrInvalid, 0},
		{"delete of an unknown kind", txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind(77), pending, 0)}}, txn.ErrInvalid, 0},
		{"claim with negative cpu", txn.Txn{Ops: []txn.Op{txn.Claim(pending, m0, res(-1, 1), pt.Version)}}, txn.ErrInvalid, 0},
		{"claim with a negative extended resource", txn.Txn{Ops: []txn.Op{
			txn.Claim(pending, m0, txn.Resources{CPU: 1, Ext: map[string]int64{"gpu": -2}}, pt.Version),
		}}, txn.ErrInvalid, 0},
		{"status PENDING", txn.Txn{Ops: []txn.Op{txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_PENDING, at.Version, "")}}, txn.ErrInvalid, 0},
		{"RUNNING for an unplaced task", txn.Txn{Ops: []txn.Op{txn.SetStatus(pending, omegav1.TaskState_TASK_STATE_RUNNING, pt.Version, "")}}, txn.ErrIllegalState, 0},
		{"evict of an unplaced task", txn.Txn{Ops: []txn.Op{txn.ForceEvict(pending, pt.Version, "")}}, txn.ErrIllegalState, 0},
		{"claim of a task already placed", txn.Txn{Ops: []txn.Op{txn.Claim(placed, m0, res(1, 1), at.Version)}}, txn.ErrNotPending, 0},
		{"create of an existing task", txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(pending, uuid.Nil, 1, 1))}}, txn.ErrAlreadyExists, 0},
		{"create of an existing machine", txn.Txn{Ops: []txn.Op{txn.CreateMachine(machineProto(m0, 1, 1))}}, txn.ErrAlreadyExists, 0},
		{"delete of a machine in use", txn.Txn{ViewRevision: rev, Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m0, mv.Version)}}, txn.ErrInUse, 0},
		{"good operations, then a bad one", txn.Txn{Ops: []txn.Op{
			txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1)),
			txn.Claim(fresh, m0, res(1, 1), 0),
			txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_SUCCEEDED, at.Version, ""),
			txn.Claim(pending, unknownM, res(1, 1), pt.Version),
		}}, txn.ErrNotFound, 3},
		{"bad operation in all-or-nothing mode", txn.Txn{Commit: omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, Ops: []txn.Op{
			txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1)),
			txn.Claim(placed, m0, res(1, 1), at.Version),
		}}, txn.ErrNotPending, 1},
		// Strings the encoder would refuse: they used to pass validation and
		// stop the store (objects) or be acknowledged and make it
		// unopenable (messages, reasons, the component).
		{"task name not UTF-8", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Meta.Name = "t\xff" }))}}, txn.ErrInvalid, 0},
		{"task label not UTF-8", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Meta.Labels = map[string]string{"app": "\xc3"} }))}}, txn.ErrInvalid, 0},
		{"task command argument not UTF-8", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) { p.Spec.Command.Args = []string{"ok", "\xed\xa0\x80"} }))}}, txn.ErrInvalid, 0},
		{"task spec with unknown bytes that are no wire format", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) {
			p.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields("\x0a\x01\xff"))
		}))}}, txn.ErrInvalid, 0},
		{"task command with a known field, not UTF-8, among its unknown bytes", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) {
			p.Spec.Command.ProtoReflect().SetUnknown(protoreflect.RawFields("\x0a\x01\xff")) // path = "\xff"
		}))}}, txn.ErrInvalid, 0},
		{"machine failure domain not UTF-8", txn.Txn{Ops: []txn.Op{txn.CreateMachine(badMachine(func(p *omegav1.Machine) { p.Spec.FailureDomain = "fd\xff" }))}}, txn.ErrInvalid, 0},
		{"machine put with an attribute not UTF-8", txn.Txn{Ops: []txn.Op{txn.PutMachine(func() *omegav1.Machine {
			p := machineProto(m0, 1000, 1000)
			p.Spec.Attributes = map[string]string{"\xff": "x"}
			return p
		}(), 0)}}, txn.ErrInvalid, 0},
		{"job status message not UTF-8", txn.Txn{Ops: []txn.Op{txn.PutJob(func() *omegav1.Job {
			j := jobProto(job, "j", 2)
			j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING, Message: "\xff"}
			return j
		}(), 0)}}, txn.ErrInvalid, 0},
		{"status message not UTF-8", txn.Txn{Ops: []txn.Op{txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_FAILED, at.Version, "exit \xff")}}, txn.ErrInvalid, 0},
		{"evict reason not UTF-8", txn.Txn{Ops: []txn.Op{txn.ForceEvict(placed, at.Version, "\xc3")}}, txn.ErrInvalid, 0},
		{"claim with a resource name not UTF-8", txn.Txn{Ops: []txn.Op{
			txn.Claim(pending, m0, txn.Resources{CPU: 1, Ext: map[string]int64{"g\xffpu": 0}}, pt.Version),
		}}, txn.ErrInvalid, 0},
		{"component not UTF-8", txn.Txn{Component: "sched\xff", Ops: []txn.Op{txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_RUNNING, at.Version, "")}}, txn.ErrInvalid, -1},
		{"string over the limit", txn.Txn{Ops: []txn.Op{txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_FAILED, at.Version, strings.Repeat("x", maxString+1))}}, txn.ErrTooLarge, 0},
		{"object over the limit", txn.Txn{Ops: []txn.Op{txn.CreateTask(badTask(func(p *omegav1.Task) {
			p.Meta.Annotations = map[string]string{}
			for _, k := range "abcdefghijk" {
				p.Meta.Annotations[string(k)] = strings.Repeat("x", maxString)
			}
		}))}}, txn.ErrTooLarge, 0},
		{"transaction over the limit", txn.Txn{Ops: func() []txn.Op {
			var ops []txn.Op
			for range maxOps {
				ops = append(ops, txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_FAILED, at.Version, strings.Repeat("x", maxString)))
			}
			return ops
		}()}, txn.ErrTooLarge, -1},
		{"too many operations", txn.Txn{Ops: tooMany}, txn.ErrTooLarge, -1},
		{"view revision in the future", txn.Txn{ViewRevision: rev + 1, Ops: []txn.Op{txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1))}}, txn.ErrFutureRevision, -1},
		{"unknown conflict mode", txn.Txn{Conflict: 5, Ops: []txn.Op{txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1))}}, txn.ErrInvalid, -1},
		{"unknown commit mode", txn.Txn{Commit: 5, Ops: []txn.Op{txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1))}}, txn.ErrInvalid, -1},
		{"rejected by the policy", txn.Txn{Component: "intruder", Ops: []txn.Op{txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1))}}, ErrRejected, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := s.Watch(rev)
			if err != nil {
				t.Fatal(err)
			}
			tx := tc.tx
			r, err := s.Commit(ctx, &tx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Commit: %v, want %v", err, tc.want)
			}
			var opErr *txn.OpError
			switch {
			case tc.opIdx >= 0 && !errors.As(err, &opErr):
				t.Errorf("error %v is not an *txn.OpError", err)
			case tc.opIdx >= 0 && opErr.Index != tc.opIdx:
				t.Errorf("error names op %d, want %d: %v", opErr.Index, tc.opIdx, err)
			case tc.opIdx < 0 && errors.As(err, &opErr):
				t.Errorf("whole-transaction error %v names op %d", err, opErr.Index)
			}
			if r.Revision != 0 || r.Committed != 0 {
				t.Errorf("result with an error: revision %d, %d committed", r.Revision, r.Committed)
			}
			if s.Snapshot() != before || s.Revision() != rev {
				t.Fatalf("bad input changed the store: revision %d → %d", rev, s.Revision())
			}
			if sets, _, err := w.Poll(0); err != nil || len(sets) != 0 {
				t.Fatalf("watchers got %d write sets (%v) from bad input", len(sets), err)
			}
		})
	}

	// No transaction at all.
	if _, err := s.Commit(ctx, nil); !errors.Is(err, txn.ErrInvalid) {
		t.Fatalf("Commit(nil): %v, want ErrInvalid", err)
	}

	// A cancelled context: nothing happens either.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Commit(cctx, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1))}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with a cancelled context: %v", err)
	}
	if s.Snapshot() != before {
		t.Fatal("a commit with a cancelled context changed the store")
	}

	// Nothing reached the disk.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	if d := diffStates(before, s.Snapshot(), true); d != "" {
		t.Fatalf("after reopen: %s", d)
	}
	// And the store still works: the same good operations commit.
	mustCommitAll(t, s, &txn.Txn{ViewRevision: rev, Ops: []txn.Op{
		txn.CreateTask(taskProto(fresh, uuid.Nil, 1, 1)),
		txn.Claim(fresh, m0, res(1, 1), 0),
		txn.SetStatus(placed, omegav1.TaskState_TASK_STATE_SUCCEEDED, at.Version, ""),
	}})
}

// TestConflictsChangeNothing: a transaction whose every operation
// conflicts is not an error, gets no revision, and changes nothing; an
// all-or-nothing transaction with one conflict commits nothing.
func TestConflictsChangeNothing(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	m0 := testUID(uidMachine, 0, 0)
	a, b := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(machineProto(m0, 100, 100)),
		txn.CreateTask(taskProto(a, uuid.Nil, 60, 60)),
		txn.CreateTask(taskProto(b, uuid.Nil, 60, 60)),
	}})
	before := s.Snapshot()
	ta, _ := before.Task(a)
	tb, _ := before.Task(b)
	for _, tx := range []*txn.Txn{
		{ViewRevision: before.Revision(), Ops: []txn.Op{txn.Claim(a, m0, res(200, 1), ta.Version)}}, // does not fit
		{ViewRevision: before.Revision(), Ops: []txn.Op{txn.Claim(a, m0, res(1, 1), ta.Version+7)}}, // stale version
		{ViewRevision: before.Revision(), Commit: omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, Ops: []txn.Op{
			txn.Claim(a, m0, res(60, 60), ta.Version),
			txn.Claim(b, m0, res(60, 60), tb.Version), // only one fits
		}},
	} {
		r, err := s.Commit(context.Background(), tx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Revision != 0 || r.Committed != 0 || !r.Conflicted() {
			t.Fatalf("result %+v: want no revision, nothing committed, conflicted", r)
		}
		if s.Snapshot() != before {
			t.Fatal("a conflicting transaction changed the store")
		}
	}
}
