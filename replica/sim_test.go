package replica

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// The replicated cell in virtual time, in the manner of FoundationDB's
// simulation and etcd's robustness tests: three or five members in one
// process over a simulated network that delays, reorders, drops and
// duplicates messages and partitions the members, with members crashing
// (losing all but their storage) and starting again; clients write and
// read registers (a job's label each) through whichever member they
// believe leads. The history is checked with porcupine (linearizable),
// every acknowledged write must be in every member's log at its revision,
// and once healed every member holds the same cell. A run is a function of
// its seed alone; a failing seed is printed, and OMEGA_REPLICA_SEED runs
// just that one.

type envelope struct {
	at  int64
	seq int64
	msg *raftpb.Message
}

type simMember struct {
	slot    uint64 // its member number: 1, 2, 3…
	id      uint64 // its raft id: slot, or JoinID's after its data was lost
	node    *Node  // nil while crashed
	storage *Storage
	log     map[uint64]string // revision → what its write set wrote ("key=value"), as applied
	// The simulation's failure detector (with Config.DriverElections): the
	// step the member last heard from the leader it knows, and how long it
	// waits before it stands for election (drawn from the seed).
	heard, patience int64
	// With disks: the member's raft directory, reopened at every start (a
	// crash keeps only what Disk synced).
	dir  string
	disk *Disk
	// wiped: the member's data is lost at its next start, which joins the
	// cell under a new raft id (JoinID) and waits for the leader to
	// replace its old id (Node.Replace) and send it a snapshot.
	wiped bool
	// dropSave: the member crashes in its next Disk write, which is lost.
	dropSave bool
	// absent: a slot for a member the run adds later (no server yet);
	// removed: a member the run removed (stopped for good).
	absent, removed bool
	// inc is its directory's incarnation (Config.Incarnation), drawn anew
	// when its data is lost; refused: a member refused its messages as
	// another incarnation's (it stopped for good).
	inc     uint64
	refused bool
	// oldID: a wiped member restarts under its old raft id, without
	// joining (TestWipedMemberWithoutJoin's mistake).
	oldID bool
}

// crashingDisk is a member's Disk that loses the write its member crashes
// in (simMember.dropSave).
type crashingDisk struct {
	*Disk
	m *simMember
}

func (d crashingDisk) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if d.m.dropSave {
		return nil
	}
	return d.Disk.Save(hs, ents, snap)
}

type simCell struct {
	t        *testing.T
	rng      *rand.Rand
	now      int64
	seq      int64
	members  []*simMember
	inflight []envelope
	cut      map[[2]uint64]bool // a partition: messages between these two are lost
	faults   bool
	cfg      Config
	jobs     []uuid.UUID
	disks    bool
	// churn: the run adds a member (the spare slot, absent until then) and
	// removes another as it goes (AddMember, Replace, promote, RemoveMember).
	churn bool
	// what the run did, to know the faults were met
	crashes, partitions, snapshots, wipes, replaced, earlyCrashes int
	added, promoted, removedAt                                    int64
	victim                                                        *simMember
}

// active are the members that are the cell's (not a slot still absent,
// not one removed).
func (c *simCell) active() []*simMember {
	var out []*simMember
	for _, m := range c.members {
		if !m.absent && !m.removed {
			out = append(out, m)
		}
	}
	return out
}

// target is a member a client turns to at random.
func (c *simCell) target() uint64 {
	a := c.active()
	return a[c.rng.IntN(len(a))].slot
}

// member is the member of a raft id's number (its slot), whatever
// incarnation runs there.
func (c *simCell) member(id uint64) *simMember { return c.members[MemberOf(id)-1] }

func newSimCell(t *testing.T, seed uint64, n int, driverElections, disks, churn bool) *simCell {
	c := &simCell{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), cut: map[[2]uint64]bool{}, disks: disks, churn: churn}
	var peers []uint64
	addrs := map[uint64]string{}
	for i := range n {
		peers = append(peers, uint64(i+1))
		addrs[uint64(i+1)] = fmt.Sprintf("sim-%d:1", i+1)
	}
	c.cfg = Config{Peers: peers, Addrs: addrs, ElectionTick: 10, HeartbeatTick: 1, SnapshotEvery: 64, DriverElections: driverElections}
	if churn {
		spare := &simMember{slot: uint64(n + 1), absent: true, log: map[uint64]string{}}
		if disks {
			spare.dir = t.TempDir()
		}
		defer func() { c.members = append(c.members, spare) }()
	}
	for _, id := range peers {
		st, err := NewStorage(peers)
		if err != nil {
			t.Fatal(err)
		}
		m := &simMember{slot: id, id: id, storage: st, log: map[uint64]string{}}
		if disks {
			m.dir = t.TempDir()
		}
		c.members = append(c.members, m)
		c.start(m)
	}
	return c
}

func (c *simCell) start(m *simMember) {
	cfg := c.cfg
	if m.wiped {
		// Its data lost: an empty member under a new raft id.
		m.wiped, m.id = false, JoinID(m.slot, c.rng.Uint32())
		m.log, m.storage = map[uint64]string{}, raft.NewMemoryStorage()
		m.inc++
		if m.oldID { // the mistake: a new cell's member under the old id
			m.id = m.slot
			st, err := NewStorage(c.cfg.Peers)
			if err != nil {
				c.t.Fatal(err)
			}
			m.storage = st
		}
		if c.disks {
			if m.disk != nil {
				m.disk.Close()
				m.disk = nil
			}
			os.RemoveAll(m.dir)
		}
	}
	cfg.ID = m.id
	if m.inc == 0 {
		m.inc = m.slot << 32
	}
	cfg.Incarnation = m.inc
	if c.disks {
		if m.disk != nil {
			m.disk.Close()
			// The crash may have cut a write short: garbage after the last
			// synced record, which opening must cut off.
			if c.rng.IntN(2) == 0 {
				if f, err := os.OpenFile(m.disk.path("log", m.disk.index), os.O_WRONLY|os.O_APPEND, 0); err == nil {
					junk := make([]byte, 1+c.rng.IntN(40))
					for i := range junk {
						junk[i] = byte(c.rng.IntN(256))
					}
					f.Write(junk)
					f.Close()
				}
			}
		}
		peers := c.cfg.Peers
		if m.id != m.slot {
			peers = nil // a joining member
		}
		d, err := OpenDisk(m.dir, m.id, peers)
		if err != nil {
			c.t.Fatalf("open member %d's disk: %v", m.id, err)
		}
		m.disk, m.storage, cfg.Disk = d, d.Storage(), crashingDisk{d, m}
		c.t.Cleanup(func() { d.Close() })
	}
	cfg.OnApply = func(ws *txn.WriteSet) { m.log[ws.Revision] = describeWrite(ws) }
	node, err := New(cfg, m.storage)
	if err != nil {
		c.t.Fatalf("start member %d: %v", m.id, err)
	}
	m.node = node
	m.heard, m.patience = c.now, 10+int64(c.rng.IntN(10))
}

// describeWrite is what a write set wrote, for the durability check: each
// job's register value.
func describeWrite(ws *txn.WriteSet) string {
	s := ""
	for _, ch := range ws.Changes {
		if ch.Job != nil {
			s += fmt.Sprintf("%s=%s;", ch.Job.Name(), ch.Job.Meta.GetLabels()["v"])
		}
	}
	return s
}

// process runs a member's Ready handling and puts its messages on the
// network: each delayed up to 4 steps (so they reorder), and with faults
// on, some lost, some duplicated, none across a partition.
func (c *simCell) process(m *simMember) {
	if m.node == nil {
		return
	}
	// A leader's messages leave before its disk write (PersistSending);
	// with disks, the member sometimes crashes right after they left, its
	// write never made (the hazard the early send must survive).
	msgs, err := m.node.PersistSending(func(early []*raftpb.Message) {
		c.put(m, early)
		if c.disks && c.faults && c.rng.IntN(50) == 0 && c.down() < (len(c.members)-1)/2 {
			m.dropSave = true
		}
	})
	if m.dropSave {
		m.dropSave = false
		m.node = nil // crashed before its write: the disk has what it had
		c.crashes++
		c.earlyCrashes++
		return
	}
	if err == nil {
		c.put(m, msgs)
		err = m.node.Apply()
	}
	if err != nil {
		c.t.Fatalf("member %d at step %d: %v", m.id, c.now, err)
	}
}

// down is how many members are crashed or joining.
func (c *simCell) down() int {
	down := 0
	for _, m := range c.active() {
		if m.node == nil || !m.node.Voter() {
			down++
		}
	}
	// In a joint configuration (a replacement under way) the outgoing
	// voters need their own quorum: an id replaced, or of a member whose
	// data was lost, is down for good there.
	if l := c.leader(); l != nil {
		outgoing, dead := l.node.Status().Config.Voters[1], 0
		for id := range outgoing {
			if m := c.member(id); m.node == nil || m.id != id {
				dead++
			}
		}
		if len(outgoing) > 0 {
			down = max(down, dead+(len(c.active())-len(outgoing)))
		}
	}
	return down
}

// put puts a member's messages on the network.
func (c *simCell) put(m *simMember, msgs []*raftpb.Message) {
	for _, msg := range msgs {
		if c.faults && c.rng.IntN(100) < 3 {
			if msg.GetType() == raftpb.MsgSnap {
				m.node.ReportSnapshot(msg.GetTo(), false)
			}
			continue
		}
		copies := 1
		if c.faults && c.rng.IntN(100) < 2 {
			copies = 2
		}
		for range copies {
			if msg.GetType() == raftpb.MsgSnap {
				c.snapshots++
			}
			c.seq++
			c.inflight = append(c.inflight, envelope{at: c.now + int64(c.rng.IntN(5)), seq: c.seq, msg: proto.Clone(msg).(*raftpb.Message)})
		}
	}
}

// deliver hands every message due to its member, in an order of the seed's.
func (c *simCell) deliver() {
	var due, later []envelope
	for _, e := range c.inflight {
		if e.at <= c.now {
			due = append(due, e)
		} else {
			later = append(later, e)
		}
	}
	c.inflight = later
	c.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, e := range due {
		from, to := e.msg.GetFrom(), e.msg.GetTo()
		if int(MemberOf(to)) > len(c.members) {
			continue // a member added whose server the test never starts
		}
		m, sender := c.member(to), c.member(from)
		if sender.id != from {
			sender = &simMember{} // an incarnation gone: nobody to tell
		}
		if m.node != nil && sender.node != nil && m.node.Heard(from, sender.inc) != nil {
			// Another incarnation than the cell recorded: refused, which
			// tells it (the live transport's answer): it stops for good.
			sender.node, sender.refused = nil, true
			continue
		}
		if m.node != nil && sender.node != nil && m.node.MemberRemoved(sender.slot) {
			// A removed member's messages are refused, which tells it
			// (the live transport's answer): it stops for good.
			sender.node, sender.removed = nil, true
			continue
		}
		snap := e.msg.GetType() == raftpb.MsgSnap
		if c.cut[[2]uint64{min(m.slot, sender.slot), max(m.slot, sender.slot)}] || m.node == nil || m.id != to {
			// Cut off, crashed, or for an incarnation gone (its successor's
			// transport refuses what is addressed to the old id).
			if snap && sender.node != nil {
				sender.node.ReportSnapshot(to, false)
			}
			continue
		}
		if lead, _ := m.node.Leader(); lead == from {
			m.heard = c.now
		}
		if err := m.node.Step(e.msg); errors.Is(err, ErrLostLog) {
			c.t.Fatalf("step %d: %v", c.now, err)
		} // else a stale message from an old term, refused: raft's business
		c.process(m)
		if snap && sender.node != nil {
			sender.node.ReportSnapshot(to, true)
			c.process(sender)
		}
	}
}

func (c *simCell) step() {
	c.now++
	for _, m := range c.members {
		if m.node == nil {
			continue
		}
		if m.node.Removed() {
			m.node, m.removed = nil, true // it applied its own removal: it stops
			continue
		}
		m.node.Tick()
		if c.cfg.DriverElections {
			if lead, _ := m.node.Leader(); lead == m.id {
				m.heard = c.now
			} else if c.now-m.heard > m.patience {
				_ = m.node.Campaign()
				m.heard, m.patience = c.now, 10+int64(c.rng.IntN(10))
			}
		}
		c.process(m)
	}
	// A joining member asks the leader to take it in, as a live one does
	// over the peer service, every few steps until it is a voter.
	if c.now%5 == 0 {
		for _, m := range c.members {
			if m.node == nil || m.id == m.slot || m.node.Voter() {
				continue
			}
			if l := c.leader(); l != nil && l != m {
				if done, err := l.node.Replace(m.slot, m.id); err == nil && !done {
					c.replaced++
				}
				c.process(l)
			}
		}
	}
	c.deliver()
}

// injectFaults partitions, heals, crashes and restarts, at the seed's
// whim; at most a minority is down at once.
func (c *simCell) injectFaults() {
	n := len(c.active())
	switch r := c.rng.IntN(1000); {
	case r < 8: // a partition: one member apart from the rest
		c.partitions++
		cut := c.target()
		for _, m := range c.members {
			if m.slot != cut {
				c.cut[[2]uint64{min(cut, m.slot), max(cut, m.slot)}] = true
			}
		}
	case r < 20:
		clear(c.cut)
	case r < 26:
		if m := c.member(c.target()); m.node != nil && c.down() < (n-1)/2 {
			m.node = nil // crashed: what it had not persisted is gone; its storage stays
			c.crashes++
			if c.rng.IntN(4) == 0 {
				m.wiped = true // and its disk with it
				c.wipes++
			}
		}
	case r < 40:
		for _, m := range c.active() {
			if m.node == nil && c.rng.IntN(2) == 0 {
				c.start(m)
			}
		}
	}
}

// A client's operation on a register.
type kvInput struct {
	write bool
	key   int
	value string
}

type kvOutput struct {
	value   string
	unknown bool
}

type client struct {
	id       int
	target   uint64
	op       *kvInput
	call     int64
	deadline int64
	prop     *Proposal
	read     *Read
	node     *Node // the member the op went to (a crash replaces it)
}

// TestReplicatedCellLinearizable: see the top of this file. Elections
// start on the simulation's seeded failure detector (DriverElections), so
// a seed is the whole run.
func TestReplicatedCellLinearizable(t *testing.T) {
	simTest(t, true, false, 8)
}

// TestReplicatedCellOnDisk is the same with every member's raft state in a
// Disk: a crash keeps only what was synced (and sometimes leaves garbage
// after it, a write cut short), and a start reopens the directory; a
// leader sometimes crashes between its early send (PersistSending) and its
// disk write, which is lost. Six seeds: a mutation that lets followers send
// early too (acknowledging what they have not written) fails seeds 1, 3
// and 4 (checked at issue 32's end).
func TestReplicatedCellOnDisk(t *testing.T) {
	simTest(t, true, true, 6)
}

// TestReplicatedCellRaftTimers is the same with raft's own election
// timers, CheckQuorum and PreVote, as a live server runs: raft draws its
// randomized timeouts from crypto/rand, so a seed fixes everything but
// when elections start, and a failure here may not come back on its seed
// (run it again with -count, or find it in the test above).
func TestReplicatedCellRaftTimers(t *testing.T) {
	simTest(t, false, false, 4)
}

func simTest(t *testing.T, driverElections, disks bool, seeds int) {
	simTestChurn(t, driverElections, disks, seeds, false)
}

func simTestChurn(t *testing.T, driverElections, disks bool, seeds int, churn bool) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			if testing.Short() {
				seeds = 2
			}
			for _, seed := range simSeeds(t, seeds) {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					defer func() {
						if t.Failed() {
							t.Logf("seed %d (rerun with OMEGA_REPLICA_SEED=%d go test ./replica -run '%s')", seed, seed, t.Name())
						}
					}()
					runSim(t, seed, n, 3000, driverElections, disks, churn)
				})
			}
		})
	}
}

// simSeeds are 1..n, or the one OMEGA_REPLICA_SEED names.
func simSeeds(t *testing.T, n int) []uint64 {
	if v := os.Getenv("OMEGA_REPLICA_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("OMEGA_REPLICA_SEED=%q: %v", v, err)
		}
		return []uint64{seed}
	}
	var out []uint64
	for i := range n {
		out = append(out, uint64(i+1))
	}
	return out
}

func runSim(t *testing.T, seed uint64, n, steps int, driverElections, disks, churn bool) {
	c := newSimCell(t, seed, n, driverElections, disks, churn)
	const keys = 4
	// Elect a leader and make the registers (jobs), without faults; a
	// leader may still change meanwhile (the failure detector's patience is
	// short), and its commit's outcome be unknown: until a leader has them.
	var ops []txn.Op
	for k := range keys {
		u := uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(k)))
		c.jobs = append(c.jobs, u)
		ops = append(ops, txn.CreateJob(testkit.Job(u, "k"+strconv.Itoa(k), "batch")))
	}
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("the registers were not made in 1,000 steps")
		}
		c.step()
		leader := c.leader()
		if leader == nil {
			continue
		}
		if _, ok := leader.node.Applied().Job(c.jobs[keys-1]); ok {
			break
		}
		if p, _, err := leader.node.Commit(&txn.Txn{Component: "setup", Ops: ops}); err == nil && p != nil {
			for j := 0; !p.Done && j < 200; j++ {
				c.step()
			}
		}
	}

	var history []porcupine.Operation
	var clock int64
	tick := func() int64 { clock++; return clock }
	clients := make([]*client, 3)
	for i := range clients {
		clients[i] = &client{id: i, target: uint64(i%n + 1)}
	}
	type acked struct {
		rev  uint64
		want string
	}
	var acks []acked
	values := 0
	c.faults = true
	for s := 0; s < steps; s++ {
		if s == steps-steps/5 { // the last fifth: heal, restart, no more faults
			c.faults = false
			clear(c.cut)
			for _, m := range c.active() {
				if m.node == nil {
					c.start(m)
				}
			}
		}
		if c.faults {
			c.injectFaults()
		}
		if c.churn {
			c.changeMembers(s, steps)
		}
		for _, cl := range clients {
			switch {
			case cl.op == nil:
				if c.rng.IntN(3) != 0 {
					continue
				}
				m := c.member(cl.target)
				if m.node == nil {
					cl.target = c.target()
					continue
				}
				in := &kvInput{key: c.rng.IntN(keys)}
				if c.rng.IntN(2) == 0 {
					values++
					in.write, in.value = true, strconv.Itoa(values)
				}
				if in.write {
					j := testkit.Job(c.jobs[in.key], "k"+strconv.Itoa(in.key), "batch")
					j.Meta.Labels = map[string]string{"v": in.value}
					p, _, err := m.node.Commit(&txn.Txn{Component: fmt.Sprintf("client-%d", cl.id), Ops: []txn.Op{txn.PutJob(j, 0)}})
					var nl *NotLeaderError
					switch {
					case errors.As(err, &nl):
						if nl.Leader != 0 {
							cl.target = MemberOf(nl.Leader)
						} else {
							cl.target = c.target()
						}
						continue
					case errors.Is(err, ErrNotReady):
						continue
					case errors.Is(err, ErrOutcomeUnknown):
						history = append(history, porcupine.Operation{ClientId: cl.id, Input: *in, Call: tick(), Output: kvOutput{unknown: true}, Return: math.MaxInt64})
						continue
					case err != nil:
						t.Fatalf("commit: %v", err)
					case p == nil:
						t.Fatal("an unconditional put committed nothing")
					}
					cl.prop = p
				} else {
					cl.read = m.node.ReadIndex()
				}
				cl.op, cl.call, cl.deadline, cl.node = in, tick(), int64(s+60), m.node
				c.process(m)
			default:
				m := c.member(cl.target)
				gone := m.node != cl.node // crashed since (and maybe started again)
				switch {
				case cl.prop != nil && cl.prop.Done && !gone:
					out := kvOutput{unknown: cl.prop.Err != nil}
					ret := tick()
					if out.unknown {
						ret = math.MaxInt64
					} else {
						acks = append(acks, acked{cl.prop.Revision, fmt.Sprintf("k%d=%s;", cl.op.key, cl.op.value)})
					}
					history = append(history, porcupine.Operation{ClientId: cl.id, Input: *cl.op, Call: cl.call, Output: out, Return: ret})
					cl.op, cl.prop = nil, nil
				case cl.read != nil && cl.read.Done && !gone:
					j, ok := cl.read.State.Job(c.jobs[cl.op.key])
					if !ok {
						t.Fatalf("register %d missing in a read's state", cl.op.key)
					}
					history = append(history, porcupine.Operation{ClientId: cl.id, Input: *cl.op, Call: cl.call, Output: kvOutput{value: j.Meta.GetLabels()["v"]}, Return: tick()})
					cl.op, cl.read = nil, nil
				case int64(s) > cl.deadline || gone:
					if cl.op.write { // it may have committed, or may yet
						history = append(history, porcupine.Operation{ClientId: cl.id, Input: *cl.op, Call: cl.call, Output: kvOutput{unknown: true}, Return: math.MaxInt64})
					}
					cl.op, cl.prop, cl.read = nil, nil, nil
					cl.target = c.target()
				}
			}
		}
		c.step()
	}
	// Let the healed cell settle: every member applies the whole log.
	for i := 0; ; i++ {
		if i > 2000 {
			for _, m := range c.members {
				if m.node != nil {
					st := m.node.Status()
					t.Logf("member %d (slot %d, removed %v): applied %d, voters %v, learners %v, lead %d", m.id, m.slot, m.removed, m.node.AppliedIndex(), st.Config.Voters, st.Config.Learners, st.Lead)
				} else {
					t.Logf("member %d (slot %d, removed %v, absent %v): down", m.id, m.slot, m.removed, m.absent)
				}
			}
			t.Fatalf("the members did not converge in 2,000 steps after healing: applied %v", c.appliedIndexes())
		}
		if c.converged() {
			break
		}
		c.step()
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, 30*time.Second)
	if res != porcupine.Ok {
		file := fmt.Sprintf("%s/replica-seed-%d.html", os.TempDir(), seed)
		if f, err := os.Create(file); err == nil {
			porcupine.Visualize(kvModel, info, f)
			f.Close()
		}
		t.Fatalf("the history of %d operations is not linearizable (%v); porcupine's picture: %s", len(history), res, file)
	}
	first := c.active()[0]
	want := first.node.Applied()
	for _, m := range c.active()[1:] {
		if err := testkit.DiffStates(want, m.node.Applied(), testkit.Compare{IgnoreSeq: true}); err != nil {
			t.Fatalf("member %d's cell differs from member %d's: %v", m.id, first.id, err)
		}
	}
	for _, a := range acks {
		for _, m := range c.members {
			if got, ok := m.log[a.rev]; ok && got != a.want {
				t.Fatalf("revision %d was acknowledged as %q; member %d applied %q there", a.rev, a.want, m.id, got)
			}
		}
		if a.rev > want.Revision() {
			t.Fatalf("revision %d was acknowledged; the healed cell is at %d", a.rev, want.Revision())
		}
	}
	// The acknowledged writes of each register are in the final state's
	// history order: the last acknowledged is at or before the final one.
	unknown := 0
	for _, op := range history {
		if op.Output.(kvOutput).unknown {
			unknown++
		}
	}
	term := c.leader().node.Status().Term
	t.Logf("%d members, %d steps: %d operations (%d writes acknowledged, %d of unknown outcome), revision %d, term %d, %d crashes (%d with the data lost, %d replacements proposed, %d of a leader between its early send and its write), %d partitions, %d snapshots sent",
		n, steps, len(history), len(acks), unknown, want.Revision(), *term, c.crashes, c.wipes, c.replaced, c.earlyCrashes, c.partitions, c.snapshots)
	// With raft's own timers (crypto/rand), a run of five may see a single
	// leader change: two terms are enough there.
	minTerm := uint64(3)
	if !driverElections {
		minTerm = 2
	}
	if c.crashes == 0 || c.partitions == 0 || *term < minTerm {
		t.Errorf("the run met too few faults to mean much: %d crashes, %d partitions, term %d", c.crashes, c.partitions, *term)
	}
	if c.churn {
		t.Logf("member %d added at step %d, promoted by step %d; member removed at step %d", len(c.members), c.added, c.promoted, c.removedAt)
		if c.added == 0 || c.promoted == 0 || c.removedAt == 0 {
			t.Errorf("the membership changes did not all happen: added at %d, promoted at %d, removed at %d", c.added, c.promoted, c.removedAt)
		}
		for _, m := range c.members {
			if m.removed && m.node != nil {
				t.Errorf("member %d was removed and still runs", m.id)
			}
		}
	}
}

func (c *simCell) leader() *simMember {
	for _, m := range c.members {
		if m.node != nil {
			if _, ready := m.node.Leader(); ready {
				return m
			}
		}
	}
	return nil
}

func (c *simCell) appliedIndexes() []uint64 {
	var out []uint64
	for _, m := range c.active() {
		out = append(out, m.node.AppliedIndex())
	}
	return out
}

// converged: a leader is ready and every member has applied everything it
// committed.
func (c *simCell) converged() bool {
	l := c.leader()
	if l == nil {
		return false
	}
	st := l.node.Status()
	if len(st.Config.Voters[1]) > 0 || len(st.Config.Voters[0]) != len(c.active()) || len(st.Config.Learners) > 0 {
		return false // a replacement or a promotion under way
	}
	for _, m := range c.active() {
		if _, ok := st.Config.Voters[0][m.id]; !ok || !m.node.Voter() {
			return false // a joining member not yet in
		}
		if m.node.AppliedIndex() != l.node.AppliedIndex() || m.node.AppliedIndex() < *st.Commit {
			return false
		}
	}
	return true
}

// kvModel is porcupine's register per key: a write sets it, a read returns
// it; a write whose outcome is unknown may have happened or not.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(kvInput).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for k := range len(by) + 8 {
			if ops, ok := by[k]; ok {
				out = append(out, ops)
			}
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, out := input.(kvInput), output.(kvOutput)
		if in.write {
			return true, in.value // an unknown outcome linearized means it happened
		}
		return out.value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		if in.write {
			return fmt.Sprintf("put(k%d, %s) unknown=%v", in.key, in.value, out.unknown)
		}
		return fmt.Sprintf("get(k%d) -> %q", in.key, out.value)
	},
}
