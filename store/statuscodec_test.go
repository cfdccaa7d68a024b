package store

import (
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestStatusCodecMatchesProto: the hand-written status encoding decodes,
// with the real protobuf decoder, to exactly the message StatusProto builds,
// for any task status.
func TestStatusCodecMatchesProto(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		i64 := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64(), rapid.Just(int64(math.MinInt64)), rapid.Int64Range(-1, 1))
		task := &txn.Task{
			State:     omegav1.TaskState(rapid.Int32Range(0, 7).Draw(rt, "state")),
			Scheduler: rapid.SampledFrom([]string{"", "batch-0", "ü"}).Draw(rt, "scheduler"),
			Assigned:  i64.Draw(rt, "assigned"),
			Started:   i64.Draw(rt, "started"),
			Finished:  i64.Draw(rt, "finished"),
			Evictions: rapid.Int32().Draw(rt, "evictions"),
			Claimed: txn.Resources{
				CPU:    i64.Draw(rt, "cpu"),
				Memory: i64.Draw(rt, "mem"),
			},
		}
		task.SetMessage(rapid.String().Draw(rt, "message"))
		if rapid.Bool().Draw(rt, "run") {
			run := &omegav1.TaskRun{
				Restarts: rapid.Int32Range(0, 1000).Draw(rt, "restarts"),
				Health:   omegav1.HealthState(rapid.Int32Range(0, 2).Draw(rt, "health")),
				Address:  rapid.SampledFrom([]string{"", "127.1.2.3", "::1"}).Draw(rt, "address"),
			}
			if rapid.Bool().Draw(rt, "exit") {
				run.LastExit = &omegav1.ExitStatus{Code: rapid.Int32Range(-1, 255).Draw(rt, "code"), Signal: rapid.SampledFrom([]string{"", "killed"}).Draw(rt, "signal")}
			}
			task.SetRun(run)
		}
		if rapid.Bool().Draw(rt, "placed") {
			copy(task.Machine[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "machine"))
		}
		if n := rapid.IntRange(0, 3).Draw(rt, "ext"); n > 0 {
			task.Claimed.Ext = map[string]int64{}
			for j := range n {
				task.Claimed.Ext[rapid.SampledFrom([]string{"gpu", "ssd", "a", ""}).Draw(rt, "name")] = i64.Draw(rt, "v") + int64(j)
			}
		}
		got := &omegav1.TaskStatus{}
		if err := proto.Unmarshal(appendTaskStatus(nil, task), got); err != nil {
			rt.Fatalf("decode: %v", err)
		}
		want := task.StatusProto()
		if task.Machine == uuid.Nil {
			want.MachineUid = ""
		}
		if !proto.Equal(got, want) {
			rt.Fatalf("decoded %v\nwant    %v", got, want)
		}
	})
}

// TestTaskRecordMatchesProto: the task record written at creation (meta and
// spec marshalled, status appended by hand) decodes to exactly Task.Proto().
func TestTaskRecordMatchesProto(t *testing.T) {
	task := &txn.Task{
		UID: uuid.MustParse("0b8f2c4e-6a1d-4f3e-9c2b-5d7e8f9a0b1c"), Version: 7, CreateRev: 7, Created: 123,
		Meta:  &omegav1.ObjectMeta{Name: "t0", Labels: map[string]string{"job": "j"}},
		Spec:  &omegav1.TaskSpec{Resources: &omegav1.Resources{CpuMillis: 250, MemoryBytes: 1 << 30}, DurationMillis: 60_000},
		State: omegav1.TaskState_TASK_STATE_ASSIGNED, Machine: uuid.MustParse("1c9f3d5e-7b2e-4a4f-8d3c-6e8f9a0b1c2d"),
		Claimed: txn.Resources{CPU: 250, Memory: 1 << 30}, Scheduler: "batch-0", Assigned: 456,
	}
	b := new(pebble.Batch)
	ws := &txn.WriteSet{Revision: 7, Changes: []txn.Change{{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: task, Created: true}}}
	if err := EncodeWriteSet(b, ws); err != nil {
		t.Fatal(err)
	}
	r := b.Reader()
	key := recKey(prefixTask, task.UID)
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil || !ok {
			t.Fatalf("no task record in the batch (err %v)", err)
		}
		_ = kind
		if string(k) != string(key[:]) {
			continue
		}
		got := &omegav1.Task{}
		if err := proto.Unmarshal(v, got); err != nil {
			t.Fatal(err)
		}
		if want := task.Proto(); !proto.Equal(got, want) {
			t.Fatalf("decoded %v\nwant    %v", got, want)
		}
		return
	}
}

// TestTaskRecordAnyMeta: the hand-written task record (meta, the
// cached spec, status) decodes, with the real protobuf decoder, to exactly
// the message SpecProto and StatusProto build, for any meta — names,
// labels, annotations, owner references (nil ones too), versions — and for
// tasks that share a spec, whose bytes come from the encoder's cache.
func TestTaskRecordAnyMeta(t *testing.T) {
	specs := []*omegav1.TaskSpec{
		nil,
		{},
		{Resources: &omegav1.Resources{CpuMillis: 500, MemoryBytes: 1 << 30}, Priority: 9, Command: &omegav1.Command{Path: "/bin/sleep", Args: []string{"1"}}},
	}
	e := new(encoder)
	rapid.Check(t, func(rt *rapid.T) {
		str := rapid.SampledFrom([]string{"", "a", "ü-ß", "job-17"})
		strMap := func(label string) map[string]string {
			if rapid.Bool().Draw(rt, label+"-nil") {
				return nil
			}
			return rapid.MapOfN(str, str, 0, 3).Draw(rt, label)
		}
		var owners []*omegav1.OwnerReference
		for range rapid.IntRange(0, 2).Draw(rt, "owners") {
			var o *omegav1.OwnerReference
			if !rapid.Bool().Draw(rt, "nil-owner") {
				o = &omegav1.OwnerReference{Kind: str.Draw(rt, "kind"), Uid: str.Draw(rt, "ouid"), Name: str.Draw(rt, "oname"), Controller: rapid.Bool().Draw(rt, "controller")}
				if rapid.Bool().Draw(rt, "later-schema") { // a field this schema does not know, kept as stored
					o.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), rapid.Uint64().Draw(rt, "f99")))
				}
			}
			owners = append(owners, o)
		}
		task := &txn.Task{
			UID:       uuid.UUID(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "uid")),
			Version:   rapid.Uint64().Draw(rt, "version"),
			CreateRev: rapid.Uint64Range(0, 1<<40).Draw(rt, "createRev"),
			Created:   rapid.Int64().Draw(rt, "created"),
			Meta:      &omegav1.ObjectMeta{Name: str.Draw(rt, "name"), Labels: strMap("labels"), Annotations: strMap("annotations"), OwnerReferences: owners},
			Spec:      specs[rapid.IntRange(0, len(specs)-1).Draw(rt, "spec")],
			State:     omegav1.TaskState(rapid.Int32Range(0, 7).Draw(rt, "state")),
			Scheduler: str.Draw(rt, "scheduler"),
		}
		version := rapid.SampledFrom([]uint64{0, task.Version, task.CreateRev}).Draw(rt, "at")
		e.reset(1)
		if err := e.taskRecord(task, version); err != nil {
			rt.Fatal(err)
		}
		got := &omegav1.Task{}
		if err := proto.Unmarshal(e.vals[e.recs[0].off:e.recs[0].end], got); err != nil {
			rt.Fatalf("unmarshal: %v", err)
		}
		want := task.SpecProto()
		want.Meta.Version = version
		want.Status = task.StatusProto()
		if !proto.Equal(got, want) {
			rt.Fatalf("decoded\n  %v\nwant\n  %v", got, want)
		}
	})
}
