package live

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// TestLiveSchedulers: a batch and a service scheduler run live, each on
// its own goroutine and its own client, against one durable in-process
// store, while a submitter creates jobs concurrently. Every job ends
// placed, abandoned (one asks for more than any machine has) or pending;
// no machine is ever over capacity (the store checks after every commit);
// no task is placed twice; and each scheduler's committed claims are what
// the store's own history says it placed. The test waits on the store,
// with a deadline; it never sleeps.
func TestLiveSchedulers(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilitySync))
	ctx := context.Background()
	ids := testkit.NewIDs(1, 1)
	var ops []txn.Op
	for i := range 8 {
		ops = append(ops, txn.CreateMachine(testkit.Machine(ids.Next(), fmt.Sprintf("m%d", i), testkit.Res(4000, 16<<30))))
	}
	if _, err := st.Commit(ctx, &txn.Txn{Component: "setup", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	newClient := func(name string, seed uint64) *client.Client {
		c, err := client.New(ctx, inproc.New(st), client.Config{Component: name, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(seed, 9))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Cell().Close)
		return c
	}
	cfg := schedulers.DefaultRunnerConfig()
	cfg.TJob, cfg.TTask, cfg.RetryDelay = time.Millisecond, 0, 5*time.Millisecond
	var drivers []*Driver
	for i, s := range []schedulers.Scheduler{schedulers.NewBatch(), schedulers.NewService()} {
		r, err := schedulers.NewRunner(s, newClient(s.Kind()+"-0", uint64(i+2)), rand.New(rand.NewPCG(uint64(i), 3)), cfg)
		if err != nil {
			t.Fatal(err)
		}
		in := schedulers.NewIntake()
		in.Add(r)
		drivers = append(drivers, &Driver{Runner: r, Intake: in, Clock: client.RealClock{}, Idle: 50 * time.Millisecond})
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, len(drivers))
	for i, d := range drivers {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = d.Run(runCtx) }()
	}

	// The submitter, concurrently: 20 batch jobs of 3 tasks, 5 service
	// jobs of 2, and one batch job no machine can hold.
	sub := newClient("submitter", 1)
	var jobs []uuid.UUID
	var tooBig uuid.UUID
	submit := func(name, scheduler string, kind omegav1.JobKind, tasks int, cpu int64) uuid.UUID {
		j := ids.Next()
		p := testkit.Job(j, name, scheduler)
		p.Spec.Kind, p.Spec.Replicas = kind, int32(tasks)
		ops := []txn.Op{txn.CreateJob(p)}
		for k := range tasks {
			ops = append(ops, txn.CreateTask(testkit.Task(ids.Next(), j, fmt.Sprintf("%s-%d", name, k), testkit.Res(cpu, 1<<30))))
		}
		tx := sub.NewTxn(sub.View())
		tx.Ops = ops
		if _, err := sub.Commit(ctx, tx); err != nil {
			t.Error(err)
		}
		return j
	}
	var subWG sync.WaitGroup
	subWG.Add(1)
	go func() {
		defer subWG.Done()
		for i := range 25 {
			if i%5 == 4 {
				jobs = append(jobs, submit(fmt.Sprintf("svc%d", i), "service", omegav1.JobKind_JOB_KIND_SERVICE, 2, 500))
			} else {
				jobs = append(jobs, submit(fmt.Sprintf("b%d", i), "batch", omegav1.JobKind_JOB_KIND_BATCH, 3, 200))
			}
		}
		tooBig = submit("huge", "batch", omegav1.JobKind_JOB_KIND_BATCH, 1, 5000)
	}()
	subWG.Wait()

	// Wait, with a deadline, until every task but the huge one's is placed.
	w, err := st.Watch(st.Revision())
	if err != nil {
		t.Fatal(err)
	}
	deadline, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		pending := 0
		s := st.Snapshot()
		s.RangePendingJobs(func(j uuid.UUID, n int) bool {
			if j != tooBig {
				pending += n
			}
			return true
		})
		if pending == 0 {
			break
		}
		if _, err := w.Next(deadline, 0); err != nil {
			t.Fatalf("%d tasks still pending: %v", pending, err)
		}
	}
	// (The huge job is abandoned once it reaches the bound of attempts
	// without a placement, which only its runner knows: it is checked
	// after the drivers stop, as abandoned or still pending.)
	stop()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("driver %d: %v", i, err)
		}
	}

	// Conservation, by the runners' records.
	final := st.Snapshot()
	if err := txn.CheckInvariants(final); err != nil {
		t.Fatal(err)
	}
	seen := map[uuid.UUID]string{}
	for _, d := range drivers {
		for _, rec := range d.Runner.Records() {
			switch {
			case rec.Abandoned:
				seen[rec.UID] = "abandoned"
			case !rec.Placed.IsZero():
				seen[rec.UID] = "placed"
			default:
				seen[rec.UID] = "pending"
			}
		}
	}
	for _, j := range jobs {
		if seen[j] != "placed" {
			t.Errorf("job %s: %q, want placed", j, seen[j])
		}
	}
	if s := seen[tooBig]; s != "abandoned" && s != "pending" {
		t.Errorf("the job no machine holds is %q", s)
	}

	// The store's own history: no task assigned twice, and each
	// scheduler's committed claims are the assignments it made.
	hw, err := st.Watch(1)
	if err != nil {
		t.Fatal(err)
	}
	sets, _, err := hw.Poll(0)
	if err != nil {
		t.Fatal(err)
	}
	assigned := map[uuid.UUID]int{}
	by := map[string]int64{}
	for _, ws := range sets {
		for _, c := range ws.Changes {
			if c.Task != nil && !c.Deleted && c.Task.State == omegav1.TaskState_TASK_STATE_ASSIGNED {
				assigned[c.Task.UID]++
				by[c.Task.Scheduler]++
			}
		}
	}
	for u, n := range assigned {
		if n != 1 {
			t.Errorf("task %s assigned %d times", u, n)
		}
	}
	for _, d := range drivers {
		name := d.Runner.Name()
		if got := d.Runner.Client().Counters().ClaimsCommitted; got != by[name] || got == 0 {
			t.Errorf("%s committed %d claims; the store's history says it assigned %d", name, got, by[name])
		}
	}
}

// TestDriverMembers: an instance told it shares its kind with another
// places only the jobs the rendezvous hash gives it; told the other is
// gone, it takes that one's jobs over and places them too.
func TestDriverMembers(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	ctx := context.Background()
	ids := testkit.NewIDs(2, 1)
	ops := []txn.Op{txn.CreateMachine(testkit.Machine(ids.Next(), "m0", testkit.Res(64000, 64<<30)))}
	var jobs []uuid.UUID
	ours := 0
	for i := range 12 {
		j := ids.Next()
		jobs = append(jobs, j)
		if []string{"batch-a", "batch-b"}[schedulers.Pick(j, []string{"batch-a", "batch-b"})] == "batch-a" {
			ours++
		}
		p := testkit.Job(j, fmt.Sprintf("j%d", i), "batch")
		p.Spec.Replicas = 1
		ops = append(ops, txn.CreateJob(p), txn.CreateTask(testkit.Task(ids.Next(), j, fmt.Sprintf("j%d-0", i), testkit.Res(100, 1<<20))))
	}
	if ours == 0 || ours == len(jobs) {
		t.Fatalf("the fixture's jobs all hash to one instance (%d of %d)", ours, len(jobs))
	}
	c, err := client.New(ctx, inproc.New(st), client.Config{Component: "batch-a", Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cell().Close)
	cfg := schedulers.DefaultRunnerConfig()
	cfg.TJob, cfg.TTask = 0, 0
	r, err := schedulers.NewRunner(schedulers.NewBatch(), c, rand.New(rand.NewPCG(3, 4)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := schedulers.NewIntake()
	in.Add(r)
	members := make(chan []string, 1)
	members <- []string{"batch-a", "batch-b"}
	d := &Driver{Runner: r, Intake: in, Clock: client.RealClock{}, Idle: 20 * time.Millisecond, Members: members}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("the driver ended with %v", err)
		}
	}()
	if _, err := st.Commit(ctx, &txn.Txn{Component: "setup", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	placedJobs := func() (n int) {
		pending := map[uuid.UUID]bool{}
		st.Snapshot().RangePendingJobs(func(j uuid.UUID, k int) bool { pending[j] = k > 0; return true })
		for _, j := range jobs {
			if !pending[j] {
				n++
			}
		}
		return n
	}
	say := func() string {
		n := 0
		for _, j := range jobs {
			if _, ok := in.Owner(j); ok {
				n++
			}
		}
		return fmt.Sprintf("%d of %d jobs placed, %d its own, %d owned", placedJobs(), len(jobs), ours, n)
	}
	waitStore(t, st, "its own jobs placed", func() bool { return placedJobs() == ours }, say)
	members <- []string{"batch-a"}
	waitStore(t, st, "every job placed, the other's taken over", func() bool { return placedJobs() == len(jobs) }, say)
}

// waitStore waits on st's watch, with a deadline, until cond holds.
func waitStore(t *testing.T, st *store.Store, what string, cond func() bool, describe func() string) {
	t.Helper()
	w, err := st.Watch(st.Revision())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !cond() {
		if _, err := w.Next(ctx, 0); err != nil {
			t.Fatalf("%s: %v (%s)", what, err, describe())
		}
	}
}

// failingCommits is a transport whose first n commits fail with err (the
// request never reaching the store).
type failingCommits struct {
	transport.Transport
	mu  sync.Mutex
	n   int
	err error
}

func (f *failingCommits) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	f.mu.Lock()
	fail := f.n > 0
	if fail {
		f.n--
	}
	f.mu.Unlock()
	if fail {
		return txn.Result{}, f.err
	}
	return f.Transport.Commit(ctx, tx)
}

// TestDriverRidesThroughUnavailable: commits the cell cannot take (its
// server gone, no leader yet: transport.ErrUnavailable) queue the job
// again and the driver goes on, placing it once the cell takes commits;
// any other commit error still ends the driver, naming it.
func TestDriverRidesThroughUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		ends bool
	}{
		{fmt.Errorf("%w: connection refused", transport.ErrUnavailable), false},
		{fmt.Errorf("%w: the call's deadline", context.DeadlineExceeded), false},
		{fmt.Errorf("%w: a field it cannot take", txn.ErrInvalid), true},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
			ctx := context.Background()
			ids := testkit.NewIDs(3, 1)
			j := ids.Next()
			p := testkit.Job(j, "j", "batch")
			p.Spec.Replicas = 1
			if _, err := st.Commit(ctx, &txn.Txn{Component: "setup", Ops: []txn.Op{
				txn.CreateMachine(testkit.Machine(ids.Next(), "m0", testkit.Res(64000, 64<<30))),
				txn.CreateJob(p), txn.CreateTask(testkit.Task(ids.Next(), j, "j-0", testkit.Res(100, 1<<20)))}}); err != nil {
				t.Fatal(err)
			}
			tr := &failingCommits{Transport: inproc.New(st), n: 3, err: tc.err}
			c, err := client.New(ctx, tr, client.Config{Component: "batch-0", Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(1, 2))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Cell().Close)
			cfg := schedulers.DefaultRunnerConfig()
			cfg.TJob, cfg.TTask, cfg.RetryDelay = 0, 0, time.Millisecond
			r, err := schedulers.NewRunner(schedulers.NewBatch(), c, rand.New(rand.NewPCG(3, 4)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			in := schedulers.NewIntake()
			in.Add(r)
			d := &Driver{Runner: r, Intake: in, Clock: client.RealClock{}, Idle: 20 * time.Millisecond}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- d.Run(runCtx) }()
			if tc.ends {
				select {
				case err := <-done:
					if !errors.Is(err, txn.ErrInvalid) {
						t.Fatalf("the driver ended with %v, want the commit's ErrInvalid", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the driver still runs 30 s after a commit it cannot make")
				}
				return
			}
			waitStore(t, st, "the job placed through the failures", func() bool {
				placed := false
				st.Snapshot().RangeTasks(func(tk *txn.Task) bool { placed = tk.Machine != uuid.Nil; return true })
				return placed
			}, func() string { return fmt.Sprintf("%d failures left", tr.n) })
			stop()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the driver ended with %v, want its context's end", err)
			}
		})
	}
}
