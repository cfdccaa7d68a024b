package store

// A claim's extended resources are the store's own copy: what the caller does
// with its Resources.Ext map after Commit returns reaches neither the
// committed state nor any reader of it.

import (
	"context"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestClaimExtMapIsCopied: the caller writing to its claim's Ext map after
// Commit changes neither the committed task's claim nor the machine's
// allocation: the task's release frees exactly what it claimed, and a later
// claim over the machine's capacity still conflicts.
func TestClaimExtMapIsCopied(t *testing.T) {
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
		t.Errorf("the published snapshot's task claims gpu=%d (the caller's later write), want 1", got.Claimed.Ext["gpu"])
	}
	if err := txn.CheckInvariants(snap); err != nil {
		t.Errorf("invariants after the caller's write: %v", err)
	}
	// Freeing the task subtracts what it claimed from the machine.
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
	// No drift, so no free room: a task claiming 1001 GPUs does not fit on a
	// 2-GPU machine.
	t2 := testUID(uidTask, 51, 1)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(t2, uuid.Nil, 1, 1))}})
	r, err = s.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
		txn.Claim(t2, m0, txn.Resources{Ext: map[string]int64{"gpu": 1001}}, version(t, s, t2))}})
	t.Logf("claim of 1001 gpus on a 2-gpu machine: %+v err=%v", r.Outcomes, err)
	if err == nil && r.Committed == 1 {
		t.Errorf("a machine with gpu capacity 2 holds a task claiming 1001 gpus")
	}
	s.Close()
}

// TestClaimExtMapReuseUnseenByReaders: the caller building its next claim in
// the map it committed while a reader walks the published state; every read
// (and the state afterwards) shows the amount committed, never the caller's
// later writes. Under -race a shared map is also reported as a data race.
func TestClaimExtMapReuseUnseenByReaders(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.CheckInvariants = false })
	defer s.Close()
	m0 := testUID(uidMachine, 63, 0)
	tk := testUID(uidTask, 63, 0)
	mp := machineProto(m0, 1000, 1000)
	mp.Spec.Capacity.Extended = map[string]int64{"gpu": 8}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(mp), txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1))}})
	const committed = 1
	ext := map[string]int64{"gpu": committed}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.Claim(tk, m0, txn.Resources{Ext: ext}, version(t, s, tk))}})
	done := make(chan int64, 1)
	go func() {
		wrong := int64(committed)
		for range 100 {
			x, _ := s.Snapshot().Task(tk) // a reader of the published state
			_ = x.Claimed.String()
			if g := x.Claimed.Ext["gpu"]; g != committed {
				wrong = g
			}
		}
		done <- wrong
	}()
	for i := range 100 {
		ext["gpu"] = int64(2 + i) // the caller, building its next claim in the same map
	}
	if g := <-done; g != committed {
		t.Errorf("a reader saw the task claim gpu=%d, the caller's later write; committed %d", g, committed)
	}
	x, _ := s.Snapshot().Task(tk)
	m, _ := s.Snapshot().Machine(m0)
	if x.Claimed.Ext["gpu"] != committed || m.Allocated.Ext["gpu"] != committed {
		t.Errorf("after the caller's writes: task claims gpu=%d, machine allocates gpu=%d; committed %d",
			x.Claimed.Ext["gpu"], m.Allocated.Ext["gpu"], committed)
	}
}
