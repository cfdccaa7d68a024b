package replica

// What raft has ready, persisted and applied: a leader's messages sent
// before its disk write, the committed entries applied in order (each the
// next revision), configuration changes before raft's Advance, snapshots
// taken in and made.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Process handles what raft has ready: it persists the hard state, the
// new entries and any snapshot in storage (the caller makes storage
// durable before it sends the messages returned), applies the committed
// entries — answering the proposals and reads they complete — and returns
// the messages to send. Call it after every Tick, Step, Commit and
// ReadIndex.
func (n *Node) Process() ([]*raftpb.Message, error) {
	out, err := n.Persist()
	if err != nil {
		return out, err
	}
	return out, n.Apply()
}

// Persist is Process's first half: it persists what raft has ready and
// returns the messages, which may go out at once; the committed entries
// wait for Apply. A driver sends the messages between the two, so a
// follower's acknowledgement does not wait for what it applies.
func (n *Node) Persist() ([]*raftpb.Message, error) { return n.PersistSending(nil) }

// PersistSending is Persist, but a leader's messages go to send before its
// Ready is persisted: the leader writes its log while its followers write
// theirs (the raft thesis, 10.2.1; etcd's server sends a leader's
// messages before it saves, server/etcdserver/raft.go). It is safe: raft
// counts the leader's own entries toward a quorum only at Advance, after
// they are persisted, and a leader's term and vote were persisted before
// it stood for election (a candidate's messages wait for its disk). A
// follower's or a candidate's messages are returned, to go out after, as
// Persist's. send must not hold on to the messages past its return
// (raft reuses what they point into): copy them.
func (n *Node) PersistSending(send func([]*raftpb.Message)) ([]*raftpb.Message, error) {
	var out []*raftpb.Message
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		reask := false
		early := false
		if send != nil && len(rd.Messages) > 0 {
			leading := n.leading
			if rd.SoftState != nil {
				leading = rd.SoftState.RaftState == raft.StateLeader
			}
			if early = leading && raft.IsEmptySnap(rd.Snapshot); early {
				send(rd.Messages)
			}
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := n.storage.ApplySnapshot(rd.Snapshot); err != nil {
				return out, err
			}
			if err := n.restore(rd.Snapshot); err != nil {
				return out, err
			}
		}
		if n.cfg.Disk != nil {
			if err := n.cfg.Disk.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
				return out, fmt.Errorf("replica %d: persist: %w", n.cfg.ID, err)
			}
		}
		if err := n.storage.Append(rd.Entries); err != nil {
			return out, err
		}
		if n.resyncDue && n.leading {
			n.resyncDue = false
			n.resync() // the storage holds every entry this leader proposed
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			if err := n.storage.SetHardState(rd.HardState); err != nil {
				return out, err
			}
		}
		if rd.SoftState != nil {
			// Reads asked while no leader was known were dropped: asked
			// again once one is (after Advance).
			reask = n.lead == 0 && rd.SoftState.Lead != 0
			n.lead = rd.SoftState.Lead
			n.leadership(rd.SoftState.RaftState == raft.StateLeader)
		}
		for _, rs := range rd.ReadStates {
			if len(rs.RequestCtx) == 8 {
				if r := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; r != nil && r.index == 0 {
					r.index = rs.Index
					n.confirmed = append(n.confirmed, r)
				}
			}
		}
		n.toApply = append(n.toApply, rd.CommittedEntries...)
		if !early {
			out = append(out, rd.Messages...)
		}
		if confChanges(rd.CommittedEntries) {
			// raft takes a Ready's committed entries as applied at Advance,
			// and reads its configuration then (a leader in a joint
			// configuration proposes to leave it once the entry that
			// entered it is applied: applied later, it proposed the leave
			// twice, and the second panics). So a configuration change is
			// applied before Advance, as etcd's server waits for one.
			if err := n.applyTaken(); err != nil {
				return out, err
			}
		}
		n.rn.Advance(rd)
		if reask {
			n.askReads()
		}
	}
	return out, nil
}

// Apply is Process's second half: it applies the committed entries
// Persist took in, answering the proposals and reads they complete.
func (n *Node) Apply() error {
	if err := n.applyTaken(); err != nil {
		return err
	}
	n.answerReads()
	return n.maybeSnapshot()
}

// applyTaken applies the committed entries Persist took in.
func (n *Node) applyTaken() error {
	ents := n.toApply
	n.toApply = nil
	if err := n.apply(ents); err != nil {
		return err
	}
	if n.leading && n.head == nil && n.appliedIndex >= n.readyAt {
		n.head = n.applied
	}
	return nil
}

// confChanges: the entries hold a configuration change.
func confChanges(ents []*raftpb.Entry) bool {
	for _, e := range ents {
		if e.GetType() != raftpb.EntryNormal {
			return true
		}
	}
	return false
}

// apply applies committed entries in order: each data entry is the next
// revision's write set.
func (n *Node) apply(ents []*raftpb.Entry) error {
	for _, e := range ents {
		if e.GetIndex() <= n.appliedIndex {
			continue
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.Data) == 0 {
				break // a new leader's empty entry: no revision
			}
			from, seq := entryHeader(e.Data)
			if seq == recordSeq {
				if err := n.applyRecords(e); err != nil {
					return err
				}
				break
			}
			var ws *txn.WriteSet
			var next *txn.State
			// This member's own proposal of this leadership (the term tells
			// it from an entry a process of the same id proposed before a
			// restart, whose sequence numbers started again).
			own := n.props[seq]
			if own != nil && (from != n.cfg.ID || e.GetTerm() != own.term) {
				own = nil
			}
			if p := own; p != nil && p.ws != nil {
				// Its own proposal: evaluated here against the head whose
				// entries come before it, so it applies as it is.
				ws = p.ws
				if ws.Revision != n.applied.Revision()+1 {
					return n.outOfOrder(e, ws)
				}
				next = n.applied.Apply(ws)
			} else {
				var err error
				ws, err = n.decodeEntry(e.Data, n.applied)
				if err != nil {
					return fmt.Errorf("replica %d: entry %d: %w", n.cfg.ID, e.GetIndex(), err)
				}
				if ws.Revision != n.applied.Revision()+1 {
					return n.outOfOrder(e, ws)
				}
				if next, err = n.applied.ApplyChecked(ws); err != nil {
					return fmt.Errorf("replica %d: entry %d (revision %d): %w", n.cfg.ID, e.GetIndex(), ws.Revision, err)
				}
			}

			n.applied = next
			if n.cfg.OnApply != nil {
				n.cfg.OnApply(ws)
			}
			if own != nil {
				own.Done = true
				delete(n.props, seq)
			}
		case raftpb.EntryConfChange:
			cc := &raftpb.ConfChange{}
			if err := proto.Unmarshal(e.Data, cc); err != nil {
				return err
			}
			n.applyConf(cc)
		case raftpb.EntryConfChangeV2:
			cc := &raftpb.ConfChangeV2{}
			if err := proto.Unmarshal(e.Data, cc); err != nil {
				return err
			}
			if len(cc.GetContext()) > 0 {
				rec := &omegav1.CellMembers{}
				if err := proto.Unmarshal(cc.GetContext(), rec); err != nil {
					return fmt.Errorf("replica %d: entry %d: a configuration change's member records: %w", n.cfg.ID, e.GetIndex(), err)
				}
				n.takeRecords(rec)
			}
			n.applyConf(cc)
		}
		n.appliedIndex = e.GetIndex()
	}
	// A proposal at a revision the state has passed that was not this
	// member's entry will never commit.
	for seq, p := range n.props {
		if p.Revision <= n.applied.Revision() {
			p.Err, p.Done = ErrOutcomeUnknown, true
			delete(n.props, seq)
		}
	}
	return nil
}

// outOfOrder is the error of an entry whose revision does not follow the
// state's, with what tells where it came from (term, proposer and its
// sequence, the snapshot the state started from).
func (n *Node) outOfOrder(e *raftpb.Entry, ws *txn.WriteSet) error {
	from, seq := entryHeader(e.Data)
	return fmt.Errorf("replica %d: entry %d (term %d, proposed by raft id %d as its proposal %d) holds revision %d, the state is at %d (applied index %d, snapshot at %d): the log broke the revisions' order",
		n.cfg.ID, e.GetIndex(), e.GetTerm(), from, seq, ws.Revision, n.applied.Revision(), n.appliedIndex, n.snapIndex)
}

// applyConf applies a configuration change. One that brings in a member
// makes the next Apply snapshot: raft's member refuses a snapshot whose
// configuration does not name it, and a new member needs one (the log
// before it is compacted, or starts after the new cell's snapshot).
func (n *Node) applyConf(cc raftpb.ConfChangeI) {
	before := map[uint64]bool{}
	if n.conf != nil {
		for _, id := range slices.Concat(n.conf.Voters, n.conf.Learners, n.conf.VotersOutgoing) {
			before[id] = true
		}
	}
	n.conf = n.rn.ApplyConfChange(cc)
	n.confProposed = false
	for _, id := range slices.Concat(n.conf.Voters, n.conf.Learners) {
		if !before[id] {
			n.snapDue = true
		}
	}
	if before[n.cfg.ID] && !n.InConfig() {
		n.removedSelf = true
	}
}

// restore takes a snapshot's state (a member far behind, or wiped).
func (n *Node) restore(snap *raftpb.Snapshot) error {
	st, records, err := DecodeSnapshot(snap.GetData())
	if err != nil {
		return fmt.Errorf("replica %d: snapshot at index %d: %w", n.cfg.ID, snap.GetMetadata().GetIndex(), err)
	}
	n.setRecords(records)
	n.applied, n.appliedIndex = st, snap.GetMetadata().GetIndex()
	n.snapIndex, n.conf = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetConfState()
	if n.cfg.OnRestore != nil {
		n.cfg.OnRestore(st)
	}
	return nil
}

func (n *Node) answerReads() {
	keep := n.confirmed[:0]
	for _, r := range n.confirmed {
		if r.index <= n.appliedIndex {
			r.State, r.Done = n.applied, true
			delete(n.reads, r.id)
			continue
		}
		keep = append(keep, r)
	}
	n.confirmed = keep
}

// maybeSnapshot snapshots the applied state and compacts the log behind
// it, every SnapshotEvery entries, and after a member came in.
func (n *Node) maybeSnapshot() error {
	if n.appliedIndex < n.snapIndex+n.cfg.SnapshotEvery && !(n.snapDue && n.appliedIndex > n.snapIndex) {
		return nil
	}
	n.snapDue = false
	data, err := EncodeSnapshot(n.applied, n.records())
	if err != nil {
		return err
	}
	snap, err := n.storage.CreateSnapshot(n.appliedIndex, n.conf, data)
	if err != nil {
		return err
	}
	if n.cfg.Disk != nil {
		if err := n.cfg.Disk.SaveSnapshot(snap); err != nil {
			return fmt.Errorf("replica %d: persist a snapshot: %w", n.cfg.ID, err)
		}
	}
	n.snapIndex = n.appliedIndex
	n.snapshots++
	if keep := n.cfg.SnapshotEvery / 2; n.appliedIndex > keep {
		err := n.storage.Compact(n.appliedIndex - keep)
		if err != nil && !errors.Is(err, raft.ErrCompacted) {
			return err
		}
		if err == nil {
			n.compactions++
		}
	}
	return nil
}
