package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

type member struct {
	id   uint64
	dir  string
	lis  net.Listener
	srv  *grpc.Server
	drv  *Driver
	addr string
}

type cell struct {
	t       *testing.T
	members []*member
	addrs   map[uint64]string
}

func newCell(t *testing.T, n int) *cell {
	c := &cell{t: t, addrs: map[uint64]string{}}
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &member{id: uint64(i + 1), dir: t.TempDir(), lis: lis, addr: lis.Addr().String()}
		c.addrs[m.id] = m.addr
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		c.start(m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.stop(m)
		}
	})
	return c
}

func (c *cell) start(m *member) {
	var peers []uint64
	for _, o := range c.members {
		peers = append(peers, o.id)
	}
	if m.lis == nil {
		lis, err := net.Listen("tcp", m.addr)
		if err != nil {
			c.t.Fatal(err)
		}
		m.lis = lis
	}
	drv, err := Start(Config{Member: replica.Config{ID: m.id, Peers: peers}, Dir: m.dir, Addrs: c.addrs, Cluster: "test",
		Tick: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}, Hooks{})
	if err != nil {
		c.t.Fatal(err)
	}
	m.drv = drv
	m.srv = grpc.NewServer()
	cellgrpc.RegisterPeerServer(m.srv, drv.PeerServer())
	go m.srv.Serve(m.lis)
}

func (c *cell) stop(m *member) {
	if m.drv == nil {
		return
	}
	m.srv.Stop()
	if err := m.drv.Stop(); err != nil {
		c.t.Errorf("member %d: %v", m.id, err)
	}
	m.drv, m.srv, m.lis = nil, nil, nil
}

// commit commits tx through whichever member leads, polling until one
// does (at most within).
func (c *cell) commit(tx *txn.Txn, within time.Duration) (txn.Result, *member) {
	c.t.Helper()
	var res txn.Result
	var by *member
	eventually(within, 20*time.Millisecond, func() bool { // until a member leads
		for _, m := range c.members {
			if m.drv == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r, err := m.drv.Commit(ctx, tx)
			cancel()
			if err == nil {
				res, by = r, m
				return true
			}
			if !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrNotReady) && !errors.Is(err, replica.ErrOutcomeUnknown) {
				c.t.Fatalf("commit through member %d: %v", m.id, err)
			}
		}
		return false
	})
	if by != nil {
		return res, by
	}
	c.t.Fatalf("no member committed within %v", within)
	return txn.Result{}, nil
}

func job(i int) txn.Op {
	return txn.CreateJob(testkit.Job(uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(i))), fmt.Sprintf("j%d", i), "batch"))
}

// TestThreeMembersOverGRPC: three members on loopback elect a leader and
// commit through it; the leader stopped, the other two elect another and
// go on; the stopped one, started again from its directory, catches up;
// every member then holds the same cell, every acknowledged job in it,
// and a linearizable read on a follower sees the last commit.
func TestThreeMembersOverGRPC(t *testing.T) {
	c := newCell(t, 3)
	var revs []uint64
	var leader *member
	for i := range 20 {
		res, m := c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(i)}}, 10*time.Second)
		revs, leader = append(revs, res.Revision), m
	}
	start := time.Now()
	c.stop(leader)
	_, next := c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(20)}}, 10*time.Second)
	t.Logf("leader %d stopped; member %d committed %v later", leader.id, next.id, time.Since(start).Round(time.Millisecond))
	if next == leader {
		t.Fatal("the stopped leader committed")
	}
	for i := 21; i < 40; i++ {
		c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(i)}}, 10*time.Second)
	}
	c.start(leader)
	var rev []uint64
	if !eventually(20*time.Second, 20*time.Millisecond, func() bool {
		rev = rev[:0]
		for _, m := range c.members {
			rev = append(rev, m.drv.Applied().Revision())
		}
		return rev[0] == rev[1] && rev[1] == rev[2] && rev[0] >= 40
	}) {
		t.Fatalf("the members did not converge: revisions %v", rev)
	}
	want := c.members[0].drv.Applied()
	for _, m := range c.members[1:] {
		if err := testkit.DiffStates(want, m.drv.Applied(), testkit.Compare{IgnoreSeq: true}); err != nil {
			t.Fatalf("member %d differs: %v", m.id, err)
		}
	}
	if want.NumJobs() != 40 {
		t.Fatalf("%d jobs, want 40", want.NumJobs())
	}
	var follower *member
	for _, m := range c.members {
		if m.drv.Leader() != m.id {
			follower = m
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := follower.drv.Read(ctx)
	if err != nil || st.NumJobs() != 40 {
		t.Fatalf("a read on follower %d: %v", follower.id, err)
	}
}

// A peer's stream from another cell, or for another member, is refused.
func TestPeerRefusesStrangers(t *testing.T) {
	c := newCell(t, 1)
	m := c.members[0]
	conn, err := grpcDial(m.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		msg  *cellgrpc.PeerMessages
		want string
	}{
		{&cellgrpc.PeerMessages{Cluster: "other", From: 2, To: 1}, `a message of cell "other"; this is cell "test"`},
		{&cellgrpc.PeerMessages{Cluster: "test", From: 2, To: 7}, "a message for member 7; this is member 1"},
		{&cellgrpc.PeerMessages{Cluster: "test", From: 2, To: 1, Messages: [][]byte{{0xff, 0xff}}}, "a message from member 2"},
	} {
		st, err := cellgrpc.NewPeerClient(conn).Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st.Send(tc.msg)
		_, err = st.CloseAndRecv()
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.msg, err, tc.want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func grpcDial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// eventually checks cond every `every` until it holds (true) or within
// has passed (false), waiting on a ticker and a deadline timer.
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

// TestFragmentedMessages: with fragments of 1 KiB, a member stopped while
// the others commit 200 jobs (snapshots every 1,000 entries are too far:
// the leader's log is compacted by a snapshot the test forces by adding a
// member) catches up from messages and a snapshot sent in fragments; a
// fragment out of order, one overrunning its total and a total over the
// bound are refused, naming the sender.
func TestFragmentedMessages(t *testing.T) {
	defer func(b int) { FragmentBytes = b }(FragmentBytes)
	FragmentBytes = 1 << 10
	c := newCell(t, 3)
	for i := range 50 {
		c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(i)}}, 10*time.Second)
	}
	var rev []uint64
	if !eventually(20*time.Second, 20*time.Millisecond, func() bool {
		rev = rev[:0]
		for _, m := range c.members {
			rev = append(rev, m.drv.Applied().Revision())
		}
		return rev[0] == rev[1] && rev[1] == rev[2] && rev[0] >= 50
	}) {
		t.Fatalf("the members did not converge over fragments: revisions %v", rev)
	}
	// A snapshot in fragments: adding a member makes every member snapshot
	// (its configuration must name the new one); a follower stopped and
	// wiped comes back joining, and is sent the snapshot.
	var lead *member
	for _, m := range c.members {
		if m.drv.Leads() {
			lead = m
		}
	}
	if lead == nil {
		t.Fatal("no leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var f *member
	for _, m := range c.members {
		if m != lead {
			f = m
		}
	}
	c.stop(f)
	os.RemoveAll(f.dir)
	c.startJoining(f, c.addrs)
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
		return f.drv.Voter() && f.drv.Applied().Revision() >= 50
	}) {
		t.Fatalf("the wiped member did not catch up over a fragmented snapshot: voter %v revision %d", f.drv.Voter(), f.drv.Applied().Revision())
	}
	if err := testkit.DiffStates(lead.drv.Applied(), f.drv.Applied(), testkit.Compare{IgnoreSeq: true}); err != nil {
		t.Fatalf("the member sent a fragmented snapshot differs: %v", err)
	}
	if lead.drv.fragments.Load() == 0 {
		t.Fatal("the leader sent nothing in fragments")
	}
	_ = ctx

	// Hostile fragments.
	conn, err := grpcDial(lead.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		batches []*cellgrpc.PeerMessages
		want    string
	}{
		{[]*cellgrpc.PeerMessages{{Fragment: []byte("ab"), FragmentOffset: 5, FragmentTotal: 10}}, "out of order"},
		{[]*cellgrpc.PeerMessages{{Fragment: []byte("abcdef"), FragmentOffset: 0, FragmentTotal: 4}}, "overrun"},
		{[]*cellgrpc.PeerMessages{{Fragment: []byte("ab"), FragmentOffset: 0, FragmentTotal: MaxMessageBytes + 1}}, "at most"},
	} {
		st, err := cellgrpc.NewPeerClient(conn).Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range tc.batches {
			b.Cluster, b.From, b.To = lead.drv.Cluster(), 99, lead.drv.ID()
			st.Send(b)
		}
		_, err = st.CloseAndRecv()
		if err == nil || !contains(err.Error(), tc.want) || !contains(err.Error(), "member 99") {
			t.Errorf("fragments %v: %v, want refused with %q naming the sender", tc.batches[0].GetFragmentOffset(), err, tc.want)
		}
	}
}

// TestOutcomeUnknownIsUnavailable: a commit the leader proposed and could
// not see committed (its followers gone) is transport.ErrUnavailable to
// the client as well as replica.ErrOutcomeUnknown: the transport's
// contract for a commit in flight when the store failed, which a client
// (a scheduler) takes as "try again after reading", not as a refusal.
func TestOutcomeUnknownIsUnavailable(t *testing.T) {
	c := newCell(t, 3)
	_, lead := c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(0)}}, 10*time.Second)
	for _, m := range c.members {
		if m != lead {
			c.stop(m)
		}
	}
	f := lead.drv.Forwarder()
	defer f.Close()
	var err error
	for i := 1; i <= 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
		_, err = f.Commit(ctx, &txn.Txn{Component: "test", Ops: []txn.Op{job(i)}})
		cancel()
		if errors.Is(err, replica.ErrOutcomeUnknown) {
			break
		}
	}
	if !errors.Is(err, replica.ErrOutcomeUnknown) || !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("a commit the leader could not see committed: %v; want ErrOutcomeUnknown and transport.ErrUnavailable", err)
	}
}

// TestJoinThroughAFollower: a member joining with peers that do not name
// the leader (its --peers older than the cell's members) asks a follower,
// which forwards the Join to the leader; it is taken in and caught up.
func TestJoinThroughAFollower(t *testing.T) {
	c := newCell(t, 3)
	_, lead := c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(0)}}, 10*time.Second)
	var fs []*member
	for _, m := range c.members {
		if m != lead {
			fs = append(fs, m)
		}
	}
	f, other := fs[0], fs[1]
	c.stop(f)
	os.RemoveAll(f.dir)
	for i := 1; i < 20; i++ {
		c.commit(&txn.Txn{Component: "test", Ops: []txn.Op{job(i)}}, 10*time.Second)
	}
	addrs := map[uint64]string{f.id: f.addr, other.id: other.addr} // not the leader's
	c.startJoining(f, addrs)
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
		return f.drv.Voter() && f.drv.Applied().Revision() >= 20
	}) {
		t.Fatalf("a member whose peers do not name the leader did not join: voter %v, revision %d", f.drv.Voter(), f.drv.Applied().Revision())
	}
}

// startJoining starts member m on its (empty) directory as a joining
// member that knows the peers at addrs, serving its peer service on its
// address.
func (c *cell) startJoining(m *member, addrs map[uint64]string) {
	c.t.Helper()
	drv, err := Start(Config{Member: replica.Config{ID: m.id}, Dir: m.dir, Addrs: addrs, Cluster: "test", Join: true,
		Tick: 20 * time.Millisecond, Logger: testLogger(c.t)}, Hooks{})
	if err != nil {
		c.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", m.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	m.drv, m.lis, m.srv = drv, lis, grpc.NewServer()
	cellgrpc.RegisterPeerServer(m.srv, drv.PeerServer())
	go m.srv.Serve(lis)
}

// testLogger discards, unless OMEGA_TEST_LOGS is set: then stderr.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("OMEGA_TEST_LOGS") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
