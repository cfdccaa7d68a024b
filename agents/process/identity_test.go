package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// stranger starts a process that is no task's (in a session of its own,
// as a shim is) and stops it (SIGSTOP), so that a signal sent to it stays
// pending where /proc shows it: the process an old pid names after a
// reboot, or after the number went round.
func stranger(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		cmd.Wait()
	})
	syscall.Kill(pid, syscall.SIGSTOP)
	// It is our child: wait4 with WUNTRACED returns once it has stopped
	// (and reaps nothing).
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil); err != nil || !ws.Stopped() {
		t.Fatalf("process %d did not stop: %v (status %v)", pid, err, ws)
	}
	if st := procState(t, pid); st != "T" {
		t.Fatalf("process %d stopped, but /proc says %q", pid, st)
	}
	return pid
}

// procState is the state letter of /proc/PID/stat.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))[0]
}

// untouched fails unless the stopped process pid is still stopped with no
// signal pending: a signal sent to it (to it or its session) would show in
// SigPnd or ShdPnd until it is continued, or, SIGKILL, have ended it.
func untouched(t *testing.T, pid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if !strings.HasPrefix(v, "T") {
				t.Errorf("process %d is %s, want stopped as it was", pid, v)
			}
		case "SigPnd", "ShdPnd":
			if n, _ := strconv.ParseUint(v, 16, 64); n != 0 {
				t.Errorf("process %d was signalled: %s %s", pid, k, v)
			}
		}
	}
}

// leftBehind writes the directory an agent that ran before left for tk:
// its task file, the pid file, and (if id is not nil) the pid's identity.
func leftBehind(t *testing.T, dir string, tk *txn.Task, pid int, id *identity) {
	t.Helper()
	d := filepath.Join(dir, tk.UID.String())
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(d, fileTask, taskFile{UID: tk.UID.String(), Assigned: tk.Assigned, Path: "/bin/sleep", Args: []string{"300"}, GraceMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, filePID), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id != nil {
		if err := writeJSON(d, fileShimID, *id); err != nil {
			t.Fatal(err)
		}
	}
}

// The pid an agent recorded names another process when it restarts (the
// host rebooted, or the number went round): the task ended without a
// trace — reported as an exit with code -1 saying why — and the process
// that has the pid now is never signalled, whatever the cell says of the
// task (placed again, stopped, killed for its health, not placed at all).
func TestAdoptPIDOfAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	boot, err := bootID()
	if err != nil || boot == "" {
		t.Skipf("no boot id here: %v", err)
	}
	reused, rebooted, unplaced := stranger(t), stranger(t), stranger(t)
	startOf := func(pid int) uint64 {
		s, err := procStart(pid)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tReused, tRebooted, tUnplaced := task(t, 21, "/bin/sleep", "300"), task(t, 22, "/bin/sleep", "300"), task(t, 23, "/bin/sleep", "300")
	// Its supervisor started earlier than the process there now.
	leftBehind(t, dir, tReused, reused, &identity{PID: reused, Start: startOf(reused) - 1, Boot: boot})
	// The same start time, but in another boot.
	leftBehind(t, dir, tRebooted, rebooted, &identity{PID: rebooted, Start: startOf(rebooted), Boot: "00000000-0000-0000-0000-000000000000"})
	leftBehind(t, dir, tUnplaced, unplaced, &identity{PID: unplaced, Start: startOf(unplaced) + 100, Boot: boot})

	x := newExec(t, dir)
	if n := x.Running(); n != 0 {
		t.Fatalf("%d adopted tasks running, want none: their pids are other processes'", n)
	}
	x.Start(tReused, agents.Placement{Gen: 1})
	x.Start(tRebooted, agents.Placement{Gen: 2})
	got := exits(t, x, 2)
	want := map[uuid.UUID]string{tReused.UID: "the pid is another process's now", tRebooted.UID: "ran before the host rebooted"}
	for _, e := range got {
		st := e.Status
		if e.State.String() != "TASK_STATE_FAILED" || st.GetCode() != -1 || !strings.Contains(st.GetError(), want[e.Task]) {
			t.Errorf("task %s: %s, code %d, error %q; want FAILED, -1, saying %q", e.Task, e.State, st.GetCode(), st.GetError(), want[e.Task])
		}
	}
	x.Kill(tReused.UID)                             // its health checks failed (the agent core would not, for an exit)
	x.Stop(tRebooted.UID, agents.Placement{Gen: 2}) // the cell ended it
	x.Sweep()                                       // tUnplaced: the cell places it no more
	x.wg.Wait()
	for _, pid := range []int{reused, rebooted, unplaced} {
		untouched(t, pid)
	}
}

// A pid file alone (an agent from before identities) is adopted as it was:
// the process that has the pid is the task's.
func TestAdoptPIDFileWithoutIdentity(t *testing.T) {
	dir := t.TempDir()
	first := newExec(t, dir)
	tk := task(t, 24, "/bin/sleep", "300")
	first.Start(tk, agents.Placement{Gen: 1})
	pid := shimPID(t, dir, tk)
	if _, err := os.Stat(filepath.Join(dir, tk.UID.String(), fileShimID)); err != nil {
		t.Fatalf("the supervisor's identity was not recorded: %v", err)
	}
	os.Remove(filepath.Join(dir, tk.UID.String(), fileShimID))

	second := newExec(t, dir)
	second.Start(tk, agents.Placement{Gen: 7})
	if second.Running() != 1 {
		t.Fatalf("%d running after the restart, want the task adopted", second.Running())
	}
	syscall.Kill(-pid, syscall.SIGTERM)
	got := exits(t, second, 1)
	if got[0].Task != tk.UID || got[0].Gen != 7 || got[0].Message != "signal: terminated" {
		t.Fatalf("the adopted task's end: %+v", got[0])
	}
}

// fakeProcs is an executor's view of processes where a test decides that
// a pid went to another process, and signals are recorded (and, for the
// pids held, not sent).
type fakeProcs struct {
	mu      sync.Mutex
	other   map[int]bool // the pid names another process now
	held    map[int]bool // signals to these are recorded, not sent
	signals []string
}

func newFakeProcs() *fakeProcs { return &fakeProcs{other: map[int]bool{}, held: map[int]bool{}} }

func (f *fakeProcs) startOf(pid int) (uint64, error) {
	s, err := procStart(pid)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && f.other[pid] {
		s += 1000
	}
	return s, err
}

func (f *fakeProcs) kill(pid int, sig syscall.Signal) error {
	f.mu.Lock()
	p := pid
	if p < 0 {
		p = -p
	}
	held := f.held[p]
	if sig != 0 {
		f.signals = append(f.signals, fmt.Sprintf("%d %v", pid, sig))
	}
	f.mu.Unlock()
	if held && sig != 0 {
		return nil
	}
	return syscall.Kill(pid, sig)
}

func (f *fakeProcs) set(m map[int]bool, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m[pid] = true
}

func (f *fakeProcs) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.signals...)
}

// While an agent watches an adopted supervisor, its pid going to another
// process is its end (reported, as one without an exit status), and from
// then on nothing signals the pid: not a kill for its health, not a stop,
// not the SIGKILL at the end of a stop's grace period begun before.
func TestWatchedPIDGoesToAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	first := newExec(t, dir)
	watched, stopped := task(t, 25, "/bin/sleep", "300"), task(t, 26, "/bin/sleep", "300")
	first.Start(watched, agents.Placement{Gen: 1})
	first.Start(stopped, agents.Placement{Gen: 2})
	watchedPID, stoppedPID := shimPID(t, dir, watched), shimPID(t, dir, stopped)

	f := newFakeProcs()
	second, err := New(Config{Dir: dir, Shim: []string{os.Args[0]}, Grace: time.Minute,
		Env: []string{"PATH=" + os.Getenv("PATH"), "OMEGA_TEST_SHIM=1"}, startOf: f.startOf, kill: f.kill})
	if err != nil {
		t.Fatal(err)
	}
	second.Start(watched, agents.Placement{Gen: 7})
	second.Start(stopped, agents.Placement{Gen: 8})
	if second.Running() != 2 {
		t.Fatalf("%d running after the restart, want both adopted", second.Running())
	}

	// The watched one's pid is another process's: a kill for its health
	// sends nothing, and the watch on it reports its end.
	f.set(f.other, watchedPID)
	second.Kill(watched.UID)
	got := exits(t, second, 1)
	if got[0].Task != watched.UID || got[0].Gen != 7 || got[0].Status.GetCode() != -1 || got[0].Status.GetError() == "" {
		t.Fatalf("the end of the task whose pid went to another process: %+v", got[0])
	}
	second.Stop(watched.UID, agents.Placement{Gen: 7})

	// The stopped one is signalled (held here: it goes on running), then
	// its pid goes to another process before the grace period is over:
	// no SIGKILL follows.
	f.set(f.held, stoppedPID)
	second.Stop(stopped.UID, agents.Placement{Gen: 8})
	f.set(f.other, stoppedPID)
	second.wg.Wait() // the stop's grace period is a minute: it ends at the pid's change
	want := []string{fmt.Sprintf("%d %v", -stoppedPID, syscall.SIGTERM)}
	if s := f.sent(); fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("signals sent: %q, want only %q", s, want)
	}
	for _, pid := range []int{watchedPID, stoppedPID} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("supervisor %d: %v", pid, err)
		}
	}
}

// A task started records its supervisor's identity beside its pid: the
// pid, its start time, the boot.
func TestIdentityRecorded(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	tk := task(t, 27, "/bin/sleep", "300")
	x.Start(tk, agents.Placement{Gen: 1})
	pid := shimPID(t, dir, tk)
	b, err := os.ReadFile(filepath.Join(dir, tk.UID.String(), fileShimID))
	if err != nil {
		t.Fatal(err)
	}
	start, _ := procStart(pid)
	boot, _ := bootID()
	if want := fmt.Sprintf(`{"pid":%d,"start":%d,"boot":"%s"}`, pid, start, boot); string(b) != want || start == 0 {
		t.Fatalf("%s: %s, want %s", fileShimID, b, want)
	}
	x.Stop(tk.UID, agents.Placement{Gen: 1})
	if err := testkit.WaitGone(pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
