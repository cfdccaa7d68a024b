package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// TestNamesForPeople: `get tasks` names the machine a task is on, not a
// uid prefix; a job's name used again, the first run finished and kept,
// is no longer "ambiguous": get, describe and logs take the newest (or the
// live) one and say so on stderr.
func TestNamesForPeople(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	a := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "m1", "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi")
	waitLog(t, a, "registered", 60*time.Second)
	startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	job := filepath.Join(t.TempDir(), "once.yaml")
	os.WriteFile(job, []byte("meta: {name: once}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/echo, args: [hi]}\n"), 0o644)
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	done := func(n int) func(client.View) bool {
		return func(v client.View) bool {
			k := 0
			v.RangeJobs(func(j *txn.Job) bool {
				if j.Phase() == omegav1.JobPhase_JOB_PHASE_SUCCEEDED {
					k++
				}
				return true
			})
			return k == n
		}
	}
	for i := 1; i <= 2; i++ {
		if _, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc); err != nil {
			t.Fatalf("submit %d: %v\n%s", i, err, errs)
		}
		waitFor(t, c, 60*time.Second, "the job succeeded", done(i))
	}
	out, errs, err := run(t, "", "get", "tasks", "--server", srv.grpc)
	if err != nil || !strings.Contains(out, "SUCCEEDED  m1 ") {
		t.Fatalf("get tasks: %v, want the machine by name:\n%s%s", err, out, errs)
	}
	for _, args := range [][]string{{"get", "jobs", "once"}, {"describe", "job", "once"}, {"logs", "once-0"}} {
		out, errs, err := run(t, "", append(args, "--server", srv.grpc)...)
		if err != nil || !strings.Contains(errs, `omega: 2 `) || !strings.Contains(errs, `named "once`) || !strings.Contains(errs, "this is the newest; none is live") {
			t.Errorf("%v: %v, want the newest taken and said:\n%s%s", args, err, out, errs)
		}
	}
}
