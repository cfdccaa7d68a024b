package live

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

func TestRunConfigValidate(t *testing.T) {
	good := func() Config {
		c := DefaultConfig()
		c.Scheduler, c.Name, c.Transport = schedulers.NewBatch(), "b", inproc.New(nil)
		return c
	}
	if c := good(); c.Validate() != nil {
		t.Fatalf("a good config: %v", c.Validate())
	}
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Scheduler = nil }, "Scheduler is required"},
		{func(c *Config) { c.Name = "" }, "Name is required"},
		{func(c *Config) { c.Transport = nil }, "Transport is required"},
		{func(c *Config) { c.Runner.TTask = -1 }, "Runner.TJob"},
		{func(c *Config) { c.Leave = -time.Second }, "Leave"},
	} {
		c := good()
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
		if rerr := Run(context.Background(), c); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("Run: %v, want Validate's error", rerr)
		}
	}
}

// runCell is a store with machines, and a way to submit batch jobs to it
// and wait until they are placed.
type runCell struct {
	t   *testing.T
	st  *store.Store
	ids *testkit.IDs
}

func newRunCell(t *testing.T, machines int) *runCell {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	c := &runCell{t: t, st: st, ids: testkit.NewIDs(7, 1)}
	var ops []txn.Op
	for i := range machines {
		ops = append(ops, txn.CreateMachine(testkit.Machine(c.ids.Next(), fmt.Sprintf("m%d", i), testkit.Res(8000, 32<<30))))
	}
	if _, err := st.Commit(context.Background(), &txn.Txn{Component: "setup", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	return c
}

// submit creates n batch jobs of two tasks each.
func (c *runCell) submit(prefix string, n int) []uuid.UUID {
	var jobs []uuid.UUID
	for i := range n {
		j := c.ids.Next()
		p := testkit.Job(j, fmt.Sprintf("%s%d", prefix, i), "batch")
		p.Spec.Kind, p.Spec.Replicas = omegav1.JobKind_JOB_KIND_BATCH, 2
		ops := []txn.Op{txn.CreateJob(p)}
		for k := range 2 {
			ops = append(ops, txn.CreateTask(testkit.Task(c.ids.Next(), j, fmt.Sprintf("%s%d-%d", prefix, i, k), testkit.Res(100, 1<<20))))
		}
		if _, err := c.st.Commit(context.Background(), &txn.Txn{Component: "submitter", Ops: ops}); err != nil {
			c.t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// placedBy waits, at most 60 s, until every task of jobs is placed, and
// returns which components placed them.
func (c *runCell) placedBy(jobs []uuid.UUID) map[string]int {
	c.t.Helper()
	want := map[uuid.UUID]bool{}
	for _, j := range jobs {
		want[j] = true
	}
	w, err := c.st.Watch(c.st.Revision())
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		by, pending := map[string]int{}, 0
		c.st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
			if want[tk.Job] {
				if tk.State == omegav1.TaskState_TASK_STATE_PENDING {
					pending++
				} else {
					by[tk.Scheduler]++
				}
			}
			return true
		})
		if pending == 0 {
			return by
		}
		if _, err := w.Next(ctx, 0); err != nil {
			c.t.Fatalf("%d tasks still pending: %v", pending, err)
		}
	}
}

// Run places the jobs of its kind and returns nil when its context ends.
func TestRunPlacesAndStops(t *testing.T) {
	cell := newRunCell(t, 4)
	cfg := DefaultConfig()
	cfg.Scheduler, cfg.Name, cfg.Transport = schedulers.NewBatch(), "batch-a", inproc.New(cell.st)
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	if by := cell.placedBy(cell.submit("j", 5)); by["batch-a"] != 10 || len(by) != 1 {
		t.Fatalf("placed by %v, want batch-a's 10", by)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after its context ended: %v, want nil", err)
	}
}

// lineWatch is an io.Writer for a text logger that closes seen the first
// time a line holds every one of want.
type lineWatch struct {
	mu   sync.Mutex
	want []string
	seen chan struct{}
}

func (w *lineWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.want {
		if !strings.Contains(string(b), s) {
			return len(b), nil
		}
	}
	select {
	case <-w.seen:
	default:
		close(w.seen)
	}
	return len(b), nil
}

// Two instances of a kind join the membership (on the in-memory network);
// once each has been given both names, each job is placed by the one the
// rendezvous hash picks (schedulers.Pick), and both place some; when one
// stops, it leaves, and the other places every job, its share included.
func TestRunInstancesShareAndTakeOver(t *testing.T) {
	cell := newRunCell(t, 4)
	net := membership.NewMemNetwork(membership.ServerName, "scheduler/batch/a", "scheduler/batch/b")
	t.Cleanup(net.Close)
	gossip := func(name string, join ...string) *membership.Config {
		return &membership.Config{Profile: "local", Transport: net.Transport(name), Join: join, Tune: membership.Fast}
	}
	srvCfg := gossip(membership.ServerName)
	srvCfg.Name, srvCfg.Meta = membership.ServerName, membership.Server()
	srv, err := membership.Start(*srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	start := func(instance string) (stop func() error, both <-chan struct{}) {
		cfg := DefaultConfig()
		cfg.Scheduler, cfg.Name, cfg.Transport = schedulers.NewBatch(), instance, inproc.New(cell.st)
		cfg.Membership = gossip("scheduler/batch/"+instance, membership.Addr(srv))
		w := &lineWatch{want: []string{"msg=instances", `members="[a b]"`}, seen: make(chan struct{})}
		cfg.Logger = slog.New(slog.NewTextHandler(w, nil))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg) }()
		stopped := false
		stop = func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			return <-done
		}
		t.Cleanup(func() { stop() })
		return stop, w.seen
	}
	stopA, bothA := start("a")
	stopB, bothB := start("b")
	for _, both := range []<-chan struct{}{bothA, bothB} {
		select {
		case <-both:
		case <-time.After(30 * time.Second):
			t.Fatal("an instance was not given both names within 30 s")
		}
	}
	first := cell.submit("first", 12)
	by := cell.placedBy(first)
	if by["a"] == 0 || by["b"] == 0 || by["a"]+by["b"] != 24 {
		t.Fatalf("placed by %v, want the 24 tasks shared by a and b", by)
	}
	names := []string{"a", "b"}
	cell.st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
		if want := names[schedulers.Pick(tk.Job, names)]; slices.Contains(first, tk.Job) && tk.Scheduler != want {
			t.Errorf("task %s of job %s placed by %s, want %s (the rendezvous hash's)", tk.Name(), tk.Job, tk.Scheduler, want)
		}
		return true
	})
	if err := stopA(); err != nil {
		t.Fatalf("a: Run: %v", err)
	}
	if by := cell.placedBy(cell.submit("second", 12)); by["b"] != 24 || len(by) != 1 {
		t.Fatalf("after a stopped, placed by %v, want all 24 by b", by)
	}
	if err := stopB(); err != nil {
		t.Fatalf("b: Run: %v", err)
	}
}
