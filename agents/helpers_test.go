package agents

// Fixtures shared by the fleet's tests: a virtual clock, a store that checks
// its invariants after every commit, deterministic uids and object
// builders, and a recording transport that can act just before a commit
// lands (a transport "told to" make the state move under the fleet).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

const (
	gib = int64(1) << 30

	assigned = omegav1.TaskState_TASK_STATE_ASSIGNED
	running  = omegav1.TaskState_TASK_STATE_RUNNING
	failedSt = omegav1.TaskState_TASK_STATE_FAILED
)

// t0 is where virtual time starts in the tests.
var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// vclock is virtual time for a client: Sleep advances it and returns.
type vclock struct{ now time.Time }

func (c *vclock) Now() time.Time { return c.now }

func (c *vclock) Sleep(ctx context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return ctx.Err()
}

// openStore opens an in-memory store that checks its invariants after
// every commit. history 0 keeps the default.
func openStore(t testing.TB, history int) *store.Store {
	t.Helper()
	return openStoreCheck(t, history, true)
}

// openStoreCheck is openStore that checks invariants after every commit
// only if check (a full scan per commit: long runs check now and then).
func openStoreCheck(t testing.TB, history int, check bool) *store.Store {
	t.Helper()
	o := storekit.Options(t, store.DurabilityNone)
	o.HistoryChanges, o.CheckInvariants = history, check
	return storekit.Open(t, o)
}

// commitAt commits ops straight to the store, stamped at virtual time at
// (a claim's time is its assignment time), and fails the test unless every
// operation committed.
func commitAt(t testing.TB, st *store.Store, at time.Time, ops ...txn.Op) txn.Result {
	t.Helper()
	res, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "test", UnixNanos: at.UnixNano(), Ops: ops})
	if err != nil {
		t.Fatalf("test commit: %v", err)
	}
	if res.Conflicted() || res.Revision == 0 {
		t.Fatalf("test commit conflicted: %+v", res.Outcomes)
	}
	return res
}

// ids hands out deterministic uids from a seed.
type ids struct{ *testkit.IDs }

func newIDs(seed uint64) *ids { return &ids{testkit.NewIDs(seed, 0xa9e)} }

func (g *ids) next() uuid.UUID { return g.Next() }

func machineProto(uid uuid.UUID, name string, cpu, mem int64) *omegav1.Machine {
	m := testkit.Machine(uid, name, testkit.Res(cpu, mem))
	m.Spec.FailureDomain = "rack-" + name
	return m
}

func taskProto(uid uuid.UUID, name string, cpu, mem int64, duration time.Duration) *omegav1.Task {
	t := testkit.Task(uid, uuid.Nil, name, testkit.Res(cpu, mem))
	t.Spec.DurationMillis = duration.Milliseconds()
	return t
}

func res(cpu, mem int64) txn.Resources { return testkit.Res(cpu, mem) }

// makeMachines registers n machines of 4 cores and 16 GiB.
func makeMachines(t testing.TB, st *store.Store, g *ids, n int) []uuid.UUID {
	t.Helper()
	var ms []uuid.UUID
	var ops []txn.Op
	for i := range n {
		u := g.next()
		ms = append(ms, u)
		ops = append(ops, txn.CreateMachine(machineProto(u, fmt.Sprintf("m%03d", i), 4000, 16*gib)))
	}
	commitAt(t, st, t0, ops...)
	return ms
}

// place creates a task of 500 millicores and 1 GiB with the given duration
// and claims it on machine at virtual time at, in one transaction. It
// returns the task's uid and the revision (the version the claim gave it).
func place(t testing.TB, st *store.Store, g *ids, machine uuid.UUID, at time.Time, duration time.Duration) (uuid.UUID, uint64) {
	t.Helper()
	u := g.next()
	r := commitAt(t, st, at,
		txn.CreateTask(taskProto(u, "task-"+u.String()[:8], 500, gib, duration)),
		txn.Claim(u, machine, res(500, gib), 0))
	return u, r.Revision
}

// recorder wraps a Transport and logs every commit, encoded before it is
// sent. before, if set, runs just before a commit is sent: it may commit to
// the store itself, so the state moves under the caller.
type recorder struct {
	client.Transport
	before func(n int, tx *txn.Txn)

	mu  sync.Mutex
	log []recorded
}

type recorded struct {
	enc string
	tx  *txn.Txn
	res txn.Result
	err error
}

// recordingSharer keeps the in-process snapshot sharing through the wrapper.
type recordingSharer struct {
	*recorder
	client.SnapshotSharer
}

func record(tr client.Transport) (*recorder, client.Transport) {
	r := &recorder{Transport: tr}
	if s, ok := tr.(client.SnapshotSharer); ok {
		return r, recordingSharer{r, s}
	}
	return r, r
}

func (r *recorder) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	enc := encodeTxn(tx)
	r.mu.Lock()
	n := len(r.log)
	r.mu.Unlock()
	if r.before != nil {
		r.before(n, tx)
	}
	res, err := r.Transport.Commit(ctx, tx)
	r.mu.Lock()
	r.log = append(r.log, recorded{enc: enc, tx: tx, res: res, err: err})
	r.mu.Unlock()
	return res, err
}

func (r *recorder) commits() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.log...)
}

// encodeTxn writes out everything a transaction carries, the machine
// objects as deterministic protobuf bytes.
func encodeTxn(tx *txn.Txn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "view=%d conflict=%d commit=%d component=%s at=%d\n", tx.ViewRevision, tx.Conflict, tx.Commit, tx.Component, tx.UnixNanos)
	for i := range tx.Ops {
		op := &tx.Ops[i]
		fmt.Fprintf(&b, "%d %s task=%s machine=%s state=%s expect=%d msg=%q", i, op.Kind, op.Task, op.Machine, op.State, op.ExpectVersion, op.Message)
		if op.NewMachine != nil {
			bs, err := proto.MarshalOptions{Deterministic: true}.Marshal(op.NewMachine)
			if err != nil {
				panic(err)
			}
			fmt.Fprintf(&b, " object=%x", bs)
		}
		if op.NewTask != nil || op.NewJob != nil {
			b.WriteString(" (unexpected object)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// harness is a store, a recording in-process transport, the fleet's client
// and the fleet.
type harness struct {
	st    *store.Store
	rec   *recorder
	cl    *client.Client
	fleet *SimFleet
}

func newHarness(t testing.TB, st *store.Store, cfg FleetConfig, opts ...inproc.Option) *harness {
	t.Helper()
	rec, tr := record(inproc.New(st, opts...))
	cl, err := client.New(context.Background(), tr, client.Config{
		Component: "fleet",
		Clock:     &vclock{now: t0},
		Rand:      rand.New(rand.NewPCG(7, 7)),
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	f, err := NewSimFleet(context.Background(), cl, cfg)
	if err != nil {
		t.Fatalf("NewSimFleet: %v", err)
	}
	t.Cleanup(f.Close)
	return &harness{st: st, rec: rec, cl: cl, fleet: f}
}

// tick runs one fleet tick and fails the test on an error.
func (h *harness) tick(t testing.TB, now time.Time) txn.Result {
	t.Helper()
	r, err := h.fleet.Tick(context.Background(), now)
	if err != nil {
		t.Fatalf("tick at %v: %v", now.Sub(t0), err)
	}
	return r
}

func taskAt(t testing.TB, s *txn.State, u uuid.UUID) *txn.Task {
	t.Helper()
	tk, ok := s.Task(u)
	if !ok {
		t.Fatalf("task %s missing", u)
	}
	return tk
}

func machineAt(t testing.TB, s *txn.State, u uuid.UUID) *txn.Machine {
	t.Helper()
	m, ok := s.Machine(u)
	if !ok {
		t.Fatalf("machine %s missing", u)
	}
	return m
}
