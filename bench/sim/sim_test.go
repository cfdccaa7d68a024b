package sim

import (
	"bytes"
	"context"
	"fmt"
	"github.com/omega-cell/omega/bench/vtime"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// listSource yields jobs every interval, each with 1..maxTasks tasks.
type listSource struct {
	rng      *rand.Rand
	uids     *rand.Rand
	n, i     int
	interval time.Duration
	maxTasks int
	kind     string
}

func (s *listSource) uid() uuid.UUID {
	u, _ := uuid.NewRandomFromReader(client.RandReader(s.uids))
	return u
}

func (s *listSource) Next() (Arrival, bool) {
	if s.i >= s.n {
		return Arrival{}, false
	}
	s.i++
	job := s.uid()
	name := "job-" + strconv.Itoa(s.i)
	res := &omegav1.Resources{CpuMillis: 500, MemoryBytes: 1 << 30}
	a := Arrival{At: time.Duration(s.i) * s.interval, Job: &omegav1.Job{
		Meta: &omegav1.ObjectMeta{Uid: job.String(), Name: name},
		Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: s.kind, Replicas: 1,
			Template: &omegav1.TaskTemplate{Resources: res}},
	}}
	for k := range 1 + s.rng.IntN(s.maxTasks) {
		a.Tasks = append(a.Tasks, &omegav1.Task{
			Meta: &omegav1.ObjectMeta{Uid: s.uid().String(), Name: name + "-" + strconv.Itoa(k),
				OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: job.String(), Controller: true}}},
			Spec: &omegav1.TaskSpec{Resources: res},
		})
	}
	return a, true
}

type testSim struct {
	e  *Sim
	st *store.Store
}

// newTestSim builds a cell of machines (4 cores, 16 GiB, UP) with two batch
// runners, checking the store's invariants after every commit.
func newTestSim(t *testing.T, seed uint64, machines, jobs int, onCommit func(string, time.Time, *schedulers.Attempt, schedulers.Outcome)) *testSim {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(store.Options{Durability: store.DurabilityNone, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := vtime.NewClock()
	tr := inproc.New(st)
	mk := func(name string, stream uint64) *client.Client {
		c, err := client.New(ctx, tr, client.Config{Component: name, Clock: clock, Rand: rand.New(rand.NewPCG(seed, stream))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sub := mk("submitter", 100)
	tx := sub.NewTxn(sub.View())
	for i := range machines {
		tx.Ops = append(tx.Ops, txn.CreateMachine(&omegav1.Machine{
			Meta: &omegav1.ObjectMeta{Uid: sub.NewUID().String(), Name: fmt.Sprintf("m%d", i)},
			Spec: &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: 4000, MemoryBytes: 16 << 30}, FailureDomain: fmt.Sprintf("rack%d", i%4)},
		}))
	}
	if _, err := sub.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	var runners []*schedulers.Runner
	for i := range 2 {
		c := mk(fmt.Sprintf("batch-%d", i), uint64(i+1))
		r, err := schedulers.NewRunner(schedulers.NewBatch(), c, rand.New(rand.NewPCG(seed, uint64(10+i))), schedulers.DefaultRunnerConfig())
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
	}
	src := &listSource{rng: rand.New(rand.NewPCG(seed, 200)), uids: rand.New(rand.NewPCG(seed, 201)), n: jobs, interval: 50 * time.Millisecond, maxTasks: 6, kind: "batch"}
	e, err := New(Options{Store: st, Submitter: sub, Runners: runners, Source: src, Clock: clock,
		Duration: time.Duration(jobs)*50*time.Millisecond + 10*time.Minute, OnCommit: onCommit})
	if err != nil {
		t.Fatal(err)
	}
	return &testSim{e: e, st: st}
}

func (s *testSim) run(t *testing.T) (summary, jobsCSV []byte) {
	t.Helper()
	if err := s.e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	sum := s.e.Summarize(1, 0)
	sum.Host = Host{}
	if err := sum.WriteJSON(&a); err != nil {
		t.Fatal(err)
	}
	if err := s.e.WriteJobsCSV(&b); err != nil {
		t.Fatal(err)
	}
	return a.Bytes(), b.Bytes()
}

// TestDeterministic: two runs with one seed give the same bytes; another
// seed gives other bytes.
func TestDeterministic(t *testing.T) {
	const seed = 7
	a1, j1 := newTestSim(t, seed, 8, 300, nil).run(t)
	a2, j2 := newTestSim(t, seed, 8, 300, nil).run(t)
	if !bytes.Equal(a1, a2) || !bytes.Equal(j1, j2) {
		t.Fatalf("seed %d: two runs differ:\n%s\n---\n%s", seed, a1, a2)
	}
	a3, _ := newTestSim(t, seed+1, 8, 300, nil).run(t)
	if bytes.Equal(a1, a3) {
		t.Fatalf("seeds %d and %d gave identical summaries", seed, seed+1)
	}
}

// TestConservation: every submitted job ends scheduled, abandoned or
// pending; the tasks placed are in the store; the conflict counters match
// the engine's log of commits.
func TestConservation(t *testing.T) {
	const seed = 3
	type logged struct {
		conflicted, claimsConflicted int
	}
	log := map[string]*logged{}
	var s *testSim
	s = newTestSim(t, seed, 4, 400, func(name string, _ time.Time, a *schedulers.Attempt, _ schedulers.Outcome) {
		if log[name] == nil {
			log[name] = &logged{}
		}
		if a.Result.Conflicted() {
			log[name].conflicted++
		}
		log[name].claimsConflicted += a.Result.ClaimsConflicted
	})
	if err := s.e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum := s.e.Summarize(seed, 4)
	if sum.JobsSubmitted != 400 {
		t.Fatalf("seed %d: %d jobs submitted, want 400", seed, sum.JobsSubmitted)
	}
	if got := sum.JobsScheduled + sum.JobsAbandoned + sum.JobsPending; got != sum.JobsSubmitted {
		t.Fatalf("seed %d: scheduled %d + abandoned %d + pending %d != submitted %d", seed, sum.JobsScheduled, sum.JobsAbandoned, sum.JobsPending, sum.JobsSubmitted)
	}
	placed := 0
	s.st.Snapshot().RangeTasks(func(t *txn.Task) bool {
		if t.Placed() {
			placed++
		}
		return true
	})
	if placed != sum.TasksPlaced {
		t.Fatalf("seed %d: store holds %d placed tasks, summary says %d", seed, placed, sum.TasksPlaced)
	}
	// 4 machines x 8 tasks of 500m fill up: the later jobs cannot all fit.
	if sum.JobsAbandoned == 0 && sum.JobsPending == 0 {
		t.Fatalf("seed %d: a full cell abandoned nothing", seed)
	}
	if err := txn.CheckInvariants(s.st.Snapshot()); err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	for _, x := range sum.Schedulers {
		l := log[x.Name]
		if l == nil || int64(l.conflicted) != x.Conflicts || int64(l.claimsConflicted) != x.ClaimsConflicted {
			t.Fatalf("seed %d: %s: summary conflicts %d / claims %d, the commit log says %+v", seed, x.Name, x.Conflicts, x.ClaimsConflicted, l)
		}
		conflicts += int(x.Conflicts)
	}
	if conflicts == 0 {
		t.Fatalf("seed %d: two schedulers on 4 machines never conflicted", seed)
	}
}

// TestEvictedJobPlacedAgain: a task evicted back to PENDING is noticed by
// the engine and its job handed back to its scheduler, which places it
// again.
func TestEvictedJobPlacedAgain(t *testing.T) {
	const seed = 9
	s := newTestSim(t, seed, 8, 20, nil)
	ctx := context.Background()
	if err := s.e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// Evict one placed task.
	var victim *txn.Task
	s.st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
		if tk.Placed() {
			victim = tk
			return false
		}
		return true
	})
	if victim == nil {
		t.Fatalf("seed %d: nothing placed", seed)
	}
	sub := s.e.o.Submitter
	if err := sub.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	tx := sub.NewTxn(sub.View())
	tx.Ops = []txn.Op{txn.ForceEvict(victim.UID, victim.Version, "test")}
	if r, err := sub.Commit(ctx, tx); err != nil || r.Committed != 1 {
		t.Fatalf("evict: %+v %v", r, err)
	}
	now := s.e.o.Clock.Now()
	if err := s.e.afterStep(ctx, now); err != nil {
		t.Fatal(err)
	}
	// The job's runner took it back and, idle, began an attempt at once:
	// its actor's next step is an attempt landing after its decision time.
	owner, ok := s.e.intake.Owner(victim.Job)
	if !ok {
		t.Fatalf("seed %d: the victim's job %s has no owner", seed, victim.Job)
	}
	k := s.e.wakes[s.e.byRunner[owner]]
	next, queued := s.e.eng.Queued(k)
	if !queued || next.Phase != vtime.PhaseCommit || next.At.Before(now) {
		t.Fatalf("seed %d: the owner was not woken into an attempt: next %+v queued %v", seed, next, queued)
	}
	// Step the engine until that attempt has landed.
	for n, q := next, queued; q && n == next; n, q = s.e.eng.Queued(k) {
		if _, ok, err := s.e.eng.Step(ctx, next.At); err != nil || !ok {
			t.Fatalf("seed %d: step: ok %v, %v", seed, ok, err)
		}
	}
	tk, _ := s.st.Snapshot().Task(victim.UID)
	if !tk.Placed() {
		t.Fatalf("seed %d: evicted task %s not placed again (%s)", seed, tk.UID, tk.State)
	}
}
