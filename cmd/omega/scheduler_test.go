package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// TestSchedulersShareJobs: two batch instances join the cell's membership
// and share the kind's jobs by the rendezvous hash of their ids (each job
// placed by the instance the hash picks); when one is killed, the other
// takes its jobs over and places them.
func TestSchedulersShareJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	names := []string{"batch-0", "batch-1"}
	var scheds []*proc
	for _, n := range names {
		scheds = append(scheds, startProc(t, "scheduler", "--kind", "batch", "--name", n, "--server", srv.grpc, "--join", srv.gossip))
	}
	for _, s := range scheds {
		waitLog(t, s, "members=\"[batch-0 batch-1]\"", 60*time.Second)
	}
	startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", t.TempDir(), "--cpu", "1", "--memory", "4Gi")
	dir := t.TempDir()
	submit := func(name, cpu string) uuid.UUID {
		t.Helper()
		f := filepath.Join(dir, name+".yaml")
		os.WriteFile(f, []byte(fmt.Sprintf("meta: {name: %s}\nspec:\n  template:\n    resources: {cpu: %s, memory: 16Mi}\n    command: {path: /bin/sleep, args: ['300']}\n", name, cpu)), 0o644)
		out, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc)
		if err != nil {
			t.Fatalf("submit %s: %v\n%s", name, err, errs)
		}
		_, rest, _ := strings.Cut(out, "(uid ")
		u, err := uuid.Parse(strings.TrimRight(strings.Fields(rest + " x")[0], ","))
		if err != nil {
			t.Fatalf("submit %s printed no uid: %q", name, out)
		}
		return u
	}
	placedBy := func(v client.View, job uuid.UUID) string {
		by := ""
		v.RangeTasks(func(tk *txn.Task) bool {
			if tk.Job == job && tk.Placed() {
				by = tk.Scheduler
			}
			return by == ""
		})
		return by
	}

	// Shared: each job goes to the instance the hash picks.
	small := map[uuid.UUID]string{}
	for i := range 6 {
		j := submit(fmt.Sprintf("small%d", i), "100m")
		small[j] = names[schedulers.Pick(j, names)]
	}
	waitFor(t, c, 60*time.Second, "every small job placed by the instance its hash picks", func(v client.View) bool {
		for j, want := range small {
			if by := placedBy(v, j); by != want {
				return false
			}
		}
		return true
	})

	// Jobs no machine holds yet, some of them batch-1's; batch-1 dies.
	var big []uuid.UUID
	ofDead := 0
	for i := 0; ofDead == 0 || len(big) < 3; i++ {
		if i == 20 {
			t.Fatal("20 jobs and none hashed to batch-1")
		}
		j := submit(fmt.Sprintf("big%d", i), "2")
		big = append(big, j)
		if names[schedulers.Pick(j, names)] == "batch-1" {
			ofDead++
		}
	}
	scheds[1].cmd.Process.Kill()
	waitLog(t, scheds[0], "members=[batch-0]", 60*time.Second)
	startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a2", "--data", t.TempDir(), "--cpu", "16", "--memory", "16Gi")
	waitFor(t, c, 60*time.Second, "every big job placed by batch-0, batch-1's taken over", func(v client.View) bool {
		for _, j := range big {
			if placedBy(v, j) != "batch-0" {
				return false
			}
		}
		return true
	})
}
