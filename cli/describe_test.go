package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// A job's description: its fields, its tasks with their machines by name
// (a machine gone by its uid), and its tasks' transitions in time order,
// each task's last with its message; the last N only when asked.
func TestDescribeJob(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	at := func(s int) int64 { return now.Add(time.Duration(s-100) * time.Second).UnixNano() }
	job := &omegav1.Job{
		Meta: &omegav1.ObjectMeta{Uid: "j-uid", Name: "web", Labels: map[string]string{"team": "a", "app": "web"}},
		Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_SERVICE, Scheduler: "service", Priority: 5, Replicas: 2, SubmitUnixNanos: at(1),
			Template: &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 500, MemoryBytes: 64 << 20},
				Command: &omegav1.Command{Path: "/bin/sh", Args: []string{"-c", "echo it's"}}}},
		Status: &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_RUNNING, Running: 1, Pending: 1},
	}
	task := func(name string, created int, st *omegav1.TaskStatus) *omegav1.Task {
		return &omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: name + "-uid", Name: name, CreationUnixNanos: at(created),
			OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: "j-uid", Name: "web", Controller: true}}}, Status: st}
	}
	d := &description{kind: omegav1.ObjectKind_OBJECT_KIND_JOB, job: job, names: map[string]string{"m-uid": "m1"},
		tasks: []*omegav1.Task{
			task("web-0", 1, &omegav1.TaskStatus{State: omegav1.TaskState_TASK_STATE_RUNNING, MachineUid: "m-uid", Scheduler: "service-0",
				AssignUnixNanos: at(3), StartUnixNanos: at(4), Message: "restarted 1 times, last exit: exit status 2",
				Run: &omegav1.TaskRun{Restarts: 1, Address: "127.0.0.7", Health: omegav1.HealthState_HEALTH_STATE_HEALTHY, LastExit: &omegav1.ExitStatus{Code: 2}}}),
			task("web-1", 2, &omegav1.TaskStatus{State: omegav1.TaskState_TASK_STATE_PENDING, Evictions: 2, Message: "preempted"}),
			task("web-2", 2, &omegav1.TaskStatus{State: omegav1.TaskState_TASK_STATE_LOST, MachineUid: "0123456789ab", AssignUnixNanos: at(5), FinishUnixNanos: at(6), Message: "machine down"}),
		}}
	var b bytes.Buffer
	if err := d.print(&b, now, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Name:         web", "Kind:         service", "Priority:     5", "Replicas:     2", "Phase:        RUNNING",
		"Tasks:        1 pending, 1 running, 0 succeeded, 0 failed", "Labels:       app=web,team=a",
		"Resources:    cpu 500m, memory 64Mi each", `Command:      /bin/sh -c 'echo it'\''s'`,
		"NAME   STATE    MACHINE          ADDRESS    RESTARTS  HEALTH   LAST EXIT      AGE",
		"web-0  RUNNING  m1               127.0.0.7  1         healthy  exit status 2  1m39s",
		"web-1  PENDING  -                -          0         -        -              1m38s",
		"web-2  LOST     01234567 (gone)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	_, trans, _ := strings.Cut(out, "Recent transitions:\n")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(trans), "\n")[1:] {
		f := strings.Fields(l)
		got = append(got, strings.Join(f[2:], " "))
	}
	want := []string{
		"job/web submitted: 2 replicas for scheduler service",
		"task/web-0 created",
		"task/web-1 created",
		"task/web-1 evicted 2 times (PENDING: preempted)",
		"task/web-2 created",
		"task/web-0 assigned to m1 by service-0",
		"task/web-0 RUNNING: restarted 1 times, last exit: exit status 2",
		"task/web-2 assigned to 01234567 (gone)",
		"task/web-2 LOST: machine down",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transitions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b.Reset()
	d.print(&b, now, 2)
	if out := b.String(); !strings.Contains(out, "(7 earlier not shown") || strings.Contains(out, "task/web-0 created") || !strings.Contains(out, "LOST: machine down") {
		t.Fatalf("the last 2 transitions:\n%s", out)
	}

	b.Reset()
	if err := d.printDoc(&b, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Job   map[string]any   `json:"job"`
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || doc.Job["meta"].(map[string]any)["name"] != "web" || len(doc.Tasks) != 3 {
		t.Fatalf("-o json: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := d.printDoc(&b, "yaml"); err != nil || !strings.Contains(b.String(), "name: web-2") {
		t.Fatalf("-o yaml: %v\n%s", err, b.String())
	}
}

// A machine's description: its capacity and allocation, its endpoints,
// its tasks.
func TestDescribeMachine(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	d := &description{kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, names: map[string]string{},
		machine: &omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: "m-uid", Name: "m1", Annotations: map[string]string{"omega.io/logs": "http://127.0.0.1:9"}},
			Spec:   &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: 2000, MemoryBytes: 4 << 30}, FailureDomain: "rack-1"},
			Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP, Allocated: &omegav1.Resources{CpuMillis: 500, MemoryBytes: 1 << 30}, AgentAddress: "127.0.0.1:7950", Tasks: 1}},
		tasks: []*omegav1.Task{{Meta: &omegav1.ObjectMeta{Name: "a-0", OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Name: "a", Controller: true}}},
			Status: &omegav1.TaskStatus{State: omegav1.TaskState_TASK_STATE_RUNNING, MachineUid: "m-uid", Claimed: &omegav1.Resources{CpuMillis: 500, MemoryBytes: 1 << 30}}}}}
	var b bytes.Buffer
	d.print(&b, now, 0)
	for _, want := range []string{"State:           UP", "Capacity:        cpu 2, memory 4.0Gi", "Allocated:       cpu 500m of 2 (25%), memory 1.0Gi of 4.0Gi (25%)",
		"Agent:           127.0.0.1:7950", "Logs:            http://127.0.0.1:9", "Failure domain:  rack-1", "a-0   RUNNING  a    500m  1.0Gi"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

func TestNaturalLess(t *testing.T) {
	for _, tc := range [][2]string{{"job-2", "job-10"}, {"a", "b"}, {"job-9", "job-10-x"}, {"a-1", "a-1b"}, {"x01", "x2"}, {"", "a"}} {
		if !naturalLess(tc[0], tc[1]) || naturalLess(tc[1], tc[0]) {
			t.Errorf("%q < %q: want true, and not the other way", tc[0], tc[1])
		}
	}
	if naturalLess("a-1", "a-1") {
		t.Error("a name is not less than itself")
	}
}

// A job that waits says why, in its fields and among its transitions; an
// unset replica count reads as the one every reader takes it for.
func TestDescribeWaitingJob(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	job := &omegav1.Job{
		Meta: &omegav1.ObjectMeta{Uid: "j-uid", Name: "big"},
		Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "batch", SubmitUnixNanos: now.Add(-time.Minute).UnixNano()},
		Status: &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_PENDING, Pending: 1, Waiting: &omegav1.JobWaiting{
			Reason: omegav1.WaitReason_WAIT_REASON_RESOURCES, Resource: "cpu", Reporter: "batch-0", Tasks: 1,
			SinceUnixNanos: now.Add(-50 * time.Second).UnixNano(), Message: "0 of 1 UP machines can take a task of cpu 64"}},
	}
	d := &description{kind: omegav1.ObjectKind_OBJECT_KIND_JOB, job: job}
	var b bytes.Buffer
	if err := d.print(&b, now, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Replicas:     1",
		"Waiting:      Resources:cpu, 1 tasks, since ",
		"(50s ago) (batch-0): 0 of 1 UP machines can take a task of cpu 64",
		"job/big  submitted: 1 replicas for scheduler batch",
		"job/big  waiting (Resources:cpu, batch-0): 0 of 1 UP machines can take a task of cpu 64",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for w, short := range map[omegav1.WaitReason]string{
		omegav1.WaitReason_WAIT_REASON_UNSPECIFIED: "", omegav1.WaitReason_WAIT_REASON_CONSTRAINTS: "Constraints",
		omegav1.WaitReason_WAIT_REASON_QUOTA: "Quota", omegav1.WaitReason_WAIT_REASON_NO_SCHEDULER: "NoScheduler",
		omegav1.WaitReason_WAIT_REASON_NO_MACHINES: "NoMachines",
	} {
		if got := waitingShort(&omegav1.JobWaiting{Reason: w}); got != short {
			t.Errorf("%s: %q, want %q", w, got, short)
		}
	}
}
