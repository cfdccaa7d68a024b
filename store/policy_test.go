package store

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// reservedRules is a RulesPolicy: claims on machines labelled reserved are
// refused unless they come from "ops".
type reservedRules struct{}

func (reservedRules) Name() string                     { return "reserved" }
func (reservedRules) Admit(*txn.State, *txn.Txn) error { return nil }
func (reservedRules) Rules() txn.Rules                 { return reservedRules{} }
func (reservedRules) Check(o txn.Overlay, _ int, op *txn.Op) *txn.Rejection {
	if op.Kind != txn.OpClaim {
		return nil
	}
	if m, ok := o.Machine(op.Machine); ok && m.Meta.GetLabels()["reserved"] == "yes" && o.Txn().Component != "ops" {
		return &txn.Rejection{Reason: omegav1.RejectReason_REJECT_REASON_NOT_OWNER, Detail: "reserved for ops"}
	}
	return nil
}

// TestRulesPolicy: a store whose policy has per-operation rules refuses an
// operation with a REJECTED outcome and its reason while the rest of the
// transaction commits, durably; a reopened store holds exactly what was
// committed.
func TestRulesPolicy(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.Policy = reservedRules{} }
	s := openTest(t, dir, mod)
	m0, m1 := testUID(uidMachine, 0, 0), testUID(uidMachine, 0, 1)
	a, b := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1)
	reserved := machineProto(m0, 1000, 1000)
	reserved.Meta.Labels = map[string]string{"reserved": "yes"}
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(reserved), txn.CreateMachine(machineProto(m1, 1000, 1000)),
		txn.CreateTask(taskProto(a, uuid.Nil, 10, 10)), txn.CreateTask(taskProto(b, uuid.Nil, 10, 10)),
	}})
	st := s.Snapshot()
	va, _ := st.Task(a)
	vb, _ := st.Task(b)
	res, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "batch", Ops: []txn.Op{
		txn.Claim(a, m0, res(10, 10), va.Version),
		txn.Claim(b, m1, res(10, 10), vb.Version),
	}})
	if err != nil || res.Rejected != 1 || res.Committed != 1 || res.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_REJECTED ||
		res.Outcomes[0].Reason != omegav1.RejectReason_REJECT_REASON_NOT_OWNER {
		t.Fatalf("%+v %v", res, err)
	}
	before := s.Snapshot()
	if x, _ := before.Task(a); x.Placed() {
		t.Fatal("the rejected claim placed its task")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, mod)
	defer s.Close()
	if d := diffStates(before, s.Snapshot(), true); d != "" {
		t.Fatalf("after reopen: %s", d)
	}
}

// TestMediatedPolicy: the mediated store rejects, each with its reason,
// what the raw store takes at its word — a claim declaring less memory
// than its task requests (a unit bug), a claim reserving no GPU for a task
// that asks for one (an outdated scheduler), a never-placed task reported
// SUCCEEDED (an agent reporting what did not happen) — and commits the
// correct claim and report beside them.
func TestMediatedPolicy(t *testing.T) {
	for _, p := range []Policy{Raw(), Mediated()} {
		t.Run(p.Name(), func(t *testing.T) {
			s := openTest(t, t.TempDir(), func(o *Options) { o.Policy = p })
			defer s.Close()
			m := testUID(uidMachine, 0, 0)
			mp := machineProto(m, 4000, 4<<30)
			mp.Spec.Capacity.Extended = map[string]int64{"gpu": 4}
			short, gpu, lie, good := testUID(uidTask, 0, 0), testUID(uidTask, 0, 1), testUID(uidTask, 0, 2), testUID(uidTask, 0, 3)
			gp := taskProto(gpu, uuid.Nil, 100, 1<<20)
			gp.Spec.Resources.Extended = map[string]int64{"gpu": 1}
			mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
				txn.CreateMachine(mp), txn.CreateTask(taskProto(short, uuid.Nil, 100, 1<<30)), txn.CreateTask(gp),
				txn.CreateTask(taskProto(lie, uuid.Nil, 100, 1<<20)), txn.CreateTask(taskProto(good, uuid.Nil, 100, 1<<20)),
			}})
			st := s.Snapshot()
			ver := func(u uuid.UUID) uint64 { x, _ := st.Task(u); return x.Version }
			r, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "batch-0", Ops: []txn.Op{
				txn.Claim(short, m, res(100, 1<<10), ver(short)),                         // memory in KiB: less than requested
				txn.Claim(gpu, m, res(100, 1<<20), ver(gpu)),                             // no GPU
				txn.SetStatus(lie, omegav1.TaskState_TASK_STATE_SUCCEEDED, ver(lie), ""), // never placed
				txn.Claim(good, m, res(100, 1<<20), ver(good)),
			}})
			if err != nil {
				t.Fatal(err)
			}
			want := []omegav1.RejectReason{
				omegav1.RejectReason_REJECT_REASON_RESOURCES_MISMATCH,
				omegav1.RejectReason_REJECT_REASON_RESOURCES_MISMATCH,
				omegav1.RejectReason_REJECT_REASON_ILLEGAL_TRANSITION,
			}
			for i, o := range r.Outcomes {
				raw := p.Name() == "raw"
				switch {
				case i == 3 || raw:
					if !o.Committed() {
						t.Errorf("op %d: %v, want committed", i, o)
					}
				case o.Code != omegav1.OutcomeCode_OUTCOME_CODE_REJECTED || o.Reason != want[i] || o.Detail == "":
					t.Errorf("op %d: %+v, want rejected for %s with a reason", i, o, want[i])
				}
			}
			after := s.Snapshot()
			x, _ := after.Task(good)
			y, _ := after.Task(lie)
			if !x.Placed() || (p.Name() == "mediated") != (y.State == omegav1.TaskState_TASK_STATE_PENDING) {
				t.Fatalf("after: the good claim placed %v, the lie left the task %s", x.Placed(), y.State)
			}
		})
	}
}

// TestMediatedOwnership: under the mediated policy a scheduler claims only
// tasks of jobs routed to it (the job's scheduler, or an instance of that
// kind), an operator may claim any, an agent none; an agent reports only on
// tasks placed on its own machine, a declared fleet on any. The raw store
// accepts every one of them.
func TestMediatedOwnership(t *testing.T) {
	for _, p := range []Policy{Raw(), MediatedFor(Identities{Fleets: []string{"fleet"}})} {
		t.Run(p.Name(), func(t *testing.T) {
			s := openTest(t, t.TempDir(), func(o *Options) { o.Policy = p })
			defer s.Close()
			m0, m1 := testUID(uidMachine, 0, 0), testUID(uidMachine, 0, 1)
			job := testUID(uidJob, 0, 0)
			jp := jobProto(job, "j", 8)
			jp.Spec.Scheduler = "batch"
			mp0, mp1 := machineProto(m0, 64000, 64<<30), machineProto(m1, 64000, 64<<30)
			mp0.Meta.Name, mp1.Meta.Name = "m0", "m1"
			var tasks []uuid.UUID
			ops := []txn.Op{txn.CreateMachine(mp0), txn.CreateMachine(mp1), txn.CreateJob(jp)}
			for i := range 10 {
				u := testUID(uidTask, 0, uint32(i))
				tasks = append(tasks, u)
				ops = append(ops, txn.CreateTask(taskProto(u, job, 100, 1<<20)))
			}
			mustCommitAll(t, s, &txn.Txn{Ops: ops})
			mediated := p.Name() == "mediated"
			try := func(component string, op func(ver func(uuid.UUID) uint64) txn.Op, wantOK bool) {
				t.Helper()
				st := s.Snapshot()
				ver := func(u uuid.UUID) uint64 { x, _ := st.Task(u); return x.Version }
				r, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: component, Ops: []txn.Op{op(ver)}})
				if err != nil {
					t.Fatalf("%s: %v", component, err)
				}
				o := r.Outcomes[0]
				switch {
				case wantOK || !mediated:
					if !o.Committed() {
						t.Errorf("%s: %+v, want committed", component, o)
					}
				case o.Reason != omegav1.RejectReason_REJECT_REASON_NOT_OWNER || !strings.Contains(o.Detail, component):
					t.Errorf("%s: %+v, want rejected as not the owner, naming it", component, o)
				}
			}
			claim := func(i int, m uuid.UUID) func(func(uuid.UUID) uint64) txn.Op {
				return func(ver func(uuid.UUID) uint64) txn.Op { return txn.Claim(tasks[i], m, res(100, 1<<20), ver(tasks[i])) }
			}
			try("service-0", claim(0, m0), false) // another kind's
			try("batchy-0", claim(1, m0), false)  // a kind whose name starts like it
			try("agent/m0", claim(2, m0), false)  // agents place nothing
			try("fleet", claim(3, m0), false)
			try("batch-0", claim(4, m0), true)
			try("batch", claim(5, m0), true)
			try("batch-live-eu", claim(6, m0), true)
			try("submitter", claim(7, m0), true)
			try("admin/ops", claim(8, m1), true)
			report := func(i int, st omegav1.TaskState) func(func(uuid.UUID) uint64) txn.Op {
				return func(ver func(uuid.UUID) uint64) txn.Op { return txn.SetStatus(tasks[i], st, ver(tasks[i]), "") }
			}
			try("agent/m1", report(4, omegav1.TaskState_TASK_STATE_RUNNING), false) // the task is on m0
			if mediated {                                                           // the raw store refuses RUNNING unplaced as an error of the transaction
				try("agent/m1", report(9, omegav1.TaskState_TASK_STATE_SUCCEEDED), false) // not placed at all
			}
			try("agent/m0", report(5, omegav1.TaskState_TASK_STATE_RUNNING), true)
			try("agent/m1", report(8, omegav1.TaskState_TASK_STATE_RUNNING), true)
			try("fleet", report(6, omegav1.TaskState_TASK_STATE_RUNNING), true)
		})
	}
}

// TestMediatedQuota: under the mediated policy a claim that would take its
// scheduler past a quota covering it (by name, or its kind's) is rejected
// with REJECT_REASON_QUOTA, counting what the scheduler's placed tasks
// hold and the transaction's own earlier claims; a task that ends gives
// its room back; a quota put higher lets the claim through; another
// scheduler is not capped. The raw store keeps the quota and enforces
// nothing. The quota and its use survive a reopen.
func TestMediatedQuota(t *testing.T) {
	for _, p := range []Policy{Raw(), Mediated()} {
		t.Run(p.Name(), func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, func(o *Options) { o.Policy = p })
			m0 := testUID(uidMachine, 0, 0)
			jb, js := testUID(uidJob, 0, 0), testUID(uidJob, 0, 1)
			jpb, jps := jobProto(jb, "b", 8), jobProto(js, "s", 8)
			jpb.Spec.Scheduler, jps.Spec.Scheduler = "batch", "service"
			q := testUID('Q', 0, 0)
			quota := &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: q.String(), Name: "batch-cpu"},
				Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 2500}}}
			ops := []txn.Op{txn.CreateMachine(machineProto(m0, 64000, 64<<30)), txn.CreateJob(jpb), txn.CreateJob(jps), txn.CreateQuota(quota)}
			var bt, stk []uuid.UUID
			for i := range 6 {
				b, sv := testUID(uidTask, 0, uint32(i)), testUID(uidTask, 1, uint32(i))
				bt, stk = append(bt, b), append(stk, sv)
				ops = append(ops, txn.CreateTask(taskProto(b, jb, 1000, 1<<20)), txn.CreateTask(taskProto(sv, js, 1000, 1<<20)))
			}
			mustCommitAll(t, s, &txn.Txn{Component: "admin", Ops: ops})
			mediated := p.Name() == "mediated"
			claims := func(component string, tasks ...uuid.UUID) txn.Result {
				t.Helper()
				st := s.Snapshot()
				var ops []txn.Op
				for _, u := range tasks {
					x, _ := st.Task(u)
					ops = append(ops, txn.Claim(u, m0, res(1000, 1<<20), x.Version))
				}
				r, err := s.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: component, Ops: ops})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			want := func(r txn.Result, committed ...bool) {
				t.Helper()
				for i, c := range committed {
					o := r.Outcomes[i]
					if !mediated {
						c = true
					}
					if o.Committed() != c || !c && (o.Reason != omegav1.RejectReason_REJECT_REASON_QUOTA || !strings.Contains(o.Detail, "batch-cpu")) {
						t.Fatalf("claim %d: %+v, want committed %v (or a quota rejection naming the quota)", i, o, c)
					}
				}
			}
			// 2,500 millicores: two tasks of 1,000, the third is over (in
			// one transaction: its earlier claims count).
			want(claims("batch-0", bt[0], bt[1], bt[2]), true, true, false)
			want(claims("batch-1", bt[3]), false) // another instance of the kind: the same quota
			want(claims("service-0", stk[0], stk[1], stk[2]), true, true, true)
			if used := s.Snapshot().QuotaUsed(q); mediated && used.CPU != 2000 || !mediated && used.CPU != 4000 {
				t.Fatalf("the quota's use: %v", used)
			}
			// A task that ends gives its room back.
			mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "fleet", Ops: []txn.Op{txn.SetStatus(bt[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "")}})
			want(claims("batch-0", bt[4]), true)
			// A quota put higher lets the next through.
			higher := &omegav1.Quota{Meta: quota.Meta, Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 10000}}}
			mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: "admin", Ops: []txn.Op{txn.PutQuota(higher, 0)}})
			if x, _ := s.Snapshot().Task(bt[5]); !x.Placed() {
				want(claims("batch-0", bt[5]), true)
			}
			before := s.Snapshot()
			if d, err := reopenDiff(t, s, dir, before); err != nil || d != "" {
				t.Fatalf("reopened: %s %v", d, err)
			}
		})
	}
}
