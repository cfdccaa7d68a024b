package txn

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// changeObjectOneof is omegav1.Change's object oneof, from its descriptor.
func changeObjectOneof(t *testing.T) protoreflect.OneofDescriptor {
	t.Helper()
	o := (&omegav1.Change{}).ProtoReflect().Descriptor().Oneofs().ByName("object")
	if o == nil {
		t.Fatal("omegav1.Change has no object oneof")
	}
	return o
}

// TestChangeCodecsCoverTheOneof: every field of omegav1.Change's object
// oneof has exactly one entry in changeCodecs, of the object kind named
// like it and building the field's message, and no entry names another
// field; an entry that goes partial says how for every encoder (and how
// a watcher completes it). A kind added to the oneof fails here until it
// has an entry, so no encoder of a Change can forget it.
func TestChangeCodecsCoverTheOneof(t *testing.T) {
	oneof := changeObjectOneof(t)
	fields := oneof.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		var found []*changeCodec
		for j := range changeCodecs {
			if changeCodecs[j].field == fd.Number() {
				found = append(found, &changeCodecs[j])
			}
		}
		if len(found) != 1 {
			t.Errorf("omegav1.Change.%s (field %d): %d entries in changeCodecs, want 1", fd.Name(), fd.Number(), len(found))
			continue
		}
		k := found[0]
		if want := "OBJECT_KIND_" + strings.ToUpper(string(fd.Name())); k.kind.String() != want {
			t.Errorf("omegav1.Change.%s: the entry is of kind %s, want %s", fd.Name(), k.kind, want)
		}
		if k.has == nil || k.message == nil || k.set == nil {
			t.Errorf("omegav1.Change.%s: the entry does not say how the object is encoded whole", fd.Name())
		}
		if all, none := k.partial != nil && k.partialMessage != nil && k.appendPartial != nil && k.complete != nil,
			k.partial == nil && k.partialMessage == nil && k.appendPartial == nil && k.complete == nil; !all && !none {
			t.Errorf("omegav1.Change.%s: the entry says how it goes partial for some encoders and not others", fd.Name())
		}
	}
	if len(changeCodecs) != fields.Len() {
		t.Errorf("%d entries in changeCodecs for the %d fields of omegav1.Change's object oneof", len(changeCodecs), fields.Len())
	}
}

// TestChangeCodecsEncodeEveryKind: a history that makes, changes and
// deletes an object of every kind of the oneof (a kind it does not make
// fails the test) encodes alike through the three encoders — Proto,
// PartialProto and the hand encoder, each as proto.Unmarshal reads it —
// each kind into its oneof field as its message, and reads back
// (WriteSetFromProto, then Complete on the state before) to the write set
// encoded.
func TestChangeCodecsEncodeEveryKind(t *testing.T) {
	sets := everyKindHistory(t)
	oneof := changeObjectOneof(t)
	seen := map[protowire.Number]map[string]bool{}
	for _, h := range sets {
		ws := h.ws
		for i := range ws.Changes {
			c := &ws.Changes[i]
			k := c.codec()
			if k == nil {
				t.Fatalf("revision %d change %d: no entry in changeCodecs", ws.Revision, i)
			}
			if k.kind != c.Kind {
				t.Fatalf("revision %d change %d of kind %s: the entry is of kind %s", ws.Revision, i, c.Kind, k.kind)
			}
			fd := oneof.Fields().ByNumber(k.field)
			if fd == nil {
				t.Fatalf("revision %d change %d: the entry's field %d is not in the oneof", ws.Revision, i, k.field)
			}
			if got := k.message(c).ProtoReflect().Descriptor(); got != fd.Message() {
				t.Fatalf("revision %d: the entry of %s builds a %s, the oneof's field holds a %s", ws.Revision, fd.Name(), got.FullName(), fd.Message().FullName())
			}
			if seen[k.field] == nil {
				seen[k.field] = map[string]bool{}
			}
			switch {
			case c.Created && c.Deleted:
			case c.Created:
				seen[k.field]["created"] = true
			case c.Deleted:
				seen[k.field]["deleted"] = true
			case k.goesPartial(c):
				seen[k.field]["partial"] = true
			default:
				seen[k.field]["changed"] = true
			}
		}
		for _, partial := range []bool{false, true} {
			want := ws.Proto()
			if partial {
				want = ws.PartialProto()
			}
			var pieces [][]byte
			if err := ws.AppendChunks(partial, 0, func(b []byte) error { pieces = append(pieces, b); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(pieces) != 1 {
				t.Fatalf("revision %d: %d pieces", ws.Revision, len(pieces))
			}
			got := &omegav1.RevisionChanges{}
			if err := proto.Unmarshal(pieces[0], got); err != nil {
				t.Fatalf("revision %d (partial %v): %v", ws.Revision, partial, err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("revision %d (partial %v): the hand encoder wrote\n%v\nthe messages say\n%v", ws.Revision, partial, got, want)
			}
			for i, w := range want.Changes {
				if w.GetObject() == nil {
					t.Fatalf("revision %d (partial %v) change %d: no object: %v", ws.Revision, partial, i, w)
				}
			}
			back, err := WriteSetFromProto(want)
			if err != nil {
				t.Fatalf("revision %d (partial %v): %v", ws.Revision, partial, err)
			}
			if err := back.Complete(h.before); err != nil {
				t.Fatalf("revision %d (partial %v): %v", ws.Revision, partial, err)
			}
			if again := back.Proto(); !proto.Equal(again, ws.Proto()) {
				t.Fatalf("revision %d (partial %v): read back as\n%v\nwant\n%v", ws.Revision, partial, again, ws.Proto())
			}
		}
	}
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		if len(seen[fd.Number()]) == 0 {
			t.Errorf("the history makes no change of omegav1.Change.%s: add one to everyKindHistory", fd.Name())
		}
	}
	t.Logf("changes seen by field: %v", seen)
}

type historyStep struct {
	before *State
	ws     *WriteSet
}

// everyKindHistory commits a short history that creates, changes and
// deletes an object of every kind, returning each write set with the
// state it applies to.
func everyKindHistory(t *testing.T) []historyStep {
	t.Helper()
	id := func(n byte) uuid.UUID {
		var u uuid.UUID
		u[0], u[6], u[8], u[15] = n, 0x40, 0x80, n
		return u
	}
	m1, m2, j1, t1, t2, q1, o1 := id(1), id(2), id(3), id(4), id(5), id(6), id(7)
	machine := func(u uuid.UUID) *omegav1.Machine {
		return &omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: u.String(), Name: "m-" + u.String()[:2], Labels: map[string]string{"rack": "r1"}},
			Spec: &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: 4000, MemoryBytes: 1 << 32}, FailureDomain: "fd"}}
	}
	task := func(u uuid.UUID) *omegav1.Task {
		return &omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: u.String(), Name: "t-" + u.String()[:2],
			OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: j1.String(), Controller: true}}},
			Spec: &omegav1.TaskSpec{Resources: &omegav1.Resources{CpuMillis: 500, MemoryBytes: 1 << 30}, Command: &omegav1.Command{Path: "/bin/true"}}}
	}
	job := &omegav1.Job{Meta: &omegav1.ObjectMeta{Uid: j1.String(), Name: "j1"}, Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "fw"}}
	quota := func(cpu int64) *omegav1.Quota {
		return &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: q1.String(), Name: "q1", Labels: map[string]string{"team": "a"}},
			Spec: &omegav1.QuotaSpec{Scheduler: "fw", Limit: &omegav1.Resources{CpuMillis: cpu}}}
	}
	lease := func(holder string) *omegav1.Lease {
		return &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: LeaseUID("fw").String(), Name: "fw"},
			Spec: &omegav1.LeaseSpec{Holder: holder, Role: "scheduler", SchedulerKind: "fw", DurationMillis: 15_000}}
	}
	r500 := Resources{CPU: 500, Memory: 1 << 30}
	s := NewState()
	var out []historyStep
	step := func(component string, ops ...Op) {
		t.Helper()
		tx := &Txn{ViewRevision: s.Revision(), Component: component, UnixNanos: int64(s.Revision()+1) * 1e9, Ops: ops}
		r, ws, err := Evaluate(s, tx, s.Revision()+1, DefaultLimits())
		if err != nil || r.Committed != len(ops) {
			t.Fatalf("revision %d: %d of %d committed (%+v), %v", s.Revision()+1, r.Committed, len(ops), r.Outcomes, err)
		}
		out = append(out, historyStep{before: s, ws: ws})
		s = s.Apply(ws)
	}
	step("admin", CreateMachine(machine(m1)), CreateMachine(machine(m2)), CreateJob(job), CreateTask(task(t1)), CreateTask(task(t2)), CreateQuota(quota(2000)), CreateLease(lease("h1")))
	step("fw", Claim(t1, m1, r500, s.versionOf(t1)))
	step("admin", CreateOffer(&omegav1.Offer{Meta: &omegav1.ObjectMeta{Uid: o1.String(), Name: "offer-1"}, Spec: &omegav1.OfferSpec{Framework: "fw"}}))
	step("fw", Answer(o1), Claim(t2, m2, r500, s.versionOf(t2)))
	j := proto.Clone(job).(*omegav1.Job)
	j.Spec.Replicas = 2
	step("admin", PutQuota(quota(3000), 0), PutLease(lease("h2"), 0), PutJob(j, 0), SetStatus(t1, omegav1.TaskState_TASK_STATE_RUNNING, s.versionOf(t1), "started"))
	step("admin", SetStatus(t1, omegav1.TaskState_TASK_STATE_SUCCEEDED, s.versionOf(t1), "done"))
	step("admin", Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, t1, 0), Delete(omegav1.ObjectKind_OBJECT_KIND_QUOTA, q1, 0), Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, LeaseUID("fw"), 0))
	step("admin", Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m1, 0))
	return out
}

// versionOf is a task's version in s (0 if s has none).
func (s *State) versionOf(u uuid.UUID) uint64 {
	if t, ok := s.Task(u); ok {
		return t.Version
	}
	return 0
}
