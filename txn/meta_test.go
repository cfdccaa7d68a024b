package txn_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestCreatedTasksShareMeta: the tasks one transaction creates with metas
// equal but for their names (labels, annotations, owner references) share
// one stored meta, which carries no task's uid or name, while each task
// still reports its own uid, name, version and owner on the wire; a task
// whose labels differ starts a run of its own.
func TestCreatedTasksShareMeta(t *testing.T) {
	c := newCell(t)
	job := uid(900)
	c.commit(c.tx(txn.CreateJob(jobP(job))))
	mk := func(n uint64, labels map[string]string, name string) *omegav1.Task {
		p := ownedTaskP(uid(n), job, res(1, 1))
		p.Meta.Labels = labels
		p.Meta.Name = name
		return p
	}
	// Equal by content, not by pointer: as decoded from a request.
	var ops []txn.Op
	for i := range 5 {
		ops = append(ops, txn.CreateTask(mk(uint64(1000+i), map[string]string{"app": "web"}, "")))
	}
	ops = append(ops,
		txn.CreateTask(mk(2000, map[string]string{"app": "db"}, "")),
		txn.CreateTask(mk(2001, map[string]string{"app": "db"}, "named")),
		txn.CreateTask(mk(2002, map[string]string{"app": "db"}, "other")))
	c.commit(c.tx(ops...))

	first, second := c.task(uid(1000)), c.task(uid(1001))
	if second.Meta == first.Meta {
		t.Fatal("the first task of a run shares its own message, uid and all")
	}
	for i := 2; i < 5; i++ {
		if got := c.task(uid(uint64(1000 + i))).Meta; got != second.Meta {
			t.Fatalf("task %d does not share the meta of the tasks before it", i)
		}
	}
	if second.Meta.GetUid() != "" || second.Meta.GetVersion() != 0 {
		t.Fatalf("the shared meta carries uid %q, version %d", second.Meta.GetUid(), second.Meta.GetVersion())
	}
	for i := range 5 {
		tk := c.task(uid(uint64(1000 + i)))
		p := tk.Proto()
		if p.Meta.GetUid() != tk.UID.String() || p.Meta.GetVersion() != tk.Version || tk.Labels()["app"] != "web" || tk.Job != job || len(tk.OwnerReferences()) != 1 {
			t.Fatalf("task %d: wire meta %v, labels %v, job %s", i, p.Meta, tk.Labels(), tk.Job)
		}
	}
	db, named, other := c.task(uid(2000)), c.task(uid(2001)), c.task(uid(2002))
	if db.Meta == second.Meta || db.Labels()["app"] != "db" {
		t.Fatalf("a task with other labels shares: %v", db.Labels())
	}
	if named.Meta != other.Meta || named.Meta == db.Meta || named.Meta.GetName() != "" {
		t.Fatal("named tasks alike do not share a stripped meta")
	}
	for _, tk := range []*txn.Task{db, named, other} {
		want := map[*txn.Task]string{named: "named", other: "other"}[tk]
		if tk.Name() != want || tk.Proto().Meta.GetName() != want || tk.Labels()["app"] != "db" {
			t.Fatalf("task %s: name %q, wire name %q, labels %v; want name %q", tk.UID, tk.Name(), tk.Proto().Meta.GetName(), tk.Labels(), want)
		}
	}
}

// TestMetaShareOwnerEdges: owner references with nil entries compare as
// empty ones without a panic, and one carrying fields of a later schema
// (kept as stored) is never shared: each task reports its own.
func TestMetaShareOwnerEdges(t *testing.T) {
	c := newCell(t)
	mk := func(n uint64, owners ...*omegav1.OwnerReference) *omegav1.Task {
		p := taskP(uid(n), res(1, 1), 0)
		p.Meta.Name = ""
		p.Meta.OwnerReferences = owners
		return p
	}
	later := &omegav1.OwnerReference{Kind: "Other", Uid: "x"}
	later.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	c.commit(c.tx(
		txn.CreateTask(mk(3000, nil)),
		txn.CreateTask(mk(3001, &omegav1.OwnerReference{Kind: "Other", Uid: "x"})),
		txn.CreateTask(mk(3002, nil)),
		txn.CreateTask(mk(3003, nil)),
		txn.CreateTask(mk(3004, &omegav1.OwnerReference{Kind: "Other", Uid: "x"})),
		txn.CreateTask(mk(3005, later)),
	))
	for _, n := range []uint64{3000, 3002, 3003} {
		if o := c.task(uid(n)).OwnerReferences(); len(o) != 1 || o[0] != nil {
			t.Fatalf("task %d: owner references %v, want its one nil entry", n, o)
		}
	}
	if c.task(uid(3003)).Meta.GetOwnerReferences() == nil || c.task(uid(3003)).Meta == c.task(uid(3002)).Meta {
		t.Fatal("the second task of a run with a nil owner entry does not share the run's stripped meta")
	}
	if c.task(uid(3001)).Meta == c.task(uid(3000)).Meta {
		t.Fatal("a nil owner entry and a real one share a meta")
	}
	tk := c.task(uid(3005))
	if tk.Meta == c.task(uid(3004)).Meta {
		t.Fatal("an owner reference with fields of a later schema shares a meta")
	}
	if got := tk.Proto().Meta.GetOwnerReferences(); len(got) != 1 || len(got[0].ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("the later schema's field is gone: %v", got)
	}
}
