package schedulers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// TestExplainSaysWhy: each reason a person can act on, in the order
// Explain looks for them, with the machines counted in the message.
func TestExplainSaysWhy(t *testing.T) {
	eq := func(attr, val string) []*omegav1.Constraint {
		return []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_EQUAL, Attribute: attr, Value: val}}
	}
	down := omegav1.MachineState_MACHINE_STATE_DOWN
	draining := omegav1.MachineState_MACHINE_STATE_DRAINING
	for _, tc := range []struct {
		name     string
		machines []machineSpec
		job      jobSpec
		reason   omegav1.WaitReason
		resource string
		message  string // a part of it
	}{
		{"empty cell", nil, jobSpec{cpu: 1000, mem: gib},
			omegav1.WaitReason_WAIT_REASON_NO_MACHINES, "", "no machine in the cell"},
		{"none up", []machineSpec{{cpu: 4000, mem: 16 * gib, state: down}, {cpu: 4000, mem: 16 * gib, state: draining}}, jobSpec{cpu: 1000, mem: gib},
			omegav1.WaitReason_WAIT_REASON_NO_MACHINES, "", "no machine is UP (2 down, draining or cordoned)"},
		{"constraints", []machineSpec{{cpu: 4000, mem: 16 * gib, attrs: map[string]string{"zone": "us"}}, {cpu: 4000, mem: 16 * gib, state: down, attrs: map[string]string{"zone": "eu"}}},
			jobSpec{cpu: 1000, mem: gib, constraints: eq("zone", "eu")},
			omegav1.WaitReason_WAIT_REASON_CONSTRAINTS, "", `none of 1 UP machines meets the constraints "zone=eu"; 1 more down, draining or cordoned`},
		{"cpu beyond any machine", uniform(3, 4000, 16*gib, 0), jobSpec{cpu: 64000, mem: gib},
			omegav1.WaitReason_WAIT_REASON_RESOURCES, "cpu", "0 of 3 UP machines can take a task of cpu 64, memory 1Gi: 3 short of cpu (none has 64 in all; the largest has 4)"},
		{"memory", uniform(2, 4000, 16*gib, 0), jobSpec{cpu: 1000, mem: 32 * gib},
			omegav1.WaitReason_WAIT_REASON_RESOURCES, "memory", "2 short of memory (none has 32Gi in all; the largest has 16Gi)"},
		{"some meet the constraints, they are full", []machineSpec{{cpu: 500, mem: 16 * gib, attrs: map[string]string{"zone": "eu"}}, {cpu: 8000, mem: 16 * gib}},
			jobSpec{cpu: 1000, mem: gib, constraints: eq("zone", "eu")},
			omegav1.WaitReason_WAIT_REASON_RESOURCES, "cpu", `1 short of cpu (none has 1 in all; the largest has 500m), 1 not meeting the constraints "zone=eu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCell(t, 1)
			if len(tc.machines) > 0 {
				c.addMachines(tc.machines...)
			}
			tc.job.kind, tc.job.scheduler, tc.job.tasks = batchKind, "batch", 1
			_, tasks := c.addJob("j", tc.job)
			w := Explain(c.view(), c.task(tasks[0]))
			if w == nil {
				t.Fatal("no reason")
			}
			if w.GetReason() != tc.reason || w.GetResource() != tc.resource || !strings.Contains(w.GetMessage(), tc.message) {
				t.Fatalf("got %s %q %q\nwant %s %q, a message holding %q", w.GetReason(), w.GetResource(), w.GetMessage(), tc.reason, tc.resource, tc.message)
			}
		})
	}
}

// TestExplainFullCell: machines that could hold the task once free are
// counted as short now, not as too small.
func TestExplainFullCell(t *testing.T) {
	c := newCell(t, 1)
	ms := c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	c.fill(3500, gib, ms[0])
	c.fill(4000, gib, ms[1])
	_, tasks := c.addJob("j", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 1000, mem: gib})
	w := Explain(c.view(), c.task(tasks[0]))
	if w.GetReason() != omegav1.WaitReason_WAIT_REASON_RESOURCES || w.GetResource() != "cpu" || !strings.HasSuffix(w.GetMessage(), ": 2 short of cpu") {
		t.Fatalf("got %s %q %q", w.GetReason(), w.GetResource(), w.GetMessage())
	}
}

// TestExplainAgreesWithFeasible is Explain against the placement toolkit's
// own measure: on random cells (states, attributes, sizes, what is
// allocated) it gives no reason exactly when some machine is feasible for
// the task, and otherwise the reason the model below finds.
func TestExplainAgreesWithFeasible(t *testing.T) {
	forSeeds(t, 200, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 31))
		states := []omegav1.MachineState{omegav1.MachineState_MACHINE_STATE_UP, omegav1.MachineState_MACHINE_STATE_UP, omegav1.MachineState_MACHINE_STATE_DOWN, omegav1.MachineState_MACHINE_STATE_DRAINING}
		zones := []string{"eu", "us"}
		var specs []machineSpec
		for range r.IntN(6) {
			specs = append(specs, machineSpec{cpu: int64(1000 * (1 + r.IntN(4))), mem: int64(1+r.IntN(4)) * gib,
				state: states[r.IntN(len(states))], attrs: map[string]string{"zone": zones[r.IntN(2)]}})
		}
		c := newCell(t, seed)
		var ms []uuid.UUID
		if len(specs) > 0 {
			ms = c.addMachines(specs...)
		}
		for _, m := range ms {
			if r.IntN(3) == 0 && c.machine(m).State == omegav1.MachineState_MACHINE_STATE_UP {
				c.fill(int64(500*r.IntN(3)), int64(r.IntN(2))*gib, m)
			}
		}
		js := jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: int64(500 * (1 + r.IntN(6))), mem: int64(1+r.IntN(3)) * gib}
		if r.IntN(2) == 0 {
			js.constraints = []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_EQUAL, Attribute: "zone", Value: zones[r.IntN(2)]}}
		}
		_, tasks := c.addJob("j", js)
		v := c.view()
		task := c.task(tasks[0])
		w := Explain(v, task)
		p := NewPlacer(v, nil)
		up, meets, feasible := 0, 0, 0
		v.RangeMachines(func(m *txn.Machine) bool {
			if m.State == omegav1.MachineState_MACHINE_STATE_UP {
				up++
				if meetsAttributes(m, task.Constraints()) {
					meets++
				}
			}
			if p.Feasible(m, task.Request(), task.Constraints()) {
				feasible++
			}
			return true
		})
		var want omegav1.WaitReason
		switch {
		case feasible > 0:
		case up == 0:
			want = omegav1.WaitReason_WAIT_REASON_NO_MACHINES
		case meets == 0:
			want = omegav1.WaitReason_WAIT_REASON_CONSTRAINTS
		default:
			want = omegav1.WaitReason_WAIT_REASON_RESOURCES
		}
		if w.GetReason() != want {
			t.Fatalf("%d machines (%d up, %d meeting the constraints, %d feasible): Explain says %s (%q), the model %s",
				len(specs), up, meets, feasible, w.GetReason(), w.GetMessage(), want)
		}
		if want == omegav1.WaitReason_WAIT_REASON_RESOURCES && !strings.Contains(w.GetMessage(), fmt.Sprintf("0 of %d UP machines", up)) {
			t.Fatalf("message %q does not count the %d UP machines", w.GetMessage(), up)
		}
	})
}

// TestReasonQuota: under a mediated store, a claim past the scheduler's
// quota is refused; the Runner (with Reasons) says the job waits on its
// quota, in the store's words, and a verdict carries it.
func TestReasonQuota(t *testing.T) {
	o := storekit.Options(t, store.DurabilityNone)
	o.Policy = store.Mediated()
	c := &testCell{t: t, st: storekit.Open(t, o), ids: newIDs(1)}
	c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	c.commit(txn.CreateQuota(&omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: c.ids.next().String(), Name: "small"},
		Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 1000}}}))
	job, _ := c.addJob("big", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 2000, mem: gib})
	cfg := testConfig()
	cfg.Reasons, cfg.MaxAttemptsNoPlacement = true, 2
	r := c.runner(NewBatch(), "batch-0", 1, cfg, nil)
	r.Submit(job, t0)
	now := t0
	for range 2 {
		a, ok, err := r.Begin(context.Background(), now)
		if err != nil || !ok {
			t.Fatalf("begin: %v %v", ok, err)
		}
		now = now.Add(a.DecisionTime)
		if _, err := r.Finish(context.Background(), a, now); err != nil {
			t.Fatal(err)
		}
		j, _ := c.state().Job(job)
		if w := j.StatusProto().GetWaiting(); j.Phase() != omegav1.JobPhase_JOB_PHASE_ABANDONED &&
			(w.GetReason() != omegav1.WaitReason_WAIT_REASON_QUOTA || !strings.Contains(w.GetMessage(), `past quota "small"`)) {
			t.Fatalf("waiting %v", w)
		}
		now = now.Add(cfg.RetryDelay)
	}
	j, _ := c.state().Job(job)
	if j.Phase() != omegav1.JobPhase_JOB_PHASE_ABANDONED || !strings.Contains(j.StatusProto().GetMessage(), `without a placement: the claim of task`) {
		t.Fatalf("the verdict: %v %q", j.Phase(), j.StatusProto().GetMessage())
	}
}
