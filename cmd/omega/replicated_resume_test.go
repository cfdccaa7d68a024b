package main_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// dialServers is a transport over several servers as the CLI makes one
// (gRPC's pick-first over the addresses in order).
func dialServers(t *testing.T, addrs ...string) *remote.Transport {
	t.Helper()
	r := manual.NewBuilderWithScheme("omega-test-servers")
	var ra []resolver.Address
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		ra = append(ra, resolver.Address{Addr: a, ServerName: host})
	}
	r.InitialState(resolver.State{Addresses: ra})
	tr, err := remote.Dial(r.Scheme()+":///cell", grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestReplicatedWatchResumes: a client given the three servers watches the
// cell through the first (the leader, so that the kill moves both the
// watch and the commits); another client commits jobs through the other
// two; the first server is SIGKILLed midway. The watch goes on through a
// survivor without its reader doing anything — resumed at its revision,
// waited for if that survivor had not applied it yet — and delivers every
// revision once, in order, every acknowledged commit among them.
func TestReplicatedWatchResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := newReplCell(t)
	lead := c.leader(-1)
	a, b := (lead+1)%3, (lead+2)%3
	watcher := dialServers(t, c.ports[lead], c.ports[a], c.ports[b])
	committer := dialServers(t, c.ports[a], c.ports[b])
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := watcher.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := st.Revision()
	w, err := watcher.Watch(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	acked := map[uint64]string{}
	var last uint64
	for i := range 30 {
		if i == 10 {
			c.srv[lead].cmd.Process.Signal(syscall.SIGKILL)
		}
		name := fmt.Sprintf("resume-%d", i)
		var res txn.Result
		if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			defer ccancel()
			res, err = committer.Commit(cctx, &txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), name, "batch"))}})
			return err == nil
		}) {
			t.Fatalf("commit %s: %v", name, err)
		}
		acked[res.Revision] = name
		last = max(last, res.Revision)
	}
	var got []uint64
	names := map[uint64]string{}
	for len(got) == 0 || got[len(got)-1] < last {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			t.Fatalf("the watch, after revisions %v: %v", got, err)
		}
		for _, ws := range sets {
			got = append(got, ws.Revision)
			for _, ch := range ws.Changes {
				if ch.Job != nil {
					names[ws.Revision] = ch.Job.Name()
				}
			}
		}
	}
	for i, r := range got {
		if r != from+uint64(i)+1 {
			t.Fatalf("the watch from %d delivered %v: revision %d at place %d", from, got, r, i)
		}
	}
	for rev, name := range acked {
		if names[rev] != name {
			t.Fatalf("revision %d was acknowledged as job %s; the watch delivered %q there", rev, name, names[rev])
		}
	}
	t.Logf("the watch delivered revisions %d to %d across the SIGKILL of server %d (the leader it watched)", from+1, last, lead+1)
}
