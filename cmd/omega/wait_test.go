package main_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// TestCellStartsInAnyOrder: an agent, a scheduler and a submission started
// before the server wait for it (one line each saying what waits for
// what), and once it listens the cell comes up and runs the job; nobody
// exits on "connection refused".
func TestCellStartsInAnyOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	grpc, gossip := freePort(t), freePort(t)
	sched := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", grpc)
	agent := startProc(t, "agent", "--server", grpc, "--join", gossip, "--name", "m1", "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi")
	for _, p := range []*proc{sched, agent} {
		waitLog(t, p, "waiting for the cell's server", 30*time.Second)
	}
	// A one-shot command waits too (10 s by default).
	job := filepath.Join("..", "..", "examples", "jobs", "hello.yaml") // tests run in the package directory
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	submit := exec.CommandContext(ctx, bin, "submit", "-f", job, "--server", grpc)
	var subOut strings.Builder
	subErr := newOutput()
	submit.Stdout, submit.Stderr = &subOut, subErr
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	// The server starts once the submission waits for it (else a slow
	// start of the submission's process could find it up already).
	subErr.waitFor(t, "waiting for the cell's server", 30*time.Second)

	srv := startServerAt(t, t.TempDir(), grpc, "--gossip", gossip)
	if err := submit.Wait(); err != nil {
		t.Fatalf("submit, started before the server: %v\n%s", err, subErr.String())
	}
	if !strings.Contains(subErr.String(), "waiting for the cell's server") {
		t.Errorf("submit did not say it waited:\n%s", subErr.String())
	}
	waitLog(t, agent, "registered", 60*time.Second)
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	waitFor(t, c, 60*time.Second, "the job's three tasks succeeded", func(v client.View) bool {
		n := 0
		v.RangeTasks(func(tk *txn.Task) bool {
			if tk.State == omegav1.TaskState_TASK_STATE_SUCCEEDED {
				n++
			}
			return true
		})
		return n == 3
	})
	for _, p := range []*proc{sched, agent} {
		log := p.log()
		if n := strings.Count(log, "waiting for the cell's server"); n != 1 {
			t.Errorf("%v said it waited %d times, want once:\n%s", p.cmd.Args[:2], n, log)
		}
		if !strings.Contains(log, "the cell's server answers") {
			t.Errorf("%v did not say the server answered:\n%s", p.cmd.Args[:2], log)
		}
	}
}
