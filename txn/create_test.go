package txn_test

import (
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestCreateCommits(t *testing.T) {
	t.Run("task", func(t *testing.T) {
		c := std(t)
		p := ownedTaskP(uid(100), j1, res(300, 400, "gpu", 1))
		// A creator cannot pick the status: the task starts PENDING, unplaced.
		p.Status = &omegav1.TaskStatus{State: running, MachineUid: m1.String(), Claimed: res(1, 1).Proto(), Scheduler: "x"}
		tx := c.tx(txn.CreateTask(p))
		r := c.commit(tx)
		wantCodes(t, r, cCommitted)
		if r.Revision != 3 {
			t.Fatalf("revision %d, want 3", r.Revision)
		}
		tk := c.task(uid(100))
		if tk.State != pending || tk.Machine != uuid.Nil || !tk.Claimed.IsZero() || tk.Scheduler != "" {
			t.Fatalf("created task %+v, want PENDING and unplaced", tk)
		}
		if tk.Version != 3 || tk.CreateRev != 3 || tk.Created != tx.UnixNanos {
			t.Fatalf("version %d createRev %d created %d, want 3, 3, %d", tk.Version, tk.CreateRev, tk.Created, tx.UnixNanos)
		}
		wantRes(t, "request", tk.Request(), res(300, 400, "gpu", 1))
		if tk.Job != j1 {
			t.Fatalf("owner job %s, want %s", tk.Job, j1)
		}
		var owned []uuid.UUID
		c.s.RangePendingTasks(j1, func(x *txn.Task) bool { owned = append(owned, x.UID); return true })
		if len(owned) != 1 || owned[0] != uid(100) {
			t.Fatalf("job's tasks %v", owned)
		}
		if c.s.NumTasks() != 6 {
			t.Fatalf("%d tasks", c.s.NumTasks())
		}
	})
	t.Run("job", func(t *testing.T) {
		c := std(t)
		c.commit(c.tx(txn.CreateJob(jobP(j1))))
		j, ok := c.s.Job(j1)
		if !ok || j.Version != 3 || j.CreateRev != 3 || j.Status.GetPhase() != omegav1.JobPhase_JOB_PHASE_PENDING {
			t.Fatalf("job %+v ok=%v", j, ok)
		}
	})
	t.Run("machine", func(t *testing.T) {
		c := std(t)
		p := machineP(m3, res(1000, 2000, "gpu", 4))
		// The allocation, task count and sequence are derived, never written.
		p.Status = &omegav1.MachineStatus{Allocated: res(500, 500).Proto(), Tasks: 3, Seq: 99, AgentAddress: "a:1"}
		before := c.s.Capacity()
		c.commit(c.tx(txn.CreateMachine(p)))
		m := c.machine(m3)
		if m.State != up || !m.Allocated.IsZero() || m.Tasks != 0 || m.Seq != 3 || m.Version != 3 || m.CreateRev != 3 || m.Agent != "a:1" {
			t.Fatalf("created machine %+v", m)
		}
		wantRes(t, "capacity", m.Capacity, res(1000, 2000, "gpu", 4))
		wantRes(t, "total capacity", c.s.Capacity(), before.Add(res(1000, 2000, "gpu", 4)))
	})
	t.Run("machine down", func(t *testing.T) {
		c := std(t)
		c.commit(c.tx(txn.CreateMachine(machineState(m3, res(1000, 1000), down))))
		if st := c.machine(m3).State; st != down {
			t.Fatalf("state %s, want DOWN", st)
		}
	})
}

func TestCreateRejected(t *testing.T) {
	badUID := func(s string) *omegav1.Task { p := taskP(t5, res(1, 1), 0); p.Meta.Uid = s; return p }
	noSpecMachine := machineP(m3, res(1, 1))
	noSpecMachine.Spec = nil
	noSpecJob := jobP(j1)
	noSpecJob.Spec = nil
	negReplicas := jobP(j1)
	negReplicas.Spec.Replicas = -1
	negTemplate := jobP(j1)
	negTemplate.Spec.Template.Resources = &omegav1.Resources{CpuMillis: -1}
	badOwner := taskP(uid(100), res(1, 1), 0)
	badOwner.Meta.OwnerReferences = []*omegav1.OwnerReference{{Kind: "Job", Uid: "not-a-uuid", Controller: true}}
	badState := machineState(m3, res(1, 1), omegav1.MachineState(42))

	cases := []struct {
		name string
		ops  []txn.Op
		want error
		at   int
	}{
		{"duplicate task", []txn.Op{txn.CreateTask(taskP(t1, res(1, 1), 0))}, txn.ErrAlreadyExists, 0},
		{"duplicate machine", []txn.Op{txn.CreateMachine(machineP(m1, res(1, 1)))}, txn.ErrAlreadyExists, 0},
		{"duplicate job", []txn.Op{txn.CreateJob(jobP(j1)), txn.CreateJob(jobP(j1))}, txn.ErrAlreadyExists, 1},
		{"duplicate inside the transaction", []txn.Op{
			txn.CreateTask(taskP(uid(100), res(1, 1), 0)),
			txn.CreateTask(taskP(uid(100), res(1, 1), 0)),
		}, txn.ErrAlreadyExists, 1},
		{"bad uid", []txn.Op{txn.CreateTask(badUID("nope"))}, txn.ErrInvalid, 0},
		{"nil uid", []txn.Op{txn.CreateTask(badUID(uuid.Nil.String()))}, txn.ErrInvalid, 0},
		{"empty uid", []txn.Op{txn.CreateTask(badUID(""))}, txn.ErrInvalid, 0},
		{"nil task meta", []txn.Op{txn.CreateTask(&omegav1.Task{Spec: &omegav1.TaskSpec{}})}, txn.ErrInvalid, 0},
		{"nil machine meta", []txn.Op{txn.CreateMachine(&omegav1.Machine{Spec: &omegav1.MachineSpec{}})}, txn.ErrInvalid, 0},
		{"nil job meta", []txn.Op{txn.CreateJob(&omegav1.Job{Spec: &omegav1.JobSpec{}})}, txn.ErrInvalid, 0},
		{"negative task cpu", []txn.Op{txn.CreateTask(taskP(uid(100), res(-1, 1), 0))}, txn.ErrInvalid, 0},
		{"negative task gpu", []txn.Op{txn.CreateTask(taskP(uid(100), res(1, 1, "gpu", -1), 0))}, txn.ErrInvalid, 0},
		{"negative machine memory", []txn.Op{txn.CreateMachine(machineP(m3, res(1, -1)))}, txn.ErrInvalid, 0},
		{"negative machine gpu", []txn.Op{txn.CreateMachine(machineP(m3, res(1, 1, "gpu", -2)))}, txn.ErrInvalid, 0},
		{"machine without spec", []txn.Op{txn.CreateMachine(noSpecMachine)}, txn.ErrInvalid, 0},
		{"machine unknown state", []txn.Op{txn.CreateMachine(badState)}, txn.ErrInvalid, 0},
		{"job without spec", []txn.Op{txn.CreateJob(noSpecJob)}, txn.ErrInvalid, 0},
		{"job negative replicas", []txn.Op{txn.CreateJob(negReplicas)}, txn.ErrInvalid, 0},
		{"job negative template", []txn.Op{txn.CreateJob(negTemplate)}, txn.ErrInvalid, 0},
		{"bad owner reference", []txn.Op{txn.CreateTask(badOwner)}, txn.ErrInvalid, 0},
		{"no object", []txn.Op{{Kind: txn.OpCreate}}, txn.ErrInvalid, 0},
		{"two objects", []txn.Op{{Kind: txn.OpCreate, NewTask: taskP(uid(100), res(1, 1), 0), NewJob: jobP(j1)}}, txn.ErrInvalid, 0},
		{"unknown op kind", []txn.Op{{Kind: txn.OpKind(99)}}, txn.ErrInvalid, 0},
		// An error in a later op rejects the earlier, valid ones too.
		{"error after valid ops", []txn.Op{
			txn.CreateTask(taskP(uid(100), res(1, 1), 0)),
			txn.Claim(uid(100), m1, res(1, 1), 0),
			txn.CreateMachine(machineP(m3, res(-1, 1))),
		}, txn.ErrInvalid, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			c.mustErr(c.tx(tc.ops...), tc.want, tc.at)
		})
	}
}
