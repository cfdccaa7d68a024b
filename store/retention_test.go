package store

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// TestRetention: terminal tasks and finished jobs leave the state one
// retention window after the first Expire that saw them terminal, as durable
// deletions that watchers see; live tasks and jobs stay; a reopened store
// sees what is left at its first Expire and expires it one window later.
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
	rev := s.Revision()
	expire(t, s, t0, 0) // sees done1, done2, jDone
	if s.Revision() != rev {
		t.Fatalf("an Expire with nothing due committed revision %d", s.Revision())
	}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(2 * time.Second), Ops: []txn.Op{
		txn.SetStatus(failed, omegav1.TaskState_TASK_STATE_FAILED, 0, "exit 1"),
	}})
	expire(t, s, t0.Add(30*time.Second), 0) // sees failed
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(3 * time.Second), Ops: []txn.Op{
		txn.SetStatus(late, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
	}})
	expire(t, s, t0.Add(59*time.Second), 0) // sees late; nothing a minute old
	rev = s.Revision()
	w, err := s.Watch(rev)
	if err != nil {
		t.Fatal(err)
	}
	expire(t, s, t0.Add(60*time.Second), 3) // done1, done2, jDone
	present(t, s, false, done1, done2)
	present(t, s, true, failed, running, pending, late)
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
	if deleted != 3 {
		t.Errorf("watchers saw %d deletions, want 3", deleted)
	}
	expire(t, s, t0.Add(60*time.Second), 0) // idempotent
	expire(t, s, t0.Add(90*time.Second), 1) // failed
	present(t, s, false, failed)

	// Durable: a reopened store does not have them. The late task, seen at
	// 59 s by the store before, is seen anew by the reopened one.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	present(t, s, false, done1, done2, failed)
	present(t, s, true, running, pending, late)
	if _, ok := s.Snapshot().Job(jDone); ok {
		t.Error("finished job back after reopen")
	}
	expire(t, s, t0.Add(200*time.Second), 0)
	expire(t, s, t0.Add(259*time.Second), 0)
	expire(t, s, t0.Add(260*time.Second), 1)
	present(t, s, false, late)
	present(t, s, true, running, pending)
	if err := txn.CheckInvariants(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if n := s.expiry.len(); n != 0 {
		t.Errorf("%d entries left in the expiry queue", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	present(t, s, false, late)
	present(t, s, true, running, pending)
}

// TestRetentionIgnoresCommitterClocks: finish times a year ahead or a year
// behind the store's clock neither delay nor hasten any expiry — in
// particular a far-future one does not hold back the objects finished after
// it (the queue used to be ordered by committers' finish times and stop at
// the first one not yet due).
func TestRetentionIgnoresCommitterClocks(t *testing.T) {
	const year = 365 * 24 * time.Hour
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	ahead, normal, behind := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1), testUID(uidTask, 0, 2)
	aheadJob := testUID(uidJob, 0, 0)
	finish := func(u uuid.UUID, clock time.Duration) {
		mustCommitAll(t, s, &txn.Txn{UnixNanos: at(clock), Ops: []txn.Op{
			txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
			txn.SetStatus(u, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
		}})
	}
	finish(ahead, year)
	j := jobProto(aheadJob, "ahead", 1)
	j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_SUCCEEDED, FinishUnixNanos: at(year)}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(year), Ops: []txn.Op{txn.CreateJob(j)}})
	expire(t, s, t0, 0) // sees ahead and aheadJob at t0
	finish(normal, 10*time.Second)
	expire(t, s, t0.Add(10*time.Second), 0) // sees normal
	finish(behind, -year)
	expire(t, s, t0.Add(20*time.Second), 0) // sees behind: a year-old finish time is not due
	present(t, s, true, ahead, normal, behind)
	expire(t, s, t0.Add(time.Minute-time.Nanosecond), 0)
	expire(t, s, t0.Add(time.Minute), 2) // ahead and its job, a year early by their own clock
	present(t, s, false, ahead)
	present(t, s, true, normal, behind)
	expire(t, s, t0.Add(70*time.Second), 1) // normal, not held back by ahead
	present(t, s, false, normal)
	present(t, s, true, behind)
	expire(t, s, t0.Add(80*time.Second-time.Nanosecond), 0)
	expire(t, s, t0.Add(80*time.Second), 1)
	present(t, s, false, behind)

	// The store's clock only moves forward, by the time that passes
	// between Expires: a clock set back a year stops it, and it runs on from
	// where it was, so nothing is held up for the year (nor expires early).
	late := testUID(uidTask, 0, 3)
	finish(late, 0)
	expire(t, s, t0.Add(-year), 0) // sees late, stamped t0+80s
	expire(t, s, t0.Add(-year+59*time.Second), 0)
	expire(t, s, t0.Add(-year+60*time.Second), 1)
	present(t, s, false, late)
	// A jump forward ages everything by the jump.
	jumped := testUID(uidTask, 0, 4)
	finish(jumped, 0)
	expire(t, s, t0.Add(-year+61*time.Second), 0)
	expire(t, s, t0.Add(year), 1)
}

// TestRetentionClockEdges: at the ends of int64 time the store's clock
// neither wraps nor sticks, and a time it cannot hold (the zero time.Time,
// whose UnixNano is far outside int64's range) is refused, changing
// nothing: read as a time, it would age everything by centuries on the way
// back.
func TestRetentionClockEdges(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	finish := func(u uuid.UUID) {
		mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
			txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
			txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
		}})
	}
	u, v, w := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1), testUID(uidTask, 0, 2)
	finish(u)
	expire(t, s, time.Unix(0, math.MinInt64), 0) // sees u at the earliest time there is
	expire(t, s, time.Unix(0, math.MinInt64+59e9), 0)
	expire(t, s, time.Unix(0, math.MaxInt64), 1) // the whole range later: no wrap-around
	finish(v)
	expire(t, s, time.Unix(0, math.MinInt64), 0) // back: the clock stays
	expire(t, s, time.Unix(0, math.MinInt64+59e9), 0)
	expire(t, s, time.Unix(0, math.MinInt64+60e9), 1) // and runs on from there
	finish(w)
	for _, bad := range []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if n, err := s.Expire(context.Background(), bad); !errors.Is(err, txn.ErrInvalid) || n != 0 {
			t.Fatalf("Expire(%v): %d, %v; want ErrInvalid", bad, n, err)
		}
	}
	expire(t, s, time.Unix(0, math.MinInt64+61e9), 0) // sees w: the refused times did not count
	expire(t, s, time.Unix(0, math.MinInt64+120e9), 0)
	expire(t, s, time.Unix(0, math.MinInt64+121e9), 1)
}

// TestRetentionKeepsEntriesOnFailedCommit: an Expire whose deletion
// commit fails (a policy refuses it once) loses nothing: the next Expire
// deletes what was due. Its transactions also stay within MaxTxnBytes,
// however many deletions are due.
func TestRetentionKeepsEntriesOnFailedCommit(t *testing.T) {
	refuse := &refuseOnce{}
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.Retention = time.Minute
		o.Policy = refuse
		o.Limits = txn.Limits{MaxObjectBytes: 1024, MaxTxnBytes: 1024}
	})
	defer s.Close()
	var uids []uuid.UUID
	for i := range 40 {
		u := testUID(uidTask, 0, uint32(i))
		uids = append(uids, u)
		mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
			txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
			txn.SetStatus(u, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
		}})
	}
	expire(t, s, t0, 0)
	refuse.armed = true
	if n, err := s.Expire(context.Background(), t0.Add(time.Minute)); !errors.Is(err, ErrRejected) || n != 0 {
		t.Fatalf("Expire with a refusing policy: %d, %v", n, err)
	}
	present(t, s, true, uids...)
	expire(t, s, t0.Add(time.Minute), 40) // in transactions of at most 1 KiB
	present(t, s, false, uids...)
	if refuse.biggest > 1024 || refuse.txns < 2 {
		t.Errorf("retention sent %d transactions, the biggest %d bytes (the limit is 1024)", refuse.txns, refuse.biggest)
	}
}

// refuseOnce refuses the store's retention transaction once, when armed,
// and records the sizes of those it admits.
type refuseOnce struct {
	armed         bool
	txns, biggest int
}

func (*refuseOnce) Name() string { return "refuse-once" }
func (p *refuseOnce) Admit(_ *txn.State, tx *txn.Txn) error {
	if tx.Component != RetentionComponent {
		return nil
	}
	if p.armed {
		p.armed = false
		return fmt.Errorf("%w: not now", ErrRejected)
	}
	p.txns++
	p.biggest = max(p.biggest, tx.WireSize())
	return nil
}

// TestRetentionSkipsWhatChanged: an entry whose object was deleted by a
// client, re-created under the same uid, put again or left its finished
// phase does nothing: a re-created task that finishes is expired one window
// after the store first saw the new one terminal, not at the old entry's time.
func TestRetentionSkipsWhatChanged(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	a, b, c := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1), testUID(uidTask, 0, 2)
	j, k := testUID(uidJob, 0, 0), testUID(uidJob, 0, 1)
	finished := func(uid uuid.UUID, name string) *omegav1.Job {
		p := jobProto(uid, name, 1)
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_FAILED, FinishUnixNanos: at(0)}
		return p
	}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.CreateTask(taskProto(a, uuid.Nil, 1, 1)),
		txn.CreateTask(taskProto(b, uuid.Nil, 1, 1)),
		txn.CreateTask(taskProto(c, uuid.Nil, 1, 1)),
		txn.CreateJob(finished(j, "j")),
		txn.CreateJob(finished(k, "k")),
	}})
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.SetStatus(a, omegav1.TaskState_TASK_STATE_KILLED, 0, ""), // never placed: still terminal
		txn.SetStatus(b, omegav1.TaskState_TASK_STATE_LOST, 0, ""),
		txn.SetStatus(c, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
	}})
	expire(t, s, t0, 0) // sees a, b, c, j, k
	revived := jobProto(j, "j", 1)
	revived.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING}
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(time.Second), Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, a, 0),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, c, 0),
		txn.PutJob(revived, 0),
		txn.PutJob(finished(k, "k-relabelled"), 0), // finished still, at a new version
	}})
	// c comes back under the same uid and finishes again.
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(-time.Hour), Ops: []txn.Op{
		txn.CreateTask(taskProto(c, uuid.Nil, 1, 1)),
		txn.SetStatus(c, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
	}})
	expire(t, s, t0.Add(30*time.Second), 0) // sees the new c and k's new version
	expire(t, s, t0.Add(time.Minute), 1)    // b only: the old entries of c and k match nothing
	present(t, s, false, b)
	present(t, s, true, c)
	if _, ok := s.Snapshot().Job(j); !ok {
		t.Fatal("a job that is running again was expired")
	}
	if _, ok := s.Snapshot().Job(k); !ok {
		t.Fatal("a job put again was expired by its old entry")
	}
	expire(t, s, t0.Add(90*time.Second-time.Nanosecond), 0)
	expire(t, s, t0.Add(90*time.Second), 2) // c and k
	present(t, s, false, c)
	if _, ok := s.Snapshot().Job(k); ok {
		t.Fatal("k not expired")
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
	expire(t, s, t0, 0)
	expire(t, s, t0.Add(time.Minute), 30)
	present(t, s, false, uids...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	present(t, s, false, uids...)
}

// TestRetentionDurabilityNone: expiry works the same in memory; with a zero
// window an object goes at the first Expire that sees it.
func TestRetentionDurabilityNone(t *testing.T) {
	s := openTest(t, "", func(o *Options) { o.Durability = DurabilityNone; o.Retention = 0 })
	defer s.Close()
	u := testUID(uidTask, 0, 0)
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(time.Hour), Ops: []txn.Op{
		txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
		txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
	}})
	expire(t, s, t0, 1)
	present(t, s, false, u)
}

// TestRetentionWaitsForTheJobController: a terminal task of a job whose
// status a job controller writes (observed revision above 0) stays past
// the window until a status written from a view holding its end; a task of
// a job no controller writes, or of a finished job, expires as before.
func TestRetentionWaitsForTheJobController(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	m0 := testUID(uidMachine, 1, 0)
	followed, plain := testUID(uidJob, 1, 0), testUID(uidJob, 1, 1)
	a, b := testUID(uidTask, 1, 0), testUID(uidTask, 1, 1)
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.CreateMachine(machineProto(m0, 1000, 1000)),
		txn.CreateJob(jobProto(followed, "followed", 2)),
		txn.CreateJob(jobProto(plain, "plain", 2)),
		txn.CreateTask(taskProto(a, followed, 10, 10)),
		txn.CreateTask(taskProto(b, plain, 10, 10)),
	}})
	putStatus := func(obs uint64) {
		t.Helper()
		j, _ := s.Snapshot().Job(followed)
		p := j.Proto()
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING, Failed: 1, ObservedRevision: obs}
		mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), UnixNanos: at(0), Ops: []txn.Op{txn.PutJob(p, j.Version)}})
	}
	putStatus(s.Revision()) // the controller follows the job
	r := mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), UnixNanos: at(time.Second), Ops: []txn.Op{
		txn.SetStatus(a, omegav1.TaskState_TASK_STATE_KILLED, 0, ""),
		txn.SetStatus(b, omegav1.TaskState_TASK_STATE_KILLED, 0, ""),
	}})
	expire(t, s, t0.Add(2*time.Second), 0)
	expire(t, s, t0.Add(2*time.Minute), 1) // b only: a's end is not in its job's status yet
	present(t, s, true, a)
	present(t, s, false, b)
	putStatus(r.Revision)                  // written from a view holding a's end
	expire(t, s, t0.Add(3*time.Minute), 0) // a is seen again: one window on
	expire(t, s, t0.Add(4*time.Minute), 1)
	present(t, s, false, a)
}

// TestRetentionJobsManaged: in a cell whose jobs a controller manages
// (Options.JobsManaged), a terminal task of a job whose status was never
// written stays past the window, until a status written from a view
// holding its end; without the option, it expires on the window (the job
// is taken to have no controller). A controller down for longer than the
// window at a job's start would otherwise lose the task's end.
func TestRetentionJobsManaged(t *testing.T) {
	for _, managed := range []bool{false, true} {
		s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute; o.JobsManaged = managed })
		m0, j, a := testUID(uidMachine, 1, 0), testUID(uidJob, 1, 0), testUID(uidTask, 1, 0)
		mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
			txn.CreateMachine(machineProto(m0, 1000, 1000)),
			txn.CreateJob(jobProto(j, "never-written", 2)),
			txn.CreateTask(taskProto(a, j, 10, 10)),
		}})
		r := mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), UnixNanos: at(time.Second), Ops: []txn.Op{
			txn.SetStatus(a, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
		}})
		expire(t, s, t0.Add(2*time.Second), 0)
		if !managed {
			expire(t, s, t0.Add(2*time.Minute), 1)
			present(t, s, false, a)
			continue
		}
		expire(t, s, t0.Add(2*time.Minute), 0) // held: no status counts it yet
		present(t, s, true, a)
		jb, _ := s.Snapshot().Job(j)
		p := jb.Proto()
		p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING, Failed: 1, ObservedRevision: r.Revision}
		mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), UnixNanos: at(0), Ops: []txn.Op{txn.PutJob(p, jb.Version)}})
		expire(t, s, t0.Add(3*time.Minute), 0) // seen again: one window on
		expire(t, s, t0.Add(4*time.Minute), 1)
		present(t, s, false, a)
	}
}

// TestRetentionStampedByAFollower: what Stamp saw terminal (a replicated
// cell's follower, which expires nothing) expires one window after the
// Stamp, not after the first Expire of the member once it leads: the
// window does not start again with a new leader.
func TestRetentionStampedByAFollower(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	u := testUID(uidTask, 0, 0)
	mustCommitAll(t, s, &txn.Txn{UnixNanos: at(0), Ops: []txn.Op{
		txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
		txn.SetStatus(u, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""),
	}})
	s.Stamp(t0) // a follower sees it terminal
	present(t, s, true, u)
	expire(t, s, t0.Add(50*time.Second), 0) // it leads now: not yet a minute
	expire(t, s, t0.Add(time.Minute), 1)    // a minute after the follower saw it
	present(t, s, false, u)
}
