package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// TestGhostAgentsRefused: a machine's identity is its name, its data
// directory's uid and its agent's token together. A second agent that
// disagrees with the cell — a running agent's name with a directory of its
// own, a running agent's directory, a copy of it under another name or the
// same one, a token for another machine — is refused with an error naming
// the conflict, and the cell keeps one machine, UP, as its agent left it.
func TestGhostAgentsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("admin-0123456789abcdef,admin,ops\nagent1-0123456789abcdef,agent,m1\n"), 0o600)
	adminTok, agentTok := filepath.Join(dir, "admin"), filepath.Join(dir, "agent1")
	os.WriteFile(adminTok, []byte("admin-0123456789abcdef\n"), 0o600)
	os.WriteFile(agentTok, []byte("agent1-0123456789abcdef\n"), 0o600)
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h", "--tokens", tokens)
	agent := func(name, data string) []string {
		return []string{"agent", "--server", srv.grpc, "--join", srv.gossip, "--name", name, "--data", data, "--cpu", "1", "--memory", "1Gi", "--token-file", agentTok, "--wait", "0"}
	}
	d1 := filepath.Join(dir, "m1")
	a1 := startProc(t, agent("m1", d1)...)
	waitLog(t, a1, "registered", 60*time.Second)
	c, _ := newRemoteClientWith(t, srv.grpc, "tester", adminTok)
	var m1 *txn.Machine
	c.Sync(t.Context())
	c.View().RangeMachines(func(m *txn.Machine) bool { m1 = m; return false })

	// Copies of m1's directory (its machine.uid, not its lock or gossip address).
	copyOf := func(name string) string {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		b, err := os.ReadFile(filepath.Join(d1, "machine.uid"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "machine.uid"), b, 0o644)
		return d
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"m1's name, a directory of its own", agent("m1", filepath.Join(dir, "fresh")), `machine identity: the cell has machine "m1" as ` + m1.UID.String()},
		{"m1's directory while m1 runs", agent("m1", d1), "machine identity: the data directory " + d1 + " is in use by another agent (pid"},
		{"a copy of m1's directory under another name", agent("m9", copyOf("copy9")), `which the cell knows as "m1", not --name "m9"`},
		{"a copy of m1's directory under its name", agent("m1", copyOf("copy1")), `machine identity: machine "m1" (` + m1.UID.String() + `) is MACHINE_STATE_UP with its agent at ` + m1.Agent},
	}
	for _, tc := range cases {
		_, errs, err := run(t, "", tc.args...)
		if err == nil || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: %v, want refused with %q:\n%s", tc.name, err, tc.want, errs)
		}
	}
	// m1's token for a machine of another name, with a directory of its own.
	_, errs, err := run(t, "", agent("m2", filepath.Join(dir, "m2"))...)
	if err == nil || !strings.Contains(errs, `permission denied: the token is agent m1's (component "agent/m1"), the transaction says it is "agent/m2"`) {
		t.Errorf("m1's token for m2: %v:\n%s", err, errs)
	}

	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	var ms []*txn.Machine
	c.View().RangeMachines(func(m *txn.Machine) bool { ms = append(ms, m); return true })
	if len(ms) != 1 || ms[0].UID != m1.UID || ms[0].State != omegav1.MachineState_MACHINE_STATE_UP || ms[0].Agent != m1.Agent || ms[0].Version != m1.Version {
		t.Fatalf("after the refusals the cell holds %d machines (%v), want m1 untouched (%v)", len(ms), ms, m1)
	}
	if strings.Contains(a1.log(), "level=ERROR") {
		t.Fatalf("the running agent logged errors:\n%s", a1.log())
	}
}

// TestMachineDrain: `omega machine drain` cordons a machine and evicts its
// tasks, and the service's replica runs again on the other machine; delete
// refuses a machine with tasks and removes one without; cordon survives
// what would otherwise bring a machine back UP.
func TestMachineDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	for _, n := range []string{"m1", "m2"} {
		a := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", n, "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi")
		waitLog(t, a, "registered", 60*time.Second)
	}
	startProc(t, "scheduler", "--kind", "service", "--name", "service-0", "--server", srv.grpc)
	job := filepath.Join(t.TempDir(), "svc.yaml")
	os.WriteFile(job, []byte("meta: {name: svc}\nspec:\n  kind: service\n  replicas: 1\n  template:\n    resources: {cpu: 500m, memory: 32Mi}\n    command: {path: /bin/sleep, args: ['3600']}\n"), 0o644)
	if _, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v\n%s", err, errs)
	}
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	name := func(v client.View, tk *txn.Task) string {
		m, _ := v.Machine(tk.Machine)
		if m == nil {
			return ""
		}
		return m.Name()
	}
	var from string
	waitFor(t, c, 60*time.Second, "the replica RUNNING", func(v client.View) bool {
		v.RangeTasks(func(tk *txn.Task) bool {
			if tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
				from = name(v, tk)
			}
			return true
		})
		return from != ""
	})
	to := map[string]string{"m1": "m2", "m2": "m1"}[from]

	if _, errs, err := run(t, "", "machine", "delete", from, "--server", srv.grpc); err == nil || !strings.Contains(errs, "has 1 tasks placed on it: omega machine drain") {
		t.Fatalf("delete of a machine with a task: %v\n%s", err, errs)
	}
	start := time.Now()
	out, errs, err := run(t, "", "machine", "drain", from, "--server", srv.grpc)
	if err != nil || !strings.Contains(out, fmt.Sprintf("machine %s cordoned, 1 tasks evicted", from)) {
		t.Fatalf("drain: %v\n%s%s", err, out, errs)
	}
	waitFor(t, c, 60*time.Second, "the replica RUNNING on "+to, func(v client.View) bool {
		ok := false
		v.RangeTasks(func(tk *txn.Task) bool {
			ok = ok || tk.State == omegav1.TaskState_TASK_STATE_RUNNING && name(v, tk) == to
			return true
		})
		return ok
	})
	t.Logf("drain of %s to the replica RUNNING on %s: %v", from, to, time.Since(start).Round(time.Millisecond))
	v := c.View()
	var drained *txn.Machine
	v.RangeMachines(func(m *txn.Machine) bool {
		if m.Name() == from {
			drained = m
		}
		return true
	})
	if drained == nil || drained.State != omegav1.MachineState_MACHINE_STATE_DRAINING || !drained.Cordoned() || drained.Tasks != 0 {
		t.Fatalf("the drained machine: %+v", drained)
	}
	if out, errs, err := run(t, "", "machine", "delete", from, "--server", srv.grpc); err != nil || !strings.Contains(out, "machine "+from+" deleted") {
		t.Fatalf("delete of the drained machine: %v\n%s%s", err, out, errs)
	}
	if _, errs, err := run(t, "", "machine", "uncordon", "nosuch", "--server", srv.grpc); err == nil || !strings.Contains(errs, `machine "nosuch": no machine of that name or uid`) {
		t.Fatalf("uncordon of no machine: %v\n%s", err, errs)
	}
}
