package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestAgentMembership: an agent process registers its machine and joins the
// server's gossip membership; when it is killed (SIGKILL) the membership
// declares it dead and the server puts its machine DOWN and its task LOST;
// restarted on its directory, it is the same machine, UP again.
func TestAgentMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	adir := t.TempDir()
	agentArgs := []string{"agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "2", "--memory", "4Gi"}
	ag := startProc(t, agentArgs...)
	var machine *txn.Machine
	waitFor(t, c, 60*time.Second, "the agent's machine registered UP", func(v client.View) bool {
		v.RangeMachines(func(m *txn.Machine) bool {
			if m.Name() == "a1" && m.State == omegav1.MachineState_MACHINE_STATE_UP {
				machine = m
			}
			return machine == nil
		})
		return machine != nil
	})
	if machine.Capacity.CPU != 2000 || machine.Capacity.Memory != 4<<30 {
		t.Fatalf("capacity %v, want 2 cores and 4Gi", machine.Capacity)
	}
	task := testkit.UID('t', 9, 0)
	tx := c.NewTxn(c.View())
	tx.Ops = []txn.Op{txn.CreateTask(testkit.Task(task, uuid.Nil, "sleeper", testkit.Res(100, 1<<20))), txn.Claim(task, machine.UID, testkit.Res(100, 1<<20), 0)}
	if res, err := c.Commit(context.Background(), tx); err != nil || res.Committed != 2 {
		t.Fatalf("place a task: %+v %v", res, err)
	}
	ag.cmd.Process.Kill()
	waitFor(t, c, 90*time.Second, "the dead agent's machine DOWN and its task LOST", func(v client.View) bool {
		m, _ := v.Machine(machine.UID)
		tk, _ := v.Task(task)
		return m.State == omegav1.MachineState_MACHINE_STATE_DOWN && tk.State == omegav1.TaskState_TASK_STATE_LOST
	})
	startProc(t, agentArgs...)
	waitFor(t, c, 60*time.Second, "the restarted agent's machine UP again, the same uid", func(v client.View) bool {
		m, ok := v.Machine(machine.UID)
		return ok && m.State == omegav1.MachineState_MACHINE_STATE_UP && v.NumMachines() == 1
	})
}

// TestCellRunsRealProcesses: a server, an agent and a batch scheduler, as
// processes; a job of shell commands is submitted, placed, run by the
// agent as real processes, and its tasks end SUCCEEDED (one job) or FAILED
// with their exit status (the other), their output in the agent's task
// directories; the job controller is not in this cell, so tasks are read.
func TestCellRunsRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	adir := t.TempDir()
	ag := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "4", "--memory", "8Gi")
	sc := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	defer func() {
		if t.Failed() {
			t.Logf("agent:\n%s\nscheduler:\n%s\nserver:\n%s", ag.log(), sc.log(), srv.log())
		}
	}()
	dir := t.TempDir()
	jobs := map[string]string{
		"ok":   "meta: {name: ok}\nspec:\n  replicas: 3\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/sh, args: [-c, 'echo hello from $OMEGA_TASK_NAME']}\n",
		"boom": "meta: {name: boom}\nspec:\n  replicas: 1\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/sh, args: [-c, 'exit 3']}\n",
	}
	waitFor(t, c, 60*time.Second, "the agent's machine UP", func(v client.View) bool { return v.NumMachines() == 1 })
	for name, src := range jobs {
		f := filepath.Join(dir, name+".yaml")
		os.WriteFile(f, []byte(src), 0o644)
		if out, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
			t.Fatalf("submit %s: %v\n%s%s", name, err, out, errs)
		}
	}
	states := func(v client.View) map[string][]*txn.Task {
		by := map[string][]*txn.Task{}
		v.RangeTasks(func(tk *txn.Task) bool {
			by[tk.Labels()["job"]] = append(by[tk.Labels()["job"]], tk)
			return true
		})
		return by
	}
	waitFor(t, c, 90*time.Second, "every task ended", func(v client.View) bool {
		n := 0
		for _, ts := range states(v) {
			for _, tk := range ts {
				if tk.Terminal() {
					n++
				}
			}
		}
		return n == 4
	})
	by := states(c.View())
	for _, tk := range by["ok"] {
		if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || tk.Message() != "exit status 0" {
			t.Fatalf("task %s: %s %q", tk.Name(), tk.State, tk.Message())
		}
		out, err := os.ReadFile(filepath.Join(adir, "tasks", tk.UID.String(), "stdout"))
		if err != nil || strings.TrimSpace(string(out)) != "hello from "+tk.Name() {
			t.Fatalf("task %s's stdout %q, %v", tk.Name(), out, err)
		}
	}
	if tk := by["boom"][0]; tk.State != omegav1.TaskState_TASK_STATE_FAILED || tk.Message() != "exit status 3" {
		t.Fatalf("the failing task: %s %q", tk.State, tk.Message())
	}
}

// TestAgentRestartAdoptsItsTasks: a restarted agent (same directory, same
// gossip address) adopts the task still running from before — the same
// process, not a second one — and, though it is not the process's parent,
// reports its end correctly when it is killed.
func TestAgentRestartAdoptsItsTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	adir := t.TempDir()
	// The default gossip address (port 0): the agent keeps the port it got
	// for its restart.
	args := []string{"agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "2", "--memory", "2Gi"}
	ag := startProc(t, args...)
	sc := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	defer func() {
		if t.Failed() {
			t.Logf("agent:\n%s\nscheduler:\n%s", ag.log(), sc.log())
		}
	}()
	waitFor(t, c, 60*time.Second, "the machine UP", func(v client.View) bool { return v.NumMachines() == 1 })
	f := filepath.Join(t.TempDir(), "sleeper.yaml")
	os.WriteFile(f, []byte("meta: {name: sleeper}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/sleep, args: ['300']}\n"), 0o644)
	if out, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v %s%s", err, out, errs)
	}
	task := waitRunning(t, c, 60*time.Second)
	pidFile := filepath.Join(adir, "tasks", task.UID.String(), "shim.pid")
	pid0, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := ag.stop(t); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
	ag = startProc(t, args...)
	// Adopted: still RUNNING at the same version, the same supervisor alive.
	waitFor(t, c, 30*time.Second, "the restarted agent registered", func(v client.View) bool {
		return strings.Contains(ag.log(), "registered")
	})
	pid1, _ := os.ReadFile(pidFile)
	if string(pid0) != string(pid1) {
		t.Fatalf("the task was started again: supervisor %s, then %s", pid0, pid1)
	}
	var shim int
	fmt.Sscan(string(pid0), &shim)
	if err := syscall.Kill(shim, 0); err != nil {
		t.Fatalf("the task's supervisor %d is gone after the agent's restart: %v", shim, err)
	}
	// Kill the task's session: the restarted agent, not its parent, reports it.
	syscall.Kill(-shim, syscall.SIGTERM)
	waitFor(t, c, 60*time.Second, "the killed task FAILED with how it ended", func(v client.View) bool {
		tk, _ := v.Task(task.UID)
		return tk.State == omegav1.TaskState_TASK_STATE_FAILED && tk.Message() == "signal: terminated"
	})
}
