package server

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// blockingHandler is a log handler that holds the first record of msg
// until release is closed: the membership's follower stuck in a
// transaction (it logs each one it commits), as a slow disk would hold
// it.
type blockingHandler struct {
	msg     string
	once    sync.Once
	blocked chan struct{} // closed when the first record is held
	release chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler            { return h }
func (h *blockingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.blocked) })
		<-h.release
	}
	return nil
}

// eventDelegate is the event delegate the membership gave memberlist
// (read from memberlist's configuration: what memberlist itself calls).
func eventDelegate(t *testing.T, ml *memberlist.Memberlist) memberlist.EventDelegate {
	t.Helper()
	f := reflect.ValueOf(ml).Elem().FieldByName("config")
	if !f.IsValid() {
		t.Fatal("memberlist.Memberlist has no config field any more: find its event delegate another way")
	}
	cfg := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*memberlist.Config)
	return cfg.Events
}

// putMachines creates machines in one transaction.
func putMachines(t *testing.T, st *store.Store, ms ...*omegav1.Machine) {
	t.Helper()
	ops := make([]txn.Op, len(ms))
	for i, m := range ms {
		ops[i] = txn.CreateMachine(m)
	}
	res, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "test", Ops: ops,
		Conflict: omegav1.ConflictMode_CONFLICT_MODE_FINE, Commit: omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING})
	if err != nil || res.Conflicted() {
		t.Fatalf("create machines: %+v %v", res, err)
	}
}

func machineAt(uid uuid.UUID, state omegav1.MachineState, agent string) *omegav1.Machine {
	m := testkit.Machine(uid, "m-"+uid.String()[:8], testkit.Res(1000, 1<<30))
	m.Status = &omegav1.MachineStatus{State: state, AgentAddress: agent}
	return m
}

// waitMachines polls st (with a deadline) until every machine in want is
// in its state at its agent address.
func waitMachines(t *testing.T, st *store.Store, within time.Duration, want map[uuid.UUID]string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := st.Snapshot()
		var wrong []string
		for u, w := range want {
			mc, _ := s.Machine(u)
			if got := mc.State.String() + " " + mc.Agent; got != w {
				wrong = append(wrong, fmt.Sprintf("%s: %q, want %q", u, got, w))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d machines not as their agents' latest events say within %v, e.g. %s", len(wrong), within, wrong[0])
		}
		w, err := st.Watch(s.Revision())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // the next commit, or a moment
		w.Next(ctx, 0)
		cancel()
	}
}

// Memberlist calls the membership's event delegate holding its own lock:
// the delegate must not wait, however far behind the transactions are
// (thousands of agents joining at once). Each node's latest event is kept
// and acted on: joins, leaves and updates (an agent back at another
// address, or a node now another machine's).
func TestMembershipEventsNeverBlock(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	const nodes = 400 // their events: three times memberlist.ChannelEventDelegate's channel of 256
	uids := make([]uuid.UUID, nodes)
	var ms []*omegav1.Machine
	want := map[uuid.UUID]string{}
	up, down := omegav1.MachineState_MACHINE_STATE_UP, omegav1.MachineState_MACHINE_STATE_DOWN
	addr := func(i, n int) (net.IP, uint16) { return net.IPv4(127, 0, byte(n), byte(i%250+1)), uint16(7000 + i) }
	at := func(i, n int) string { ip, p := addr(i, n); return net.JoinHostPort(ip.String(), strconv.Itoa(int(p))) }
	for i := range nodes {
		uids[i] = testkit.UID('m', uint32(i), 0)
		switch i % 4 {
		case 0: // UP; joins, moves, leaves
			ms = append(ms, machineAt(uids[i], up, ""))
			want[uids[i]] = down.String() + " "
		case 1: // UP; leaves, back at another address
			ms = append(ms, machineAt(uids[i], up, at(i, 0)))
			want[uids[i]] = up.String() + " " + at(i, 1)
		case 2: // DOWN; joins, moves
			ms = append(ms, machineAt(uids[i], down, ""))
			want[uids[i]] = up.String() + " " + at(i, 1)
		case 3: // DOWN; joins, leaves, joins again, moves
			ms = append(ms, machineAt(uids[i], down, ""))
			want[uids[i]] = up.String() + " " + at(i, 2)
		}
	}
	first := testkit.UID('m', 9999, 0)
	ms = append(ms, machineAt(first, down, ""))
	putMachines(t, st, ms...)

	h := &blockingHandler{msg: "membership", blocked: make(chan struct{}), release: make(chan struct{})}
	m, err := StartMembership(st, "127.0.0.1:0", time.Hour, slog.New(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	t.Cleanup(func() { // first (cleanups run last first): the follower may be held
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	ev := eventDelegate(t, m.ml)
	node := func(i, n int) *memberlist.Node {
		ip, p := addr(i, n)
		return &memberlist.Node{Name: "agent-" + strconv.Itoa(i), Addr: ip, Port: p, Meta: uids[i][:]}
	}

	// The follower commits the first machine's join, and is held there.
	ev.NotifyJoin(&memberlist.Node{Name: "first", Addr: net.IPv4(127, 0, 0, 1), Port: 1, Meta: first[:]})
	select {
	case <-h.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the first join was not committed within 30 s")
	}
	sent := make(chan struct{})
	go func() { // as memberlist's goroutines would
		defer close(sent)
		for i := range nodes {
			switch i % 4 {
			case 0:
				ev.NotifyJoin(node(i, 0))
				ev.NotifyUpdate(node(i, 1))
				ev.NotifyLeave(node(i, 1))
			case 1:
				ev.NotifyLeave(node(i, 0))
				ev.NotifyJoin(node(i, 1))
			case 2:
				ev.NotifyJoin(node(i, 0))
				ev.NotifyUpdate(node(i, 1))
			case 3:
				ev.NotifyJoin(node(i, 0))
				ev.NotifyLeave(node(i, 0))
				ev.NotifyJoin(node(i, 1))
				ev.NotifyUpdate(node(i, 2))
			}
		}
	}()
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("the event delegate blocked memberlist: 1,200 events not taken within 30 s while a transaction is slow")
	}
	close(h.release)
	waitMachines(t, st, 60*time.Second, want)
}

// metaOf is an agent's node metadata: its machine's uid, which a test
// changes.
type metaOf struct {
	mu   sync.Mutex
	meta []byte
}

func (d *metaOf) NodeMeta(int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.meta
}
func (d *metaOf) set(u uuid.UUID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.meta = append([]byte(nil), u[:]...)
}
func (d *metaOf) NotifyMsg([]byte)                {}
func (d *metaOf) GetBroadcasts(int, int) [][]byte { return nil }
func (d *metaOf) LocalState(bool) []byte          { return nil }
func (d *metaOf) MergeRemoteState([]byte, bool)   {}

// Over real gossip: an agent that joins where its machine records another
// address (it restarted on another port) moves the machine's address to
// its own, though the machine is UP; a node whose metadata changes (an
// update, not a join) brings the machine it names now UP at its address
// (DRAINING, if an operator cordoned it).
func TestMembershipJoinAndUpdateMoveTheAgentAddress(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	a, b, c := testkit.UID('m', 1, 0), testkit.UID('m', 2, 0), testkit.UID('m', 3, 0)
	cordoned := machineAt(c, omegav1.MachineState_MACHINE_STATE_DOWN, "")
	cordoned.Meta.Annotations = map[string]string{txn.CordonAnnotation: "true"}
	putMachines(t, st, machineAt(a, omegav1.MachineState_MACHINE_STATE_UP, "127.0.0.1:1"), machineAt(b, omegav1.MachineState_MACHINE_STATE_DOWN, ""), cordoned)
	m, err := StartMembership(st, "127.0.0.1:0", time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	meta := &metaOf{}
	meta.set(a)
	cfg := memberlist.DefaultLANConfig()
	cfg.Name, cfg.BindAddr, cfg.BindPort = "agent-a", "127.0.0.1", 0
	cfg.Delegate = meta
	cfg.Logger = log.New(io.Discard, "", 0)
	agent, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Shutdown() })
	if _, err := agent.Join([]string{m.Addr()}); err != nil {
		t.Fatal(err)
	}
	here := agent.LocalNode().Address()
	waitMachines(t, st, 30*time.Second, map[uuid.UUID]string{a: "MACHINE_STATE_UP " + here, b: "MACHINE_STATE_DOWN "})

	meta.set(b)
	if err := agent.UpdateNode(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitMachines(t, st, 30*time.Second, map[uuid.UUID]string{b: "MACHINE_STATE_UP " + here})

	// A cordoned machine comes back DRAINING: the operator's cordon holds.
	meta.set(c)
	if err := agent.UpdateNode(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitMachines(t, st, 30*time.Second, map[uuid.UUID]string{c: "MACHINE_STATE_DRAINING " + here})
}

// On the in-memory network, the follower reads every member by the
// metadata codec: an agent of the current version and one of before the
// codec (its machine's 16 raw bytes) bring their machines UP at their
// addresses; a scheduler and a member of an unknown version touch no
// machine; the current agent leaving puts its machine DOWN.
func TestMembershipReadsEveryMetadataForm(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	a, b := testkit.UID('m', 1, 0), testkit.UID('m', 2, 0)
	down, up := omegav1.MachineState_MACHINE_STATE_DOWN, omegav1.MachineState_MACHINE_STATE_UP
	putMachines(t, st, machineAt(a, down, ""), machineAt(b, down, ""))
	net := membership.NewMemNetwork(membership.ServerName, "agent-a", "agent-b", "scheduler/batch/x", "future")
	t.Cleanup(net.Close)
	m, err := StartMembershipWith(st, membership.Config{Profile: "local", Transport: net.Transport(membership.ServerName), Tune: membership.Fast}, time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	start := func(name string, meta []byte) *memberlist.Memberlist {
		cfg := memberlist.DefaultLocalConfig()
		cfg.Name, cfg.Transport, cfg.Delegate = name, net.Transport(name), &metaOf{meta: meta}
		cfg.Logger = log.New(io.Discard, "", 0)
		membership.Fast(cfg)
		ml, err := memberlist.Create(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ml.Shutdown() })
		if _, err := ml.Join([]string{m.Addr()}); err != nil {
			t.Fatal(err)
		}
		return ml
	}
	enc := func(meta membership.Meta) []byte {
		e, err := meta.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	agentA := start("agent-a", enc(membership.Agent(a)))
	agentB := start("agent-b", b[:])
	start("scheduler/batch/x", enc(membership.Scheduler("batch", "x")))
	start("future", append([]byte{0xCE, 0xA9, 9, 1}, a[:]...)) // version 9 names machine a: not read
	waitMachines(t, st, 30*time.Second, map[uuid.UUID]string{
		a: up.String() + " " + agentA.LocalNode().Address(),
		b: up.String() + " " + agentB.LocalNode().Address(),
	})
	if err := agentA.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	agentA.Shutdown()
	waitMachines(t, st, 30*time.Second, map[uuid.UUID]string{a: down.String() + " " + agentA.LocalNode().Address()})
	if n := st.Snapshot().NumMachines(); n != 2 {
		t.Fatalf("%d machines: a member made one", n)
	}
}

// In a replicated cell the membership's duties are the leader's: a
// follower's membership sees an agent join and commits nothing; taking the
// lead, it puts UP the machines whose agents are alive members at once,
// and puts DOWN those UP whose agents never joined only a grace period
// after it took the lead; losing the lead, it commits nothing again (an
// agent leaving leaves its machine UP for the new leader to see to).
func TestMembershipDutiesOnTheLeaderOnly(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	a, b := testkit.UID('m', 1, 0), testkit.UID('m', 2, 0)
	down, up := omegav1.MachineState_MACHINE_STATE_DOWN, omegav1.MachineState_MACHINE_STATE_UP
	putMachines(t, st, machineAt(a, down, ""), machineAt(b, up, "127.0.0.1:9"))
	name := ServerNodeName(2)
	net := membership.NewMemNetwork(name, "agent-a")
	t.Cleanup(net.Close)
	var leads atomic.Bool
	m, err := StartMembershipOpts(st, membership.Config{Profile: "local", Transport: net.Transport(name), Tune: membership.Fast},
		MembershipOptions{Grace: 300 * time.Millisecond, Name: name, Leads: leads.Load, LeadCheck: 10 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if got := m.ml.LocalNode().Name; got != "omega-server-2" {
		t.Fatalf("the member's node name is %q, want omega-server-2", got)
	}
	// drained: the server sees n members and its follower took every event.
	drained := func(n int) bool {
		m.events.mu.Lock()
		pending := len(m.events.order)
		m.events.mu.Unlock()
		return m.ml.NumMembers() == n && pending == 0
	}
	cfg := memberlist.DefaultLocalConfig()
	cfg.Name, cfg.Transport = "agent-a", net.Transport("agent-a")
	meta, _ := membership.Agent(a).Encode()
	cfg.Delegate, cfg.Logger = &metaOf{meta: meta}, log.New(io.Discard, "", 0)
	membership.Fast(cfg)
	agent, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Shutdown() })
	rev := st.Revision()
	if _, err := agent.Join([]string{m.Addr()}); err != nil {
		t.Fatal(err)
	}
	if !eventuallyTrue(30*time.Second, func() bool { return drained(2) }) {
		t.Fatal("the server's membership did not see the agent")
	}
	if st.Revision() != rev {
		t.Fatalf("a follower's membership committed (revision %d, was %d)", st.Revision(), rev)
	}

	leads.Store(true)
	here := agent.LocalNode().Address()
	waitMachines(t, st, 30*time.Second, map[uuid.UUID]string{a: up.String() + " " + here, b: down.String() + " 127.0.0.1:9"})
	s := st.Snapshot()
	ma, _ := s.Machine(a)
	mb, _ := s.Machine(b)
	if mb.Version <= ma.Version {
		t.Fatalf("machine b went DOWN at revision %d, before a came UP at %d: the grace did not count from taking the lead", mb.Version, ma.Version)
	}

	leads.Store(false)
	if !eventuallyTrue(30*time.Second, func() bool { return !m.leadingNow() }) {
		t.Fatal("the membership did not notice it lost the lead")
	}
	rev = st.Revision()
	agent.Leave(5 * time.Second)
	agent.Shutdown()
	if !eventuallyTrue(30*time.Second, func() bool { return drained(1) }) {
		t.Fatal("the server's membership did not see the agent go")
	}
	if st.Revision() != rev {
		t.Fatalf("a membership that lost the lead committed (revision %d, was %d)", st.Revision(), rev)
	}
}

// eventuallyTrue polls cond every 10 ms until it holds or within passed.
func eventuallyTrue(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
	return true
}
