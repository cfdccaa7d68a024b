package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestCheckpointIngest: a checkpoint on a real disk (pebble links its
// tables in) leaves nothing in the ingest directory; a table left there by
// a checkpoint a crash cut short is removed at the next open, which holds
// the same state; and checkpoints one after another (the second rewriting
// the first's objects) reopen to the state they were taken from.
func TestCheckpointIngest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mod := func(o *Options) { o.CheckpointBytes = 1 << 40 } // the test checkpoints
	s := openTest(t, dir, mod)
	ms, err := registerMachines(ctx, s, 20, 1<<40, 1<<50)
	if err != nil {
		t.Fatal(err)
	}
	ingest := filepath.Join(dir, ingestDirName)
	empty := func(when string) {
		t.Helper()
		names, err := os.ReadDir(ingest)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(names) != 0 {
			t.Fatalf("%s: the ingest directory holds %d files (%s...)", when, len(names), names[0].Name())
		}
	}
	n := 0
	for round := range 3 {
		tx := &txn.Txn{Component: "test"}
		for range 3000 { // more than a chunk of objects, so tables span chunks
			u := testUID(uidTask, 7, uint32(n))
			n++
			tx.Ops = append(tx.Ops, txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)), txn.Claim(u, ms[n%len(ms)], res(1, 1), 0))
		}
		if r := mustCommit(t, s, tx); r.Committed != len(tx.Ops) {
			t.Fatalf("placed %d of %d operations", r.Committed, len(tx.Ops))
		}
		if round > 0 { // the last round's tasks end: status records over the task records
			end := &txn.Txn{Component: "test"}
			for k := n - 6000; k < n-3000; k++ {
				u := testUID(uidTask, 7, uint32(k))
				tk, _ := s.Snapshot().Task(u)
				end.Ops = append(end.Ops, txn.SetStatus(u, omegav1.TaskState_TASK_STATE_SUCCEEDED, tk.Version, "done"))
			}
			if r := mustCommit(t, s, end); r.Committed != len(end.Ops) {
				t.Fatalf("ended %d of %d tasks", r.Committed, len(end.Ops))
			}
		}
		if err := s.checkpoint(); err != nil {
			t.Fatal(err)
		}
		empty("after a checkpoint")
	}
	want := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(ingest, "0000000000000001-t.sst")
	if err := os.WriteFile(stray, []byte("a table a crash cut short"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, dir, mod)
	defer s2.Close()
	empty("after reopening over a stray table")
	if d := diffStates(want, s2.Snapshot(), true); d != "" {
		t.Fatalf("reopened state differs: %s", d)
	}
}

// TestTouchList holds the touched list's blocks to a plain slice: every
// touch, in order, across the blocks' growth.
func TestTouchList(t *testing.T) {
	var l touchList
	var want []touch
	for i := range 200 {
		ws := &txn.WriteSet{Revision: uint64(i + 1)}
		for k := range i * 7 { // up to 1,393 changes a set: blocks of 1,024, 2,048, ... fill and roll
			u := testUID(uidTask, uint32(i), uint32(k))
			ws.Changes = append(ws.Changes, txn.Change{Task: &txn.Task{UID: u}, Created: k%2 == 0})
			want = append(want, touch{kind: prefixTask, created: k%2 == 0, seq: uint32(len(want)), uid: u})
		}
		l.add(ws)
	}
	got := l.flat()
	if len(got) != len(want) || l.n != len(want) {
		t.Fatalf("%d touches (n %d), want %d", len(got), l.n, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("touch %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(l.blocks) < 3 || cap(l.blocks[len(l.blocks)-1]) != touchBlock {
		t.Fatalf("%d blocks, the last of %d: the test did not reach full blocks", len(l.blocks), cap(l.blocks[len(l.blocks)-1]))
	}
}
