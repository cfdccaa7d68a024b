package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitOutput runs the command until its standard output holds want, at
// most within; it returns that output.
func waitOutput(t *testing.T, within time.Duration, want string, args ...string) string {
	t.Helper()
	var out, errs string
	var err error
	if !eventually(within, 100*time.Millisecond, func() bool { // a process's output has no event to wait on
		out, errs, err = run(t, "", args...)
		return err == nil && strings.Contains(out, want)
	}) {
		t.Fatalf("omega %s: no %q within %v: %v\n%s%s", strings.Join(args, " "), want, within, err, out, errs)
	}
	return out
}

// TestWhyAJobWaits: a job no machine can take says why, in `get jobs`
// and `describe`, written by the live scheduler that tried it; the
// task's version is not moved by it.
func TestWhyAJobWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0")
	a := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "m1", "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi")
	waitLog(t, a, "registered", 60*time.Second)
	startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	job := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(job, []byte("meta: {name: big}\nspec:\n  kind: batch\n  replicas: 2\n  template:\n    resources: {cpu: 64, memory: 32Mi}\n    command: {path: /bin/true}\n"), 0o644)
	if _, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v\n%s", err, errs)
	}
	out := waitOutput(t, 60*time.Second, "Resources:cpu", "get", "jobs", "--server", srv.grpc)
	if !strings.Contains(out, "WAITING") || !strings.Contains(out, "PENDING") {
		t.Fatalf("get jobs:\n%s", out)
	}
	out, errs, err := run(t, "", "describe", "job", "big", "--server", srv.grpc)
	want := "Resources:cpu, 2 tasks, since "
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "(batch-0): 0 of 1 UP machines can take a task of cpu 64, memory 32Mi: 1 short of cpu (none has 64 in all; the largest has 1)") {
		t.Fatalf("describe job big: %v, want %q and the message\n%s%s", err, want, out, errs)
	}
	out, _, err = run(t, "", "get", "jobs", "big", "-o", "json", "--server", srv.grpc)
	if err != nil || !strings.Contains(out, `"reason": "WAIT_REASON_RESOURCES"`) || !strings.Contains(out, `"resource": "cpu"`) {
		t.Fatalf("get jobs big -o json: %v\n%s", err, out)
	}
	// The tasks are at the version that created them: the reason moved
	// the job, not them.
	out, _, err = run(t, "", "get", "tasks", "-o", "json", "--server", srv.grpc)
	var list struct {
		Items []struct {
			Meta struct {
				Version        string `json:"version"`
				CreateRevision string `json:"createRevision"`
			} `json:"meta"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"items"`
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Items) != 2 {
		t.Fatalf("get tasks -o json: %v\n%s", err, out)
	}
	for _, tk := range list.Items {
		if tk.Status.State != "TASK_STATE_PENDING" || tk.Meta.Version != tk.Meta.CreateRevision {
			t.Fatalf("a task moved: %+v\n%s", tk, out)
		}
	}
}

// TestSchedulersAnnounced: scheduler instances hold leases in the cell. A
// job for a kind no scheduler runs is said to wait for one (by submit at
// once, and on the job by the server once --scheduler-grace passed); a
// scheduler of that kind starting takes its lease, shows LIVE in `get
// schedulers` and places the job (the reason gone with the pending
// tasks); a second process under its name is refused while it runs; one
// that stops gives its lease back; one killed leaves it to expire.
func TestSchedulersAnnounced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--scheduler-grace", "500ms")
	a := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "m1", "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi")
	waitLog(t, a, "registered", 60*time.Second)
	job := filepath.Join(t.TempDir(), "svc.yaml")
	os.WriteFile(job, []byte("meta: {name: svc}\nspec:\n  kind: service\n  template:\n    resources: {cpu: 100m, memory: 32Mi}\n    command: {path: /bin/sleep, args: ['3600']}\n"), 0o644)
	_, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc)
	if err != nil || !strings.Contains(errs, `omega: no scheduler of kind "service" runs in the cell (omega get schedulers)`) {
		t.Fatalf("submit for a kind no one runs: %v\n%s", err, errs)
	}
	out := waitOutput(t, 60*time.Second, "NoScheduler", "get", "jobs", "--server", srv.grpc)
	out, _, _ = run(t, "", "describe", "job", "svc", "--server", srv.grpc)
	if !strings.Contains(out, `(jobs): no scheduler of kind "service" runs in the cell`) {
		t.Fatalf("describe job svc:\n%s", out)
	}

	s1 := startProc(t, "scheduler", "--kind", "service", "--name", "svc-0", "--server", srv.grpc, "--lease-duration", "900ms")
	out = waitOutput(t, 60*time.Second, "LIVE", "get", "schedulers", "--server", srv.grpc)
	if !strings.Contains(out, "svc-0") || !strings.Contains(out, "service") {
		t.Fatalf("get schedulers:\n%s", out)
	}
	// Placed: nothing waits, and the job says nothing of waiting.
	out = waitOutput(t, 60*time.Second, `"phase": "JOB_PHASE_RUNNING"`, "get", "jobs", "svc", "-o", "json", "--server", srv.grpc)
	if strings.Contains(out, `"waiting"`) {
		t.Fatalf("get jobs svc after its placement:\n%s", out)
	}

	// A second process of the name, while the first runs and renews.
	_, errs, err = run(t, "", "scheduler", "--kind", "service", "--name", "svc-0", "--server", srv.grpc, "--lease-duration", "900ms")
	if err == nil || !strings.Contains(errs, `scheduler "svc-0" is running elsewhere`) {
		t.Fatalf("a second svc-0: %v\n%s", err, errs)
	}

	// Stopped: the lease is given back.
	if err := s1.stop(t); err != nil {
		t.Fatalf("svc-0 on SIGTERM: %v\n%s", err, s1.log())
	}
	if out, _, err := run(t, "", "get", "schedulers", "--server", srv.grpc); err != nil || strings.Contains(out, "svc-0") {
		t.Fatalf("get schedulers after svc-0 stopped: %v\n%s", err, out)
	}

	// Killed: the lease stays, and expires.
	s2 := startProc(t, "scheduler", "--kind", "service", "--name", "svc-1", "--server", srv.grpc, "--lease-duration", "900ms")
	waitOutput(t, 60*time.Second, "svc-1", "get", "schedulers", "--server", srv.grpc)
	s2.cmd.Process.Signal(syscall.SIGKILL)
	err = <-s2.exited
	s2.exited <- err
	waitOutput(t, 60*time.Second, "EXPIRED", "get", "schedulers", "svc-1", "--server", srv.grpc)
}
