package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestServerProcess: a real `omega server` process serves commits and a
// watch over loopback, reports health and per-component metrics, drains on
// SIGTERM (the process exits 0), and keeps every acknowledged commit across
// a restart on the same data, the open watch resuming by itself.
func TestServerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	p := startServer(t, data)
	c, tr := newRemoteClient(t, p.grpc, "tester")
	ctx := context.Background()
	w, err := tr.Watch(ctx, c.View().Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var acked []uint64
	for i := range 5 {
		tx := c.NewTxn(c.View())
		tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(c.NewUID(), fmt.Sprintf("m%d", i), testkit.Res(4000, 1<<34)))}
		res, err := c.Commit(ctx, tx)
		if err != nil || res.Committed != 1 {
			t.Fatalf("commit %d: %+v %v", i, res, err)
		}
		acked = append(acked, res.Revision)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen []uint64
	for len(seen) < len(acked) {
		sets, err := w.Next(wctx, 0)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		for _, ws := range sets {
			seen = append(seen, ws.Revision)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(acked) {
		t.Fatalf("watched %v, acknowledged %v", seen, acked)
	}
	body := func(path string) string {
		resp, err := http.Get("http://" + p.http + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(b)
	}
	if h := body("/healthz"); !strings.HasPrefix(h, fmt.Sprintf("ok revision %d", acked[len(acked)-1])) {
		t.Fatalf("/healthz: %q", h)
	}
	m := body("/metrics") // two watchers: the client's own copy, and w
	for _, want := range []string{`omega_commits_total{component="tester",result="committed"} 5`, `omega_watchers 2`, `omega_machines{state="MACHINE_STATE_UP"} 5`, `omega_commit_seconds_count 5`, `omega_store_log_segments 1`, `omega_store_checkpoints_total 0`} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, m)
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
	}

	// Restart on the same data and address: every acknowledged commit is
	// there, and the open watch resumes by itself, delivering what commits
	// after the restart.
	p2 := startServerAt(t, data, p.grpc)
	c2, _ := newRemoteClient(t, p2.grpc, "tester")
	if got := c2.View().Revision(); got != acked[len(acked)-1] || c2.View().NumMachines() != 5 {
		t.Fatalf("after the restart: revision %d with %d machines, want %d with 5", got, c2.View().NumMachines(), acked[len(acked)-1])
	}
	tx := c2.NewTxn(c2.View())
	tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(testkit.UID('a', 1, 1), "m-after", testkit.Res(4000, 1<<34)))} // not c2.NewUID(): its seed is c's
	res, err := c2.Commit(ctx, tx)
	if err != nil || res.Committed != 1 {
		t.Fatalf("commit after the restart: %+v %v", res, err)
	}
	sets, err := w.Next(wctx, 0)
	if err != nil || len(sets) != 1 || sets[0].Revision != res.Revision {
		t.Fatalf("the watch across the restart: %d sets, %v; want the one at %d", len(sets), err, res.Revision)
	}
	if err := p2.stop(t); err != nil {
		t.Fatalf("second exit: %v", err)
	}
}

// TestSchedulerProcess: `omega scheduler` in a process of its own, over
// gRPC, places a batch job submitted to a running server, and exits 0 on
// SIGTERM.
func TestSchedulerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	c, _ := newRemoteClient(t, srv.grpc, "submitter")
	ctx := context.Background()
	tx := c.NewTxn(c.View())
	for i := range 3 {
		tx.Ops = append(tx.Ops, txn.CreateMachine(testkit.Machine(testkit.UID('m', uint32(i), 0), fmt.Sprintf("m%d", i), testkit.Res(4000, 16<<30))))
	}
	job := testkit.UID('j', 1, 0)
	pj := testkit.Job(job, "hello", "batch")
	pj.Spec.Replicas = 5
	tx.Ops = append(tx.Ops, txn.CreateJob(pj))
	for i := range 5 {
		tx.Ops = append(tx.Ops, txn.CreateTask(testkit.Task(testkit.UID('t', uint32(i), 0), job, fmt.Sprintf("hello-%d", i), testkit.Res(500, 1<<30))))
	}
	if res, err := c.Commit(ctx, tx); err != nil || res.Committed != len(tx.Ops) {
		t.Fatalf("setup: %+v %v", res, err)
	}
	sched := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		placed := 0
		c.View().RangeTasks(func(tk *txn.Task) bool {
			if tk.Placed() && tk.Scheduler == "batch-0" {
				placed++
			}
			return true
		})
		if placed == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 tasks placed by batch-0 after 60 s; the scheduler said:\n%s", placed, sched.log())
		}
		wctx, cancel := context.WithDeadline(ctx, deadline) // wait for the next commit, never past the deadline
		err := c.SyncTo(wctx, c.View().Revision()+1)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	}
	if err := sched.stop(t); err != nil {
		t.Fatalf("the scheduler's exit: %v\n%s", err, sched.log())
	}
}
