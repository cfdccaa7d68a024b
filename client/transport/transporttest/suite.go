// Package transporttest is the conformance suite every transport runs (in
// the manner of hashicorp/raft's bench suite: one suite, every backend): the
// in-process transport (client/inproc) and the gRPC one (client/remote). A
// transport that passes it is one schedulers and agents cannot tell from
// any other: the same results, the same typed errors (errors.Is and the
// operation's index and kind), the same watch order, the same compaction
// signal.
//
// A backend's test calls Run with a function that opens a fresh store with
// the options given (a temporary directory is in them) behind the
// transport under test.
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Backend opens a store with opts behind the transport under test. It
// registers its own cleanup with t.Cleanup.
type Backend func(t testing.TB, opts store.Options) transport.Transport

// Run runs the suite against backend.
func Run(t *testing.T, backend Backend) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, b Backend)
	}{
		{"CommitAndSnapshot", testCommitAndSnapshot},
		{"Results", testResults},
		{"TypedErrors", testTypedErrors},
		{"Watch", testWatch},
		{"WatchNextWaits", testWatchNextWaits},
		{"Compacted", testCompacted},
		{"ConcurrentCommitters", testConcurrent},
		{"Lifecycle", testLifecycle},
		{"Offers", testOffers},
		{"Quotas", testQuotas},
		{"Leases", testLeases},
		{"RandomHistory", testRandomHistory},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, backend) })
	}
}

func options(t testing.TB) store.Options {
	o := store.DefaultOptions(t.TempDir())
	o.MemTableSize = 4 << 20
	o.CheckInvariants = true
	return o
}

// Deterministic uids of the suite.
func uid(kind byte, i int) uuid.UUID {
	var u uuid.UUID
	u[0], u[1], u[2] = kind, byte(i>>8), byte(i)
	u[6], u[8], u[15] = 0x40, 0x80, 1
	return u
}

func machine(i int, cpu, mem int64) *omegav1.Machine {
	return &omegav1.Machine{
		Meta:   &omegav1.ObjectMeta{Uid: uid('M', i).String(), Name: fmt.Sprintf("m%d", i), Labels: map[string]string{"rack": "r1"}},
		Spec:   &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: cpu, MemoryBytes: mem}, FailureDomain: "fd"},
		Status: &omegav1.MachineStatus{AgentAddress: "127.0.0.1:7946"},
	}
}

func task(i int, cpu, mem int64) *omegav1.Task {
	return &omegav1.Task{
		Meta: &omegav1.ObjectMeta{Uid: uid('T', i).String(), Name: fmt.Sprintf("t%d", i)},
		Spec: &omegav1.TaskSpec{Resources: &omegav1.Resources{CpuMillis: cpu, MemoryBytes: mem}, Command: &omegav1.Command{Path: "/bin/true"}},
	}
}

func commit(t testing.TB, tr transport.Transport, tx *txn.Txn) txn.Result {
	t.Helper()
	res, err := tr.Commit(context.Background(), tx)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return res
}

func snapshot(t testing.TB, tr transport.Transport) *txn.State {
	t.Helper()
	st, err := tr.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return st
}

// equalStates compares two states object by object (machines' coarse
// sequence numbers aside, which a listing may set to its revision).
func equalStates(a, b *txn.State) error {
	if a.Revision() != b.Revision() || a.NumMachines() != b.NumMachines() || a.NumTasks() != b.NumTasks() || a.NumJobs() != b.NumJobs() {
		return fmt.Errorf("revision %d with %d/%d/%d machines/tasks/jobs vs %d with %d/%d/%d",
			a.Revision(), a.NumMachines(), a.NumTasks(), a.NumJobs(), b.Revision(), b.NumMachines(), b.NumTasks(), b.NumJobs())
	}
	var err error
	a.RangeMachines(func(x *txn.Machine) bool {
		y, ok := b.Machine(x.UID)
		if !ok {
			err = fmt.Errorf("machine %s missing", x.UID)
			return false
		}
		px, py := x.Proto(), y.Proto()
		px.Status.Seq, py.Status.Seq, px.Status.LastClaim, py.Status.LastClaim = 0, 0, 0, 0
		if !proto.Equal(px, py) {
			err = fmt.Errorf("machine %s: %v vs %v", x.UID, px, py)
		}
		return err == nil
	})
	a.RangeTasks(func(x *txn.Task) bool {
		if y, ok := b.Task(x.UID); !ok || !proto.Equal(x.Proto(), y.Proto()) {
			err = fmt.Errorf("task %s differs", x.UID)
		}
		return err == nil
	})
	a.RangeJobs(func(x *txn.Job) bool {
		if y, ok := b.Job(x.UID); !ok || !proto.Equal(x.Proto(), y.Proto()) {
			err = fmt.Errorf("job %s differs", x.UID)
		}
		return err == nil
	})
	if err == nil && a.NumOffers() != b.NumOffers() {
		err = fmt.Errorf("%d offers vs %d", a.NumOffers(), b.NumOffers())
	}
	if err == nil && a.NumQuotas() != b.NumQuotas() {
		err = fmt.Errorf("%d quotas vs %d", a.NumQuotas(), b.NumQuotas())
	}
	a.RangeQuotas(func(x *txn.Quota) bool {
		if y, ok := b.Quota(x.UID); !ok || !proto.Equal(x.Proto(), y.Proto()) || !a.QuotaUsed(x.UID).Equal(b.QuotaUsed(x.UID)) {
			err = fmt.Errorf("quota %s differs", x.UID)
		}
		return err == nil
	})
	if err == nil && a.NumLeases() != b.NumLeases() {
		err = fmt.Errorf("%d leases vs %d", a.NumLeases(), b.NumLeases())
	}
	a.RangeLeases(func(x *txn.Lease) bool {
		if y, ok := b.Lease(x.UID); !ok || !proto.Equal(x.Proto(), y.Proto()) {
			err = fmt.Errorf("lease %s differs", x.UID)
		}
		return err == nil
	})
	a.RangeOffers(func(x *txn.Offer) bool {
		if y, ok := b.Offer(x.UID); !ok || !proto.Equal(x.Proto(), y.Proto()) {
			err = fmt.Errorf("offer %s differs", x.UID)
		}
		return err == nil
	})
	return err
}

// testOffers: a two-level allocator's offer crosses the transport whole —
// its locks, which the store derived, in the commit's watch and in a
// snapshot; a claim on what it locks conflicts for anyone but its
// framework; only the framework answers it (a typed error naming the
// operation otherwise), with claims inside it; the answer's deletion
// reaches the watch.
func testOffers(t *testing.T, b Backend) {
	tr := b(t, options(t))
	commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 4000, 4000)), txn.CreateMachine(machine(1, 2000, 2000))}})
	base := snapshot(t, tr)
	w, err := tr.Watch(context.Background(), base.Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	o := uid('O', 1)
	res := commit(t, tr, &txn.Txn{ViewRevision: base.Revision(), Component: "allocator", Ops: []txn.Op{
		txn.CreateOffer(&omegav1.Offer{Meta: &omegav1.ObjectMeta{Uid: o.String(), Name: "offer-1"}, Spec: &omegav1.OfferSpec{Framework: "fw"}}),
	}})
	st := snapshot(t, tr)
	got, ok := st.Offer(o)
	if !ok || got.Framework != "fw" || got.Len() != 2 || got.Version != res.Revision {
		t.Fatalf("the snapshot's offer: %+v (found %v)", got, ok)
	}
	if l, _ := got.Lock(uid('M', 0)); l.CPU != 4000 || l.Memory != 4000 {
		t.Fatalf("the offer locks %v on m0, want all of it", l)
	}
	res = commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Component: "other", Ops: []txn.Op{
		txn.CreateTask(task(1, 10, 10)), txn.Claim(uid('T', 1), uid('M', 0), txn.Resources{CPU: 10, Memory: 10}, 0),
	}})
	if res.Outcomes[1].Code != omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES {
		t.Fatalf("a claim on offered resources: %+v", res.Outcomes[1])
	}
	_, err = tr.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "other", Ops: []txn.Op{txn.Answer(o)}})
	var oe *txn.OpError
	if !errors.Is(err, txn.ErrIllegalState) || !errors.As(err, &oe) || oe.Index != 0 || oe.Kind != txn.OpAnswer {
		t.Fatalf("an answer by another component: %v, want ErrIllegalState at op 0 (answer)", err)
	}
	st = snapshot(t, tr)
	x, _ := st.Task(uid('T', 1))
	res = commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Component: "fw", Ops: []txn.Op{
		txn.Answer(o),
		txn.Claim(uid('T', 1), uid('M', 1), txn.Resources{CPU: 1500, Memory: 10}, x.Version),
		txn.CreateTask(task(2, 10, 10)), txn.Claim(uid('T', 2), uid('M', 1), txn.Resources{CPU: 1000, Memory: 10}, 0), // beyond the offer's 2000 on m1
	}})
	if res.Committed != 3 || !res.Outcomes[1].Committed() || res.Outcomes[3].Code != omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES {
		t.Fatalf("the answer: %+v", res.Outcomes)
	}
	head := snapshot(t, tr)
	if head.NumOffers() != 0 {
		t.Fatalf("%d offers after the answer", head.NumOffers())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := base
	var created, deleted bool
	for state.Revision() < head.Revision() {
		sets, err := w.Next(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range sets {
			for _, c := range ws.Changes {
				if c.Offer != nil && c.Kind == omegav1.ObjectKind_OBJECT_KIND_OFFER {
					created = created || (c.Created && c.Offer.Len() == 2)
					deleted = deleted || c.Deleted
				}
			}
			state = state.Apply(ws)
		}
	}
	if !created || !deleted {
		t.Fatalf("the watch carried the offer's creation with its locks %v, its answer %v", created, deleted)
	}
	if err := equalStates(head, state); err != nil {
		t.Fatalf("the watched state differs from the snapshot: %v", err)
	}
}

// testCommitAndSnapshot: a commit's revision is the next one, and a
// snapshot afterwards holds what it created, derived allocations included.
func testCommitAndSnapshot(t *testing.T, b Backend) {
	tr := b(t, options(t))
	before := snapshot(t, tr)
	res := commit(t, tr, &txn.Txn{ViewRevision: before.Revision(), Component: "suite", UnixNanos: 5, Ops: []txn.Op{
		txn.CreateMachine(machine(0, 1000, 1000)),
		txn.CreateTask(task(0, 300, 300)),
		txn.Claim(uid('T', 0), uid('M', 0), txn.Resources{CPU: 300, Memory: 300}, 0),
	}})
	if res.Revision != before.Revision()+1 || res.Committed != 3 || res.Base != before.Revision() {
		t.Fatalf("result %+v after revision %d", res, before.Revision())
	}
	st := snapshot(t, tr)
	if st.Revision() != res.Revision {
		t.Fatalf("snapshot at %d after a commit at %d", st.Revision(), res.Revision)
	}
	m, ok := st.Machine(uid('M', 0))
	if !ok || !m.Allocated.Equal(txn.Resources{CPU: 300, Memory: 300}) || m.Tasks != 1 {
		t.Fatalf("machine %+v", m)
	}
	tk, ok := st.Task(uid('T', 0))
	if !ok || tk.State != omegav1.TaskState_TASK_STATE_ASSIGNED || tk.Machine != uid('M', 0) || tk.Scheduler != "suite" || tk.Assigned != 5 {
		t.Fatalf("task %+v", tk)
	}
	if err := txn.CheckInvariants(st); err != nil {
		t.Fatal(err)
	}
}

// testResults: conflicts are outcomes with their codes and counts, an
// all-or-nothing transaction with a conflict aborts the rest, and Base
// names the revision evaluated against.
func testResults(t *testing.T, b Backend) {
	tr := b(t, options(t))
	commit(t, tr, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(machine(0, 1000, 1000)),
		txn.CreateTask(task(0, 600, 600)), txn.CreateTask(task(1, 600, 600)), txn.CreateTask(task(2, 100, 100)),
	}})
	st := snapshot(t, tr)
	v := func(i int) uint64 { x, _ := st.Task(uid('T', i)); return x.Version }
	res := commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{
		txn.Claim(uid('T', 0), uid('M', 0), txn.Resources{CPU: 600, Memory: 600}, v(0)),
		txn.Claim(uid('T', 1), uid('M', 0), txn.Resources{CPU: 600, Memory: 600}, v(1)), // no room left
		txn.Claim(uid('T', 2), uid('M', 0), txn.Resources{CPU: 100, Memory: 100}, v(2)+7),
	}})
	want := []omegav1.OutcomeCode{omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED, omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES, omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED}
	if len(res.Outcomes) != 3 || res.Committed != 1 || res.Conflicts != 2 || res.ClaimsConflicted != 2 || res.Base != st.Revision() || res.Revision != st.Revision()+1 {
		t.Fatalf("incremental result %+v", res)
	}
	for i, o := range res.Outcomes {
		if o.Code != want[i] || (o.Code != omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED && o.Detail == "") {
			t.Fatalf("outcome %d: %s %q, want %s with a detail", i, o.Code, o.Detail, want[i])
		}
	}
	st = snapshot(t, tr)
	res = commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Commit: omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, Ops: []txn.Op{
		txn.Claim(uid('T', 2), uid('M', 0), txn.Resources{CPU: 100, Memory: 100}, v(2)),
		txn.Claim(uid('T', 1), uid('M', 0), txn.Resources{CPU: 600, Memory: 600}, v(1)),
	}})
	if res.Revision != 0 || res.Committed != 0 || res.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_ABORTED ||
		res.Outcomes[1].Code != omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES || res.Base != st.Revision() {
		t.Fatalf("all-or-nothing result %+v", res)
	}
	if after := snapshot(t, tr); after.Revision() != st.Revision() {
		t.Fatalf("an aborted transaction moved the store to %d", after.Revision())
	}
}

// testTypedErrors: every kind of bad input comes back as its sentinel
// (errors.Is), with the index and kind of the operation at fault, and
// changes nothing.
func testTypedErrors(t *testing.T, b Backend) {
	o := options(t)
	o.Limits.MaxOps = 8
	tr := b(t, o)
	commit(t, tr, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(machine(0, 1000, 1000)),
		txn.CreateTask(task(0, 10, 10)), txn.CreateTask(task(1, 10, 10)),
		txn.Claim(uid('T', 1), uid('M', 0), txn.Resources{CPU: 10, Memory: 10}, 0),
	}})
	st := snapshot(t, tr)
	v := func(i int) uint64 { x, _ := st.Task(uid('T', i)); return x.Version }
	badName := task(9, 1, 1)
	badName.Meta.Name = "\xff"
	tooMany := make([]txn.Op, 9)
	for i := range tooMany {
		tooMany[i] = txn.CreateTask(task(100+i, 1, 1))
	}
	ok := txn.SetStatus(uid('T', 0), omegav1.TaskState_TASK_STATE_KILLED, v(0), "")
	for _, c := range []struct {
		name  string
		tx    *txn.Txn
		want  error
		index int // -1: the whole transaction
		kind  txn.OpKind
	}{
		{"invalid", &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{ok, txn.CreateTask(badName)}}, txn.ErrInvalid, 1, txn.OpCreate},
		{"not found", &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.SetStatus(uid('T', 77), omegav1.TaskState_TASK_STATE_KILLED, 0, "")}}, txn.ErrNotFound, 0, txn.OpSetStatus},
		{"already exists", &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{ok, txn.CreateTask(task(0, 1, 1))}}, txn.ErrAlreadyExists, 1, txn.OpCreate},
		{"too many operations", &txn.Txn{ViewRevision: st.Revision(), Ops: tooMany}, txn.ErrTooLarge, -1, 0},
		{"not pending", &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.Claim(uid('T', 1), uid('M', 0), txn.Resources{CPU: 1}, v(1))}}, txn.ErrNotPending, 0, txn.OpClaim},
		{"illegal state", &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.ForceEvict(uid('T', 0), v(0), "")}}, txn.ErrIllegalState, 0, txn.OpEvict},
		{"in use", &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, uid('M', 0), 0)}}, txn.ErrInUse, 0, txn.OpDelete},
		{"future revision", &txn.Txn{ViewRevision: st.Revision() + 5, Ops: []txn.Op{ok}}, txn.ErrFutureRevision, -1, 0},
		{"nil", nil, txn.ErrInvalid, -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := tr.Commit(context.Background(), c.tx)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			var oe *txn.OpError
			switch {
			case c.index >= 0 && (!errors.As(err, &oe) || oe.Index != c.index || oe.Kind != c.kind):
				t.Fatalf("error %v: want op %d (%s)", err, c.index, c.kind)
			case c.index < 0 && errors.As(err, &oe):
				t.Fatalf("a whole-transaction error %v names op %d", err, oe.Index)
			}
			if res.Revision != 0 || res.Committed != 0 {
				t.Fatalf("a result with the error: %+v", res)
			}
			if after := snapshot(t, tr); after.Revision() != st.Revision() {
				t.Fatalf("bad input moved the store to %d", after.Revision())
			}
		})
	}
}

// testWatch: a watch from a snapshot's revision delivers every later
// revision once, in order, and applying them to the snapshot gives the
// newest one.
func testWatch(t *testing.T, b Backend) {
	tr := b(t, options(t))
	commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 10000, 10000))}})
	base := snapshot(t, tr)
	w, err := tr.Watch(context.Background(), base.Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var revs []uint64
	for i := range 20 {
		st := snapshot(t, tr)
		ops := []txn.Op{txn.CreateTask(task(i, 10, 10)), txn.Claim(uid('T', i), uid('M', 0), txn.Resources{CPU: 10, Memory: 10}, 0)}
		if i%3 == 2 {
			x, _ := st.Task(uid('T', i-1))
			ops = append(ops, txn.SetStatus(uid('T', i-1), omegav1.TaskState_TASK_STATE_SUCCEEDED, x.Version, "done"))
		}
		revs = append(revs, commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Ops: ops}).Revision)
	}
	head := snapshot(t, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := base
	var got []uint64
	for len(got) < len(revs) {
		sets, err := w.Next(ctx, 7)
		if err != nil {
			t.Fatalf("watch after %v: %v", got, err)
		}
		if len(sets) > 7 {
			t.Fatalf("Next(7) returned %d write sets", len(sets))
		}
		for _, ws := range sets {
			got = append(got, ws.Revision)
			// Each task's change carries the state the task left (as the
			// watcher's copy before the revision has it), UNSPECIFIED for a
			// task the revision created.
			for _, c := range ws.Changes {
				if c.Task == nil {
					continue
				}
				want := omegav1.TaskState_TASK_STATE_UNSPECIFIED
				if prev, ok := state.Task(c.Task.UID); ok && !c.Created {
					want = prev.State
				}
				if c.PrevState != want {
					t.Fatalf("revision %d: task %s changed from %s, the copy had %s", ws.Revision, c.Task.UID, c.PrevState, want)
				}
			}
			state = state.Apply(ws)
		}
	}
	for i := range revs {
		if got[i] != revs[i] {
			t.Fatalf("watched revisions %v, committed %v", got, revs)
		}
	}
	if err := equalStates(head, state); err != nil {
		t.Fatalf("the watched state differs from the snapshot: %v", err)
	}
	if sets, err := w.Poll(0); err != nil || len(sets) != 0 {
		t.Fatalf("a drained watch polled %d write sets, %v", len(sets), err)
	}
}

// testWatchNextWaits: Next blocks until a revision is published (it
// returns the one committed after it started waiting) and returns the
// context's error when the context ends first.
func testWatchNextWaits(t *testing.T, b Backend) {
	tr := b(t, options(t))
	st := snapshot(t, tr)
	w, err := tr.Watch(context.Background(), st.Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(cctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with an ended context: %v", err)
	}
	got := make(chan []*txn.WriteSet, 1)
	errc := make(chan error, 1)
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	go func() {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			errc <- err
			return
		}
		got <- sets
	}()
	res := commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 1, 1))}})
	select {
	case sets := <-got:
		if len(sets) != 1 || sets[0].Revision != res.Revision {
			t.Fatalf("Next returned %d write sets, want the one at %d", len(sets), res.Revision)
		}
	case err := <-errc:
		t.Fatalf("Next: %v", err)
	case <-ctx.Done():
		t.Fatal("Next did not return within 30 s of a commit")
	}
}

// testCompacted: a watch from a revision the store no longer retains
// fails with an error that errors.Is matches to transport.ErrCompacted,
// at Watch or at the first Poll; a re-list and a watch from its revision
// then work.
func testCompacted(t *testing.T, b Backend) {
	o := options(t)
	o.HistoryChanges = 4
	tr := b(t, o)
	commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 1000, 1000))}})
	for i := range 10 {
		commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateTask(task(i, 1, 1)), txn.CreateTask(task(100+i, 1, 1))}})
	}
	w, err := tr.Watch(context.Background(), 1)
	if err == nil {
		_, err = w.Poll(0)
		w.Close()
	}
	if !errors.Is(err, transport.ErrCompacted) {
		t.Fatalf("a watch from revision 1 after 10 more revisions in a history of 4 changes: %v", err)
	}
	st := snapshot(t, tr)
	w, err = tr.Watch(context.Background(), st.Revision())
	if err != nil {
		t.Fatalf("watch from a fresh listing: %v", err)
	}
	defer w.Close()
	if sets, err := w.Poll(0); err != nil || len(sets) != 0 {
		t.Fatalf("poll after re-listing: %d, %v", len(sets), err)
	}
}

// testConcurrent: committers on their own goroutines through one
// transport; every acknowledged revision is distinct, and a watcher sees
// each exactly once, in order.
func testConcurrent(t *testing.T, b Backend) {
	tr := b(t, options(t))
	start := commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 1<<40, 1<<40))}}).Revision
	w, err := tr.Watch(context.Background(), start)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const committers, each = 4, 25
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, committers)
	for g := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 1000 + g*each + i
				res, err := tr.Commit(context.Background(), &txn.Txn{Ops: []txn.Op{
					txn.CreateTask(task(n, 1, 1)), txn.Claim(uid('T', n), uid('M', 0), txn.Resources{CPU: 1, Memory: 1}, 0),
				}})
				if err == nil && (res.Committed != 2 || res.Revision == 0) {
					err = fmt.Errorf("result %+v", res)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if acked[res.Revision] {
					errs <- fmt.Errorf("revision %d acknowledged twice", res.Revision)
				}
				acked[res.Revision] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := start
	for seen := 0; seen < committers*each; {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			t.Fatalf("watch after %d of %d: %v", seen, committers*each, err)
		}
		for _, ws := range sets {
			if ws.Revision != last+1 || !acked[ws.Revision] {
				t.Fatalf("watched revision %d after %d (acknowledged: %v)", ws.Revision, last, acked[ws.Revision])
			}
			last = ws.Revision
			seen++
		}
	}
	if err := txn.CheckInvariants(snapshot(t, tr)); err != nil {
		t.Fatal(err)
	}
}

// testLifecycle: what the live agent needs crosses the transport whole —
// a task's lifecycle (restart policy, health check, grace, working
// directory) in its spec, and the agent's run report in its status —
// through a commit, the snapshot and the watch; a claim clears the report.
func testLifecycle(t *testing.T, b Backend) {
	tr := b(t, options(t))
	commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 10000, 10000))}})
	base := snapshot(t, tr)
	w, err := tr.Watch(context.Background(), base.Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := task(0, 100, 100)
	p.Spec.Command.WorkingDir = "srv"
	p.Spec.RestartPolicy, p.Spec.GracePeriodMillis, p.Spec.RestartDelayMillis = omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE, 2500, 300
	p.Spec.HealthCheck = &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Http{Http: &omegav1.HttpProbe{Port: 8080, Path: "/healthz"}}, PeriodMillis: 500, FailureThreshold: 2}
	spec := proto.Clone(p.Spec)
	commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateTask(p), txn.Claim(uid('T', 0), uid('M', 0), txn.Resources{CPU: 100, Memory: 100}, 0)}})
	st := snapshot(t, tr)
	tk, _ := st.Task(uid('T', 0))
	run := &omegav1.TaskRun{Restarts: 2, Address: "127.3.4.5", Health: omegav1.HealthState_HEALTH_STATE_HEALTHY,
		LastExit: &omegav1.ExitStatus{Code: -1, Signal: "killed"}}
	last := commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{
		txn.SetStatus(tk.UID, omegav1.TaskState_TASK_STATE_RUNNING, tk.Version, "restarted").WithRun(run)}})
	st = snapshot(t, tr)
	tk, _ = st.Task(uid('T', 0))
	if !proto.Equal(tk.Spec, spec) || !proto.Equal(tk.Run(), run) || tk.State != omegav1.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("snapshot: spec %v, run %v, state %v", tk.Spec, tk.Run(), tk.State)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := base
	for state.Revision() < last.Revision {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range sets {
			state = state.Apply(ws)
		}
	}
	wt, _ := state.Task(uid('T', 0))
	if !proto.Equal(wt.Spec, spec) || !proto.Equal(wt.Run(), run) {
		t.Fatalf("watched: spec %v, run %v", wt.Spec, wt.Run())
	}
	// Evicted and claimed again: the new placement has no report.
	commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.ForceEvict(tk.UID, tk.Version, "drain")}})
	st = snapshot(t, tr)
	tk, _ = st.Task(uid('T', 0))
	commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Ops: []txn.Op{txn.Claim(tk.UID, uid('M', 0), txn.Resources{CPU: 100, Memory: 100}, tk.Version)}})
	if tk, _ := snapshot(t, tr).Task(uid('T', 0)); tk.Run() != nil {
		t.Fatalf("a new claim kept the report %v", tk.Run())
	}
}

// testQuotas: a quota crosses the transport whole — created, put and
// deleted through commits, in the watch and in a snapshot — and what its
// scheduler's tasks hold is counted alike on both sides.
func testQuotas(t *testing.T, b Backend) {
	tr := b(t, options(t))
	commit(t, tr, &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machine(0, 4000, 4000))}})
	base := snapshot(t, tr)
	w, err := tr.Watch(context.Background(), base.Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	q := uid('Q', 1)
	quota := func(cpu int64) *omegav1.Quota {
		return &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: q.String(), Name: "q1", Labels: map[string]string{"team": "a"}},
			Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: cpu}}}
	}
	commit(t, tr, &txn.Txn{Component: "admin", Ops: []txn.Op{txn.CreateQuota(quota(2000))}})
	commit(t, tr, &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.CreateTask(task(1, 500, 10)), txn.Claim(uid('T', 1), uid('M', 0), txn.Resources{CPU: 500, Memory: 10}, 0)}})
	commit(t, tr, &txn.Txn{Component: "admin", Ops: []txn.Op{txn.PutQuota(quota(3000), 0)}})
	st := snapshot(t, tr)
	got, ok := st.Quota(q)
	if !ok || got.Limit.CPU != 3000 || got.Scheduler() != "batch" || st.QuotaUsed(q).CPU != 500 {
		t.Fatalf("the snapshot's quota: %+v (found %v), used %v", got, ok, st.QuotaUsed(q))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := base
	for state.Revision() < st.Revision() {
		sets, err := w.Next(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range sets {
			state = state.Apply(ws)
		}
	}
	if err := equalStates(st, state); err != nil {
		t.Fatalf("the watched state differs from the snapshot: %v", err)
	}
	res := commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Component: "admin", Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_QUOTA, q, got.Version)}})
	if res.Committed != 1 || snapshot(t, tr).NumQuotas() != 0 {
		t.Fatalf("delete the quota: %+v", res.Outcomes)
	}
}
