package main_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// serverStatus asks a server how it stands (nil if it does not answer).
func serverStatus(addr string) *cellgrpc.ServerStatus {
	tr, err := remote.Dial(addr)
	if err != nil {
		return nil
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := tr.Server(ctx)
	if err != nil {
		return nil
	}
	return st
}

// commitVia commits a job named name through the first of addrs that takes
// it, within 30 s.
func commitVia(t *testing.T, addrs []string, name string) {
	t.Helper()
	commitOps(t, addrs, []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), name, "batch"))})
}

// TestReplicatedAddRemove: a member added to a running cell of three and
// one removed, through the CLI, with the refusals the operator meets.
//
// omega server add 4 (asked of a follower, which forwards to the leader)
// makes member 4 a learner at its address; its server started with --join
// on an empty directory is taken in, sent a snapshot, and made a voter once
// caught up. It then counts toward the quorum: with a founder SIGKILLed,
// the cell of four commits only with it. Refused, each with its reason: a
// number taken, an address taken, a member that does not exist, an add
// while the new member is still joining is not refused but done. A founder
// restarted with its old --peers (no member 4) knows member 4's address
// from the records. omega server remove of the leader hands the lead over
// first; the removed server exits 0 saying so, and the cell commits on;
// restarted, it is refused by the others and stops again; its number
// cannot be added again. omega server transfer-leader (asked of the new
// member) hands the lead to a founder before.
func TestReplicatedAddRemove(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := newReplCell(t)
	lead := c.leader(-1)
	var names []string
	commit := func(name string) {
		t.Helper()
		var addrs []string
		for i, s := range c.srv {
			if s != nil && s.cmd.ProcessState == nil {
				addrs = append(addrs, c.ports[i])
			}
		}
		commitVia(t, addrs, name)
		names = append(names, name)
	}
	for i := range 10 {
		commit(fmt.Sprintf("before-%d", i))
	}
	follower := (lead + 1) % 3
	omega := func(args ...string) (string, error) {
		out, stderr, err := run(t, "", append(args, "--server", c.ports[follower])...)
		if err != nil {
			return out + stderr, fmt.Errorf("%w: %s", err, stderr)
		}
		return out, nil
	}

	// The refusals before the add.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "add", "2", "--address", "127.0.0.1:1"}, "member 2 is taken: it is in the cell"},
		{[]string{"server", "add", "4", "--address", c.ports[0]}, "is taken: member 1's"},
		{[]string{"server", "remove", "9"}, "no such member in the cell's configuration: member 9"},
		{[]string{"server", "add", "4"}, "--address is required"},
		{[]string{"server", "add", "x", "--address", "127.0.0.1:1"}, "want a member number"},
	} {
		out, err := omega(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Fatalf("omega %s: %v\n%s\nwant refused with %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}

	// The add, then the new server joins.
	p4 := freePort(t)
	out, err := omega("server", "add", "4", "--address", p4)
	if err != nil || !strings.Contains(out, "member 4 added at "+p4+", a learner") {
		t.Fatalf("omega server add 4: %v\n%s", err, out)
	}
	if out, err := omega("server", "add", "4", "--address", p4); err != nil || !strings.Contains(out, "in the cell at "+p4+" already") {
		t.Fatalf("omega server add 4 again: %v\n%s", err, out)
	}
	if st := serverStatus(c.ports[lead]); st == nil || len(st.GetPeers()) != 4 || !st.GetPeers()[3].GetLearner() {
		t.Fatalf("after the add, the leader says: %v; want member 4 among its peers, a learner", st)
	}
	if out, err := omega("get", "servers"); err != nil || !regexp.MustCompile(`(?m)^4 +`+regexp.QuoteMeta(p4)+` +learner, unreachable`).MatchString(out) {
		t.Fatalf("omega get servers before member 4's server starts: %v\n%s", err, out)
	}
	commit("after-add")
	dir4 := t.TempDir()
	start4 := time.Now()
	c.ports, c.dirs = append(c.ports, p4), append(c.dirs, dir4)
	c.srv = append(c.srv, startServerAt(t, dir4, p4, "--peers", c.peers+",4="+p4, "--member", "4", "--join"))
	var st4 *cellgrpc.ServerStatus
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		st4 = serverStatus(p4)
		ls := serverStatus(c.ports[lead])
		return st4 != nil && ls != nil && st4.GetRole() == "follower" && st4.GetRevision() >= ls.GetRevision()-1 &&
			slices.ContainsFunc(ls.GetPeers(), func(p *cellgrpc.PeerStatus) bool { return p.GetMember() == 4 && !p.GetLearner() && p.GetRaftId() != 0 })
	}) {
		t.Fatalf("member 4 is not a caught-up voter 30 s after its start: %v\n%s", st4, c.srv[3].log())
	}
	t.Logf("member 4 a voter, caught up, %s after its server started", time.Since(start4).Round(time.Millisecond))
	for i := range 5 {
		commit(fmt.Sprintf("four-%d", i))
	}

	// A founder down: the quorum of four (three) needs member 4.
	down := (lead + 2) % 3
	c.srv[down].cmd.Process.Signal(syscall.SIGKILL)
	err = <-c.srv[down].exited
	c.srv[down].exited <- err
	commit("with-four-one-down")
	// Restarted with its old --peers (no member 4): the records say where 4 is.
	c.srv[down] = c.start(down)
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		st := serverStatus(c.ports[down])
		return st != nil && len(st.GetPeers()) == 4 && st.GetPeers()[3].GetAddress() == p4
	}) {
		t.Fatalf("member %d, restarted with --peers naming three, does not list member 4 at %s: %v", down+1, p4, serverStatus(c.ports[down]))
	}

	// Hand the lead to a founder that does not lead, through the CLI.
	lead = c.leader(-1)
	target := (lead + 1) % 3
	if target == lead {
		target = (lead + 2) % 3
	}
	out, stderr, err := run(t, "", "server", "transfer-leader", fmt.Sprint(target+1), "--server", c.ports[3])
	if err != nil || !strings.Contains(out, fmt.Sprintf("member %d leads now", target+1)) {
		t.Fatalf("omega server transfer-leader %d: %v\n%s%s", target+1, err, out, stderr)
	}
	if got := c.leader(-1); got != target {
		t.Fatalf("after the transfer to member %d, member %d leads", target+1, got+1)
	}

	// Remove the leader: its lead goes first; it exits 0 saying it was removed.
	lead = c.leader(-1)
	via := (lead + 1) % 4
	out, stderr, err = run(t, "", "server", "remove", fmt.Sprint(lead+1), "--server", c.ports[via])
	if err != nil || !strings.Contains(out, fmt.Sprintf("member %d removed", lead+1)) || !strings.Contains(out, "the lead went from member") {
		t.Fatalf("omega server remove %d (the leader): %v\n%s%s", lead+1, err, out, stderr)
	}
	select {
	case err := <-c.srv[lead].exited:
		c.srv[lead].exited <- err
		if err != nil || !strings.Contains(c.srv[lead].log(), "removed from the cell") {
			t.Fatalf("the removed server exited %v:\n%s", err, c.srv[lead].log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the removed server still runs 30 s after its removal:\n%s", c.srv[lead].log())
	}
	removed := c.srv[lead]
	c.srv[lead] = nil
	commit("after-remove")
	if out, stderr, err := run(t, "", "server", "add", fmt.Sprint(lead+1), "--address", "127.0.0.1:1", "--server", c.ports[3]); err == nil || !strings.Contains(stderr, "was removed from the cell") {
		t.Fatalf("omega server add %d (removed): %v\n%s%s", lead+1, err, out, stderr)
	}
	// Started again on its directory, it is refused and stops.
	again := c.start(lead)
	select {
	case err := <-again.exited:
		again.exited <- err
		if !strings.Contains(again.log(), "removed") {
			t.Fatalf("the removed server started again exited %v without saying it was removed:\n%s", err, again.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the removed server started again still runs after 30 s:\n%s", again.log())
	}
	_ = removed
	var live []*serverProc
	for _, s := range c.srv {
		if s != nil {
			live = append(live, s)
		}
	}
	c.srv = live
	c.requireJobs(names)
}
