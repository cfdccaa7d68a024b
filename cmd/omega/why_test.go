package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitOutput runs the command until its standard output holds want, at
// most within; it returns that output.
func waitOutput(t *testing.T, within time.Duration, want string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, errs, err := run(t, "", args...)
		if err == nil && strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("omega %s: no %q within %v: %v\n%s%s", strings.Join(args, " "), want, within, err, out, errs)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline: a process's output has no event to wait on
	}
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
