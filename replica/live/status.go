package live

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/omega-cell/omega/replica"
)

// Status is a member's raft state at one moment, taken on its driver's
// goroutine.
type Status struct {
	ID, Leader      uint64 // raft ids (Leader 0: none known)
	State           string // leader, follower, candidate, pre-candidate
	Term            uint64
	Commit, Applied uint64
	Voter           bool
	Voters          []uint64 // the configuration's (incoming) voters
	Progress        map[uint64]Progress
	// Pending is how many commits wait for their entries; Snapshots,
	// Compactions and SnapshotSeconds what the member made since it
	// started and how long the applies that made them took.
	Pending                int
	Snapshots, Compactions uint64
	SnapshotSeconds        float64
}

// Progress is the leader's view of one member.
type Progress struct {
	Match        uint64
	State        string // probe, replicate, snapshot
	RecentActive bool
}

// Status returns the member's raft state, read on its goroutine.
func (d *Driver) Status(ctx context.Context) (Status, error) {
	reply := make(chan Status, 1)
	f := func(n *replica.Node) {
		st := n.Status()
		s := Status{ID: n.ID(), Leader: st.Lead, Term: st.GetTerm(), Commit: st.GetCommit(), Applied: n.AppliedIndex(), Voter: n.Voter()}
		switch st.RaftState {
		case raft.StateLeader:
			s.State = "leader"
		case raft.StateCandidate:
			s.State = "candidate"
		case raft.StatePreCandidate:
			s.State = "pre-candidate"
		default:
			s.State = "follower"
		}
		for id := range st.Config.Voters[0] {
			s.Voters = append(s.Voters, id)
		}
		slices.Sort(s.Voters)
		if len(st.Progress) > 0 {
			s.Progress = map[uint64]Progress{}
			for id, pr := range st.Progress {
				s.Progress[id] = Progress{Match: pr.Match, State: strings.ToLower(strings.TrimPrefix(pr.State.String(), "State")), RecentActive: pr.RecentActive}
			}
		}
		s.Pending = int(d.pending.Load())
		s.Snapshots, s.Compactions = d.snapshots.Load(), d.compactions.Load()
		s.SnapshotSeconds = time.Duration(d.snapNanos.Load()).Seconds()
		reply <- s
	}
	select {
	case d.reports <- f:
	case <-d.done:
		return Status{}, ErrStopped
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
	select {
	case s := <-reply:
		return s, nil
	case <-d.done:
		return Status{}, ErrStopped
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// TransferLeadership, if this member leads, hands the lead to the most
// up-to-date voter (replica.Node.TransferLeadership) and waits, within
// ctx, until another member leads. It returns the member number that
// leads then (0 if this member did not lead).
func (d *Driver) TransferLeadership(ctx context.Context) (uint64, error) {
	if !d.Leads() {
		return 0, nil
	}
	reply := make(chan error, 1)
	f := func(n *replica.Node) {
		_, err := n.TransferLeadership()
		reply <- err
	}
	select {
	case d.reports <- f:
	case <-d.done:
		return 0, ErrStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case err := <-reply:
		if err != nil {
			return 0, err
		}
	case <-d.done:
		return 0, ErrStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	t := time.NewTicker(d.cfg.Tick / 5)
	defer t.Stop()
	for {
		if l := d.lead.Load(); l != 0 && l != d.cfg.Member.ID {
			return replica.MemberOf(l), nil
		}
		select {
		case <-t.C:
		case <-d.done:
			return 0, ErrStopped
		case <-ctx.Done():
			return 0, fmt.Errorf("the lead did not move: %w", ctx.Err())
		}
	}
}
