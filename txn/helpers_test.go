package txn_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// Shorthands for the enum values the tests use over and over.
const (
	fine        = omegav1.ConflictMode_CONFLICT_MODE_FINE
	coarse      = omegav1.ConflictMode_CONFLICT_MODE_COARSE
	incremental = omegav1.CommitMode_COMMIT_MODE_INCREMENTAL
	allOrNone   = omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING

	pending   = omegav1.TaskState_TASK_STATE_PENDING
	assigned  = omegav1.TaskState_TASK_STATE_ASSIGNED
	running   = omegav1.TaskState_TASK_STATE_RUNNING
	succeeded = omegav1.TaskState_TASK_STATE_SUCCEEDED
	failed    = omegav1.TaskState_TASK_STATE_FAILED
	lost      = omegav1.TaskState_TASK_STATE_LOST
	killed    = omegav1.TaskState_TASK_STATE_KILLED
	abandoned = omegav1.TaskState_TASK_STATE_ABANDONED

	up       = omegav1.MachineState_MACHINE_STATE_UP
	draining = omegav1.MachineState_MACHINE_STATE_DRAINING
	down     = omegav1.MachineState_MACHINE_STATE_DOWN

	kindTask    = omegav1.ObjectKind_OBJECT_KIND_TASK
	kindJob     = omegav1.ObjectKind_OBJECT_KIND_JOB
	kindMachine = omegav1.ObjectKind_OBJECT_KIND_MACHINE

	cCommitted    = omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED
	cAborted      = omegav1.OutcomeCode_OUTCOME_CODE_ABORTED
	cTaskChanged  = omegav1.OutcomeCode_OUTCOME_CODE_TASK_CHANGED
	cInsufficient = omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES
	cNotUp        = omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_NOT_UP
	cMachChanged  = omegav1.OutcomeCode_OUTCOME_CODE_MACHINE_CHANGED
	cPriority     = omegav1.OutcomeCode_OUTCOME_CODE_PRIORITY
	cVersion      = omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH
)

// uid returns a deterministic, non-nil uuid for n. The first 8 bytes vary
// with n so the state's hash trie sees distinct hashes.
func uid(n uint64) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[0:8], n*0x9e3779b97f4a7c15+1)
	binary.BigEndian.PutUint64(u[8:16], n)
	u[6] = (u[6] & 0x0f) | 0x40 // version 4
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u
}

// Well-known uids of the table tests.
var (
	m1, m2, m3     = uid(1), uid(2), uid(3)
	t1, t2, t3, t4 = uid(11), uid(12), uid(13), uid(14)
	t5             = uid(15)
	j1             = uid(21)
)

// res builds Resources; ext is name, amount pairs.
func res(cpu, mem int64, ext ...any) txn.Resources { return testkit.Res(cpu, mem, ext...) }

func machineP(id uuid.UUID, capacity txn.Resources) *omegav1.Machine {
	m := testkit.Machine(id, "m-"+id.String()[:4], capacity)
	m.Spec.FailureDomain = "rack-1"
	return m
}

func machineState(id uuid.UUID, capacity txn.Resources, st omegav1.MachineState) *omegav1.Machine {
	m := machineP(id, capacity)
	m.Status = &omegav1.MachineStatus{State: st}
	return m
}

func taskP(id uuid.UUID, request txn.Resources, priority int32) *omegav1.Task {
	t := testkit.Task(id, uuid.Nil, "t-"+id.String()[:4], request)
	t.Spec.Priority = priority
	return t
}

func ownedTaskP(id, job uuid.UUID, request txn.Resources) *omegav1.Task {
	return testkit.Task(id, job, "t-"+id.String()[:4], request)
}

func jobP(id uuid.UUID) *omegav1.Job {
	j := testkit.Job(id, "j-"+id.String()[:4], "batch")
	j.Spec.Replicas = 1
	j.Spec.Template = &omegav1.TaskTemplate{Resources: res(100, 100).Proto()}
	return j
}

// cell is a state the table tests commit transactions to.
type cell struct {
	t   testing.TB
	s   *txn.State
	lim txn.Limits
	now int64
	// light: eval checks neither that the base is unchanged nor the
	// result's shape (a model test's thousands of steps; the other tests
	// check those).
	light bool
}

func newCell(t testing.TB) *cell {
	return &cell{t: t, s: txn.NewState(), lim: txn.DefaultLimits(), now: 1_000}
}

// eval evaluates tx against the cell's state at the next revision and
// checks what holds for every evaluation: an error changes nothing and
// returns a zero result; otherwise the result is well formed. It does not
// apply the write set.
func (c *cell) eval(tx *txn.Txn) (txn.Result, *txn.WriteSet, error) {
	c.t.Helper()
	if c.light {
		return txn.Evaluate(c.s, tx, c.s.Revision()+1, c.lim)
	}
	before := dump(c.s)
	rev := c.s.Revision() + 1
	r, ws, err := txn.Evaluate(c.s, tx, rev, c.lim)
	if after := dump(c.s); after != before {
		c.t.Fatalf("Evaluate changed its base state:\n%s", diff(before, after))
	}
	if err != nil {
		if ws != nil || r.Revision != 0 || r.Outcomes != nil || r.Committed != 0 || r.Conflicts != 0 {
			c.t.Fatalf("Evaluate returned an error and a result: %+v, ws %v, err %v", r, ws, err)
		}
		return r, ws, err
	}
	checkResultShape(c.t, tx, r, ws, rev)
	return r, ws, nil
}

// fataler is what testing.TB and *rapid.T have in common.
type fataler interface {
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// checkResultShape checks the parts of a result every evaluation must get
// right: one outcome per op, counters that match the outcomes, a write set
// exactly when something committed, at the revision in the result.
func checkResultShape(t fataler, tx *txn.Txn, r txn.Result, ws *txn.WriteSet, rev uint64) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	if len(r.Outcomes) != len(tx.Ops) {
		t.Fatalf("%d outcomes for %d ops", len(r.Outcomes), len(tx.Ops))
	}
	var nc, nx, ncl, nab int
	for i, o := range r.Outcomes {
		switch o.Code {
		case cCommitted:
			nc++
			if o.Detail != "" {
				t.Errorf("op %d committed with detail %q", i, o.Detail)
			}
		case cAborted:
			nab++
		default:
			nx++
			if tx.Ops[i].Kind == txn.OpClaim {
				ncl++
			}
			if o.Detail == "" {
				t.Errorf("op %d: conflict %s without detail", i, o.Code)
			}
		}
	}
	if r.Committed != nc || r.Conflicts != nx || r.ClaimsConflicted != ncl {
		t.Fatalf("counters committed=%d conflicts=%d claimsConflicted=%d, outcomes say %d %d %d",
			r.Committed, r.Conflicts, r.ClaimsConflicted, nc, nx, ncl)
	}
	if r.Conflicted() != (nx > 0) || r.Partial() != (nc > 0 && nx > 0) {
		t.Fatalf("Conflicted()=%v Partial()=%v with %d committed, %d conflicts", r.Conflicted(), r.Partial(), nc, nx)
	}
	if nab > 0 && (tx.Commit != allOrNone || nc > 0 || nx == 0) {
		t.Fatalf("%d ABORTED outcomes, commit mode %s, %d committed, %d conflicts", nab, tx.Commit, nc, nx)
	}
	if tx.Commit == allOrNone && nx > 0 && nc > 0 {
		t.Fatalf("all-or-nothing committed %d ops beside %d conflicts", nc, nx)
	}
	if nc > 0 {
		if r.Revision != rev || ws == nil || ws.Revision != rev || ws.UnixNanos != tx.UnixNanos {
			t.Fatalf("committed %d ops: revision %d, write set %+v, want revision %d", nc, r.Revision, ws, rev)
		}
		seen := map[string]bool{}
		for i := range ws.Changes {
			ch := &ws.Changes[i]
			k := fmt.Sprint(ch.Kind, ch.UID())
			if seen[k] {
				t.Fatalf("write set touches %s twice", k)
			}
			seen[k] = true
		}
	} else if r.Revision != 0 || ws != nil {
		t.Fatalf("nothing committed, yet revision %d and write set %v", r.Revision, ws)
	}
}

// commit evaluates tx, requires no error, applies the write set and checks
// the invariants of the new state.
func (c *cell) commit(tx *txn.Txn) txn.Result {
	c.t.Helper()
	r, ws, err := c.eval(tx)
	if err != nil {
		c.t.Fatalf("Evaluate: %v", err)
	}
	if ws != nil {
		old := c.s
		c.s = c.s.Apply(ws)
		if c.s.Revision() != ws.Revision || old.Revision() >= ws.Revision {
			c.t.Fatalf("revision %d after applying write set %d to %d", c.s.Revision(), ws.Revision, old.Revision())
		}
	}
	if err := txn.CheckInvariants(c.s); err != nil {
		c.t.Fatalf("invariants after commit: %v", err)
	}
	if err := checkPendingIndex(c.s); err != nil {
		c.t.Fatalf("after commit: %v", err)
	}
	return r
}

// checkPendingIndex verifies the pending index (job → its PENDING tasks) against
// the tasks themselves.
func checkPendingIndex(s *txn.State) error {
	want := map[uuid.UUID]map[uuid.UUID]bool{}
	s.RangeTasks(func(t *txn.Task) bool {
		if t.State == pending {
			if want[t.Job] == nil {
				want[t.Job] = map[uuid.UUID]bool{}
			}
			want[t.Job][t.UID] = true
		}
		return true
	})
	got := 0
	var err error
	s.RangePendingJobs(func(job uuid.UUID, n int) bool {
		got++
		seen := map[uuid.UUID]bool{}
		s.RangePendingTasks(job, func(t *txn.Task) bool {
			if t.Job != job || t.State != pending || seen[t.UID] {
				err = fmt.Errorf("job %s pending index holds task %s (job %s, %s, seen twice: %v)", job, t.UID, t.Job, t.State, seen[t.UID])
				return false
			}
			seen[t.UID] = true
			return true
		})
		if err == nil && (len(seen) != n || n != len(want[job])) {
			err = fmt.Errorf("job %s: index says %d pending, lists %d, tasks say %d", job, n, len(seen), len(want[job]))
		}
		return err == nil
	})
	if err == nil && got != len(want) {
		err = fmt.Errorf("%d jobs with pending tasks indexed, %d have them", got, len(want))
	}
	return err
}

// mustErr evaluates tx and requires an *OpError (or plain error when index
// is -1) wrapping want, and an unchanged state (checked by eval).
func (c *cell) mustErr(tx *txn.Txn, want error, index int) error {
	c.t.Helper()
	_, _, err := c.eval(tx)
	if !errors.Is(err, want) {
		c.t.Fatalf("error %v, want %v", err, want)
	}
	var oe *txn.OpError
	if index >= 0 {
		if !errors.As(err, &oe) {
			c.t.Fatalf("error %v is not an *OpError", err)
		}
		if oe.Index != index || oe.Kind != tx.Ops[index].Kind {
			c.t.Fatalf("OpError at op %d (%s), want op %d (%s)", oe.Index, oe.Kind, index, tx.Ops[index].Kind)
		}
	}
	return err
}

// tx builds an incremental, fine transaction at the cell's current revision.
func (c *cell) tx(ops ...txn.Op) *txn.Txn {
	c.now += 1_000
	return &txn.Txn{ViewRevision: c.s.Revision(), Component: "test-sched", UnixNanos: c.now, Ops: ops}
}

func (c *cell) machine(id uuid.UUID) *txn.Machine {
	c.t.Helper()
	m, ok := c.s.Machine(id)
	if !ok {
		c.t.Fatalf("machine %s not in state", id)
	}
	return m
}

func (c *cell) task(id uuid.UUID) *txn.Task {
	c.t.Helper()
	t, ok := c.s.Task(id)
	if !ok {
		c.t.Fatalf("task %s not in state", id)
	}
	return t
}

// ver returns a task's current version.
func (c *cell) ver(id uuid.UUID) uint64 { return c.task(id).Version }

// std builds the usual fixture: machines m1 (cpu 4000, mem 4000, gpu 2) and
// m2 (cpu 2000, mem 2000) at revision 1, tasks t1..t5 (PENDING, priority
// 1..5) at revision 2.
func std(t testing.TB) *cell {
	c := newCell(t)
	c.commit(c.tx(
		txn.CreateMachine(machineP(m1, res(4000, 4000, "gpu", 2))),
		txn.CreateMachine(machineP(m2, res(2000, 2000))),
	))
	var ops []txn.Op
	for i, id := range []uuid.UUID{t1, t2, t3, t4, t5} {
		ops = append(ops, txn.CreateTask(taskP(id, res(1000, 1000), int32(i+1))))
	}
	c.commit(c.tx(ops...))
	if c.s.Revision() != 2 {
		t.Fatalf("fixture at revision %d", c.s.Revision())
	}
	return c
}

// place claims tasks (at their current versions) on machine, each with r,
// and requires them all to commit.
func (c *cell) place(machine uuid.UUID, r txn.Resources, tasks ...uuid.UUID) {
	c.t.Helper()
	var ops []txn.Op
	for _, id := range tasks {
		ops = append(ops, txn.Claim(id, machine, r, c.ver(id)))
	}
	res := c.commit(c.tx(ops...))
	if res.Committed != len(tasks) {
		c.t.Fatalf("placing %d tasks: %+v", len(tasks), res.Outcomes)
	}
}

func codes(r txn.Result) []omegav1.OutcomeCode {
	out := make([]omegav1.OutcomeCode, len(r.Outcomes))
	for i, o := range r.Outcomes {
		out[i] = o.Code
	}
	return out
}

func wantCodes(t testing.TB, r txn.Result, want ...omegav1.OutcomeCode) {
	t.Helper()
	if got := codes(r); !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v (%+v)", got, want, r.Outcomes)
	}
}

func wantRes(t testing.TB, what string, got, want txn.Resources) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// dump renders everything a State holds, deterministically, so two dumps
// are equal exactly when the states are. Pointers of shared messages are not
// printed: only values.
func dump(s *txn.State) string {
	var b strings.Builder
	text := func(m proto.Message) string {
		out, err := prototext.MarshalOptions{}.Marshal(m)
		if err != nil {
			return "ERR " + err.Error()
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	fmt.Fprintf(&b, "revision %d\ncapacity %v\nallocated %v\n", s.Revision(), s.Capacity(), s.Allocated())
	fmt.Fprintf(&b, "counts %d machines %d tasks %d jobs\n", s.NumMachines(), s.NumTasks(), s.NumJobs())
	var lines []string
	s.RangeMachines(func(m *txn.Machine) bool {
		lines = append(lines, fmt.Sprintf("machine %s v%d c%d at %d cap{%v} alloc{%v} tasks %d seq %d %s agent %q free{%v} | %s",
			m.UID, m.Version, m.CreateRev, m.Created, m.Capacity, m.Allocated, m.Tasks, m.Seq, m.State, m.Agent, m.Free(), text(m.Proto())))
		return true
	})
	pendingTasks := map[uuid.UUID][]string{}
	s.RangeTasks(func(t *txn.Task) bool {
		lines = append(lines, fmt.Sprintf("task %s job %s v%d c%d at %d req{%v} %s on %s claimed{%v} by %q a%d s%d f%d ev%d %q | %s",
			t.UID, t.Job, t.Version, t.CreateRev, t.Created, t.Request(), t.State, t.Machine, t.Claimed, t.Scheduler,
			t.Assigned, t.Started, t.Finished, t.Evictions, t.Message(), text(t.Proto())))
		if t.State == pending {
			pendingTasks[t.Job] = append(pendingTasks[t.Job], t.UID.String())
		}
		return true
	})
	s.RangeJobs(func(j *txn.Job) bool {
		lines = append(lines, fmt.Sprintf("job %s v%d c%d at %d | %s", j.UID, j.Version, j.CreateRev, j.Created, text(j.Proto())))
		return true
	})
	s.RangeQuotas(func(q *txn.Quota) bool {
		lines = append(lines, fmt.Sprintf("quota %s v%d c%d at %d used{%v} | %s", q.UID, q.Version, q.CreateRev, q.Created, s.QuotaUsed(q.UID), text(q.Proto())))
		return true
	})
	s.RangeLeases(func(l *txn.Lease) bool {
		lines = append(lines, fmt.Sprintf("lease %s v%d c%d at %d | %s", l.UID, l.Version, l.CreateRev, l.Created, text(l.Proto())))
		return true
	})
	s.RangeOffers(func(o *txn.Offer) bool {
		lines = append(lines, fmt.Sprintf("offer %s v%d c%d at %d to %q over %d machines, total{%v} | %s", o.UID, o.Version, o.CreateRev, o.Created, o.Framework, o.Len(), o.Total(), text(o.Proto())))
		return true
	})
	// The pending index, for the owners pending tasks name (which need not
	// exist as jobs).
	for _, job := range slices.SortedFunc(maps.Keys(pendingTasks), func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }) {
		var idx []string
		s.RangePendingTasks(job, func(t *txn.Task) bool { idx = append(idx, t.UID.String()); return true })
		slices.Sort(idx)
		want := pendingTasks[job]
		slices.Sort(want)
		lines = append(lines, fmt.Sprintf("pending %s index %v tasks %v", job, idx, want))
	}
	slices.Sort(lines)
	b.WriteString(strings.Join(lines, "\n"))
	return b.String()
}

// diff returns the lines that differ between two dumps.
func diff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
