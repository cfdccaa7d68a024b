package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// systemPython is the interpreter the Python example runs under: Debian's, which
// sees Debian's python3-grpcio and python3-protobuf (a pyenv python3 first
// on PATH does not).
const systemPython = "/usr/bin/python3"

// pythonWithGRPC skips the test unless systemPython runs and imports grpc and
// protobuf.
func pythonWithGRPC(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s: %v", systemPython, err)
	}
	if out, err := exec.Command(systemPython, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Skipf("%s has no grpc or protobuf module (apt-get install python3-grpcio python3-protobuf): %v\n%s", systemPython, err, out)
	}
}

// TestPythonScheduler: the example batch scheduler in Python
// (examples/python-scheduler), which knows the cell only through the code
// generated from the .proto files, joins a running cell — a server and an
// agent — and places the example job routed to it (spec.scheduler
// "python"): its tasks are claimed by NAME, run by the agent and end
// SUCCEEDED, and the job with them; SIGTERM stops the scheduler with exit
// status 0. The cell checks tokens: each component presents its own.
func TestPythonScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and a Python process")
	}
	pythonWithGRPC(t)
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "python-scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokens := write("tokens", "admin-py-0123456789abcdef,admin,tester\nsubmit-py-0123456789abcdef,submitter\n"+
		"sched-py-0123456789abcdef,scheduler,py-0\nagent-py-0123456789abcdef,agent,a1")
	admin, submitter := write("admin", "admin-py-0123456789abcdef"), write("submitter", "submit-py-0123456789abcdef")
	token, agentToken := write("sched", "sched-py-0123456789abcdef"), write("agent", "agent-py-0123456789abcdef")
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h", "--tokens", tokens)
	c, _ := newRemoteClientWith(t, srv.grpc, "tester", admin)
	adir := t.TempDir()
	ag := startProc(t, "agent", "--server", srv.grpc, "--token-file", agentToken, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "2", "--memory", "2Gi")
	out := newOutput()
	py := exec.Command(systemPython, filepath.Join(example, "scheduler.py"), "--server", srv.grpc, "--name", "py-0", "--token-file", token)
	py.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // no __pycache__ in the source tree
	py.Stdout, py.Stderr = out, out
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- py.Wait() }()
	t.Cleanup(func() {
		py.Process.Kill()
		exited <- <-exited // the exit status stays for a second reader
	})
	defer func() {
		if t.Failed() {
			t.Logf("python scheduler:\n%s\nagent:\n%s\nserver:\n%s", out.String(), ag.log(), srv.log())
		}
	}()
	out.waitFor(t, "watching from revision", 60*time.Second)
	waitFor(t, c, 60*time.Second, "the agent's machine UP", func(v client.View) bool {
		up := false
		v.RangeMachines(func(m *txn.Machine) bool {
			up = m.State == omegav1.MachineState_MACHINE_STATE_UP
			return !up
		})
		return up
	})

	if o, errs, err := run(t, "", "submit", "-f", filepath.Join(example, "job.yaml"), "--server", srv.grpc, "--token-file", submitter); err != nil || !strings.HasPrefix(o, "job/pyhello created") {
		t.Fatalf("submit: %v\n%s%s", err, o, errs)
	}
	var job *txn.Job
	var tasks []*txn.Task
	waitFor(t, c, 90*time.Second, "the job and its tasks SUCCEEDED", func(v client.View) bool {
		job, tasks = nil, nil
		v.RangeJobs(func(j *txn.Job) bool {
			if j.Name() == "pyhello" {
				job = j
			}
			return job == nil
		})
		v.RangeTasks(func(tk *txn.Task) bool {
			if job != nil && tk.Job == job.UID {
				tasks = append(tasks, tk)
			}
			return true
		})
		for _, tk := range tasks {
			if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
				return false
			}
		}
		return job != nil && len(tasks) == int(job.Replicas()) && job.Phase() == omegav1.JobPhase_JOB_PHASE_SUCCEEDED
	})
	if job.Scheduler() != "python" || len(tasks) != 3 {
		t.Fatalf("job %s for scheduler %q with %d tasks, want examples/python-scheduler/job.yaml's: python, 3", job.Name(), job.Scheduler(), len(tasks))
	}
	for _, tk := range tasks {
		if tk.Scheduler != "py-0" || tk.Message() != "exit status 0" {
			t.Errorf("task %s: placed by %q, %q; want py-0, exit status 0", tk.Name(), tk.Scheduler, tk.Message())
		}
		b, err := os.ReadFile(filepath.Join(adir, "tasks", tk.UID.String(), "stdout"))
		if err != nil || !strings.Contains(string(b), "hello from "+tk.Name()) {
			t.Errorf("task %s's output: %q %v", tk.Name(), b, err)
		}
	}
	out.waitFor(t, "task "+tasks[0].Name()+" on a1", 10*time.Second)
	// It announced itself with a lease of its name, as the Go schedulers do.
	if o, errs, err := run(t, "", "get", "schedulers", "--server", srv.grpc, "--token-file", admin); err != nil || !strings.Contains(o, "py-0") || !strings.Contains(o, "python") || !strings.Contains(o, "LIVE") {
		t.Fatalf("get schedulers: %v\n%s%s", err, o, errs)
	}

	if err := py.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("the scheduler's exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the scheduler did not exit within 30 s of SIGTERM")
	}
	out.waitFor(t, "SIGTERM: stopping", 5*time.Second)
	// Stopped, it gave its lease back.
	if o, errs, err := run(t, "", "get", "schedulers", "--server", srv.grpc, "--token-file", admin); err != nil || strings.Contains(o, "py-0") {
		t.Fatalf("get schedulers after the stop: %v\n%s%s", err, o, errs)
	}
}
