package cli

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// submitted completes job as `omega submit` does, submits it to a fresh
// in-memory store, and returns the job and its tasks as the store holds
// them, the tasks by name.
func submitted(t *testing.T, job *omegav1.Job) (*txn.Job, map[string]*omegav1.Task) {
	t.Helper()
	if err := completeJob("job.yaml", job); err != nil {
		t.Fatalf("completeJob: %v", err)
	}
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	now := time.Unix(1_700_000_000, 0)
	c, err := client.New(context.Background(), inproc.New(st), client.Config{Component: "submitter", Clock: testkit.NewClock(now), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cell().Close)
	uid, n, err := submit(context.Background(), c, job, false, now)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	s := st.Snapshot()
	j, ok := s.Job(uid)
	if !ok {
		t.Fatalf("job %s not in the store", uid)
	}
	tasks := map[string]*omegav1.Task{}
	s.RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == uid {
			tasks[tk.Name()] = &omegav1.Task{Meta: &omegav1.ObjectMeta{Name: tk.Name(), Labels: tk.Meta.GetLabels(), OwnerReferences: tk.Meta.GetOwnerReferences()}, Spec: tk.Spec}
		}
		return true
	})
	want := int(job.GetSpec().GetReplicas())
	if job.GetSpec().GetKind() == omegav1.JobKind_JOB_KIND_MAPREDUCE {
		want = 0 // its scheduler makes its workers
	}
	if len(tasks) != n || n != want {
		t.Fatalf("submit made %d tasks, the store holds %d, want %d", n, len(tasks), want)
	}
	return j, tasks
}

// A submitted job's tasks carry every field of its template (every field of
// the TaskTemplate descriptor: one added later is set and checked without
// an edit here), the job's priority, its labels and job=NAME.
func TestSubmitKeepsEveryTemplateField(t *testing.T) {
	for _, kind := range []omegav1.JobKind{omegav1.JobKind_JOB_KIND_BATCH, omegav1.JobKind_JOB_KIND_SERVICE} {
		t.Run(kind.String(), func(t *testing.T) {
			tmpl := testkit.FullTemplate()
			_, tasks := submitted(t, &omegav1.Job{
				Meta: &omegav1.ObjectMeta{Name: "web"},
				Spec: &omegav1.JobSpec{Kind: kind, Priority: 4, Replicas: 3, Template: proto.Clone(tmpl).(*omegav1.TaskTemplate)},
			})
			for i := range 3 {
				tk := tasks[fmt.Sprintf("web-%d", i)]
				if tk == nil {
					t.Fatalf("no task web-%d among %v", i, slices.Sorted(maps.Keys(tasks)))
				}
				testkit.CheckFromTemplate(t, tmpl, tk, nil)
				if got := tk.GetSpec().GetPriority(); got != 4 {
					t.Errorf("%s: priority %d, want the job's (4)", tk.GetMeta().GetName(), got)
				}
				if got, want := tk.GetMeta().GetLabels(), testkit.LabelsWith(tmpl.GetLabels(), "job", "web"); !maps.Equal(got, want) {
					t.Errorf("%s: labels %v, want %v", tk.GetMeta().GetName(), got, want)
				}
			}
		})
	}
}

// The template (ON_FAILURE, a 30 s grace period, an exec probe)
// survives submission.
func TestSubmitKeepsRestartPolicyGraceAndProbe(t *testing.T) {
	_, tasks := submitted(t, &omegav1.Job{
		Meta: &omegav1.ObjectMeta{Name: "web"},
		Spec: &omegav1.JobSpec{Template: &omegav1.TaskTemplate{
			Resources:         &omegav1.Resources{CpuMillis: 500},
			Command:           &omegav1.Command{Path: "/bin/server"},
			RestartPolicy:     omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE,
			GracePeriodMillis: 30_000,
			HealthCheck:       &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{Path: "/bin/check"}}},
		}},
	})
	sp := tasks["web-0"].GetSpec()
	if sp.GetRestartPolicy() != omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE || sp.GetGracePeriodMillis() != 30_000 || sp.GetHealthCheck().GetExec().GetPath() != "/bin/check" {
		t.Fatalf("task spec %v: want ON_FAILURE, a 30 s grace, exec /bin/check", sp)
	}
}

// A template without a restart policy gets its kind's on the job itself at
// submission (ALWAYS for a service, NEVER otherwise), so the job says what
// its tasks do and every task built from it, a MapReduce worker too,
// carries it.
func TestSubmitMakesRestartPolicyExplicit(t *testing.T) {
	for kind, want := range map[omegav1.JobKind]omegav1.RestartPolicy{
		omegav1.JobKind_JOB_KIND_SERVICE:     omegav1.RestartPolicy_RESTART_POLICY_ALWAYS,
		omegav1.JobKind_JOB_KIND_BATCH:       omegav1.RestartPolicy_RESTART_POLICY_NEVER,
		omegav1.JobKind_JOB_KIND_UNSPECIFIED: omegav1.RestartPolicy_RESTART_POLICY_NEVER, // completed to batch
		omegav1.JobKind_JOB_KIND_MAPREDUCE:   omegav1.RestartPolicy_RESTART_POLICY_NEVER,
	} {
		t.Run(kind.String(), func(t *testing.T) {
			j, tasks := submitted(t, &omegav1.Job{
				Meta: &omegav1.ObjectMeta{Name: "j"},
				Spec: &omegav1.JobSpec{Kind: kind, Replicas: 2, Template: &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 500}}},
			})
			if got := j.Template().GetRestartPolicy(); got != want {
				t.Errorf("the job's template says %s, want %s", got, want)
			}
			for name, tk := range tasks {
				if got := tk.GetSpec().GetRestartPolicy(); got != want {
					t.Errorf("%s: restart policy %s, want %s", name, got, want)
				}
			}
		})
	}
}
