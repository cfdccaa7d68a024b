package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) int64 { return t0.Add(d).UnixNano() }

func expire(t *testing.T, s *Store, now time.Time, want int) {
	t.Helper()
	n, err := s.Expire(context.Background(), now)
	if err != nil {
		t.Fatalf("Expire(%v): %v", now.Sub(t0), err)
	}
	if n != want {
		t.Fatalf("Expire(t0+%v) deleted %d objects, want %d", now.Sub(t0), n, want)
	}
}

func present(t *testing.T, s *Store, want bool, tasks ...uuid.UUID) {
	t.Helper()
	st := s.Snapshot()
	for _, u := range tasks {
		if _, ok := st.Task(u); ok != want {
			t.Errorf("task %s present = %v, want %v (revision %d)", u, ok, want, st.Revision())
		}
	}
}

// TestRetention: terminal tasks and finished jobs leave the state once
// Expire runs past their finish time plus the retention window, as durable
// deletions; live tasks and jobs stay; what is not yet due is expired by a
// reopened store too (the queue is rebuilt from the state).
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.Retention = time.Minute }
	s := openTest(t, dir, mod)
	m0 := testUID(uidMachine, 0, 0)
	jDone, jLive := testUID(uidJob, 0, 0), testUID(uidJob, 0, 1)
	done1, done2, failed := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1), testUID(uidTask, 0, 2)
	running, pending, late := testUID(uidTask, 0, 3), testUID(uidTask, 0, 4), testUID(uidTask, 0, 5)
	ops := []txn.Op{
		txn.CreateMachine(machineProto(m0, 1000, 1000)),
		txn.CreateJob(jobProto(jDone, "done", 3)),
		txn.CreateJob(jobProto(jLive, "live", 3)),
	}
	for _, u := range []uuid.UUID{done1, done2, failed, running, pending, late} {
		ops = append(ops, txn.CreateTask(taskProto(u, jLive, 10, 10)))
	}
	for _, u := range []uuid.UUID{done1, done2, failed, running, late} {
		ops = append(ops, txn.Claim(u, m0, res(10, 10), 0))
	}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: ops})
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(time.Second), Ops: []txn.Op{
		txn.SetStatus(done1, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
		txn.SetStatus(done2, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
		txn.SetStatus(running, omegav1.TaskState_TASK_STATE_RUNNING, 0, ""),
		txn.PutJob(func() *omegav1.Job {
			j := jobProto(jDone, "done", 3)
			j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_SUCCEEDED, FinishUnixNanos: at(time.Second)}
			return j
		}(), 0),
	}})
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(2 * time.Second), Ops: []txn.Op{
		txn.SetStatus(failed, omegav1.TaskState_TASK_STATE_FAILED, 0, "exit 1"),
	}})
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(50 * time.Second), Ops: []txn.Op{
		txn.SetStatus(late, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
	}})

	rev := s.Revision()
	expire(t, s, t0.Add(30*time.Second), 0) // nothing is a minute old yet
	if s.Revision() != rev {
		t.Fatalf("an Expire with nothing due committed revision %d", s.Revision())
	}
	w, err := s.Watch(rev)
	if err != nil {
		t.Fatal(err)
	}
	expire(t, s, t0.Add(62*time.Second), 4) // done1, done2, failed, jDone
	present(t, s, false, done1, done2, failed)
	present(t, s, true, running, pending, late)
	if _, ok := s.Snapshot().Job(jDone); ok {
		t.Error("finished job still there")
	}
	if _, ok := s.Snapshot().Job(jLive); !ok {
		t.Error("live job expired")
	}
	// Watchers see the deletions like any change.
	sets, _, err := w.Poll(0)
	if err != nil || len(sets) == 0 {
		t.Fatalf("no write set for the expiry: %v", err)
	}
	deleted := 0
	for _, ws := range sets {
		for _, c := range ws.Changes {
			if c.Deleted {
				deleted++
			}
		}
	}
	if deleted != 4 {
		t.Errorf("watchers saw %d deletions, want 4", deleted)
	}
	expire(t, s, t0.Add(62*time.Second), 0) // idempotent

	// Durable: a reopened store does not have them; the late task is still
	// due later, and the reopened store's rebuilt queue expires it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	present(t, s, false, done1, done2, failed)
	present(t, s, true, running, pending, late)
	if _, ok := s.Snapshot().Job(jDone); ok {
		t.Error("finished job back after reopen")
	}
	expire(t, s, t0.Add(70*time.Second), 0)
	expire(t, s, t0.Add(111*time.Second), 1)
	present(t, s, false, late)
	present(t, s, true, running, pending)
	if err := txn.CheckInvariants(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	present(t, s, false, late)
	present(t, s, true, running, pending)
}

// TestRetentionSkipsWhatChanged: an entry whose object was deleted by a
// client, or whose job left its finished phase, is skipped, not an error.
func TestRetentionSkipsWhatChanged(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	a, b := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1)
	j := testUID(uidJob, 0, 0)
	finished := jobProto(j, "j", 1)
	finished.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_FAILED, FinishUnixNanos: at(0)}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.CreateTask(taskProto(a, uuid.Nil, 1, 1)),
		txn.CreateTask(taskProto(b, uuid.Nil, 1, 1)),
		txn.CreateJob(finished),
	}})
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.SetStatus(a, omegav1.TaskState_TASK_STATE_KILLED, 0, ""), // never placed: still terminal
		txn.SetStatus(b, omegav1.TaskState_TASK_STATE_LOST, 0, ""),
	}})
	revived := jobProto(j, "j", 1)
	revived.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(time.Second), Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, a, 0),
		txn.PutJob(revived, 0),
	}})
	expire(t, s, t0.Add(time.Hour), 1) // b only
	if _, ok := s.Snapshot().Job(j); !ok {
		t.Fatal("a job that is running again was expired")
	}
}

// TestRetentionSmallMaxOps: Expire splits its deletions into transactions
// within Options.Limits.MaxOps, however many objects are due.
func TestRetentionSmallMaxOps(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.Retention = time.Minute; o.Limits.MaxOps = 8 }
	s := openTest(t, dir, mod)
	var uids []uuid.UUID
	for i := range 30 {
		u := testUID(uidTask, 0, uint32(i))
		uids = append(uids, u)
		mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
			txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
			txn.SetStatus(u, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
		}})
	}
	expire(t, s, t0.Add(2*time.Minute), 30)
	present(t, s, false, uids...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	present(t, s, false, uids...)
}

// TestRetentionDurabilityNone: expiry works the same in memory.
func TestRetentionDurabilityNone(t *testing.T) {
	s := openTest(t, "", func(o *Options) { o.Durability = DurabilityNone; o.Retention = 0 })
	defer s.Close()
	u := testUID(uidTask, 0, 0)
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
		txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
	}})
	expire(t, s, t0.Add(-time.Nanosecond), 0)
	expire(t, s, t0, 1)
	present(t, s, false, u)
}
