// Package replica is the cell-state store as a replicated state machine: a
// raft member (go.etcd.io/raft/v3's RawNode, a pure core driven from
// outside by Tick, Step, Ready and Advance) whose committed log is the
// cell's revisions, each entry one write set.
//
// The shape is Nomad's plan applier and etcd's apply: the leader evaluates
// a transaction with the same txn code the single store runs, against its
// head — the state of its whole log, entries proposed and not yet
// committed included — and proposes the write set; every member applies
// the committed write sets in order, so the revisions are dense and the
// same everywhere. A commit is answered once its entry is committed and
// applied: never before a majority has it. A leader that steps down drops
// its head and answers every commit still waiting "outcome unknown"
// (ErrOutcomeUnknown), never a failure that may yet turn out committed. A
// new leader evaluates nothing until it has applied its whole log up to
// the entry its election appended (so the entries of earlier terms it
// holds are in its head). Reads go through raft's read index
// (linearizable: the leader confirms it still leads before it answers);
// the applied state serves watches.
//
// It is decision code: no clock, no goroutine, no I/O. A driver (the
// server, or a test's simulated network) ticks it, delivers its messages,
// and persists what Process hands it before sending anything.
package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

var (
	// ErrNotLeader: this member does not lead; NotLeaderError says which
	// member does, if it knows.
	ErrNotLeader = errors.New("not the leader")
	// ErrNotReady: this member leads but has not yet applied the log its
	// election left it; try again in a moment.
	ErrNotReady = errors.New("leader not ready")
	// ErrOutcomeUnknown: the commit was proposed, and this member stopped
	// leading (or lost the proposal) before it knew whether it committed.
	// Read the cell to find out.
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// NotLeaderError is ErrNotLeader naming the leader (0: none known).
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "not the leader, and no leader is known"
	}
	return fmt.Sprintf("not the leader: member %d leads", e.Leader)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Config configures a Node.
type Config struct {
	// ID is this member's raft id (not 0).
	ID uint64
	// Peers are every member's ids, this one's included, for a new cell.
	Peers []uint64
	// Incarnation is this member's directory's nonce (Disk.Incarnation; 0:
	// none kept, nothing checked): the cell records it the first time its
	// leader hears from the member, and refuses the id under another.
	Incarnation uint64
	// Addrs are the founders' addresses by member number (--peers): the
	// member records of a cell whose snapshot holds none (a new cell's, or
	// one written before records were kept). members.go.
	Addrs map[uint64]string
	// ElectionTick and HeartbeatTick are raft's, in ticks. Defaults 10
	// and 1.
	ElectionTick, HeartbeatTick int
	// CatchUpRounds is how many catch-up rounds a learner finishes before
	// the leader promotes it, the last within an election timeout (the
	// raft thesis' rule, §4.2.1: members.go's promote). Default 10.
	CatchUpRounds int
	// Limits bound the transactions (txn.Limits; zero fields default).
	Limits txn.Limits
	// SnapshotEvery: after this many entries applied since the last
	// snapshot, the member snapshots its state and compacts raft's log
	// (keeping SnapshotEvery/2 entries for followers a little behind).
	// Default 1,000.
	SnapshotEvery uint64
	// Logger is raft's. Default: one that says nothing.
	Logger raft.Logger
	// DriverElections: elections start only when the driver calls
	// Campaign, never on raft's own timer, and CheckQuorum and PreVote are
	// off (a leader cut off does not step down by itself; it does when it
	// meets a later term). A deterministic simulation sets it: raft draws
	// its randomized election timeouts from crypto/rand, which no seed
	// reaches, so the simulation keeps its own seeded failure detector
	// instead. A live server leaves it off.
	DriverElections bool
	// Disk, if set, makes raft's state durable (Disk's, or a test's): each
	// Ready's snapshot, entries and hard state before its messages go out,
	// and the snapshots the member makes. Nil: the storage is all there is
	// (a test's member that keeps its storage across a crash).
	Disk Persister
	// OnApply, if set, is called with every write set the member applies,
	// in revision order (a store publishing to its watchers; a test
	// checking that no acknowledged commit was lost).
	OnApply func(ws *txn.WriteSet)
	// OnRestore, if set, is called when the member takes a whole state
	// from a snapshot sent to it (what OnApply handed before is replaced).
	OnRestore func(st *txn.State)
}

// Persister makes raft's state durable (Disk).
type Persister interface {
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error
	SaveSnapshot(snap *raftpb.Snapshot) error
}

// Proposal is a commit waiting for its entry to be committed and applied.
type Proposal struct {
	Revision uint64
	// Result is the evaluation's (the outcomes of the operations); valid
	// once Done, if Err is nil.
	Result txn.Result
	// Err is nil when the write set committed, else ErrOutcomeUnknown.
	Err  error
	Done bool
	seq  uint64
	ws   *txn.WriteSet // the write set proposed: the leader applies it as it is
	term uint64        // the term it was proposed in
}

// Read is a linearizable read waiting for its read index to be applied.
type Read struct {
	id    uint64
	index uint64 // 0 until the leader confirmed it
	// State is the applied state the read sees, once Done.
	State *txn.State
	Done  bool
}

// Node is one member of a replicated cell.
type Node struct {
	cfg     Config
	rn      *raft.RawNode
	storage *raft.MemoryStorage
	conf    *raftpb.ConfState

	applied      *txn.State // every committed entry applied
	appliedIndex uint64
	snapIndex    uint64 // the newest snapshot's index
	snapDue      bool   // a member came in: snapshot at the next Apply
	snapshots    uint64 // snapshots made
	compactions  uint64 // log compactions
	ticks        uint64

	// The member records (members.go): addresses by member number, the
	// numbers removed, a version moved by every change; whether this
	// member's own id left the configuration; learners' catching-up rounds.
	addrs          map[uint64]string
	removed        map[uint64]bool
	incs           map[uint64]uint64 // raft id → incarnation
	recordingInc   map[uint64]bool   // incarnations proposed this leadership, not yet applied
	recordsVersion uint64
	removedSelf    bool
	confProposed   bool // a configuration change this leader proposed, not yet applied
	resyncDue      bool // a proposal was dropped: the head waits for the log (resync) at the next Persist
	rounds         map[uint64]catchUp

	// Leading: head is the state of the whole log (nil until the log the
	// election left is applied: appliedIndex ≥ readyAt).
	leading    bool
	leaderTerm uint64
	readyAt    uint64
	head       *txn.State
	lead       uint64
	scratch    txn.Scratch

	seq   uint64
	props map[uint64]*Proposal // by proposal seq
	reads map[uint64]*Read     // by read id
	// waiting reads whose index the leader confirmed, not yet applied.
	confirmed []*Read
	// committed entries Persist took in, for Apply
	toApply []*raftpb.Entry
	reader  txn.WriteSetReader
}

// Storage is what a member keeps across a crash: raft's hard state, log
// and snapshot (whose data is the cell state at its index, EncodeState's).
// In tests it is kept aside in memory; a server keeps it on disk.
type Storage = raft.MemoryStorage

// NewStorage returns the storage of a new member of a cell of peers: a
// snapshot at index 1 holding the empty cell and the voters.
func NewStorage(peers []uint64) (*Storage, error) {
	st := raft.NewMemoryStorage()
	data, err := EncodeState(txn.NewState())
	if err != nil {
		return nil, err
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		Index: new(uint64(1)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: append([]uint64(nil), peers...)}}}
	if err := st.ApplySnapshot(snap); err != nil {
		return nil, err
	}
	return st, nil
}

// New starts a member on storage (NewStorage's for a new cell, or what a
// member that stopped kept): its state is the snapshot's, and the
// committed entries after it are applied again as raft hands them over.
func New(cfg Config, storage *Storage) (*Node, error) {
	if cfg.ID == 0 {
		return nil, errors.New("replica: Config.ID is 0")
	}
	if cfg.ElectionTick == 0 {
		cfg.ElectionTick = 10
	}
	if cfg.HeartbeatTick == 0 {
		cfg.HeartbeatTick = 1
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 1000
	}
	if cfg.CatchUpRounds == 0 {
		cfg.CatchUpRounds = 10
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger{}
	}
	snap, err := storage.Snapshot()
	if err != nil {
		return nil, err
	}
	st := txn.NewState() // a joining member's, until the leader's snapshot
	var records *omegav1.CellMembers
	if !raft.IsEmptySnap(snap) {
		if st, records, err = DecodeSnapshot(snap.GetData()); err != nil {
			return nil, fmt.Errorf("replica %d: the snapshot at index %d: %w", cfg.ID, snap.GetMetadata().GetIndex(), err)
		}
	}
	rc := &raft.Config{
		ID: cfg.ID, ElectionTick: cfg.ElectionTick, HeartbeatTick: cfg.HeartbeatTick, Storage: storage,
		Applied: snap.GetMetadata().GetIndex(), MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256,
		MaxUncommittedEntriesSize: 1 << 30, CheckQuorum: true, PreVote: true, Logger: cfg.Logger,
		// A member raft has deposed, before its Ready says so, still takes
		// commits: raft would forward their entries to the new leader,
		// whose log would then hold a write set evaluated against the old
		// leader's head (a revision out of order, which stops every member
		// that applies it). Dropped, the commit is ErrNotReady and goes to
		// the new leader whole.
		DisableProposalForwarding: true,
	}
	if cfg.DriverElections {
		rc.ElectionTick, rc.CheckQuorum, rc.PreVote = 1<<30, false, false
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("replica %d: %w", cfg.ID, err)
	}
	n := &Node{
		cfg: cfg, rn: rn, storage: storage, conf: snap.GetMetadata().GetConfState(),
		applied: st, appliedIndex: snap.GetMetadata().GetIndex(), snapIndex: snap.GetMetadata().GetIndex(),
		props: map[uint64]*Proposal{}, reads: map[uint64]*Read{},
	}
	n.setRecords(records)
	return n, nil
}

// ID is the member's id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// Tick advances raft's logical clock by one tick.
// Tick advances raft's logical clock by one tick. Every election timeout's
// worth of ticks, the reads not yet confirmed are asked for again: raft
// drops a read index asked while no leader is known (a member just
// started, an election), and a heartbeat round's messages may be lost.
func (n *Node) Tick() {
	n.rn.Tick()
	n.ticks++
	n.promote()
	_ = n.Heard(n.cfg.ID, n.cfg.Incarnation) // a leader records its own
	if n.ticks%uint64(n.cfg.ElectionTick) == 0 {
		n.askReads()
	}
}

// askReads asks raft again for the read index of every read not yet
// confirmed.
func (n *Node) askReads() {
	for id, r := range n.reads {
		if r.index == 0 {
			var ctx [8]byte
			binary.BigEndian.PutUint64(ctx[:], id)
			n.rn.ReadIndex(ctx[:])
		}
	}
}

// Step hands the member a message from another. A leader's heartbeat
// saying this member holds entries beyond its log's end (raft's leader
// tracks what each member acknowledged: it acknowledged them, then lost
// them — its data wiped or rolled back) is refused with ErrLostLog and
// not stepped (raft would panic on it).
func (n *Node) Step(m *raftpb.Message) error {
	if m.GetType() == raftpb.MsgHeartbeat {
		if last, _ := n.storage.LastIndex(); m.GetCommit() > last {
			return &LostLogError{ID: n.cfg.ID, Leader: m.GetFrom(), Commit: m.GetCommit(), Last: last}
		}
	}
	return n.rn.Step(m)
}

// ErrLostLog: this member lost entries it had acknowledged (LostLogError).
var ErrLostLog = errors.New("this member's raft log lost entries it had acknowledged")

// LostLogError is ErrLostLog with what the leader and the log said.
type LostLogError struct{ ID, Leader, Commit, Last uint64 }

func (e *LostLogError) Error() string {
	return fmt.Sprintf("member %d (raft id %d): leader %d says index %d is committed with this member, whose log ends at %d: its data was lost or rolled back; start it again with an empty data directory as a joining member (it takes a new raft id and the leader's snapshot)",
		MemberOf(e.ID), e.ID, MemberOf(e.Leader), e.Commit, e.Last)
}

func (e *LostLogError) Unwrap() error { return ErrLostLog }

// A raft id names a member (its slot in the cell: 1, 2, 3…, the operator's
// number) and, for a member that joined a running cell, its incarnation:
// member<<32 | nonce. A new cell's members have ids 1, 2, 3…; one whose
// data was lost comes back under a new id (JoinID), never its old one,
// for raft's leader remembers what each id acknowledged (etcd gives a
// replaced member a new id too).

// MaxMember is the largest member number.
const MaxMember = 1<<32 - 1

// MemberOf is the member a raft id names.
func MemberOf(id uint64) uint64 {
	if id > MaxMember {
		return id >> 32
	}
	return id
}

// JoinID is the raft id of member's incarnation nonce (not 0).
func JoinID(member uint64, nonce uint32) uint64 {
	return member<<32 | uint64(max(nonce, 1))
}

// Voter: this member is a voter of the configuration it has applied (a
// joining member is not, until the leader's snapshot says it is).
func (n *Node) Voter() bool {
	if n.conf == nil {
		return false
	}
	return slices.Contains(n.conf.Voters, n.cfg.ID)
}

var (
	// ErrMemberAlive: the member a joining one would replace still answers
	// the leader (or leads): its data is not lost.
	ErrMemberAlive = errors.New("the member is alive")
	// ErrConfBusy: a configuration change is under way; try again.
	ErrConfBusy = errors.New("a configuration change is under way")
	// ErrNoSuchMember: no member of that number is in the configuration.
	ErrNoSuchMember = errors.New("no such member in the cell's configuration")
)

// Replace makes the joining raft id the member's, in place of the ids the
// member had (one configuration change, joint consensus: the old id out
// and the new in at once, so the cell never runs on fewer voters). done
// says id is already the member's voter; otherwise the change was
// proposed, or err says why not: ErrNotLeader, ErrNotReady, ErrConfBusy
// (a change in flight), ErrNoSuchMember, ErrMemberAlive (the member's old
// id still answers — refused, or a live member would be cut off; with
// DriverElections raft keeps no liveness, and the check is skipped).
// Adding a member that was never in the cell is not done here.
func (n *Node) Replace(member, id uint64) (done bool, err error) {
	if !n.leading {
		return false, &NotLeaderError{Leader: n.lead}
	}
	if n.head == nil {
		return false, ErrNotReady
	}
	if MemberOf(id) != member {
		return false, fmt.Errorf("%w: raft id %d is not member %d's", txn.ErrInvalid, id, member)
	}
	st := n.rn.Status()
	cfg := st.Config
	if _, ok := cfg.Voters[0][id]; ok {
		return true, nil
	}
	if _, ok := cfg.Learners[id]; ok {
		return true, nil
	}
	if n.busy() {
		return false, ErrConfBusy
	}
	old, learner := incarnations(cfg.Voters[0], cfg.Learners, member)
	if len(old) == 0 {
		if n.removed[member] {
			return false, fmt.Errorf("%w: member %d was removed from the cell", ErrNoSuchMember, member)
		}
		return false, fmt.Errorf("%w: member %d (a new member is added first: omega server add)", ErrNoSuchMember, member)
	}
	// A placeholder learner (AddMember's) is replaced by a learner; a
	// member that had voted by a voter.
	add := raftpb.ConfChangeAddLearnerNode
	for _, v := range old {
		if !learner[v] {
			add = raftpb.ConfChangeAddNode
		}
	}
	cc := &raftpb.ConfChangeV2{}
	for _, v := range old {
		if v == n.cfg.ID {
			return false, fmt.Errorf("%w: member %d (raft id %d) leads", ErrMemberAlive, member, v)
		}
		if pr := st.Progress[v]; pr.RecentActive && !n.cfg.DriverElections {
			return false, fmt.Errorf("%w: member %d (raft id %d) answered the leader within an election timeout", ErrMemberAlive, member, v)
		}
		cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(v)})
	}
	cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: add.Enum(), NodeId: new(id)})
	if err := n.proposeConf(cc); err != nil {
		return false, fmt.Errorf("%w: %v", ErrConfBusy, err)
	}
	return false, nil
}

// TransferLeadership hands the lead to member to's voter, or (to 0) to the
// voter that has the most of the log among those heard from within an
// election timeout (raft's transfer: once it has the whole log, it stands
// at once, without waiting out an election timeout; meanwhile this leader
// takes no proposal). It returns the raft id chosen, or ErrNotLeader, or
// ErrNoSuchMember when no other voter answers (or to is none that does).
func (n *Node) TransferLeadership(to uint64) (uint64, error) {
	if !n.leading {
		return 0, &NotLeaderError{Leader: n.lead}
	}
	st := n.rn.Status()
	var best uint64
	var bestMatch uint64
	for id := range st.Config.Voters[0] {
		pr, ok := st.Progress[id]
		if id == n.cfg.ID || !ok || (!pr.RecentActive && !n.cfg.DriverElections) || to != 0 && MemberOf(id) != to {
			continue
		}
		if best == 0 || pr.Match > bestMatch || pr.Match == bestMatch && id < best {
			best, bestMatch = id, pr.Match
		}
	}
	if best == 0 && to != 0 {
		return 0, fmt.Errorf("%w: member %d is not a voter that answers the leader", ErrNoSuchMember, to)
	}
	if best == 0 {
		return 0, fmt.Errorf("%w: no other voter answers", ErrNoSuchMember)
	}
	n.rn.TransferLeader(best)
	return best, nil
}

// pendingConf: the log holds a configuration change not yet applied.
func (n *Node) pendingConf() bool {
	last, _ := n.storage.LastIndex()
	if last <= n.appliedIndex {
		return false
	}
	ents, err := n.storage.Entries(n.appliedIndex+1, last+1, 1<<62)
	if err != nil {
		return true
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryNormal {
			return true
		}
	}
	return false
}

// Campaign makes the member stand for election at once.
func (n *Node) Campaign() error { return n.rn.Campaign() }

// ReportSnapshot tells the leader whether a snapshot it sent to member to
// arrived (its transport's word): until then raft sends that member
// nothing more.
func (n *Node) ReportSnapshot(to uint64, ok bool) {
	st := raft.SnapshotFinish
	if !ok {
		st = raft.SnapshotFailure
	}
	n.rn.ReportSnapshot(to, st)
}

// ReportUnreachable tells raft a message to member to was not delivered.
func (n *Node) ReportUnreachable(to uint64) { n.rn.ReportUnreachable(to) }

// Applied is the state of every entry this member applied: what it serves
// watches and stale reads from.
func (n *Node) Applied() *txn.State { return n.applied }

// AppliedIndex is raft's index of the last entry applied.
func (n *Node) AppliedIndex() uint64 { return n.appliedIndex }

// Leader is the member this one believes leads (0: none), and whether
// this one leads and may evaluate.
func (n *Node) Leader() (lead uint64, ready bool) { return n.lead, n.leading && n.head != nil }

// Status is raft's.
func (n *Node) Status() raft.Status { return n.rn.Status() }

// Snapshots and Compactions count the snapshots this member made and the
// compactions of its log since it started.
func (n *Node) Snapshots() uint64   { return n.snapshots }
func (n *Node) Compactions() uint64 { return n.compactions }

// Commit evaluates tx against the head and proposes its write set. It
// returns the Proposal to wait on (nil if nothing committed: every
// operation conflicted, and res says why), or ErrNotLeader, ErrNotReady,
// or the transaction's own error (bad input), with nothing changed.
func (n *Node) Commit(tx *txn.Txn) (*Proposal, txn.Result, error) {
	if !n.leading {
		return nil, txn.Result{}, &NotLeaderError{Leader: n.lead}
	}
	if n.head == nil {
		return nil, txn.Result{}, ErrNotReady
	}
	res, ws, err := n.scratch.EvaluateRules(n.head, tx, n.head.Revision()+1, n.cfg.Limits, nil)
	if err != nil || ws == nil {
		return nil, res, err
	}
	n.seq++
	data, err := encodeEntry(n.cfg.ID, n.seq, ws)
	if err != nil {
		return nil, txn.Result{}, err
	}
	if err := n.rn.Propose(data); err != nil {
		// Dropped (leadership moving to another member, raft's own
		// limits, or raft deposed this leader and its Ready has not
		// said so yet): nothing was appended, so the commit may be sent
		// again (to whoever leads next). The head starts again from the
		// log — once what this leader proposed before is in the storage
		// (raft's unstable entries are not), at the next Persist.
		n.head, n.resyncDue = nil, true
		return nil, txn.Result{}, fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	n.head = n.head.Apply(ws)
	p := &Proposal{Revision: ws.Revision, Result: res, seq: n.seq, ws: ws, term: n.leaderTerm}
	n.props[n.seq] = p
	return p, res, nil
}

// ReadIndex asks for a linearizable read: once the leader has confirmed it
// leads (a heartbeat round) and this member has applied the log up to the
// commit index of that moment, the Read is Done with that state. A read
// that gets no confirmation (no leader, a partition) stays pending: the
// caller gives up on it.
func (n *Node) ReadIndex() *Read {
	n.seq++
	r := &Read{id: n.seq}
	n.reads[r.id] = r
	var ctx [8]byte
	binary.BigEndian.PutUint64(ctx[:], r.id)
	n.rn.ReadIndex(ctx[:])
	return r
}

// leadership notes this member's leading or not: a leader that steps down
// (or leads again in a new term) answers every waiting commit "outcome
// unknown" and drops its head; a new leader waits for its log.
func (n *Node) leadership(leading bool) {
	term := n.rn.BasicStatus().GetTerm()
	if n.leading && (!leading || term != n.leaderTerm) {
		n.leading, n.head = false, nil
		n.recordingInc, n.confProposed = nil, false
		for seq, p := range n.props {
			p.Err, p.Done = ErrOutcomeUnknown, true
			delete(n.props, seq)
		}
	}
	if leading && !n.leading {
		n.leading, n.leaderTerm = true, term
		n.resync()
	}
}

// resync makes the head wait until everything in the log now is applied.
func (n *Node) resync() {
	n.head = nil
	last, _ := n.storage.LastIndex()
	n.readyAt = max(last, n.rn.BasicStatus().GetCommit())
}

// quietLogger is raft's logger saying only warnings and errors, to nowhere
// (a driver that wants them sets Config.Logger).
type quietLogger struct{}

func (quietLogger) Debug(...any)              {}
func (quietLogger) Debugf(string, ...any)     {}
func (quietLogger) Error(...any)              {}
func (quietLogger) Errorf(string, ...any)     {}
func (quietLogger) Info(...any)               {}
func (quietLogger) Infof(string, ...any)      {}
func (quietLogger) Warning(...any)            {}
func (quietLogger) Warningf(string, ...any)   {}
func (quietLogger) Fatal(v ...any)            { panic(fmt.Sprint(v...)) }
func (quietLogger) Fatalf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
func (quietLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (quietLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
