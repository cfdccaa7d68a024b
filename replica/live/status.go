package live

import (
	"context"
	"slices"
	"strings"

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
