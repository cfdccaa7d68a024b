package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// The cell's membership as it runs. Raft's configuration says which raft
// ids vote; the member records say where each member is (its number and
// address) and which numbers were removed. The records travel with the
// configuration: in the Context of the change that adds or removes a
// member, and in every snapshot (snapshot data is the records, then the
// state). A new cell's records are its founders' --peers (Config.Addrs).
//
// Adding a member is three changes, each one configuration change that
// raft commits like an entry (the raft thesis, 4.2.1, "catching up new
// servers"; etcd's learners):
//
//  1. AddMember: a learner with a placeholder id (JoinID of the member and
//     the log's next index), and the member's address in the records.
//  2. The new server starts empty with --join and asks to be let in under
//     its own id (Replace): the placeholder learner is replaced by it, still
//     a learner, and the leader sends it a snapshot.
//  3. The leader promotes the learner to a voter once it has caught up: a
//     round (everything the leader's log held when the round began) takes
//     at most an election timeout.
//
// A learner votes for nothing and counts toward no quorum, so the cell's
// availability never waits for the new server's snapshot.

var (
	// ErrMemberTaken: the member number or the address is another
	// member's, or the number was removed (numbers are never taken again).
	ErrMemberTaken = errors.New("taken")
	// ErrLeaderRemoval: the member to remove leads; hand the lead over
	// first (TransferLeadership).
	ErrLeaderRemoval = errors.New("the member leads")
	// ErrLastMember: removing the member would leave no voter.
	ErrLastMember = errors.New("the cell's last voter")
	// ErrRemoved: this member was removed from the cell's configuration.
	ErrRemoved = errors.New("removed from the cell")
)

// snapMagic starts a snapshot's data that holds member records: the
// records (uvarint length, omegav1.CellMembers), then EncodeState's. A
// snapshot of the first format (the state alone: uvarint-length chunks, a
// chunk never of length 0 followed by 0xff) has none.
const snapMagic = "\x00\xffomega-members\x00"

// EncodeSnapshot is a snapshot's data: the member records, then the state.
func EncodeSnapshot(st *txn.State, members *omegav1.CellMembers) ([]byte, error) {
	rec, err := proto.Marshal(members)
	if err != nil {
		return nil, err
	}
	state, err := EncodeState(st)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(snapMagic)+binary.MaxVarintLen64+len(rec)+len(state))
	b = append(b, snapMagic...)
	b = binary.AppendUvarint(b, uint64(len(rec)))
	b = append(b, rec...)
	return append(b, state...), nil
}

// DecodeSnapshot reads EncodeSnapshot's data (or a first-format snapshot's
// state alone: its records are nil).
func DecodeSnapshot(b []byte) (*txn.State, *omegav1.CellMembers, error) {
	var members *omegav1.CellMembers
	if len(b) >= len(snapMagic) && string(b[:len(snapMagic)]) == snapMagic {
		b = b[len(snapMagic):]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, nil, fmt.Errorf("%w: a snapshot's member records are cut or corrupt", txn.ErrInvalid)
		}
		members = &omegav1.CellMembers{}
		if err := proto.Unmarshal(b[k:k+int(n)], members); err != nil {
			return nil, nil, fmt.Errorf("%w: a snapshot's member records: %v", txn.ErrInvalid, err)
		}
		b = b[k+int(n):]
	}
	st, err := DecodeState(b)
	return st, members, err
}

// setRecords takes a snapshot's records (nil: the founders', Config.Addrs).
func (n *Node) setRecords(m *omegav1.CellMembers) {
	n.addrs, n.removed, n.incs = map[uint64]string{}, map[uint64]bool{}, map[uint64]uint64{}
	if m == nil {
		maps.Copy(n.addrs, n.cfg.Addrs)
	} else {
		n.takeRecords(m)
	}
	n.recordsVersion++
}

// takeRecords applies a change's records.
func (n *Node) takeRecords(m *omegav1.CellMembers) {
	for _, r := range m.GetMembers() {
		if r.GetMember() != 0 && r.GetAddress() != "" {
			n.addrs[r.GetMember()] = r.GetAddress()
		}
	}
	for _, gone := range m.GetRemoved() {
		delete(n.addrs, gone)
		n.removed[gone] = true
	}
	for _, inc := range m.GetIncarnations() {
		if _, ok := n.incs[inc.GetRaftId()]; !ok && inc.GetIncarnation() != 0 {
			n.incs[inc.GetRaftId()] = inc.GetIncarnation() // the first recorded stands
		}
		delete(n.recordingInc, inc.GetRaftId())
	}
	n.recordsVersion++
}

// Records are the member records this member applied (a snapshot carries
// them).
func (n *Node) Records() *omegav1.CellMembers { return n.records() }

func (n *Node) records() *omegav1.CellMembers {
	m := &omegav1.CellMembers{}
	for _, id := range slices.Sorted(maps.Keys(n.addrs)) {
		m.Members = append(m.Members, &omegav1.CellMember{Member: id, Address: n.addrs[id]})
	}
	m.Removed = slices.Sorted(maps.Keys(n.removed))
	for _, id := range slices.Sorted(maps.Keys(n.incs)) {
		m.Incarnations = append(m.Incarnations, &omegav1.Incarnation{RaftId: id, Incarnation: n.incs[id]})
	}
	return m
}

// recordSeq is the proposal sequence of an entry that holds member records
// (an incarnation heard for the first time), not a write set: it applies
// to the records and makes no revision.
const recordSeq = 1<<64 - 1

// IncarnationError: a raft id spoke under an incarnation other than the
// one the cell recorded for it — its directory was wiped and made again,
// and it was started without --join.
type IncarnationError struct{ ID, Recorded, Got uint64 }

func (e *IncarnationError) Error() string {
	return fmt.Sprintf("member %d (raft id %d) speaks from a directory the cell does not know (incarnation %d; the cell recorded %d): its data was lost and it started again without --join; start it again with an empty data directory as a joining member (--join: it takes a new raft id and the leader's snapshot)",
		MemberOf(e.ID), e.ID, e.Got, e.Recorded)
}

func (e *IncarnationError) Unwrap() error { return ErrLostLog }

// Heard checks a message's sender's incarnation against the records (0:
// the sender keeps none, nothing checked): another than the recorded one
// is an IncarnationError, and the message must be dropped. A leader that
// hears an id of its configuration for the first time proposes its
// incarnation to the records.
func (n *Node) Heard(from, incarnation uint64) error {
	if incarnation == 0 {
		return nil
	}
	if rec, ok := n.incs[from]; ok {
		if rec != incarnation {
			return &IncarnationError{ID: from, Recorded: rec, Got: incarnation}
		}
		return nil
	}
	if !n.leading || n.head == nil || n.recordingInc[from] || !n.configured(from) {
		return nil
	}
	rec, err := proto.Marshal(&omegav1.CellMembers{Incarnations: []*omegav1.Incarnation{{RaftId: from, Incarnation: incarnation}}})
	if err != nil {
		return nil
	}
	data := make([]byte, 16, 16+len(rec))
	binary.BigEndian.PutUint64(data, n.cfg.ID)
	binary.BigEndian.PutUint64(data[8:], recordSeq)
	if n.rn.Propose(append(data, rec...)) == nil {
		if n.recordingInc == nil {
			n.recordingInc = map[uint64]bool{}
		}
		n.recordingInc[from] = true
	}
	return nil
}

// Incarnations are the incarnations the records hold, by raft id.
func (n *Node) Incarnations() map[uint64]uint64 { return maps.Clone(n.incs) }

// configured: id is a voter or learner of the configuration applied.
func (n *Node) configured(id uint64) bool {
	return n.conf != nil && (slices.Contains(n.conf.Voters, id) || slices.Contains(n.conf.Learners, id) || slices.Contains(n.conf.VotersOutgoing, id))
}

// applyRecords applies a records entry (recordSeq's).
func (n *Node) applyRecords(e *raftpb.Entry) error {
	rec := &omegav1.CellMembers{}
	if err := proto.Unmarshal(e.Data[16:], rec); err != nil {
		return fmt.Errorf("replica %d: entry %d: member records: %w", n.cfg.ID, e.GetIndex(), err)
	}
	n.takeRecords(rec)
	return nil
}

// Addrs are the members' addresses by member number, as the records this
// member applied say, and a version that moves whenever they change (a
// driver refreshes its copy when it does).
func (n *Node) Addrs() (map[uint64]string, uint64) {
	return maps.Clone(n.addrs), n.recordsVersion
}

// MemberRemoved: member was removed from the cell (as far as this member
// applied).
func (n *Node) MemberRemoved(member uint64) bool { return n.removed[member] }

// Removed: this member's id is no longer in the configuration it applied
// (it applied its own removal, or its replacement).
func (n *Node) Removed() bool { return n.removedSelf }

// InConfig: this member is a voter or a learner of the configuration it
// applied (a joining member is neither until the leader's snapshot).
func (n *Node) InConfig() bool { return n.configured(n.cfg.ID) }

// RecordsVersion moves whenever the member records change (Addrs).
func (n *Node) RecordsVersion() uint64 { return n.recordsVersion }

// leaderReady is what a membership change asks first: this member leads
// (and has not applied its own removal) and has applied its log.
func (n *Node) leaderReady() error {
	switch {
	case !n.leading:
		return &NotLeaderError{Leader: n.lead}
	case n.removedSelf: // a leader that applied its own removal steps down
		return &NotLeaderError{}
	case n.head == nil:
		return ErrNotReady
	}
	return nil
}

// memberIDs are member's raft ids in the leader's configuration (voters
// incoming and outgoing, learners), and whether each is a learner.
func (n *Node) memberIDs(member uint64) ([]uint64, map[uint64]bool) {
	cfg := n.rn.Status().Config
	voters := map[uint64]struct{}{}
	maps.Copy(voters, cfg.Voters[0])
	maps.Copy(voters, cfg.Voters[1])
	return incarnations(voters, cfg.Learners, member)
}

// incarnations are the raft ids of member in the leader's configuration
// (voters, outgoing voters and learners), and whether each is a learner.
func incarnations(cfgVoters, learners map[uint64]struct{}, member uint64) (ids []uint64, learner map[uint64]bool) {
	learner = map[uint64]bool{}
	for id := range cfgVoters {
		if MemberOf(id) == member {
			ids = append(ids, id)
		}
	}
	for id := range learners {
		if MemberOf(id) == member {
			ids = append(ids, id)
			learner[id] = true
		}
	}
	slices.Sort(ids)
	return ids, learner
}

// busy: a configuration change is under way (a joint configuration, a
// change in the log not yet applied, or one this leader proposed that is
// not in the log's stable part yet: raft would turn a second into an empty
// entry, saying nothing).
func (n *Node) busy() bool {
	return n.confProposed || len(n.rn.Status().Config.Voters[1]) > 0 || n.pendingConf()
}

// proposeConf proposes a configuration change, noting it in flight until
// a configuration change is applied (or the leadership ends).
func (n *Node) proposeConf(cc *raftpb.ConfChangeV2) error {
	if err := n.rn.ProposeConfChange(cc); err != nil {
		return err
	}
	n.confProposed = true
	return nil
}

// AddMember adds member at addr to the cell: a learner under a placeholder
// id until its server joins (Replace) and catches up (then the leader
// promotes it). done says the member is in the cell at addr already.
// Refused: ErrNotLeader, ErrNotReady, ErrConfBusy, ErrMemberTaken (the
// number is a member's, or was removed; the address is another member's),
// txn.ErrInvalid (no number, no address).
func (n *Node) AddMember(member uint64, addr string) (done bool, err error) {
	if err := n.leaderReady(); err != nil {
		return false, err
	}
	if member == 0 || member > MaxMember || addr == "" {
		return false, fmt.Errorf("%w: a member needs a number in 1..%d and an address", txn.ErrInvalid, uint64(MaxMember))
	}
	if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" || len(addr) > 255 {
		return false, fmt.Errorf("%w: member %d's address %s is not host:port", txn.ErrInvalid, member, txn.Quote(addr))
	}
	if n.removed[member] {
		return false, fmt.Errorf("member %d is %w: it was removed from the cell, and a removed member's number is not taken again; choose another", member, ErrMemberTaken)
	}
	if ids, _ := n.memberIDs(member); len(ids) > 0 {
		if n.addrs[member] == addr {
			return true, nil
		}
		return false, fmt.Errorf("member %d is %w: it is in the cell at %s", member, ErrMemberTaken, txn.Quote(n.addrs[member]))
	}
	for m, a := range n.addrs {
		if a == addr && m != member {
			return false, fmt.Errorf("address %s is %w: member %d's", txn.Quote(addr), ErrMemberTaken, m)
		}
	}
	if n.busy() {
		return false, ErrConfBusy
	}
	last, _ := n.storage.LastIndex()
	ctx, err := proto.Marshal(&omegav1.CellMembers{Members: []*omegav1.CellMember{{Member: member, Address: addr}}})
	if err != nil {
		return false, err
	}
	cc := &raftpb.ConfChangeV2{Context: ctx, Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: new(JoinID(member, uint32(last+1)))}}}
	if err := n.proposeConf(cc); err != nil {
		return false, fmt.Errorf("%w: %v", ErrConfBusy, err)
	}
	return false, nil
}

// RemoveMember removes member from the cell (every id of it; its number is
// never taken again). done says it is out already. Refused: ErrNotLeader,
// ErrNotReady, ErrConfBusy, ErrNoSuchMember, ErrLeaderRemoval (this
// member: hand the lead over first), ErrLastMember.
func (n *Node) RemoveMember(member uint64) (done bool, err error) {
	if err := n.leaderReady(); err != nil {
		return false, err
	}
	ids, _ := n.memberIDs(member)
	if len(ids) == 0 {
		if n.removed[member] {
			return true, nil
		}
		return false, fmt.Errorf("%w: member %d", ErrNoSuchMember, member)
	}
	left := 0
	for id := range n.rn.Status().Config.Voters[0] {
		if MemberOf(id) != member {
			left++
		}
	}
	if left == 0 {
		return false, fmt.Errorf("member %d is %w: a cell keeps one at least", member, ErrLastMember)
	}
	if slices.Contains(ids, n.cfg.ID) {
		return false, fmt.Errorf("member %d: %w: hand the lead to another member first", member, ErrLeaderRemoval)
	}
	if n.busy() {
		return false, ErrConfBusy
	}
	ctx, err := proto.Marshal(&omegav1.CellMembers{Removed: []uint64{member}})
	if err != nil {
		return false, err
	}
	cc := &raftpb.ConfChangeV2{Context: ctx}
	for _, id := range ids {
		cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(id)})
	}
	if err := n.proposeConf(cc); err != nil {
		return false, fmt.Errorf("%w: %v", ErrConfBusy, err)
	}
	return false, nil
}

// catchUp is a learner's catching-up round: the leader's last index when
// it began, the tick it began at, and the rounds it finished before.
type catchUp struct{ index, tick, done uint64 }

// promote makes a learner that has caught up a voter, as the raft thesis
// says (§4.2.1, "Catching up new servers"; its text in
// github.com/ongardie/dissertation, membership/membership.tex): the leader
// replicates to it in rounds, each the leader's log as the round began;
// after a fixed number of rounds (Config.CatchUpRounds, the thesis' "such
// as 10"), if the last round took less than an election timeout, the
// learner is added. Where omega departs: the thesis then aborts the change
// with an error; here a slow learner stays a learner, rounds going on (it
// counts toward no quorum, so waiting costs nothing; the operator sees it
// in omega get servers and removes it). etcd's server promotes only on an
// operator's request, once the learner's match is 90% of the leader's
// (server/etcdserver/server.go, isLearnerReady). Called on the leader's
// ticks.
func (n *Node) promote() {
	if !n.leading || n.head == nil || n.conf == nil || len(n.conf.Learners) == 0 {
		n.rounds = nil // (no Status, which copies the progress, on every tick)
		return
	}
	st := n.rn.Status()
	if n.busy() {
		return
	}
	if n.rounds == nil {
		n.rounds = map[uint64]catchUp{}
	}
	last, _ := n.storage.LastIndex()
	for _, id := range slices.Sorted(maps.Keys(st.Config.Learners)) {
		pr, ok := st.Progress[id]
		r, began := n.rounds[id]
		switch {
		case !ok:
		case !began:
			n.rounds[id] = catchUp{index: last, tick: n.ticks}
		case pr.Match < r.index: // the round goes on
		case r.done+1 >= uint64(n.cfg.CatchUpRounds) && n.ticks-r.tick < uint64(n.cfg.ElectionTick):
			cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(id)}}}
			if n.proposeConf(cc) == nil {
				delete(n.rounds, id)
				return // one change at a time
			}
		default: // the next round
			n.rounds[id] = catchUp{index: last, tick: n.ticks, done: r.done + 1}
		}
	}
}
