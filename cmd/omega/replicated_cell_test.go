package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReplicatedCellRunsJobs: three replicated servers, each with a gossip
// membership of its own name; two agents join the list of the three
// gossip addresses, a batch scheduler is given the three servers. A job's
// tasks run on the agents. The leader is SIGKILLed: the agents and the
// scheduler carry on without a restart — a second job is placed and runs
// — and an agent SIGKILLed after that has its machine put DOWN by the new
// leader's membership.
func TestReplicatedCellRunsJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	var ports, peers []string
	for i := range 3 {
		ports = append(ports, freePort(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, ports[i]))
	}
	var srv []*serverProc
	var gossips []string
	for i := range 3 {
		s := startServerAt(t, t.TempDir(), ports[i], "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1),
			"--gossip", "127.0.0.1:0", "--agent-grace", "1h") // deaths by the membership's word, not the sweep
		srv = append(srv, s)
		gossips = append(gossips, s.gossip)
	}
	servers, join := strings.Join(ports, ","), strings.Join(gossips, ",")
	var agents []*proc
	for _, name := range []string{"m1", "m2"} {
		a := startProc(t, "agent", "--server", servers, "--join", join, "--name", name, "--data", t.TempDir(), "--cpu", "2", "--memory", "2Gi")
		waitLog(t, a, "registered", 60*time.Second)
		agents = append(agents, a)
	}
	sched := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", servers)
	defer func() {
		if t.Failed() {
			t.Logf("scheduler:\n%s\nagent m1:\n%s", sched.log(), agents[0].log())
			for i, s := range srv {
				t.Logf("server %d:\n%s", i+1, s.log())
			}
		}
	}()
	submit := func(name string) {
		t.Helper()
		job := filepath.Join(t.TempDir(), name+".yaml")
		os.WriteFile(job, []byte("meta: {name: "+name+"}\nspec:\n  kind: batch\n  replicas: 2\n  template:\n    resources: {cpu: 500m, memory: 64Mi}\n    command: {path: /bin/sleep, args: [\"300\"]}\n"), 0o644)
		if !eventually(30*time.Second, 200*time.Millisecond, func() bool {
			_, _, err := run(t, "", "submit", "-f", job, "--server", servers)
			return err == nil
		}) {
			t.Fatalf("submit %s: no server took it in 30 s", name)
		}
	}
	submit("first")
	waitTasksRunning(t, servers, "first", 2, 60*time.Second)

	lead := -1
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		for i, s := range srv {
			if _, m, l, ok := health(s.http); ok && l != 0 && m == l {
				lead = i
			}
		}
		return lead >= 0
	}) {
		t.Fatal("no leader")
	}
	srv[lead].cmd.Process.Signal(syscall.SIGKILL)
	rest := []string{}
	for i, p := range ports {
		if i != lead {
			rest = append(rest, p)
		}
	}
	servers = strings.Join(rest, ",")
	submit("second")
	waitTasksRunning(t, servers, "second", 2, 60*time.Second)

	// An agent killed: the new leader's membership puts its machine DOWN.
	agents[1].cmd.Process.Kill()
	waitOutput(t, 90*time.Second, "DOWN", "get", "machines", "m2", "--server", servers)
	if out, _, err := run(t, "", "get", "machines", "m1", "--server", servers); err != nil || !strings.Contains(out, "UP") {
		t.Fatalf("the live agent's machine: %v\n%s", err, out)
	}
}

// waitTasksRunning polls `omega get tasks` until the job has n tasks
// RUNNING.
func waitTasksRunning(t *testing.T, servers, job string, n int, within time.Duration) {
	t.Helper()
	var out string
	if !eventually(within, 200*time.Millisecond, func() bool {
		o, _, err := run(t, "", "get", "tasks", "--server", servers)
		if err != nil {
			return false
		}
		out = o
		got := 0
		for _, line := range strings.Split(o, "\n") {
			if strings.HasPrefix(line, job+"-") && strings.Contains(line, "RUNNING") {
				got++
			}
		}
		return got == n
	}) {
		t.Fatalf("job %s: not %d tasks RUNNING within %v:\n%s", job, n, within, out)
	}
}
