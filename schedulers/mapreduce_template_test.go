package schedulers

import (
	"maps"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// addMapReduceJob creates a MapReduce job named "mr" of priority 5 asking
// for replicas workers of tmpl, without tasks, and returns its uid.
func (c *testCell) addMapReduceJob(replicas int32, tmpl *omegav1.TaskTemplate) uuid.UUID {
	c.t.Helper()
	j := c.ids.next()
	c.commit(txn.CreateJob(&omegav1.Job{
		Meta: &omegav1.ObjectMeta{Uid: j.String(), Name: "mr"},
		Spec: &omegav1.JobSpec{Kind: mapreduceKind, Scheduler: "mapreduce", Priority: 5, Replicas: replicas, Template: tmpl},
	}))
	return j
}

// decideWorkers takes a MaxParallelism decision for job on the cell's
// newest state, commits it, and returns the workers it created (from the
// decision) and as the store holds them.
func (c *testCell) decideWorkers(job uuid.UUID, seed uint64) (created, stored []*omegav1.Task) {
	c.t.Helper()
	v := c.view()
	d := NewMapReduce(MaxParallelism).Decide(v, request(c.t, v, job), env(seed))
	for _, op := range d.Ops {
		if op.Kind == txn.OpCreate && op.NewTask != nil {
			created = append(created, op.NewTask)
		}
	}
	if res := c.commitDecision(v, d); res.Conflicted() || res.Committed != len(d.Ops) {
		c.t.Fatalf("committed %d of %d ops, %d conflicts", res.Committed, len(d.Ops), res.Conflicts)
	}
	c.checkInvariants()
	c.state().RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == job {
			stored = append(stored, &omegav1.Task{Meta: tk.Meta, Spec: tk.Spec})
		}
		return true
	})
	if len(stored) != len(created) {
		c.t.Fatalf("the decision created %d workers, the store holds %d", len(created), len(stored))
	}
	return created, stored
}

// A MapReduce worker keeps every field of its job's template (every field
// of the TaskTemplate descriptor: one added later is set and checked
// without an edit here), with the job's priority, its labels and job=NAME;
// only its duration is the scheduler's own (the linear speedup: the job's
// work shared by its workers). The store accepts the workers and holds
// them so.
func TestMapReduceWorkersKeepEveryTemplateField(t *testing.T) {
	notCopied := map[string]string{
		"duration_millis": "the linear speedup's share of the job's work (checked below)",
	}
	forSeeds(t, 3, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		ms := uniform(4, 4000, 16*gib, 2)
		for i := range ms {
			ms[i].attrs = map[string]string{"zone": "a"} // the template's constraint
		}
		c.addMachines(ms...)
		tmpl := testkit.FullTemplate()
		job := c.addMapReduceJob(2, proto.Clone(tmpl).(*omegav1.TaskTemplate))
		created, stored := c.decideWorkers(job, seed)
		if len(created) <= 2 {
			t.Fatalf("%d workers: want more than the 2 requested on an idle cell", len(created))
		}
		share := tmpl.GetDurationMillis() * 2 / int64(len(created))
		for _, tasks := range [][]*omegav1.Task{created, stored} {
			for _, w := range tasks {
				testkit.CheckFromTemplate(t, tmpl, w, notCopied)
				if got := w.GetSpec().GetPriority(); got != 5 {
					t.Errorf("worker %s: priority %d, want the job's (5)", w.GetMeta().GetName(), got)
				}
				if got := w.GetSpec().GetDurationMillis(); got != share {
					t.Errorf("worker %s: runs %d ms; %d workers share 2 x %d ms: want %d", w.GetMeta().GetName(), got, len(created), tmpl.GetDurationMillis(), share)
				}
				if got, want := w.GetMeta().GetLabels(), testkit.LabelsWith(tmpl.GetLabels(), "job", "mr"); !maps.Equal(got, want) {
					t.Errorf("worker %s: labels %v, want %v", w.GetMeta().GetName(), got, want)
				}
			}
		}
	})
}

// The template: a worker of a job asking for ON_FAILURE, a 30 s
// grace period and an exec probe was given UNSPECIFIED, 0 and none; it
// keeps all three.
func TestMapReduceWorkerKeepsRestartPolicyGraceAndProbe(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	job := c.addMapReduceJob(1, &omegav1.TaskTemplate{
		Resources:         &omegav1.Resources{CpuMillis: 1000, MemoryBytes: gib},
		Command:           &omegav1.Command{Path: "/bin/worker"},
		RestartPolicy:     omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE,
		GracePeriodMillis: 30_000,
		HealthCheck:       &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{Path: "/bin/check"}}},
	})
	_, stored := c.decideWorkers(job, 1)
	if len(stored) == 0 {
		t.Fatalf("no worker created")
	}
	for _, w := range stored {
		sp := w.GetSpec()
		if sp.GetRestartPolicy() != omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE || sp.GetGracePeriodMillis() != 30_000 ||
			sp.GetHealthCheck().GetExec().GetPath() != "/bin/check" || sp.GetCommand().GetPath() != "/bin/worker" {
			t.Errorf("worker %s: restart policy %s, grace %d ms, probe %v, command %v; want ON_FAILURE, 30000, exec /bin/check, /bin/worker",
				w.GetMeta().GetName(), sp.GetRestartPolicy(), sp.GetGracePeriodMillis(), sp.GetHealthCheck(), sp.GetCommand())
		}
	}
}
