package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// The test binary is its own shim: run with OMEGA_TEST_SHIM=1 it supervises
// a task as `omega task-shim` would.
func TestMain(m *testing.M) {
	if os.Getenv("OMEGA_TEST_SHIM") == "1" {
		// --workdir W DIR -- PATH ARGS...
		os.Exit(RunShim(os.Args[3], os.Args[2], os.Args[5:]))
	}
	os.Exit(m.Run())
}

func newExec(t *testing.T, dir string) *Executor {
	t.Helper()
	x, err := New(Config{Dir: dir, Shim: []string{os.Args[0]}, Grace: 2 * time.Second,
		Env: []string{"PATH=" + os.Getenv("PATH"), "OMEGA_TEST_SHIM=1"}})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func task(t *testing.T, n uint32, path string, args ...string) *txn.Task {
	t.Helper()
	p := testkit.Task(testkit.UID('t', n, 0), uuid.Nil, "t"+strconv.Itoa(int(n)), testkit.Res(100, 1<<20))
	p.Spec.Command = &omegav1.Command{Path: path, Args: args}
	tk := txn.PlannedTask(testkit.UID('t', n, 0), uuid.Nil, p, testkit.Res(100, 1<<20))
	tk.Assigned = int64(n) * 1000
	return tk
}

// exits waits (bounded) for want exits.
func exits(t *testing.T, x *Executor, want int) []agents.Exit {
	t.Helper()
	var got []agents.Exit
	deadline := time.After(30 * time.Second)
	for len(got) < want {
		got = x.Exits(0, got)
		if len(got) >= want {
			break
		}
		select {
		case <-x.Ready():
		case <-deadline:
			t.Fatalf("%d of %d exits within 30 s: %+v", len(got), want, got)
		}
	}
	return got
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func shimPID(t *testing.T, dir string, tk *txn.Task) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, tk.UID.String(), filePID))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	return pid
}

// A task's process ends: its exit status, stdout and stderr are kept, and
// it is reported once, for its placement.
func TestExitReported(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	ok, bad := task(t, 1, "/bin/sh", "-c", "echo out; echo err >&2"), task(t, 2, "/bin/sh", "-c", "exit 3")
	none := task(t, 3, "")
	x.Start(ok, agents.Placement{Gen: 11})
	x.Start(bad, agents.Placement{Gen: 12})
	x.Start(none, agents.Placement{Gen: 13})
	got := exits(t, x, 3)
	want := map[uuid.UUID]string{ok.UID: "SUCCEEDED exit status 0", bad.UID: "FAILED exit status 3", none.UID: "FAILED could not start: the task has no command"}
	for _, e := range got {
		if s := strings.TrimPrefix(e.State.String(), "TASK_STATE_") + " " + e.Message; s != want[e.Task] {
			t.Errorf("task %s: %q, want %q", e.Task, s, want[e.Task])
		}
	}
	out, _ := os.ReadFile(filepath.Join(dir, ok.UID.String(), fileStdout))
	errb, _ := os.ReadFile(filepath.Join(dir, ok.UID.String(), fileStderr))
	if string(out) != "out\n" || string(errb) != "err\n" {
		t.Fatalf("stdout %q, stderr %q", out, errb)
	}
	if more := x.Exits(0, nil); len(more) != 0 {
		t.Fatalf("reported twice: %+v", more)
	}
}

// Stop ends a running task's session (SIGTERM) and reports nothing of it.
func TestStopKillsAndReportsNothing(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	tk := task(t, 4, "/bin/sleep", "30")
	x.Start(tk, agents.Placement{Gen: 1})
	pid := shimPID(t, dir, tk)
	x.Stop(tk.UID, agents.Placement{Gen: 1})
	if err := testkit.WaitGone(pid, 10*time.Second); err != nil {
		t.Fatalf("the stopped task's supervisor: %v", err)
	}
	x.wg.Wait()
	if got := x.Exits(0, nil); len(got) != 0 {
		t.Fatalf("a stopped task was reported: %+v", got)
	}
}

// A second executor on the same directory (an agent restarted) adopts the
// running task: Start at the same placement starts nothing new, the task's
// end is reported though this process is not its parent; a task the cell
// no longer places is stopped by Sweep.
func TestAdoptAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first := newExec(t, dir)
	kept, gone := task(t, 5, "/bin/sleep", "30"), task(t, 6, "/bin/sleep", "30")
	first.Start(kept, agents.Placement{Gen: 1})
	first.Start(gone, agents.Placement{Gen: 2})
	keptPID, gonePID := shimPID(t, dir, kept), shimPID(t, dir, gone)

	second := newExec(t, dir) // the restarted agent
	second.Start(kept, agents.Placement{Gen: 7})
	if pid := shimPID(t, dir, kept); pid != keptPID || second.Running() != 2 {
		t.Fatalf("supervisor %d after the restart (was %d), %d running: want the same one, adopted", pid, keptPID, second.Running())
	}
	second.Sweep()
	if err := testkit.WaitGone(gonePID, 10*time.Second); err != nil {
		t.Fatalf("Sweep left the unclaimed task running: %v", err)
	}
	syscall.Kill(-keptPID, syscall.SIGTERM)
	got := exits(t, second, 1)
	if got[0].Task != kept.UID || got[0].Gen != 7 || got[0].State != omegav1.TaskState_TASK_STATE_FAILED || got[0].Message != "signal: terminated" {
		t.Fatalf("the adopted task's end: %+v", got[0])
	}
}

// A placement told again (a re-list) after its task ended is not run
// again: its exit is handed out again under the placement's new name.
// Unclaim then Sweep stops what a re-list no longer places. A task
// directory left without a supervisor's pid does not stop an agent from
// starting.
func TestRelistAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	once := task(t, 7, "/bin/sh", "-c", "echo ran")
	x.Start(once, agents.Placement{Gen: 1})
	if got := exits(t, x, 1); got[0].Gen != 1 {
		t.Fatalf("first exit %+v", got[0])
	}
	x.Start(once, agents.Placement{Gen: 2}) // the re-list
	if got := exits(t, x, 1); got[0].Gen != 2 || got[0].State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("the exit again: %+v", got[0])
	}
	out, _ := os.ReadFile(filepath.Join(dir, once.UID.String(), fileStdout))
	if string(out) != "ran\n" {
		t.Fatalf("the task ran again: stdout %q", out)
	}
	long := task(t, 8, "/bin/sleep", "30")
	x.Start(long, agents.Placement{Gen: 3})
	pid := shimPID(t, dir, long)
	x.Unclaim() // a re-list that no longer places it
	x.Sweep()
	if err := testkit.WaitGone(pid, 10*time.Second); err != nil {
		t.Fatalf("the task the re-list dropped: %v", err)
	}
	// A task directory with its task file and no pid file.
	stray := filepath.Join(dir, testkit.UID('t', 9, 0).String())
	os.MkdirAll(stray, 0o755)
	writeJSON(stray, fileTask, taskFile{UID: testkit.UID('t', 9, 0).String(), Assigned: 9, Path: "/bin/true"})
	if _, err := New(Config{Dir: dir, Shim: []string{os.Args[0]}}); err != nil {
		t.Fatalf("an agent with a half-started task cannot start: %v", err)
	}
}

// TestCgroups: where cgroup v2 delegates cpu and memory to this process, a
// task runs in a cgroup of its own with its request as limits. Elsewhere
// (cgroup v1, nothing delegated: as on the project's CI machine) it skips,
// saying why.
func TestCgroups(t *testing.T) {
	cg, why := DetectCgroups()
	if cg == nil {
		t.Skip("no cgroup v2 confinement here: " + why)
	}
	x, err := New(Config{Dir: t.TempDir(), Shim: []string{os.Args[0]}, Grace: 2 * time.Second, Cgroups: cg,
		Env: []string{"PATH=" + os.Getenv("PATH"), "OMEGA_TEST_SHIM=1"}})
	if err != nil {
		t.Fatal(err)
	}
	tk := task(t, 1, "/bin/sh", "-c", "cat /proc/self/cgroup; cat /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/memory.max")
	x.Start(tk, agents.Placement{Gen: 1})
	exits(t, x, 1)
	out, _ := os.ReadFile(filepath.Join(x.cfg.Dir, tk.UID.String(), fileStdout))
	if !strings.Contains(string(out), "tasks/"+tk.UID.String()) || !strings.Contains(string(out), strconv.FormatInt(1<<20, 10)) {
		t.Fatalf("the task's cgroup and memory.max:\n%s", out)
	}
}
