package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// binDir holds the binary the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// omegaBinary builds the omega binary once for the package's tests.
var omegaBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "omega-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "omega")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// serverProc is a running `omega server`.
type serverProc struct {
	cmd                *exec.Cmd
	grpc, http, gossip string
	stderr             *strings.Builder
	mu                 *sync.Mutex
	exited             chan error
}

var listening = regexp.MustCompile(`msg=listening (grpc|http|gossip)=(\S+)`)

// startServer starts `omega server` on loopback ports the kernel picks and
// waits (with a deadline) for the addresses it prints. The process is
// killed when the test ends if it still runs.
func startServer(t testing.TB, data string) *serverProc { return startServerAt(t, data, "127.0.0.1:0") }

// startServerAt is startServer with a gRPC address of the caller's.
func startServerAt(t testing.TB, data, listen string, extra ...string) *serverProc {
	t.Helper()
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"server", "--data", data, "--listen", listen, "--http", "127.0.0.1:0"}, extra...)...)
	wantGossip := len(extra) > 0 && slices.Contains(extra, "--gossip")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}, exited: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			for _, m := range listening.FindAllStringSubmatch(line, -1) {
				switch m[1] {
				case "grpc":
					p.grpc = m[2]
				case "http":
					p.http = m[2]
				default:
					p.gossip = m[2]
				}
			}
			if p.grpc != "" && p.http != "" && (!wantGossip || p.gossip != "") {
				select {
				case <-found:
				default:
					close(found)
				}
			}
			p.mu.Unlock()
		}
		io.Copy(io.Discard, pipe)
		p.exited <- cmd.Wait()
	}()
	select {
	case <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not say where it listens within 30 s:\n%s", p.log())
	}
	return p
}

func (p *serverProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop sends SIGTERM and waits (with a deadline) for the exit status.
func (p *serverProc) stop(t testing.TB) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("the server did not exit within 60 s of SIGTERM:\n%s", p.log())
	}
	return nil
}

func newRemoteClient(t testing.TB, addr, component string) (*client.Client, *remote.Transport) {
	t.Helper()
	tr, err := remote.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	c, err := client.New(context.Background(), tr, client.Config{Component: component, Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// TestServerProcess: a real `omega server` process serves commits and a
// watch over loopback, reports health and per-component metrics, drains on
// SIGTERM (the process exits 0), and keeps every acknowledged commit across
// a restart on the same data, the open watch resuming by itself.
func TestServerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	p := startServer(t, data)
	c, tr := newRemoteClient(t, p.grpc, "tester")
	ctx := context.Background()
	w, err := tr.Watch(ctx, c.View().Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var acked []uint64
	for i := range 5 {
		tx := c.NewTxn(c.View())
		tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(c.NewUID(), fmt.Sprintf("m%d", i), testkit.Res(4000, 1<<34)))}
		res, err := c.Commit(ctx, tx)
		if err != nil || res.Committed != 1 {
			t.Fatalf("commit %d: %+v %v", i, res, err)
		}
		acked = append(acked, res.Revision)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen []uint64
	for len(seen) < len(acked) {
		sets, err := w.Next(wctx, 0)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		for _, ws := range sets {
			seen = append(seen, ws.Revision)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(acked) {
		t.Fatalf("watched %v, acknowledged %v", seen, acked)
	}
	body := func(path string) string {
		resp, err := http.Get("http://" + p.http + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(b)
	}
	if h := body("/healthz"); !strings.HasPrefix(h, fmt.Sprintf("ok revision %d", acked[len(acked)-1])) {
		t.Fatalf("/healthz: %q", h)
	}
	m := body("/metrics") // two watchers: the client's own copy, and w
	for _, want := range []string{`omega_commits_total{component="tester",result="committed"} 5`, `omega_watchers 2`, `omega_machines{state="MACHINE_STATE_UP"} 5`, `omega_commit_seconds_count 5`} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, m)
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
	}

	// Restart on the same data and address: every acknowledged commit is
	// there, and the open watch resumes by itself, delivering what commits
	// after the restart.
	p2 := startServerAt(t, data, p.grpc)
	c2, _ := newRemoteClient(t, p2.grpc, "tester")
	if got := c2.View().Revision(); got != acked[len(acked)-1] || c2.View().NumMachines() != 5 {
		t.Fatalf("after the restart: revision %d with %d machines, want %d with 5", got, c2.View().NumMachines(), acked[len(acked)-1])
	}
	tx := c2.NewTxn(c2.View())
	tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(testkit.UID('a', 1, 1), "m-after", testkit.Res(4000, 1<<34)))} // not c2.NewUID(): its seed is c's
	res, err := c2.Commit(ctx, tx)
	if err != nil || res.Committed != 1 {
		t.Fatalf("commit after the restart: %+v %v", res, err)
	}
	sets, err := w.Next(wctx, 0)
	if err != nil || len(sets) != 1 || sets[0].Revision != res.Revision {
		t.Fatalf("the watch across the restart: %d sets, %v; want the one at %d", len(sets), err, res.Revision)
	}
	if err := p2.stop(t); err != nil {
		t.Fatalf("second exit: %v", err)
	}
}

// proc is a running omega process other than the server.
type proc struct {
	cmd    *exec.Cmd
	out    *strings.Builder
	mu     sync.Mutex
	exited chan error
}

func startProc(t testing.TB, args ...string) *proc {
	t.Helper()
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, args...), out: &strings.Builder{}, exited: make(chan error, 1)}
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	if args[0] == "agent" {
		// Its tasks run in sessions of their own and outlive it: end them
		// with the test, however it ends.
		for i := range args {
			if args[i] == "--data" && i+1 < len(args) {
				dir := args[i+1]
				t.Cleanup(func() { killTaskSessions(dir) })
			}
		}
	}
	return p
}

// killTaskSessions kills the session of every task an agent started in
// dir.
func killTaskSessions(dir string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "tasks", "*", "shim.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 1 {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) stop(t testing.TB) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not exit within 60 s of SIGTERM:\n%s", p.cmd.Args, p.log())
	}
	return nil
}

// TestSchedulerProcess: `omega scheduler` in a process of its own, over
// gRPC, places a batch job submitted to a running server, and exits 0 on
// SIGTERM.
func TestSchedulerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	c, _ := newRemoteClient(t, srv.grpc, "submitter")
	ctx := context.Background()
	tx := c.NewTxn(c.View())
	for i := range 3 {
		tx.Ops = append(tx.Ops, txn.CreateMachine(testkit.Machine(testkit.UID('m', uint32(i), 0), fmt.Sprintf("m%d", i), testkit.Res(4000, 16<<30))))
	}
	job := testkit.UID('j', 1, 0)
	pj := testkit.Job(job, "hello", "batch")
	pj.Spec.Replicas = 5
	tx.Ops = append(tx.Ops, txn.CreateJob(pj))
	for i := range 5 {
		tx.Ops = append(tx.Ops, txn.CreateTask(testkit.Task(testkit.UID('t', uint32(i), 0), job, fmt.Sprintf("hello-%d", i), testkit.Res(500, 1<<30))))
	}
	if res, err := c.Commit(ctx, tx); err != nil || res.Committed != len(tx.Ops) {
		t.Fatalf("setup: %+v %v", res, err)
	}
	sched := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		placed := 0
		c.View().RangeTasks(func(tk *txn.Task) bool {
			if tk.Placed() && tk.Scheduler == "batch-0" {
				placed++
			}
			return true
		})
		if placed == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 tasks placed by batch-0 after 60 s; the scheduler said:\n%s", placed, sched.log())
		}
		wctx, cancel := context.WithDeadline(ctx, deadline) // wait for the next commit, never past the deadline
		err := c.SyncTo(wctx, c.View().Revision()+1)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	}
	if err := sched.stop(t); err != nil {
		t.Fatalf("the scheduler's exit: %v\n%s", err, sched.log())
	}
}

// run runs the omega binary to completion (bounded) and returns its stdout,
// stderr and exit error.
func run(t testing.TB, stdin string, args ...string) (string, string, error) {
	t.Helper()
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err = cmd.Run()
	return out.String(), errb.String(), err
}

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
	if _, errs, err := run(t, "", "get", "jobs", "hello", "--server", srv.grpc); err == nil || !strings.Contains(errs, "ambiguous") {
		t.Fatalf("an ambiguous name: %v\n%s", err, errs)
	}
	if _, errs, err := run(t, "", "get", "tasks", "-l", "job in (hello", "--server", srv.grpc); err == nil || !strings.Contains(errs, "at byte") {
		t.Fatalf("a bad selector: %v\n%s", err, errs)
	}
}

// waitFor polls cond (each time after syncing c to the newest revision)
// until it holds or the deadline passes.
func waitFor(t testing.TB, c *client.Client, within time.Duration, what string, cond func(v client.View) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Sync(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if cond(c.View()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		wctx, cancel := context.WithTimeout(context.Background(), time.Second) // the next commit, or a second
		c.SyncTo(wctx, c.View().Revision()+1)
		cancel()
	}
}

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
		if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || tk.Message != "exit status 0" {
			t.Fatalf("task %s: %s %q", tk.Name(), tk.State, tk.Message)
		}
		out, err := os.ReadFile(filepath.Join(adir, "tasks", tk.UID.String(), "stdout"))
		if err != nil || strings.TrimSpace(string(out)) != "hello from "+tk.Name() {
			t.Fatalf("task %s's stdout %q, %v", tk.Name(), out, err)
		}
	}
	if tk := by["boom"][0]; tk.State != omegav1.TaskState_TASK_STATE_FAILED || tk.Message != "exit status 3" {
		t.Fatalf("the failing task: %s %q", tk.State, tk.Message)
	}
}

// freePort returns a loopback address no one listens on (now).
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
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
	var task *txn.Task
	waitFor(t, c, 60*time.Second, "the sleeper RUNNING", func(v client.View) bool {
		task = nil
		v.RangeTasks(func(tk *txn.Task) bool {
			if tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
				task = tk
			}
			return task == nil
		})
		return task != nil
	})
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
		return tk.State == omegav1.TaskState_TASK_STATE_FAILED && strings.Contains(tk.Message, "killed by")
	})
}

// output collects what a process writes and lets a test wait for a piece
// of it: every write wakes the waiters (no polling).
type output struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func newOutput() *output { return &output{wrote: make(chan struct{}, 1)} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	n, err := o.b.Write(p)
	o.mu.Unlock()
	select {
	case o.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits, at most within, for want in the output.
func (o *output) waitFor(t testing.TB, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for !strings.Contains(o.String(), want) {
		select {
		case <-o.wrote:
		case <-deadline:
			t.Fatalf("no %q within %v in:\n%s", want, within, o.String())
		}
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
	var task *txn.Task
	waitFor(t, c, 60*time.Second, "the sleeper RUNNING", func(v client.View) bool {
		task = nil
		v.RangeTasks(func(tk *txn.Task) bool {
			if tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
				task = tk
			}
			return task == nil
		})
		return task != nil
	})
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
