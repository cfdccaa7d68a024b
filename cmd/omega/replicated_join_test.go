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

	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

// healthBody is a server's /healthz, whole.
func healthBody(addr string) (string, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestReplicatedMemberWiped: a follower SIGKILLed and its data directory
// wiped while the other two commit on. Started again on the empty
// directory without --join, it stops at the leader's first heartbeat,
// saying its data was lost and to start it with --join (raft's leader
// remembers what it acknowledged). Started with --join, it takes a raft
// id of its own, the leader puts it in place of the old one and sends it
// a snapshot; it catches up to the leader's revision. Then the old leader
// is SIGKILLed: the rejoined member and the third elect a leader and
// commit, so it votes and acknowledges as a member.
func TestReplicatedMemberWiped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := newReplCell(t)
	lead := c.leader(-1)
	var names []string
	commit := func(via []int, name string) {
		t.Helper()
		var err error
		if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
			for _, i := range via {
				var tr *remote.Transport
				if tr, err = remote.Dial(c.ports[i]); err != nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err = tr.Commit(ctx, &txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), name, "batch"))}})
				cancel()
				tr.Close()
				if err == nil {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("commit %s through servers %v: %v", name, via, err)
		}
		names = append(names, name)
	}
	all := []int{0, 1, 2}
	for i := range 10 {
		commit(all, fmt.Sprintf("before-%d", i))
	}
	f := (lead + 1) % 3
	c.srv[f].cmd.Process.Signal(syscall.SIGKILL)
	err := <-c.srv[f].exited
	c.srv[f].exited <- err // for the cleanup
	if err := os.RemoveAll(c.dirs[f]); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(c.dirs[f], 0o700)
	others := []int{lead, 3 - lead - f}
	for i := range 10 {
		commit(others, fmt.Sprintf("while-wiped-%d", i))
	}

	// Without --join: refused at the first heartbeat, the directory's
	// fresh cell never served.
	p := c.start(f)
	var exit error
	select {
	case exit = <-p.exited:
		p.exited <- exit
	case <-time.After(30 * time.Second):
		t.Fatalf("a wiped member started without --join still runs after 30 s:\n%s", p.log())
	}
	if exit == nil || !strings.Contains(p.log(), "data was lost") || !strings.Contains(p.log(), "joining member") {
		t.Fatalf("a wiped member without --join: exit %v, want an error saying its data was lost and to join:\n%s", exit, p.log())
	}
	os.RemoveAll(c.dirs[f])
	os.MkdirAll(c.dirs[f], 0o700)

	// With --join: taken in and caught up by snapshot.
	c.srv[f] = startServerAt(t, c.dirs[f], c.ports[f], "--peers", c.peers, "--member", fmt.Sprint(f+1), "--join")
	var lrev, frev uint64
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		lrev, _, _, _ = health(c.srv[lead].http)
		body, _ := healthBody(c.srv[f].http)
		frev, _, _, _ = health(c.srv[f].http)
		return lrev != 0 && frev == lrev && !strings.Contains(body, "joining")
	}) {
		t.Fatalf("the joined member is at revision %d, the leader at %d, after 30 s:\n%s", frev, lrev, c.srv[f].log())
	}
	b, err := os.ReadFile(filepath.Join(c.dirs[f], "raft", "member"))
	var format int
	var id uint64
	if _, serr := fmt.Sscanf(string(b), "omega raft member\nformat %d\nid %d\n", &format, &id); err != nil || serr != nil || replica.MemberOf(id) != uint64(f+1) || id <= replica.MaxMember {
		t.Fatalf("the joined member's raft id: %q %v %v; want member %d's joining id", b, err, serr, f+1)
	}
	snaps, _ := filepath.Glob(filepath.Join(c.dirs[f], "raft", "snap-*"))
	if len(snaps) != 1 || strings.HasSuffix(snaps[0], fmt.Sprintf("%020d", 1)) {
		t.Fatalf("the joined member's snapshots: %v; want the leader's (past index 1)", snaps)
	}
	t.Logf("member %d joined as raft id %d (%#x), caught up at revision %d by %s", f+1, id, id, frev, filepath.Base(snaps[0]))

	// The old leader killed: the rejoined member is needed for a quorum.
	c.srv[lead].cmd.Process.Signal(syscall.SIGKILL)
	rest := []int{f, 3 - lead - f}
	for i := range 5 {
		commit(rest, fmt.Sprintf("after-leader-killed-%d", i))
	}
	c.srv[lead] = c.start(lead)
	c.requireJobs(names)
}
