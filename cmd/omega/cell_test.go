package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

const helloJob = `meta:
  name: hello
  labels: {team: infra}
spec:
  kind: batch
  replicas: 3
  template:
    resources: {cpu: 500m, memory: 256Mi}
    command: {path: /bin/true}
`

// TestSubmitAndGet: `omega submit` creates a job and its tasks from a file
// (refusing a live name unless --replace, naming a bad field's line and
// column), and `omega get` lists them as a table, JSON and YAML, by
// selector and by name or uid prefix.
func TestSubmitAndGet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	dir := t.TempDir()
	file := filepath.Join(dir, "hello.yaml")
	if err := os.WriteFile(file, []byte(helloJob), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, err := run(t, "", "submit", "-f", file, "--server", srv.grpc)
	if err != nil || !strings.HasPrefix(out, "job/hello created") || !strings.Contains(out, "3 tasks") {
		t.Fatalf("submit: %v\n%s%s", err, out, errs)
	}
	if _, errs, err := run(t, "", "submit", "-f", file, "--server", srv.grpc); err == nil || !strings.Contains(errs, `job "hello" is live`) {
		t.Fatalf("a second submit of a live name: %v\n%s", err, errs)
	}
	if out, errs, err := run(t, helloJob, "submit", "-f", "-", "--server", srv.grpc, "--replace"); err != nil || !strings.HasPrefix(out, "job/hello created") {
		t.Fatalf("submit --replace from stdin: %v\n%s%s", err, out, errs)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("meta: {name: x}\nspec:\n  replicas: many\n"), 0o644)
	if _, errs, err := run(t, "", "submit", "-f", bad, "--server", srv.grpc); err == nil || !strings.Contains(errs, bad+":3:13: spec.replicas") {
		t.Fatalf("a bad file: %v\n%s", err, errs)
	}

	out, errs, err = run(t, "", "get", "jobs", "--server", srv.grpc)
	if err != nil || !strings.Contains(out, "NAME") || strings.Count(out, "hello") != 2 || !strings.Contains(out, "KILLED") {
		t.Fatalf("get jobs (the replaced one KILLED, the new one):\n%s%s %v", out, errs, err)
	}
	out, _, err = run(t, "", "get", "tasks", "-l", "job=hello", "-o", "json", "--server", srv.grpc)
	if err != nil {
		t.Fatal(err)
	}
	var anyDoc map[string]any
	if err := json.Unmarshal([]byte(out), &anyDoc); err != nil || len(anyDoc["items"].([]any)) != 6 {
		t.Fatalf("get tasks -o json: %v\n%s", err, out)
	}
	killed := strings.Count(out, "TASK_STATE_KILLED")
	if killed != 3 {
		t.Fatalf("%d tasks KILLED, want the replaced job's 3:\n%s", killed, out)
	}
	if out, _, err := run(t, "", "get", "jobs", "-o", "yaml", "--server", srv.grpc); err != nil || !strings.Contains(out, "items:") || !strings.Contains(out, "name: hello") {
		t.Fatalf("get jobs -o yaml: %v\n%s", err, out)
	}
	// Two jobs named hello, one killed (replaced): the live one (or, once it
	// ended, the newest), said on stderr.
	if out, errs, err := run(t, "", "get", "jobs", "hello", "--server", srv.grpc); err != nil || !strings.Contains(errs, `2 jobs named "hello"; this is the `) || strings.Count(out, "hello") != 1 {
		t.Fatalf("a name used again: %v\n%s%s", err, out, errs)
	}
	if _, errs, err := run(t, "", "get", "tasks", "-l", "job in (hello", "--server", srv.grpc); err == nil || !strings.Contains(errs, "at byte") {
		t.Fatalf("a bad selector: %v\n%s", err, errs)
	}
}

// TestKillAndWatch: `omega kill` kills a running job — the job and its
// task KILLED, and the agent stops the task's process — while `omega
// watch -l job=sleeper` prints the task's changes as they commit.
func TestKillAndWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	adir := t.TempDir()
	startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "2", "--memory", "2Gi")
	startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	waitFor(t, c, 60*time.Second, "the machine UP", func(v client.View) bool { return v.NumMachines() == 1 })

	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	watched := newOutput()
	watch := exec.Command(bin, "watch", "-l", "job=sleeper", "--server", srv.grpc)
	watch.Stdout = watched
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { watch.Process.Kill(); watch.Wait() }()
	watched.waitFor(t, "watching from revision", 30*time.Second)

	f := filepath.Join(t.TempDir(), "sleeper.yaml")
	os.WriteFile(f, []byte("meta: {name: sleeper}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/sleep, args: ['300']}\n"), 0o644)
	if _, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v %s", err, errs)
	}
	task := waitRunning(t, c, 60*time.Second)
	pid := 0
	b, _ := os.ReadFile(filepath.Join(adir, "tasks", task.UID.String(), "shim.pid"))
	fmt.Sscan(string(b), &pid)
	if out, errs, err := run(t, "", "kill", "sleeper", "--server", srv.grpc); err != nil || !strings.HasPrefix(out, "job/sleeper killed") {
		t.Fatalf("kill: %v\n%s%s", err, out, errs)
	}
	waitFor(t, c, 30*time.Second, "the job and its task KILLED", func(v client.View) bool {
		tk, _ := v.Task(task.UID)
		var job *txn.Job
		v.RangeJobs(func(j *txn.Job) bool { job = j; return false })
		return tk.State == omegav1.TaskState_TASK_STATE_KILLED && job != nil && job.Phase() == omegav1.JobPhase_JOB_PHASE_KILLED
	})
	if err := testkit.WaitGone(pid, 30*time.Second); err != nil {
		t.Fatalf("the killed task's process: %v", err)
	}
	for _, want := range []string{"task/sleeper-0\tcreated\tPENDING", "RUNNING on", "KILLED"} {
		watched.waitFor(t, want, 10*time.Second)
	}
	if out, errs, err := run(t, "", "kill", "sleeper", "--server", srv.grpc); err == nil || !strings.Contains(errs, "no live job") {
		t.Fatalf("killing it again: %v\n%s%s", err, out, errs)
	}
}
