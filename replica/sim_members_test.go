package replica

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestReplicatedCellMembershipChanges is the first test with the
// membership changing under the faults and the clients: a fifth into the
// run a member is added (AddMember's placeholder learner, its server
// joining empty under its own id and sent a snapshot, promoted once it
// caught up), and then a founder that does not lead is removed (it stops
// when it applies its removal, or when a member refuses its messages);
// the leader's own removal and a removed number's second add are refused.
// With disks for half the seeds.
func TestReplicatedCellMembershipChanges(t *testing.T) {
	simTestChurn(t, true, false, 6, true)
	t.Run("disks", func(t *testing.T) { simTestChurn(t, true, true, 3, true) })
}

// changeMembers adds the spare member a fifth into the run and, once it is
// a voter, removes a founder that does not lead (asking the leader each
// step until it is done, as an operator's command retries).
func (c *simCell) changeMembers(s, steps int) {
	spare := c.members[len(c.members)-1]
	l := c.leader()
	switch {
	case s < steps/5 || l == nil || l.node.Removed():
	case spare.absent:
		done, err := l.node.AddMember(spare.slot, fmt.Sprintf("sim-%d:1", spare.slot))
		if err != nil && !errors.Is(err, ErrConfBusy) && !errors.Is(err, ErrNotReady) && !errors.Is(err, ErrNotLeader) {
			c.t.Fatalf("step %d: add member %d: %v", c.now, spare.slot, err)
		}
		c.process(l)
		if done { // the placeholder is in: its server starts, empty, joining
			spare.absent, spare.wiped, c.added = false, true, c.now
			spare.id = spare.slot
			c.start(spare)
		}
	case c.promoted == 0:
		if spare.node != nil && spare.node.Voter() {
			c.promoted = c.now
		}
	case c.removedAt == 0:
		if c.victim == nil || c.victim == l {
			c.victim = nil
			for _, m := range c.active() {
				if m != l && m != spare {
					c.victim = m
					break
				}
			}
		}
		victim := c.victim
		if _, err := l.node.RemoveMember(l.slot); !errors.Is(err, ErrLeaderRemoval) {
			c.t.Fatalf("step %d: the leader's own removal: %v, want ErrLeaderRemoval", c.now, err)
		}
		done, err := l.node.RemoveMember(victim.slot)
		if err != nil && !errors.Is(err, ErrConfBusy) && !errors.Is(err, ErrNotReady) && !errors.Is(err, ErrNotLeader) {
			c.t.Fatalf("step %d: remove member %d: %v", c.now, victim.slot, err)
		}
		c.process(l)
		if done {
			c.removedAt = c.now
			if victim.node == nil || !victim.node.InConfig() {
				// Down, or joining (its data lost): the leader's refusal of
				// its join says it was removed, and it stops.
				victim.node, victim.removed = nil, true
			}
			if _, err := l.node.AddMember(victim.slot, "elsewhere:1"); !errors.Is(err, ErrMemberTaken) {
				c.t.Fatalf("step %d: member %d added again after its removal: %v, want ErrMemberTaken", c.now, victim.slot, err)
			}
		}
	}
}

// TestWipedMemberWithoutJoin: the mistake the incarnation records catch.
// The leader commits with one follower while the third is cut off; that
// follower's data is then lost and it is started again under its old id,
// as a new cell's member, without joining; the leader crashes, the cut
// heals, and the third member stands for election. The wiped member would
// vote for it (its log is empty), and the writes only the leader and it
// had acknowledged would be lost. Its vote is refused: its incarnation is
// not the one the cell recorded for its id, and it stops; no leader is
// elected without the old one, which comes back with the writes.
func TestWipedMemberWithoutJoin(t *testing.T) {
	c := newSimCell(t, 7, 3, true, false, false)
	var leader *simMember
	for i := 0; leader == nil; i++ {
		if i > 1000 {
			t.Fatal("no leader in 1,000 steps")
		}
		c.step()
		leader = c.leader()
	}
	var third, wiped *simMember
	for _, m := range c.members {
		switch {
		case m == leader:
		case third == nil:
			third = m
		default:
			wiped = m
		}
	}
	// Incarnations recorded: a few steps of heartbeats.
	for i := 0; len(leader.node.Incarnations()) < 3 || len(third.node.Incarnations()) < 3; i++ {
		if i > 200 {
			t.Fatalf("the incarnations were not recorded in 200 steps: %v", leader.node.Incarnations())
		}
		c.step()
	}
	c.cut[[2]uint64{min(leader.slot, third.slot), max(leader.slot, third.slot)}] = true
	third.patience = 1 << 40 // it waits: the cut is not its cue
	var acked []uint64
	for k := range 5 {
		j := testkit.Job(uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "w%d", k)), fmt.Sprintf("w%d", k), "batch")
		p, _, err := leader.node.Commit(&txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(j)}})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; !p.Done; i++ {
			if i > 200 {
				t.Fatal("a write with the leader and one follower did not commit in 200 steps")
			}
			c.step()
		}
		if p.Err != nil {
			t.Fatal(p.Err)
		}
		acked = append(acked, p.Revision)
	}
	// The follower's data lost, started again as a new cell's member.
	leader.node = nil
	wiped.node, wiped.wiped, wiped.oldID = nil, true, true
	c.inflight = nil // what was on the wire is lost with the crashes
	c.start(wiped)
	clear(c.cut)
	third.patience = 5
	for range 300 {
		c.step()
		if l := c.leader(); l != nil && l != leader {
			t.Fatalf("member %d was elected without the crashed leader's writes (revisions %v acknowledged): the wiped member's vote counted", l.id, acked)
		}
	}
	if !wiped.refused {
		t.Fatal("the wiped member, started under its old id without joining, was not refused")
	}
	c.start(leader)
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("no leader in 1,000 steps after the old leader came back")
		}
		c.step()
		if l := c.leader(); l != nil {
			for _, rev := range acked {
				if _, ok := l.log[rev]; !ok && l.node.Applied().Revision() < rev {
					t.Fatalf("the new leader lacks acknowledged revision %d", rev)
				}
			}
			break
		}
	}
}
