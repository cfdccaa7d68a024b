package store

// Retention (Expire on the store's clock) against a model of when each
// object must go, and at its edges: a failed expiry commit, a zero time
// between good ones, the ends of time, a monotonic clock stepped back, the
// smallest limits.

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

type flakyPolicy struct{ n *int }

func (flakyPolicy) Name() string { return "flaky" }
func (p flakyPolicy) Admit(_ *txn.State, tx *txn.Txn) error {
	if tx.Component == RetentionComponent {
		*p.n++
		if *p.n == 1 {
			return ErrRejected // a transient refusal (e.g. a quota check, a leader change)
		}
	}
	return nil
}

// TestRetentionExpiresAfterAFailedCommit: when an expiry commit fails (a
// policy refuses it once) or cannot be made at once (a MaxTxnBytes below what
// 30 deletions need), the due entries are kept, and the objects still expire
// within the next minutes, without a reopen.
func TestRetentionExpiresAfterAFailedCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(o *Options)
	}{
		{"policy refuses once", func(o *Options) { n := 0; o.Policy = flakyPolicy{&n} }},
		{"MaxTxnBytes below what 30 deletions need", func(o *Options) { o.Limits.MaxTxnBytes, o.Limits.MaxObjectBytes = 1024, 1024 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := func(o *Options) { o.Retention = time.Minute; tc.mod(o) }
			s := openTest(t, t.TempDir(), mod)
			defer s.Close()
			tk := testUID(uidTask, 54, 0)
			for i := range 30 {
				u := testUID(uidTask, 54, uint32(i))
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1))}})
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 0, "")}})
			}
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			if n, err := s.Expire(ctx, t0); err != nil || n != 0 {
				t.Fatalf("first Expire: %d %v", n, err)
			}
			n, err := s.Expire(ctx, t0.Add(2*time.Minute))
			t.Logf("Expire at +2m: %d, %v", n, err)
			for i := 3; i < 10; i++ {
				n, err = s.Expire(ctx, t0.Add(time.Duration(i)*time.Minute))
				if n > 0 {
					break
				}
			}
			if _, ok := s.Snapshot().Task(tk); ok {
				t.Errorf("terminal task still present at +9m with Retention 1m (last Expire: %d, %v)", n, err)
			}
		})
	}
}

// TestRetentionSurvivesAZeroTime: one Expire with a zero time.Time (an
// uninitialised clock reading) between two good ones changes nothing: what
// was seen terminal one second before does not expire early, and what is seen
// afterwards still expires once its window has passed (the clock neither
// jumps nor stalls).
func TestRetentionSurvivesAZeroTime(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = time.Minute })
	defer s.Close()
	ctx := context.Background()
	finish := func(u uuid.UUID) {
		mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
			txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
			txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
		}})
	}
	T := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	a, b := testUID(uidTask, 56, 0), testUID(uidTask, 56, 1)
	finish(a)
	s.Expire(ctx, T) // sees a at T
	s.Expire(ctx, time.Time{})
	n, _ := s.Expire(ctx, T.Add(time.Second))
	if n != 0 {
		t.Errorf("task seen terminal 1s ago (window 1m) expired after a clock glitch (deleted %d)", n)
	}
	finish(b)
	s.Expire(ctx, T.Add(2*time.Second)) // sees b
	for _, d := range []time.Duration{time.Hour, 24 * time.Hour, 365 * 24 * time.Hour} {
		s.Expire(ctx, T.Add(d))
	}
	if _, ok := s.Snapshot().Task(b); ok {
		t.Errorf("retention stalled: task seen terminal at T+2s still present at T+1y (window 1m)")
	}
}

// TestRetentionWindowOfMaxDuration: with a Retention of the longest
// Duration and the clock started at 0, a finished task stays until exactly
// that long has passed on the store's clock, and goes then.
func TestRetentionWindowOfMaxDuration(t *testing.T) {
	const maxD = time.Duration(1<<63 - 1)
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = maxD })
	defer s.Close()
	ctx := context.Background()
	u := testUID(uidTask, 65, 0)
	mustCommitAll(t, s, &txn.Txn{UnixNanos: -1 << 63, Ops: []txn.Op{
		txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)), txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, "")}})
	for _, now := range []time.Time{time.Unix(0, 0), time.Unix(0, 1<<62), time.Unix(0, 1<<63-2)} {
		n, err := s.Expire(ctx, now)
		t.Logf("Expire(%d): %d %v", now.UnixNano(), n, err)
	}
	// Clock started at 0: at MaxInt64-2 the elapsed is below MaxInt64: not due yet.
	if _, ok := s.Snapshot().Task(u); !ok {
		t.Errorf("expired before the window (max Duration) passed")
	}
	n, err := s.Expire(ctx, time.Unix(0, 1<<63-1))
	t.Logf("Expire(MaxInt64): %d %v", n, err)
	if _, ok := s.Snapshot().Task(u); ok {
		t.Errorf("not expired when exactly max Duration passed")
	}
}

// TestRetentionOnAMonotonicReading: on readings that carry a monotonic
// clock (time.Now's), a task seen terminal 30s after the first Expire does
// not expire 30s later with a 15m window, and does a window after it was
// seen.
func TestRetentionOnAMonotonicReading(t *testing.T) {
	// Between times without a monotonic reading (a caller's own clock), a
	// step back then a correction ages everything by the step: documented
	// (retention.go). time.Now()'s readings carry one, and then a wall
	// clock stepped back and corrected is not seen at all: here the same
	// steps as Add on a monotonic reading, which Sub measures as they are.
	s := openTest(t, t.TempDir(), func(o *Options) { o.Retention = 15 * time.Minute })
	defer s.Close()
	ctx := context.Background()
	T := time.Now()
	s.Expire(ctx, T)
	u := testUID(uidTask, 66, 0)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)), txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, "")}})
	s.Expire(ctx, T.Add(30*time.Second)) // sees u
	n, _ := s.Expire(ctx, T.Add(time.Minute))
	if n != 0 {
		t.Errorf("task seen terminal 30s ago expired with a 15m window")
	}
	if n, _ := s.Expire(ctx, T.Add(15*time.Minute+30*time.Second)); n != 1 {
		t.Errorf("task not expired a window after it was seen: %d", n)
	}
}

// Retention against a model, on virtual times (no monotonic reading):
// random finishes (tasks and jobs, jobs re-put), deletes, random Expire
// times that go forward and back, reopens. Promise: an object is deleted
// by Expire exactly when the store's clock has advanced Retention past the
// first Expire that saw it terminal at its current version — never before,
// never missed.
func TestRetentionMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		retentionModelRun(t, seed)
	}
}

func retentionModelRun(t *testing.T, seed uint64) {
	const window = 10 * time.Second
	rng := rand.New(rand.NewPCG(seed, 99))
	dir := t.TempDir()
	mod := func(o *Options) { o.Retention = window; o.Limits.MaxOps = 3 } // several expiry txns per Expire
	s := openTest(t, dir, mod)
	defer func() { s.Close() }()
	ctx := context.Background()

	type key struct {
		kind omegav1.ObjectKind
		uid  uuid.UUID
	}
	// Model: for each terminal object at its current version, the store
	// clock at the first Expire that saw it (nil: not yet seen).
	seen := map[key]*int64{}
	var clock int64
	started := false
	var prev time.Time
	tickModel := func(now time.Time) {
		if !started {
			clock, started = now.UnixNano(), true
		} else if d := now.Sub(prev); d > 0 {
			clock += int64(d)
		}
		prev = now
	}
	wall := time.Unix(1_800_000_000, 0)
	nextID := uint32(0)
	var liveJobs []uuid.UUID
	totalDeleted := 0
	defer func() { t.Logf("seed %d: %d deleted by Expire", seed, totalDeleted) }()
	for step := 0; step < 300; step++ {
		switch rng.IntN(8) {
		case 7: // a client deletes a terminal task and recreates it (same uid), finished
			var cands []uuid.UUID
			s.Snapshot().RangeTasks(func(x *txn.Task) bool { cands = append(cands, x.UID); return true })
			if len(cands) == 0 {
				continue
			}
			sort.Slice(cands, func(i, j int) bool { return cands[i].String() < cands[j].String() })
			u := cands[rng.IntN(len(cands))]
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, u, 0)}})
			delete(seen, key{omegav1.ObjectKind_OBJECT_KIND_TASK, u})
			if rng.IntN(2) == 0 {
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(u, uuid.Nil, 1, 1))}})
				mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 0, "")}})
				seen[key{omegav1.ObjectKind_OBJECT_KIND_TASK, u}] = nil
			}
		case 0, 1: // a task finishes
			u := testUID(uidTask, 201, nextID)
			nextID++
			mustCommitAll(t, s, &txn.Txn{UnixNanos: rng.Int64(), Ops: []txn.Op{
				txn.CreateTask(taskProto(u, uuid.Nil, 1, 1)),
				txn.SetStatus(u, omegav1.TaskState_TASK_STATE_FAILED, 0, ""),
			}})
			seen[key{omegav1.ObjectKind_OBJECT_KIND_TASK, u}] = nil
		case 2: // a job is created finished, or an existing one put again
			var u uuid.UUID
			var op txn.Op
			finished := rng.IntN(2) == 0
			p := func(u uuid.UUID) *omegav1.Job {
				j := jobProto(u, "j", 1)
				if finished {
					j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_KILLED}
				}
				return j
			}
			if len(liveJobs) > 0 && rng.IntN(2) == 0 {
				u = liveJobs[rng.IntN(len(liveJobs))]
				if _, ok := s.Snapshot().Job(u); !ok {
					continue
				}
				op = txn.PutJob(p(u), 0)
			} else {
				u = testUID(uidJob, 201, nextID)
				nextID++
				liveJobs = append(liveJobs, u)
				op = txn.CreateJob(p(u))
			}
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{op}})
			k := key{omegav1.ObjectKind_OBJECT_KIND_JOB, u}
			if finished {
				seen[k] = nil // a new version: seen anew
			} else {
				delete(seen, k)
			}
		case 3: // wall time goes forward by up to 3 windows, or back a little
			if rng.IntN(4) == 0 {
				wall = wall.Add(-time.Duration(rng.IntN(20)) * time.Second)
			} else {
				wall = wall.Add(time.Duration(rng.Int64N(int64(3 * window))))
			}
			fallthrough
		case 4, 5:
			now := wall
			tickModel(now)
			for _, v := range seen {
				if v == nil {
					continue
				}
			}
			for k, v := range seen {
				if v == nil {
					c := clock
					seen[k] = &c
				}
			}
			n, err := s.Expire(ctx, now)
			if err != nil {
				t.Fatalf("seed %d step %d: Expire: %v", seed, step, err)
			}
			want := 0
			snap := s.Snapshot()
			keys := make([]key, 0, len(seen))
			for k := range seen {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool { return keys[i].uid.String() < keys[j].uid.String() })
			for _, k := range keys {
				at := seen[k]
				due := clock-*at >= int64(window)
				var present bool
				if k.kind == omegav1.ObjectKind_OBJECT_KIND_TASK {
					_, present = snap.Task(k.uid)
				} else {
					_, present = snap.Job(k.uid)
				}
				switch {
				case due && present:
					t.Errorf("seed %d step %d: %s %s seen at %d, clock %d: due but not expired", seed, step, k.kind, k.uid, *at, clock)
				case !due && !present:
					t.Errorf("seed %d step %d: %s %s seen at %d, clock %d: expired EARLY", seed, step, k.kind, k.uid, *at, clock)
				}
				if due {
					want++
					delete(seen, k)
				}
			}
			totalDeleted += n
			if n != want {
				t.Errorf("seed %d step %d: Expire deleted %d, model %d", seed, step, n, want)
			}
			if t.Failed() {
				return
			}
		case 6: // reopen: everything terminal is seen anew; the clock restarts
			if rng.IntN(5) != 0 {
				continue
			}
			s.Close()
			s = openTest(t, dir, mod)
			started = false
			for k := range seen {
				seen[k] = nil
			}
		}
	}
}

// TestRetentionAtTheSmallestLimits: Expire's transactions are bounded by
// MaxTxnBytes with a per-deletion estimate; at the smallest limits the store
// accepts, with a store clock at the end of int64 time, every expiry
// transaction is accepted and all 200 finished tasks go.
func TestRetentionAtTheSmallestLimits(t *testing.T) {
	mod := func(o *Options) {
		o.Retention = 0
		o.Limits = txn.Limits{MaxOps: 1 << 20, MaxStringBytes: txn.MinStringBytes, MaxObjectBytes: txn.MinObjectBytes, MaxTxnBytes: txn.MinObjectBytes}
	}
	s := openTest(t, t.TempDir(), mod)
	defer s.Close()
	var ops []txn.Op
	for i := range 200 {
		u := testUID(uidTask, 202, uint32(i))
		p := &omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: u.String()}}
		ops = append(ops, txn.CreateTask(p), txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 0, ""))
		if len(ops) >= 8 {
			mustCommitAll(t, s, &txn.Txn{Ops: ops})
			ops = nil
		}
	}
	// A store clock near the end of int64 time: the expiry transactions
	// carry it (UnixNanos: ten-byte varint) and a large view revision.
	n, err := s.Expire(context.Background(), time.Unix(0, 1<<63-1))
	if err != nil || n != 200 {
		t.Fatalf("Expire at the smallest limits: %d, %v", n, err)
	}
}
