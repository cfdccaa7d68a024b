package store

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestOffersDurable: outstanding offers (a two-level allocator's) are part
// of the durable state — in the log, in checkpoints, at a reopen after a
// crash and after a clean close, with the locks the store derived — and
// an answered offer is gone from all of them.
func TestOffersDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := DefaultOptions("db")
	o.FS = noLink{fs}
	o.Logger = quietLogger()
	o.CheckpointBytes = 4 << 10 // checkpoints between the offers' commits
	o.LogSegmentBytes = 2 << 10
	o.checkpointInline = true
	o.CheckInvariants = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var ms []uuid.UUID
	var ops []txn.Op
	for i := range 6 {
		m := testUID(uidMachine, uint32(i), 0)
		ms = append(ms, m)
		ops = append(ops, txn.CreateMachine(machineProto(m, 4000, 4000)))
	}
	mustCommitAll(t, s, &txn.Txn{Component: "setup", Ops: ops})
	offer := func(i uint32, fw string) uuid.UUID {
		u := testUID('O', i, 0)
		mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "allocator", Ops: []txn.Op{
			txn.CreateOffer(&omegav1.Offer{Meta: &omegav1.ObjectMeta{Uid: u.String(), Name: "o"}, Spec: &omegav1.OfferSpec{Framework: fw}}),
		}})
		return u
	}
	pad := func(n int) { // tasks of their own, to fill the log past checkpoints
		for i := range n {
			ops := make([]txn.Op, 0, 20)
			for j := range 20 {
				ops = append(ops, txn.CreateTask(taskProto(testUID(uidTask, uint32(1000+n*i+j), uint32(s.Revision())), uuid.Nil, 1, 1)))
			}
			mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "pad", Ops: ops})
		}
	}
	// A task placed, then an offer of the rest; a task's end, and a second
	// offer of what it freed; the first answered with a claim, a third made.
	tk := testUID(uidTask, 1, 0)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "fw-a", Ops: []txn.Op{
		txn.CreateTask(taskProto(tk, uuid.Nil, 1000, 1000)), txn.Claim(tk, ms[0], res(1000, 1000), 0),
	}})
	o1 := offer(1, "fw-a")
	pad(10)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{txn.SetStatus(tk, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "")}})
	o2 := offer(2, "fw-b")
	pad(10)
	t2 := testUID(uidTask, 2, 0)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "fw-a", Ops: []txn.Op{
		txn.CreateTask(taskProto(t2, uuid.Nil, 500, 500)), txn.Answer(o1), txn.Claim(t2, ms[3], res(500, 500), 0),
	}})
	o3 := offer(3, "fw-a")
	if c, _ := s.Snapshot().Offer(o2); c.Len() != 1 {
		t.Fatalf("the second offer covers %d machines, want the one the task's end freed", c.Len())
	}
	before := s.Snapshot()
	if before.NumOffers() != 2 {
		t.Fatalf("%d offers outstanding before the crash, want 2", before.NumOffers())
	}
	// A crash: only what was synced survives; every commit was acknowledged.
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, how := range []struct {
		name string
		fs   vfs.FS
	}{{"after a crash", clone}, {"after a clean close", fs}} {
		o2 := DefaultOptions("db")
		o2.FS = noLink{how.fs}
		o2.Logger = quietLogger()
		r, err := Open(o2)
		if err != nil {
			t.Fatalf("%s: open: %v", how.name, err)
		}
		if d := diffStates(before, r.Snapshot(), true); d != "" {
			t.Errorf("%s: the reopened state differs: %s", how.name, d)
		}
		if _, ok := r.Snapshot().Offer(o1); ok {
			t.Errorf("%s: the answered offer is back", how.name)
		}
		// Its locks still hold: nobody else claims what o3 locks.
		t3 := testUID(uidTask, 3, 0)
		res3 := mustCommit(t, r, &txn.Txn{ViewRevision: r.Revision(), Component: "other", Ops: []txn.Op{
			txn.CreateTask(taskProto(t3, uuid.Nil, 100, 100)), txn.Claim(t3, ms[5], res(100, 100), 0),
		}})
		if res3.Outcomes[1].Code != omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES {
			t.Errorf("%s: a claim on an offered machine: %+v", how.name, res3.Outcomes[1])
		}
		if _, ok := r.Snapshot().Offer(o3); !ok {
			t.Errorf("%s: offer o3 is gone", how.name)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
