package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// health reads a server's /healthz: "ok revision R member M leader L".
func health(addr string) (rev, member, leader uint64, ok bool) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, 0, 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := fmt.Sscanf(string(b), "ok revision %d member %d leader %d", &rev, &member, &leader)
	return rev, member, leader, n == 3
}

// TestReplicatedServers: three `omega server --peers` on loopback elect a
// leader; a job submitted to any of them is committed (a follower forwards
// it); SIGKILL of the leader, and the other two commit again (the time
// from the kill to the first commit acknowledged is logged); the killed
// one, started again on its directory, catches up to the same revision.
func TestReplicatedServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ports := []string{freePort(t), freePort(t), freePort(t)}
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, p))
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	start := func(i int) *serverProc {
		return startServerAt(t, dirs[i], ports[i], "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1))
	}
	srv := []*serverProc{start(0), start(1), start(2)}
	leaderOf := func(within time.Duration, skip int) int {
		lead := -1
		if !eventually(within, 20*time.Millisecond, func() bool {
			for i, s := range srv {
				if _, m, l, ok := health(s.http); ok && i != skip && l != 0 && m == l {
					lead = i
				}
			}
			return lead >= 0
		}) {
			t.Fatalf("no leader within %v", within)
		}
		return lead
	}
	lead := leaderOf(30*time.Second, -1)
	job := filepath.Join(t.TempDir(), "j.yaml")
	submit := func(i int, name string) error {
		os.WriteFile(job, []byte("meta: {name: "+name+"}\nspec:\n  kind: batch\n  template:\n    resources: {cpu: 100m, memory: 1Mi}\n    command: {path: /bin/true}\n"), 0o644)
		_, errs, err := run(t, "", "submit", "-f", job, "--server", srv[i].grpc)
		if err != nil {
			return fmt.Errorf("%v: %s", err, errs)
		}
		return nil
	}
	for i := range srv {
		if err := submit(i, fmt.Sprintf("through-%d", i)); err != nil {
			t.Fatalf("submit through server %d (leader %d): %v", i+1, lead+1, err)
		}
	}
	srv[lead].cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	other := (lead + 1) % 3
	for n := 0; ; n++ {
		if err := submit(other, fmt.Sprintf("after-%d", n)); err == nil {
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no commit within 30 s of the leader's SIGKILL:\n%s", srv[other].log())
		}
	}
	t.Logf("SIGKILL of the leader (server %d) to a commit acknowledged through server %d: %v", lead+1, other+1, time.Since(killed).Round(time.Millisecond))
	srv[lead] = start(lead)
	var revs []uint64
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
		revs = revs[:0]
		for _, s := range srv {
			r, _, _, _ := health(s.http)
			revs = append(revs, r)
		}
		return revs[0] == revs[1] && revs[1] == revs[2] && revs[0] >= 4
	}) {
		t.Fatalf("the servers did not converge: revisions %v", revs)
	}
	out, _, err := run(t, "", "get", "jobs", "--server", srv[lead].grpc)
	if err != nil || !strings.Contains(out, "through-0") || !strings.Contains(out, "after-") {
		t.Fatalf("get jobs on the restarted server: %v\n%s", err, out)
	}
}

// TestReplicatedReadsLinearizable: a commit acknowledged by the leader is
// seen at once by a Get through a follower (the follower waits on a read
// index), thirty times over; with stale set a read does not wait.
func TestReplicatedReadsLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ports := []string{freePort(t), freePort(t), freePort(t)}
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, p))
	}
	var srv []*serverProc
	for i := range 3 {
		srv = append(srv, startServerAt(t, t.TempDir(), ports[i], "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1)))
	}
	lead := -1
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
		for i, s := range srv {
			if _, m, l, ok := health(s.http); ok && l != 0 && m == l {
				lead = i
			}
		}
		return lead >= 0
	}) {
		t.Fatal("no leader in 30 s")
	}
	follower := (lead + 1) % 3
	ltr, err := remote.Dial(ports[lead])
	if err != nil {
		t.Fatal(err)
	}
	defer ltr.Close()
	conn, err := grpc.NewClient(ports[follower], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fc := cellgrpc.NewCellClient(conn)
	for i := range 30 {
		name := fmt.Sprintf("r%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := ltr.Commit(ctx, &txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), name, "batch"))}}); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
		resp, err := fc.Get(ctx, &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Name: name})
		cancel()
		if err != nil || resp.GetJob().GetMeta().GetName() != name {
			t.Fatalf("read %d through follower %d after the leader acknowledged it: %v", i, follower+1, err)
		}
	}
	if _, err := fc.Get(context.Background(), &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Name: "r0", Stale: true}); err != nil {
		t.Fatalf("a stale read: %v", err)
	}
}

// TestReplicatedAllRestarted: the three servers stopped (SIGTERM, each
// exiting 0) and started again on their directories elect a leader and
// hold every job committed before, and commit again.
func TestReplicatedAllRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ports := []string{freePort(t), freePort(t), freePort(t)}
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, p))
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	start := func(i int) *serverProc {
		return startServerAt(t, dirs[i], ports[i], "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1))
	}
	commit := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var err error
		if !eventually(time.Until(deadline), 50*time.Millisecond, func() bool { // until a leader takes it
			var tr *remote.Transport
			if tr, err = remote.Dial(ports[len(name)%3]); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err = tr.Commit(ctx, &txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), name, "batch"))}})
				cancel()
				tr.Close()
			}
			return err == nil
		}) {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	srv := []*serverProc{start(0), start(1), start(2)}
	for i := range 10 {
		commit(fmt.Sprintf("before-%d", i))
	}
	began := time.Now()
	for i, s := range srv {
		if err := s.stop(t); err != nil {
			t.Fatalf("server %d on SIGTERM: %v\n%s", i+1, err, s.log())
		}
		t.Logf("server %d stopped after %v", i+1, time.Since(began).Round(time.Millisecond))
	}
	srv = []*serverProc{start(0), start(1), start(2)}
	began = time.Now()
	commit("after")
	t.Logf("restarted; a commit %v later", time.Since(began).Round(time.Millisecond))
	for i, s := range srv {
		out, _, err := run(t, "", "get", "jobs", "-o", "name", "--server", s.grpc)
		if err != nil || strings.Count(out, "job/before-") != 10 || !strings.Contains(out, "job/after\n") {
			t.Fatalf("server %d after the restart: %v\n%s", i+1, err, out)
		}
	}
}

// replCell is three `omega server --peers` on loopback, each on a
// directory of its own that outlives its process.
type replCell struct {
	t     *testing.T
	ports []string
	dirs  []string
	peers string
	srv   []*serverProc
}

func newReplCell(t *testing.T) *replCell {
	c := &replCell{t: t}
	var peers []string
	for i := range 3 {
		c.ports = append(c.ports, freePort(t))
		c.dirs = append(c.dirs, t.TempDir())
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, c.ports[i]))
	}
	c.peers = strings.Join(peers, ",")
	for i := range 3 {
		c.srv = append(c.srv, c.start(i))
	}
	return c
}

// start starts server i (again) on its port and directory.
func (c *replCell) start(i int) *serverProc {
	return startServerAt(c.t, c.dirs[i], c.ports[i], "--peers", c.peers, "--member", fmt.Sprint(i+1))
}

// leader is the index of the server that says it leads (skip: one to
// leave out), polled for at most 30 s.
func (c *replCell) leader(skip int) int {
	c.t.Helper()
	lead := -1
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
		for i, s := range c.srv {
			if _, m, l, ok := health(s.http); ok && i != skip && l != 0 && m == l {
				lead = i
			}
		}
		return lead >= 0
	}) {
		c.t.Fatal("no leader within 30 s")
	}
	return lead
}

// requireJobs fails the test unless every server holds every job named,
// within 30 s.
func (c *replCell) requireJobs(names []string) {
	c.t.Helper()
	for i, s := range c.srv {
		missing := 0
		var err error
		if !eventually(30*time.Second, 100*time.Millisecond, func() bool {
			var out, stderr string
			out, stderr, err = run(c.t, "", "get", "jobs", "-o", "name", "--server", s.grpc)
			if err != nil {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr))
			}
			missing = 0
			for _, name := range names {
				if !strings.Contains(out, "job/"+name+"\n") {
					missing++
				}
			}
			return err == nil && missing == 0
		}) {
			c.t.Fatalf("server %d lacks %d of the %d acknowledged jobs: %v", i+1, missing, len(names), err)
		}
	}
}

// eventually checks cond every `every` until it holds (true) or within
// has passed (false), waiting on a ticker and a timer between checks.
func eventually(within, every time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
}
