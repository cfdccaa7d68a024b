package txn_test

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// The builder's tasks carry every field of their job's template (every field
// of the TaskTemplate descriptor, so one added later is checked too), the
// job's priority, the template's labels and job=NAME, the job as
// controlling owner; the tasks of one job share their spec, labels and owner
// references; and the store accepts them.
func TestJobTasksKeepEveryTemplateField(t *testing.T) {
	job := testkit.UID('J', 1, 0)
	tmpl := testkit.FullTemplate()
	spec := &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "batch", Priority: 9, Replicas: 2, Template: tmpl}
	want := proto.Clone(tmpl)
	of := txn.NewJobTasks(job, "web", spec)
	a, b := of.Task(testkit.UID('T', 1, 0), "web-0"), of.Task(testkit.UID('T', 2, 0), "web-1")
	for _, tk := range []*omegav1.Task{a, b} {
		testkit.CheckFromTemplate(t, tmpl, tk, nil)
		if got := tk.GetSpec().GetPriority(); got != 9 {
			t.Errorf("%s: priority %d, want the job's (9)", tk.GetMeta().GetName(), got)
		}
		if got, want := tk.GetMeta().GetLabels(), testkit.LabelsWith(tmpl.GetLabels(), "job", "web"); !maps.Equal(got, want) {
			t.Errorf("%s: labels %v, want %v", tk.GetMeta().GetName(), got, want)
		}
		o := tk.GetMeta().GetOwnerReferences()
		if len(o) != 1 || o[0].GetKind() != "Job" || o[0].GetUid() != job.String() || o[0].GetName() != "web" || !o[0].GetController() {
			t.Errorf("%s: owner references %v, want the job %s (web) as controller", tk.GetMeta().GetName(), o, job)
		}
	}
	if a.GetMeta().GetUid() != testkit.UID('T', 1, 0).String() || a.GetMeta().GetName() != "web-0" || a.GetStatus() != nil {
		t.Errorf("task meta %v, status %v: want the uid and name given, no status", a.GetMeta(), a.GetStatus())
	}
	if a.Spec != b.Spec || a.Meta.OwnerReferences[0] != b.Meta.OwnerReferences[0] {
		t.Errorf("the job's tasks do not share their spec and owner references")
	}
	a.Meta.Labels["probe"] = "shared"
	if b.Meta.Labels["probe"] != "shared" {
		t.Errorf("the job's tasks do not share their labels")
	}
	delete(a.Meta.Labels, "probe")
	if tmpl.Labels["job"] != "" || !proto.Equal(tmpl, want) {
		t.Errorf("building tasks changed the template: %v, was %v", tmpl, want)
	}

	st := txn.NewState()
	ops := []txn.Op{txn.CreateJob(&omegav1.Job{Meta: &omegav1.ObjectMeta{Uid: job.String(), Name: "web"}, Spec: spec}), txn.CreateTask(a), txn.CreateTask(b)}
	if res, _, err := txn.Evaluate(st, &txn.Txn{ViewRevision: st.Revision(), Component: "test", Ops: ops}, 1, txn.DefaultLimits()); err != nil || res.Conflicted() || res.Committed != len(ops) {
		t.Fatalf("the store refuses the built tasks: %v, %+v", err, res.Outcomes)
	}
}

// A template label named job loses to the job's name: tasks belong to
// their job by that label.
func TestJobTasksJobLabelWins(t *testing.T) {
	spec := &omegav1.JobSpec{Template: &omegav1.TaskTemplate{Labels: map[string]string{"job": "other", "app": "x"}}}
	tk := txn.NewJobTasks(testkit.UID('J', 1, 0), "web", spec).Task(testkit.UID('T', 1, 0), "web-0")
	if got := tk.GetMeta().GetLabels(); !maps.Equal(got, map[string]string{"job": "web", "app": "x"}) {
		t.Fatalf("labels %v: want job=web, app=x", got)
	}
	if spec.Template.Labels["job"] != "other" {
		t.Fatalf("the template's labels were written")
	}
}

// TaskWith gives a task its own request and priority (the replay's trace
// tasks) and the template's every other field, leaving the shared spec as
// it was.
func TestJobTasksTaskWithOverride(t *testing.T) {
	tmpl := testkit.FullTemplate()
	of := txn.NewJobTasks(testkit.UID('J', 1, 0), "web", &omegav1.JobSpec{Priority: 9, Template: tmpl})
	own := &omegav1.Resources{CpuMillis: 250, MemoryBytes: 1 << 20}
	tk := of.TaskWith(testkit.UID('T', 1, 0), "web-0", txn.Override{Resources: own, Priority: 2})
	testkit.CheckFromTemplate(t, tmpl, tk, map[string]string{"resources": "the override's"})
	if tk.Spec == of.Spec || tk.Spec.Resources != own || tk.Spec.Priority != 2 {
		t.Errorf("spec %v: want a spec of its own with the override's resources and priority 2", tk.Spec)
	}
	if of.Spec.Resources != tmpl.Resources || of.Spec.Priority != 9 {
		t.Errorf("the shared spec changed: %v", of.Spec)
	}
	if tk.Meta.Labels["job"] != "web" || len(tk.Meta.OwnerReferences) != 1 {
		t.Errorf("meta %v: want the job's labels and owner", tk.Meta)
	}
}

// The builder fills in no default: a template without a restart policy
// gives tasks without one (the simulation's and the replay's recorded
// outputs hold them so); the default is DefaultRestartPolicy's, which
// submission makes explicit on the job.
func TestRestartPolicyDefault(t *testing.T) {
	for kind, want := range map[omegav1.JobKind]omegav1.RestartPolicy{
		omegav1.JobKind_JOB_KIND_SERVICE:     omegav1.RestartPolicy_RESTART_POLICY_ALWAYS,
		omegav1.JobKind_JOB_KIND_BATCH:       omegav1.RestartPolicy_RESTART_POLICY_NEVER,
		omegav1.JobKind_JOB_KIND_MAPREDUCE:   omegav1.RestartPolicy_RESTART_POLICY_NEVER,
		omegav1.JobKind_JOB_KIND_UNSPECIFIED: omegav1.RestartPolicy_RESTART_POLICY_NEVER,
	} {
		if got := txn.DefaultRestartPolicy(kind); got != want {
			t.Errorf("DefaultRestartPolicy(%s) = %s, want %s", kind, got, want)
		}
		spec := txn.TaskSpecOf(&omegav1.JobSpec{Kind: kind, Template: &omegav1.TaskTemplate{}})
		if spec.RestartPolicy != omegav1.RestartPolicy_RESTART_POLICY_UNSPECIFIED {
			t.Errorf("%s: TaskSpecOf filled in restart policy %s", kind, spec.RestartPolicy)
		}
	}
}
