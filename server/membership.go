package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// MembershipComponent is the component name of the server's membership
// transactions.
const MembershipComponent = "server/membership"

// Membership is the server's side of the cell's gossip membership
// (package membership; memberlist, LAN defaults): agents join it with
// their machine's uid in their node's metadata (membership.Agent). When the membership
// declares an agent dead (or it leaves), the server commits its machine's
// death — DOWN, its tasks LOST — as agents.MachineDownFromView writes it;
// when the agent is back (a join, or an update of its node), its machine
// goes UP, and its agent address follows the node's. After a server
// restart, a machine whose agent does not join within the grace period
// goes DOWN.
//
// Live code: memberlist runs its own goroutines, and one goroutine here
// turns its events into transactions.
type Membership struct {
	ml     *memberlist.Memberlist
	st     *store.Store
	log    *slog.Logger
	events *nodeEvents
	opts   MembershipOptions
	lead   atomic.Bool // the follower holds the duties
	stop   chan struct{}
	done   sync.WaitGroup
}

// MembershipOptions are the server's side of the membership.
type MembershipOptions struct {
	// Grace is how long machines UP may go without their agent joining,
	// counted from when this server took up the duty (its start, or its
	// taking the lead of a replicated cell).
	Grace time.Duration
	// Name is the server's node name. Default membership.ServerName; the
	// members of a replicated cell have names of their own
	// (ServerNodeName).
	Name string
	// Leads, if set, says whether this server holds the membership's
	// duties (a replicated cell's leader): the deaths, the returns and the
	// sweep are committed by the leader only, a follower following the
	// membership without a word to the store. On taking the lead, a server
	// puts UP the machines DOWN whose agents are alive members, and counts
	// Grace from then before it puts DOWN those UP whose agents are not.
	// Nil: always (a single server).
	Leads func() bool
	// LeadCheck is how often Leads is asked. Default 200 ms.
	LeadCheck time.Duration
}

// ServerNodeName is a server's node name in the gossip membership: the
// single server's membership.ServerName, a replicated member's that
// followed by its member number, so that three servers are three members
// (agents tell a server by its metadata, membership.RoleServer).
func ServerNodeName(member uint64) string {
	if member == 0 {
		return membership.ServerName
	}
	return fmt.Sprintf("%s-%d", membership.ServerName, member)
}

// nodeEvents is the membership's event delegate. memberlist calls it from
// its own goroutines, holding its lock on the members, so it must never
// wait: it keeps each node's latest event (a node's later event says all
// the transactions need of its earlier ones), and wakes the follower,
// which takes them all at once. Thousands of agents joining together
// (after a server restart) cost a map entry each, however slowly their
// machines' transactions commit.
type nodeEvents struct {
	mu     sync.Mutex
	latest map[string]memberlist.NodeEvent // by node name
	order  []string                        // the names in latest, first recorded first
	wake   chan struct{}                   // of size 1: signalled when latest was empty
}

func newNodeEvents() *nodeEvents {
	return &nodeEvents{latest: map[string]memberlist.NodeEvent{}, wake: make(chan struct{}, 1)}
}

var _ memberlist.EventDelegate = (*nodeEvents)(nil)

func (e *nodeEvents) NotifyJoin(n *memberlist.Node)   { e.record(memberlist.NodeJoin, n) }
func (e *nodeEvents) NotifyLeave(n *memberlist.Node)  { e.record(memberlist.NodeLeave, n) }
func (e *nodeEvents) NotifyUpdate(n *memberlist.Node) { e.record(memberlist.NodeUpdate, n) }

func (e *nodeEvents) record(kind memberlist.NodeEventType, n *memberlist.Node) {
	node := *n // memberlist changes its own afterwards
	node.Addr, node.Meta = slices.Clone(n.Addr), slices.Clone(n.Meta)
	e.mu.Lock()
	if _, ok := e.latest[node.Name]; !ok {
		e.order = append(e.order, node.Name)
	}
	e.latest[node.Name] = memberlist.NodeEvent{Event: kind, Node: &node}
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default: // a wakeup is pending: the follower takes this one with it
	}
}

// take returns the events recorded since the last take, one per node
// (its latest), in the order the nodes were first recorded.
func (e *nodeEvents) take() []memberlist.NodeEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]memberlist.NodeEvent, len(e.order))
	for i, name := range e.order {
		out[i] = e.latest[name]
	}
	clear(e.latest)
	e.order = e.order[:0]
	return out
}

// StartMembership binds the gossip membership on bind (host:port; port 0
// picks one), with memberlist's LAN defaults and no key, and follows its
// events. grace is how long machines UP at the start may go without their
// agent joining.
func StartMembership(st *store.Store, bind string, grace time.Duration, logger *slog.Logger) (*Membership, error) {
	return StartMembershipWith(st, membership.Config{Bind: bind}, grace, logger)
}

// StartMembershipWith is StartMembership with the member's configuration
// (its bind address, profile, key, transport): its Name, Meta, Events and
// Join are the server's own (membership.ServerName, membership.Server(),
// the follower, none) whatever cfg says.
func StartMembershipWith(st *store.Store, cfg membership.Config, grace time.Duration, logger *slog.Logger) (*Membership, error) {
	return StartMembershipOpts(st, cfg, MembershipOptions{Grace: grace}, logger)
}

// StartMembershipOpts is StartMembershipWith with the server's options.
func StartMembershipOpts(st *store.Store, cfg membership.Config, o MembershipOptions, logger *slog.Logger) (*Membership, error) {
	if o.Name == "" {
		o.Name = membership.ServerName
	}
	if o.LeadCheck <= 0 {
		o.LeadCheck = 200 * time.Millisecond
	}
	m := &Membership{st: st, log: logger, events: newNodeEvents(), opts: o, stop: make(chan struct{})}
	cfg.Name, cfg.Meta, cfg.Events, cfg.Join = o.Name, membership.Server(), m.events, nil
	var err error
	if m.ml, err = membership.Start(cfg); err != nil {
		return nil, err
	}
	m.done.Add(1)
	go m.follow()
	// After a restart, the agents' members still hold the server's name and
	// address as alive (a quick restart is not a death to them), so they
	// would not join again, and the new server would learn of them only by
	// a random push-pull, tens of seconds later — after its grace period
	// put their machines DOWN. It joins them itself, at the gossip
	// addresses their machines recorded.
	var addrs []string
	st.Snapshot().RangeMachines(func(mc *txn.Machine) bool {
		if mc.Agent != "" && mc.State != omegav1.MachineState_MACHINE_STATE_DOWN {
			addrs = append(addrs, mc.Agent)
		}
		return true
	})
	if len(addrs) > 0 {
		// Not waited for by Close: a dead agent's address can hold a join
		// for memberlist's TCP timeout, and nothing here touches the store.
		go func() { // live code: TCP to each, bounded by memberlist's timeouts
			n, err := m.ml.Join(addrs)
			logger.Info("membership: joined the agents of the machines UP", "reached", n, "of", len(addrs), "err", err)
		}()
	}
	return m, nil
}

// Addr is the gossip address agents join.
func (m *Membership) Addr() string { return membership.Addr(m.ml) }

// Close leaves the membership and stops following it.
func (m *Membership) Close() error {
	close(m.stop)
	m.done.Wait()
	return m.ml.Shutdown()
}

// machineOf is the machine of an agent's node (its metadata in the
// current form or the legacy one); false for any other member (the
// server, a scheduler, metadata this version does not read).
func machineOf(n *memberlist.Node) (uuid.UUID, bool) {
	m, err := membership.Decode(n.Meta)
	return m.Machine, err == nil && m.Role == membership.RoleAgent
}

// follow commits what the membership's events mean while this server
// holds the duty (Leads), and sweeps Grace after it took it up. Events
// that come while another server holds it are dropped: that one commits
// them, and a server taking the duty up reconciles from the membership as
// it then is.
func (m *Membership) follow() {
	defer m.done.Done()
	leads := m.opts.Leads
	if leads == nil {
		leads = func() bool { return true }
	}
	check := time.NewTicker(m.opts.LeadCheck)
	defer check.Stop()
	var graceOver <-chan time.Time
	leading := false
	takeUp := func() {
		leading = leads()
		m.lead.Store(leading)
		if leading {
			graceOver = time.After(m.opts.Grace)
			m.reconcile()
		}
	}
	takeUp()
	for {
		select {
		case <-m.stop:
			return
		case <-check.C:
			switch now := leads(); {
			case now && !leading:
				m.log.Info("membership: this server holds the membership's duties now (it leads); the grace period starts", "grace", m.opts.Grace)
				takeUp()
			case !now && leading:
				leading, graceOver = false, nil
				m.lead.Store(false)
			}
		case <-graceOver:
			graceOver = nil
			if leading && leads() {
				m.sweep()
			}
		case <-m.events.wake:
			evs := m.events.take()
			if !leading {
				continue
			}
			for _, ev := range evs {
				select {
				case <-m.stop:
					return
				default:
				}
				m.handle(ev)
			}
		}
	}
}

// leadingNow says whether the follower holds the duties.
func (m *Membership) leadingNow() bool { return m.lead.Load() }

// reconcile puts UP (at their node's address) the machines DOWN whose
// agents are alive members: a server taking up the duty did not commit
// their returns, which came while another held it (or before it started).
func (m *Membership) reconcile() {
	for _, n := range m.ml.Members() {
		if u, ok := machineOf(n); ok && n.State == memberlist.StateAlive {
			m.up(u, n.Name, n.Address())
		}
	}
}

// handle commits what a node's latest event means for its machine.
func (m *Membership) handle(ev memberlist.NodeEvent) {
	u, ok := machineOf(ev.Node)
	if !ok {
		return // the server itself, or a member that is no agent
	}
	switch ev.Event {
	case memberlist.NodeJoin, memberlist.NodeUpdate:
		// An update comes only from a node alive (memberlist notifies one
		// when an alive node's metadata changed, and a join when a dead or
		// left one is alive again, at its new address if it moved): the
		// machine is UP, at the node's address.
		m.up(u, ev.Node.Name, ev.Node.Address())
	case memberlist.NodeLeave:
		// (memberlist's event does not say whether the node left or was
		// declared dead: its Node.State is not updated.)
		m.down(u, fmt.Sprintf("agent %s left the membership or was declared dead", ev.Node.Name))
	}
}

// commit retries a transaction built from the newest state until nothing
// conflicts (a few times: the machine moved meanwhile).
func (m *Membership) commit(what string, build func(*txn.State) []txn.Op) {
	for range 5 {
		s := m.st.Snapshot()
		ops := build(s)
		if len(ops) == 0 {
			return
		}
		res, err := m.st.Commit(context.Background(), &txn.Txn{ViewRevision: s.Revision(), Component: MembershipComponent,
			UnixNanos: time.Now().UnixNano(), Conflict: omegav1.ConflictMode_CONFLICT_MODE_FINE, Commit: omegav1.CommitMode_COMMIT_MODE_INCREMENTAL, Ops: ops})
		if err != nil {
			m.log.Error("membership transaction", "what", what, "err", err)
			return
		}
		if !res.Conflicted() {
			m.log.Info("membership", "what", what, "revision", res.Revision, "operations", len(ops))
			return
		}
	}
	m.log.Warn("membership transaction kept conflicting", "what", what)
}

func (m *Membership) down(u uuid.UUID, why string) {
	m.commit(why, func(s *txn.State) []txn.Op {
		mc, ok := s.Machine(u)
		if !ok || mc.State == omegav1.MachineState_MACHINE_STATE_DOWN {
			return nil
		}
		ops, _ := agents.MachineDownFromView(s, u, why)
		return ops
	})
}

// up puts a machine DOWN back UP (DRAINING if an operator cordoned it), and makes its agent address the
// node's (an agent restarted on another port, say); a machine UP or
// DRAINING keeps its state.
func (m *Membership) up(u uuid.UUID, name, addr string) {
	m.commit("agent "+name+" joined at "+addr, func(s *txn.State) []txn.Op {
		mc, ok := s.Machine(u)
		if !ok || (mc.State != omegav1.MachineState_MACHINE_STATE_DOWN && mc.Agent == addr) {
			return nil
		}
		p := mc.Proto()
		if mc.State == omegav1.MachineState_MACHINE_STATE_DOWN {
			p.Status.State = mc.UpState() // DRAINING if cordoned
		}
		p.Status.AgentAddress = addr
		return []txn.Op{txn.PutMachine(p, mc.Version)}
	})
}

// sweep puts DOWN the machines UP whose agents are not members (after a
// server restart, the grace period over).
func (m *Membership) sweep() {
	members := map[uuid.UUID]bool{}
	for _, n := range m.ml.Members() {
		if u, ok := machineOf(n); ok && n.State == memberlist.StateAlive {
			members[u] = true
		}
	}
	var gone []uuid.UUID
	m.st.Snapshot().RangeMachines(func(mc *txn.Machine) bool {
		if mc.State == omegav1.MachineState_MACHINE_STATE_UP && !members[mc.UID] {
			gone = append(gone, mc.UID)
		}
		return true
	})
	for _, u := range gone {
		m.down(u, "its agent did not join the membership within the grace period after the server started")
	}
}
