package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
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

// TestLogsAndDescribe: a server, an agent whose log endpoint wants a token
// and a batch scheduler, as processes. `omega logs` prints a finished
// task's stdout, its stderr, its last lines, by the task's name or its
// job's; without the token the agent refuses and says so. `omega logs -f`
// of a task that prints over time streams what it prints as it prints it
// and ends when the task ends. `omega describe` shows the job with its
// task, the task's machine by name, its state and its transitions; an
// ambiguous name lists its matches. A task not placed, a machine whose
// agent publishes no log endpoint and an agent that does not answer are
// errors that say so.
func TestLogsAndDescribe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	dir := t.TempDir()
	tok := filepath.Join(dir, "logs.token")
	os.WriteFile(tok, []byte("logs-0123456789abcdef\n"), 0o600)
	ag := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", t.TempDir(), "--cpu", "4", "--memory", "8Gi",
		"--logs-token-file", tok)
	sc := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	defer func() {
		if t.Failed() {
			t.Logf("agent:\n%s\nscheduler:\n%s\nserver:\n%s", ag.log(), sc.log(), srv.log())
		}
	}()
	waitFor(t, c, 60*time.Second, "the agent's machine UP with its log endpoint", func(v client.View) bool {
		ok := false
		v.RangeMachines(func(m *txn.Machine) bool {
			ok = m.Name() == "a1" && strings.HasPrefix(m.Meta.GetAnnotations()["omega.io/logs"], "http://127.0.0.1:")
			return !ok
		})
		return ok
	})
	submit := func(name, src string) {
		t.Helper()
		f := filepath.Join(dir, name+".yaml")
		os.WriteFile(f, []byte(src), 0o644)
		if out, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
			t.Fatalf("submit %s: %v\n%s%s", name, err, out, errs)
		}
	}
	taskIn := func(name string, states ...omegav1.TaskState) func(v client.View) bool {
		return func(v client.View) bool {
			found := false
			v.RangeTasks(func(tk *txn.Task) bool {
				for _, s := range states {
					found = found || (tk.Name() == name && tk.State == s)
				}
				return !found
			})
			return found
		}
	}
	logs := func(args ...string) (string, string, error) {
		t.Helper()
		return run(t, "", append([]string{"logs", "--server", srv.grpc}, args...)...)
	}

	submit("echo", "meta: {name: echo}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n"+
		"    command: {path: /bin/sh, args: [-c, 'for i in 1 2 3; do echo line $i; done; echo oops >&2']}\n")
	waitFor(t, c, 60*time.Second, "echo-0 SUCCEEDED", taskIn("echo-0", omegav1.TaskState_TASK_STATE_SUCCEEDED))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"echo-0"}, "line 1\nline 2\nline 3\n"},
		{[]string{"echo"}, "line 1\nline 2\nline 3\n"}, // a job of one task
		{[]string{"echo-0", "--stderr"}, "oops\n"},
		{[]string{"echo-0", "--tail", "2"}, "line 2\nline 3\n"},
		{[]string{"echo-0", "-f"}, "line 1\nline 2\nline 3\n"}, // ended: all, then the end
	} {
		out, errs, err := logs(append(tc.args, "--logs-token-file", tok)...)
		if err != nil || out != tc.want {
			t.Errorf("logs %v: %q, want %q (%v %s)", tc.args, out, tc.want, err, errs)
		}
	}
	if _, errs, err := logs("echo-0"); err == nil || !strings.Contains(errs, "the agent of machine a1 refused: no token") {
		t.Errorf("logs without the agent's token: %v %s", err, errs)
	}

	// A task that prints over time: the follow streams its first line while
	// the task waits (on a fifo the test opens), then the rest, and ends
	// with it.
	fifo := filepath.Join(dir, "go.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	submit("follow", "meta: {name: follow}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n"+
		"    command: {path: /bin/sh, args: [-c, 'echo first; read x < "+fifo+"; echo \"second $x\"']}\n")
	waitFor(t, c, 60*time.Second, "follow-0 RUNNING", taskIn("follow-0", omegav1.TaskState_TASK_STATE_RUNNING))
	bin, _ := omegaBinary()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := exec.CommandContext(ctx, bin, "logs", "-f", "follow-0", "--server", srv.grpc, "--logs-token-file", tok)
	fout, ferr := newOutput(), newOutput()
	f.Stdout, f.Stderr = fout, ferr
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	fdone := make(chan error, 1)
	go func() { fdone <- f.Wait() }()
	fout.waitFor(t, "first\n", 30*time.Second)
	select {
	case err := <-fdone:
		t.Fatalf("logs -f ended (%v) before the task did: %q %s", err, fout.String(), ferr.String())
	default:
	}
	opened := make(chan error, 1)
	go func() { // blocks until the task opens its end
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = w.WriteString("go\n")
			w.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the task did not read its fifo within 30 s")
	}
	select {
	case err := <-fdone:
		if err != nil || fout.String() != "first\nsecond go\n" {
			t.Fatalf("logs -f: %v, %q, stderr %s", err, fout.String(), ferr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("logs -f still runs 30 s after the task was let go: %q", fout.String())
	}
	waitFor(t, c, 60*time.Second, "follow-0 SUCCEEDED", taskIn("follow-0", omegav1.TaskState_TASK_STATE_SUCCEEDED))

	// describe.
	out, errs, err := run(t, "", "describe", "job", "echo", "--server", srv.grpc)
	if err != nil {
		t.Fatalf("describe job: %v %s", err, errs)
	}
	for _, want := range []string{"Name:         echo", "Phase:", "Tasks (1):", "Recent transitions:", "task/echo-0  assigned to a1 by batch-0",
		"task/echo-0  SUCCEEDED: exit status 0", "job/echo     submitted"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe job: no %q in:\n%s", want, out)
		}
	}
	if row := lineWith(out, "  echo-0 "); len(strings.Fields(row)) < 3 || strings.Fields(row)[1] != "SUCCEEDED" || strings.Fields(row)[2] != "a1" {
		t.Errorf("describe job: the task's row %q, want echo-0 SUCCEEDED a1 ...:\n%s", row, out)
	}
	if out, errs, err := run(t, "", "describe", "task", "echo-0", "--server", srv.grpc); err != nil || !strings.Contains(out, "Machine:         a1") ||
		!strings.Contains(out, "State:           SUCCEEDED") {
		t.Errorf("describe task: %v %s\n%s", err, errs, out)
	}
	if out, errs, err := run(t, "", "describe", "machine", "a1", "--server", srv.grpc); err != nil || !strings.Contains(out, "Logs:            http://127.0.0.1:") ||
		!strings.Contains(out, "echo-0") || !strings.Contains(out, "follow-0") {
		t.Errorf("describe machine: %v %s\n%s", err, errs, out)
	}
	out, errs, err = run(t, "", "describe", "job", "echo", "-o", "json", "--server", srv.grpc)
	var doc struct {
		Job   *struct{ Meta struct{ Name string } }  `json:"job"`
		Tasks []struct{ Meta struct{ Name string } } `json:"tasks"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc.Job == nil || doc.Job.Meta.Name != "echo" || len(doc.Tasks) != 1 || doc.Tasks[0].Meta.Name != "echo-0" {
		t.Errorf("describe job -o json: %v %s\n%s", err, errs, out)
	}
	waitFor(t, c, 60*time.Second, "the job echo finished", func(v client.View) bool {
		done := false
		v.RangeJobs(func(j *txn.Job) bool {
			done = j.Name() == "echo" && j.Finished()
			return !done
		})
		return done
	})
	submit("echo", "meta: {name: echo}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/true}\n")
	if _, errs, err := run(t, "", "describe", "job", "echo", "--server", srv.grpc); err != nil || !strings.Contains(errs, `2 jobs named "echo"; this is the `) {
		t.Errorf("describe of a name used again: %v %s", err, errs)
	}

	// Errors: a task not placed; machines whose agents publish no log
	// endpoint, or do not answer at the one they publish.
	submit("nobody", "meta: {name: nobody}\nspec:\n  scheduler: nobody\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/true}\n")
	if _, errs, err := logs("nobody-0"); err == nil || !strings.Contains(errs, "task nobody-0 is PENDING: not placed on a machine yet") {
		t.Errorf("logs of a pending task: %v %s", err, errs)
	}
	old, gone := testkit.Machine(testkit.UID('m', 1, 0), "old", testkit.Res(1000, 1<<30)), testkit.Machine(testkit.UID('m', 2, 0), "gone", testkit.Res(1000, 1<<30))
	gone.Meta.Annotations = map[string]string{"omega.io/logs": "http://" + freePort(t)}
	for _, m := range []*omegav1.Machine{old, gone} {
		m.Status = &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP}
	}
	tx := c.NewTxn(c.View())
	tx.Ops = []txn.Op{txn.CreateMachine(old), txn.CreateMachine(gone)}
	for i, m := range []uuid.UUID{testkit.UID('m', 1, 0), testkit.UID('m', 2, 0)} {
		u := testkit.UID('t', uint32(i+1), 7)
		tx.Ops = append(tx.Ops, txn.CreateTask(testkit.Task(u, uuid.Nil, []string{"on-old", "on-gone"}[i], testkit.Res(100, 1<<20))), txn.Claim(u, m, testkit.Res(100, 1<<20), 0))
	}
	if res, err := c.Commit(context.Background(), tx); err != nil || res.Committed != len(tx.Ops) {
		t.Fatalf("machines without agents, a task on each: %+v %v", res, err)
	}
	if _, errs, err := logs("on-old"); err == nil || !strings.Contains(errs, "machine old (task on-old's) publishes no log endpoint (no omega.io/logs annotation)") {
		t.Errorf("logs of a task on a machine without an endpoint: %v %s", err, errs)
	}
	if _, errs, err := logs("on-gone"); err == nil || !strings.Contains(errs, "the agent of machine gone is unreachable at http://127.0.0.1:") {
		t.Errorf("logs of a task whose agent does not answer: %v %s", err, errs)
	}
}

// lineWith is the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
