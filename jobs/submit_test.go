package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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

// submitted completes job as `omega submit` does (Complete), submits it to a fresh
// in-memory store, and returns the job and its tasks as the store holds
// them, the tasks by name.
func submitted(t *testing.T, job *omegav1.Job) (*txn.Job, map[string]*omegav1.Task) {
	t.Helper()
	if err := Complete(job); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	now := time.Unix(1_700_000_000, 0)
	c, err := client.New(context.Background(), inproc.New(st), client.Config{Component: "submitter", Clock: testkit.NewClock(now), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cell().Close)
	uid, n, err := Submit(context.Background(), c, job, false, now.UnixNano())
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

// submitter is a client of a fresh in-memory store, as `omega submit`'s.
func submitter(t *testing.T) (*client.Client, *store.Store) {
	t.Helper()
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	c, err := client.New(context.Background(), inproc.New(st), client.Config{Component: "submitter", Clock: testkit.NewClock(time.Unix(1_700_000_000, 0)), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cell().Close)
	return c, st
}

func job(name string, replicas int32) *omegav1.Job {
	j := &omegav1.Job{Meta: &omegav1.ObjectMeta{Name: name}, Spec: &omegav1.JobSpec{Replicas: replicas, Template: &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 100}}}}
	if err := Complete(j); err != nil {
		panic(err)
	}
	return j
}

// liveTasks counts the job's tasks not ended, and those KILLED.
func liveTasks(st *store.Store, uid uuid.UUID) (live, killed int) {
	st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == uid {
			if !tk.Terminal() {
				live++
			}
			if tk.State == omegav1.TaskState_TASK_STATE_KILLED {
				killed++
			}
		}
		return true
	})
	return live, killed
}

// A name a live job holds is refused (ErrNameInUse, nothing written);
// with replace the old job and its tasks are KILLED in the same
// transaction as the new job is created.
func TestSubmitNameInUseAndReplace(t *testing.T) {
	c, st := submitter(t)
	ctx := context.Background()
	old, _, err := Submit(ctx, c, job("web", 2), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	if _, _, err := Submit(ctx, c, job("web", 3), false, 2); !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), old.String()) {
		t.Fatalf("second submit: err = %v, want ErrNameInUse naming %s", err, old)
	}
	if st.Revision() != rev {
		t.Fatalf("a refused submission wrote: revision %d -> %d", rev, st.Revision())
	}
	nu, n, err := Submit(ctx, c, job("web", 3), true, 3)
	if err != nil || n != 3 {
		t.Fatalf("replace: %v, %d tasks", err, n)
	}
	if st.Revision() != rev+1 {
		t.Fatalf("the replacement took %d revisions, want one transaction", st.Revision()-rev)
	}
	s := st.Snapshot()
	oj, _ := s.Job(old)
	if oj.Status.GetPhase() != omegav1.JobPhase_JOB_PHASE_KILLED || oj.Status.GetMessage() != "replaced by a new submission" || oj.Status.GetFinishUnixNanos() != 3 {
		t.Fatalf("the old job's status %v: want KILLED at 3, replaced", oj.Status)
	}
	if live, killed := liveTasks(st, old); live != 0 || killed != 2 {
		t.Fatalf("the old job has %d tasks live, %d KILLED: want 0 and 2", live, killed)
	}
	if live, _ := liveTasks(st, nu); live != 3 {
		t.Fatalf("the new job has %d tasks live, want 3", live)
	}
}

// Kill finds a live job by name or uid prefix; none, or several, is an
// error that writes nothing.
func TestKill(t *testing.T) {
	c, st := submitter(t)
	ctx := context.Background()
	a, _, err := Submit(ctx, c, job("a", 2), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Submit(ctx, c, job("b", 1), false, 2); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	if _, err := Kill(ctx, c, "nosuch", "why", 3); err == nil || !strings.Contains(err.Error(), "no live job") {
		t.Fatalf("kill nosuch: %v", err)
	}
	if _, err := Kill(ctx, c, "", "why", 3); err == nil || !strings.Contains(err.Error(), "no job named") {
		t.Fatalf("kill of an empty name: %v, want refused", err)
	}
	// A job named as a prefix of another's uid: the prefix names both.
	if _, _, err := Submit(ctx, c, job(a.String()[:6], 1), false, 3); err != nil {
		t.Fatal(err)
	}
	rev = st.Revision()
	if _, err := Kill(ctx, c, a.String()[:6], "why", 3); err == nil || !strings.Contains(err.Error(), "ambiguous: 2 live jobs match") {
		t.Fatalf("kill of a name that is also a uid prefix: %v, want ambiguous", err)
	}
	long := strings.Repeat("x", 1000)
	if _, err := Kill(ctx, c, long, "why", 3); err == nil || len(err.Error()) > 200 {
		t.Fatalf("kill of a 1,000-byte name: the error quotes %d bytes", len(err.Error()))
	}
	if st.Revision() != rev {
		t.Fatal("a refused kill wrote")
	}
	k, err := Kill(ctx, c, a.String()[:8], "killed by a test", 4)
	if err != nil || k.UID != a {
		t.Fatalf("kill by uid prefix: %v, %v", k, err)
	}
	if live, killed := liveTasks(st, a); live != 0 || killed != 2 {
		t.Fatalf("job a: %d tasks live, %d KILLED", live, killed)
	}
	if _, err := Kill(ctx, c, "a", "again", 5); err == nil {
		t.Fatal("a killed job was killed again")
	}
}

// Complete refuses what a job must say with the field named, and fills
// in the kind, the scheduler and one replica.
func TestComplete(t *testing.T) {
	res := &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 1}}
	for _, tc := range []struct {
		job  *omegav1.Job
		path string
	}{
		{&omegav1.Job{}, "meta.name"},
		{&omegav1.Job{Meta: &omegav1.ObjectMeta{Name: "j", Uid: "x"}}, "meta.uid"},
		{&omegav1.Job{Meta: &omegav1.ObjectMeta{Name: "j"}}, "spec.template.resources"},
		{&omegav1.Job{Meta: &omegav1.ObjectMeta{Name: "j"}, Spec: &omegav1.JobSpec{Replicas: -1, Template: res}}, "spec.replicas"},
		{&omegav1.Job{Meta: &omegav1.ObjectMeta{Name: "j"}, Spec: &omegav1.JobSpec{Replicas: MaxReplicas + 1, Template: res}}, "spec.replicas"},
		{&omegav1.Job{Meta: &omegav1.ObjectMeta{Name: "j"}, Spec: &omegav1.JobSpec{Scheduler: "Batch", Template: res}}, "spec.scheduler"},
	} {
		var fe *FieldError
		if err := Complete(tc.job); !errors.As(err, &fe) || fe.Path != tc.path {
			t.Errorf("%v: err = %v, want a FieldError at %s", tc.job, err, tc.path)
		}
	}
	// A name is a DNS label; the refusal names the field and quotes the
	// name cut to 64 bytes (txn.Quote).
	for _, tc := range []struct{ name, says string }{
		{"Bad Name!", `meta.name: "Bad Name!": not a DNS label`},
		{"web.1", `meta.name: "web.1": not a DNS label`},
		{"-web", "starts with '-'"},
		{strings.Repeat("a", 64), "64 bytes"},
		{strings.Repeat("X", 1<<20), `meta.name: "` + strings.Repeat("X", 61) + `…" (1048576 bytes): not a DNS label`},
	} {
		j := &omegav1.Job{Meta: &omegav1.ObjectMeta{Name: tc.name}, Spec: &omegav1.JobSpec{Template: proto.Clone(res).(*omegav1.TaskTemplate)}}
		err := Complete(j)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != "meta.name" || !strings.Contains(err.Error(), tc.says) || len(err.Error()) > 400 {
			t.Errorf("name %s: err = %.400v, want a FieldError at meta.name saying %q", txn.Quote(tc.name), err, tc.says)
		}
	}
	for _, name := range []string{"a", "web-1", strings.Repeat("a", 63), "0x"} {
		j := &omegav1.Job{Meta: &omegav1.ObjectMeta{Name: name}, Spec: &omegav1.JobSpec{Template: proto.Clone(res).(*omegav1.TaskTemplate)}}
		if err := Complete(j); err != nil {
			t.Errorf("name %q: %v, want it taken", name, err)
		}
	}
	j := &omegav1.Job{Meta: &omegav1.ObjectMeta{Name: "j"}, Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_SERVICE, Template: proto.Clone(res).(*omegav1.TaskTemplate)}}
	if err := Complete(j); err != nil {
		t.Fatal(err)
	}
	if j.Spec.Scheduler != "service" || j.Spec.Replicas != 1 {
		t.Fatalf("completed: scheduler %q, replicas %d; want service, 1", j.Spec.Scheduler, j.Spec.Replicas)
	}
}
