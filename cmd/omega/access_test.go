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

// TestTokensLive: a server with --tokens, an agent and a scheduler with
// their tokens, a job submitted with a submitter's; it runs, its task
// claimed as the scheduler's token names it. A wrong token, no token, and
// the agent's token used to submit are refused with what went wrong; an
// open server says it is open.
func TestTokensLive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	tok := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body+"\n"), 0o600)
		return p
	}
	tokens := tok("tokens", "# token,role,name\nadmin-0123456789abcdef,admin,ops\nsubmit-0123456789abcdef,submitter,alice\n"+
		"sched-0123456789abcdef,scheduler,batch-0\nagent-0123456789abcdef,agent,a1")
	admin, submitter := tok("admin", "admin-0123456789abcdef"), tok("submitter", "submit-0123456789abcdef")
	sched, agent := tok("sched", "sched-0123456789abcdef"), tok("agent", "agent-0123456789abcdef")
	wrong := tok("wrong", "wrong-0123456789abcdef")

	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h", "--tokens", tokens)
	if strings.Contains(srv.log(), "CELL IS OPEN") {
		t.Fatalf("a server with tokens says it is open:\n%s", srv.log())
	}
	startProc(t, "agent", "--server", srv.grpc, "--token-file", agent, "--join", srv.gossip, "--name", "a1", "--data", t.TempDir(), "--cpu", "2", "--memory", "2Gi")
	startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc, "--token-file", sched)

	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte("meta: {name: hello}\nspec:\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/true}\n"), 0o644)
	for name, args := range map[string][]string{
		"no token":    {"get", "machines", "--server", srv.grpc},
		"wrong token": {"get", "machines", "--server", srv.grpc, "--token-file", wrong},
	} {
		if _, errs, err := run(t, "", args...); err == nil || !strings.Contains(errs, "token") {
			t.Fatalf("%s: %v\n%s", name, err, errs)
		}
	}
	if _, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc, "--token-file", agent); err == nil || !strings.Contains(errs, "permission denied: the token is agent a1") {
		t.Fatalf("the agent's token submits: %v\n%s", err, errs)
	}
	if _, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc, "--token-file", submitter); err != nil {
		t.Fatalf("submit: %v\n%s", err, errs)
	}
	c, _ := newRemoteClientWith(t, srv.grpc, "ops", admin)
	waitFor(t, c, 60*time.Second, "the job's task SUCCEEDED, placed by batch-0", func(v client.View) bool {
		done := false
		v.RangeTasks(func(tk *txn.Task) bool {
			done = tk.State == omegav1.TaskState_TASK_STATE_SUCCEEDED && tk.Scheduler == "batch-0"
			return !done
		})
		return done
	})
	if out, errs, err := run(t, "", "get", "jobs", "hello", "--server", srv.grpc, "--token-file", submitter); err != nil || !strings.Contains(out, "hello") {
		t.Fatalf("get with a submitter's token: %v\n%s%s", err, out, errs)
	}

	open := startServerAt(t, t.TempDir(), "127.0.0.1:0")
	if !strings.Contains(open.log(), "THE CELL IS OPEN") {
		t.Fatalf("an open server does not say so:\n%s", open.log())
	}
}
