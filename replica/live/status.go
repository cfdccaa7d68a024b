package live

import (
	"context"
	"errors"
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
	Learners        []uint64 // and its learners (members added, not yet voters)
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
		for id := range st.Config.Learners {
			s.Learners = append(s.Learners, id)
		}
		slices.Sort(s.Learners)
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

// TransferLeadership, if this member leads, hands the lead to member to
// (0: the most up-to-date voter; replica.Node.TransferLeadership) and
// waits, within ctx, until another member leads. It returns the member
// number that leads then (0 if this member did not lead).
func (d *Driver) TransferLeadership(ctx context.Context, to uint64) (uint64, error) {
	if !d.Leads() {
		return 0, nil
	}
	reply := make(chan error, 1)
	f := func(n *replica.Node) {
		_, err := n.TransferLeadership(to)
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

// call runs f on the member's goroutine and returns what it returns.
func (d *Driver) call(ctx context.Context, f func(n *replica.Node) (bool, error)) (bool, error) {
	type result struct {
		done bool
		err  error
	}
	reply := make(chan result, 1)
	g := func(n *replica.Node) {
		done, err := f(n)
		reply <- result{done, err}
	}
	select {
	case d.reports <- g:
	case <-d.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case r := <-reply:
		return r.done, r.err
	case <-d.done:
		return false, ErrStopped
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// ChangeWait bounds how long AddMember and RemoveMember wait for the
// change they proposed to be applied.
const ChangeWait = 10 * time.Second

// ErrChangeUnknown: a membership change was proposed and not seen applied
// in time (the leader changed, say): it may yet be, or never.
var ErrChangeUnknown = errors.New("the change was proposed and not seen applied: its outcome is unknown (omega get servers tells)")

// AddMember, if this member leads, adds member at addr to the cell
// (replica.Node.AddMember) and waits, within ctx and ChangeWait, until the
// change is applied here. done is false when the member was in the cell
// at addr already.
func (d *Driver) AddMember(ctx context.Context, member uint64, addr string) (added bool, err error) {
	done, err := d.call(ctx, func(n *replica.Node) (bool, error) { return n.AddMember(member, addr) })
	if err != nil || done {
		return false, err
	}
	return true, d.await(ctx, func(n *replica.Node) bool {
		a, _ := n.Addrs()
		return a[member] == addr
	})
}

// RemoveMember, if this member leads, removes member from the cell
// (replica.Node.RemoveMember) and waits, within ctx and ChangeWait, until
// the change is applied here. removed is false when it was out already.
func (d *Driver) RemoveMember(ctx context.Context, member uint64) (removed bool, err error) {
	done, err := d.call(ctx, func(n *replica.Node) (bool, error) { return n.RemoveMember(member) })
	if err != nil || done {
		return false, err
	}
	return true, d.await(ctx, func(n *replica.Node) bool { return n.MemberRemoved(member) })
}

// await polls cond on the member's goroutine every tick until it holds.
func (d *Driver) await(ctx context.Context, cond func(n *replica.Node) bool) error {
	ctx, cancel := context.WithTimeout(ctx, ChangeWait)
	defer cancel()
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	for {
		ok, err := d.call(ctx, func(n *replica.Node) (bool, error) { return cond(n), nil })
		if ok {
			return nil
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ErrChangeUnknown
		}
	}
}
