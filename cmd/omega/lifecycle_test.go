package main_test

import (
	"fmt"
	"io"
	"net/http"
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

// TestServiceLifecycle: examples/jobs/web.yaml, three HTTP servers on one
// agent, all on port 8080 — each task has an IP of its own from the
// agent's task range — become RUNNING and HEALTHY by their HTTP checks;
// each answers at its own address; one whose process is killed is
// restarted by the agent (ALWAYS) and counted in its status, at the same
// address; and a task whose exec check keeps failing is stopped and
// restarted (ON_FAILURE) until the cell kills it.
func TestServiceLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the example's servers are python3 -m http.server: no python3 on PATH")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	adir := t.TempDir()
	ag := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "4", "--memory", "8Gi")
	startProc(t, "scheduler", "--kind", "service", "--name", "service-0", "--server", srv.grpc)
	if _, errs, err := run(t, "", "submit", "-f", "../../examples/jobs/web.yaml", "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v %s", err, errs)
	}
	healthy := func(v client.View) []*txn.Task {
		var out []*txn.Task
		v.RangeTasks(func(tk *txn.Task) bool {
			if tk.State == omegav1.TaskState_TASK_STATE_RUNNING && tk.Run().GetHealth() == omegav1.HealthState_HEALTH_STATE_HEALTHY {
				out = append(out, tk)
			}
			return true
		})
		return out
	}
	var tasks []*txn.Task
	waitFor(t, c, 90*time.Second, "three web tasks RUNNING and HEALTHY", func(v client.View) bool {
		tasks = healthy(v)
		return len(tasks) == 3
	})
	seen := map[string]bool{}
	for _, tk := range tasks {
		a := tk.Run().GetAddress()
		if a == "" || seen[a] || !strings.HasPrefix(a, "127.") {
			t.Fatalf("task %s address %q (seen: %v)", tk.Name(), a, seen)
		}
		seen[a] = true
		resp, err := http.Get("http://" + a + ":8080/index.html")
		if err != nil {
			t.Fatalf("GET %s's server: %v", tk.Name(), err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "hello from " + tk.Name(); !strings.Contains(string(body), want) {
			t.Fatalf("%s at %s answered %q, want %q", tk.Name(), a, body, want)
		}
	}

	// Kill one server's process (not its supervisor): the agent restarts it.
	victim := tasks[0]
	child := taskChild(t, adir, victim)
	syscall.Kill(child, syscall.SIGKILL)
	waitFor(t, c, 60*time.Second, "the killed server restarted and HEALTHY again", func(v client.View) bool {
		tk, ok := v.Task(victim.UID)
		return ok && tk.State == omegav1.TaskState_TASK_STATE_RUNNING && tk.Run().GetRestarts() == 1 &&
			tk.Run().GetHealth() == omegav1.HealthState_HEALTH_STATE_HEALTHY && tk.Run().GetLastExit().GetSignal() == "killed" &&
			tk.Run().GetAddress() == victim.Run().GetAddress() && tk.Assigned == victim.Assigned
	})

	// A task whose health check always fails is stopped and restarted.
	f := filepath.Join(t.TempDir(), "sick.yaml")
	os.WriteFile(f, []byte(`meta: {name: sick}
spec:
  kind: service
  template:
    resources: {cpu: 100m, memory: 16Mi}
    command: {path: /bin/sleep, args: ["300"]}
    restart_policy: RESTART_POLICY_ON_FAILURE
    restart_delay_millis: 100
    grace_period_millis: 1000
    health_check: {exec: {path: /bin/false}, period_millis: 200, failure_threshold: 2}
`), 0o644)
	if _, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v %s", err, errs)
	}
	waitFor(t, c, 60*time.Second, "the sick task restarted twice for failing its checks", func(v client.View) bool {
		found := false
		v.RangeTasks(func(tk *txn.Task) bool {
			if strings.HasPrefix(tk.Name(), "sick-") && tk.State == omegav1.TaskState_TASK_STATE_RUNNING && tk.Run().GetRestarts() >= 2 {
				found = tk.Run().GetLastExit().GetSignal() == "terminated"
			}
			return !found
		})
		return found
	})
	if !strings.Contains(ag.log(), "unhealthy: stopping") {
		t.Fatalf("the agent did not log the unhealthy task:\n%s", ag.log())
	}
}

// taskChild returns the pid of a task's process: the only child of its
// supervisor.
func taskChild(t *testing.T, agentDir string, tk *txn.Task) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agentDir, "tasks", tk.UID.String(), "shim.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var shim, child int
	fmt.Sscan(string(b), &shim)
	// A Go process forks from any of its threads: each lists its own.
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", shim))
	var kids []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		kids = append(kids, b...)
	}
	if _, err := fmt.Sscan(string(kids), &child); err != nil {
		t.Fatalf("the supervisor %d of %s has no child: %q", shim, tk.Name(), kids)
	}
	return child
}
