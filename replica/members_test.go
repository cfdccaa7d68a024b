package replica

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// settle steps the simulated cell until cond holds, at most n steps.
func settle(t *testing.T, c *simCell, n int, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > n {
			t.Fatalf("%s: not within %d steps", what, n)
		}
		c.step()
	}
}

// TestMembershipRefusals: what AddMember and RemoveMember refuse, each
// with its error: a number or an address taken, a removed number added
// again, a member that is not there, a second change while one is in
// flight, the leader's own removal, the last voter's; and a follower
// answers NotLeaderError naming the leader.
func TestMembershipRefusals(t *testing.T) {
	c := newSimCell(t, 3, 3, true, false, false)
	var l *simMember
	settle(t, c, 1000, "a leader", func() bool { l = c.leader(); return l != nil })
	var f *simMember
	for _, m := range c.members {
		if m != l {
			f = m
			break
		}
	}
	if _, err := f.node.AddMember(4, "sim-4:1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's AddMember: %v, want ErrNotLeader", err)
	}
	for _, tc := range []struct {
		member uint64
		addr   string
		want   error
	}{
		{2, "sim-9:1", ErrMemberTaken},
		{4, "sim-1:1", ErrMemberTaken},
		{0, "sim-9:1", txn.ErrInvalid},
		{4, "", txn.ErrInvalid},
		{4, "no-port", txn.ErrInvalid},
		{4, strings.Repeat("x", 300) + ":1", txn.ErrInvalid},
	} {
		if _, err := l.node.AddMember(tc.member, tc.addr); !errors.Is(err, tc.want) {
			t.Errorf("AddMember(%d, %q): %v, want %v", tc.member, tc.addr, err, tc.want)
		}
	}
	if _, err := l.node.RemoveMember(9); !errors.Is(err, ErrNoSuchMember) {
		t.Errorf("RemoveMember(9): %v, want ErrNoSuchMember", err)
	}
	if _, err := l.node.RemoveMember(l.slot); !errors.Is(err, ErrLeaderRemoval) {
		t.Errorf("the leader's own removal: %v, want ErrLeaderRemoval", err)
	}
	// One change in flight: the next is refused until it is applied.
	if done, err := l.node.AddMember(4, "sim-4:1"); err != nil || done {
		t.Fatalf("AddMember(4): %v %v", done, err)
	}
	if _, err := l.node.AddMember(5, "sim-5:1"); !errors.Is(err, ErrConfBusy) {
		t.Errorf("a second add while the first is in flight: %v, want ErrConfBusy", err)
	}
	if _, err := l.node.RemoveMember(f.slot); !errors.Is(err, ErrConfBusy) {
		t.Errorf("a removal while an add is in flight: %v, want ErrConfBusy", err)
	}
	settle(t, c, 200, "the add applied", func() bool { a, _ := l.node.Addrs(); return a[4] == "sim-4:1" })
	if done, err := l.node.AddMember(4, "sim-4:1"); err != nil || !done {
		t.Errorf("AddMember(4) again at its address: %v %v, want done", done, err)
	}
	if done, err := l.node.RemoveMember(4); err != nil || done {
		t.Fatalf("RemoveMember(4): %v %v", done, err)
	}
	settle(t, c, 200, "the removal applied", func() bool { return l.node.MemberRemoved(4) })
	if _, err := l.node.AddMember(4, "sim-4b:1"); !errors.Is(err, ErrMemberTaken) {
		t.Errorf("a removed number added again: %v, want ErrMemberTaken", err)
	}
	// Every member holds the records, and a snapshot carries them.
	for _, m := range c.members {
		settle(t, c, 200, "the records everywhere", func() bool { return m.node.MemberRemoved(4) })
	}
	data, err := EncodeSnapshot(txn.NewState(), l.node.Records())
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := DecodeSnapshot(data)
	if err != nil || !proto.Equal(recs, l.node.Records()) {
		t.Fatalf("the records through a snapshot: %v %v, want %v", recs, err, l.node.Records())
	}

	// A cell of one: its member is the last voter.
	one := newSimCell(t, 4, 1, true, false, false)
	var solo *simMember
	settle(t, one, 1000, "a leader of one", func() bool { solo = one.leader(); return solo != nil })
	if _, err := solo.node.RemoveMember(1); !errors.Is(err, ErrLastMember) {
		t.Errorf("the last voter's removal: %v, want ErrLastMember", err)
	}
}

// TestDeposedLeaderForwardsNothing: a leader that raft has deposed (a
// message of a later term stepped) but whose Ready this member has not
// processed yet still believes it leads. A commit then must be refused:
// raft would forward the proposal to the new leader, whose log would take
// a write set evaluated against the old leader's head — a revision out of
// order, which stops every member that applies it (the long fault run
// found it).
func TestDeposedLeaderForwardsNothing(t *testing.T) {
	c := newSimCell(t, 5, 3, true, false, false)
	var l *simMember
	settle(t, c, 1000, "a leader", func() bool { l = c.leader(); return l != nil })
	settle(t, c, 1000, "every log alike", func() bool {
		return len(l.node.Incarnations()) == 3 && c.converged()
	})
	var other *simMember
	for _, m := range c.members {
		if m != l {
			other = m
			break
		}
	}
	// Another member stands and wins; the old leader steps a message of
	// the new term, and is asked to commit before its Ready is processed.
	other.node.Campaign()
	c.process(other)
	settle(t, c, 1000, "another leader", func() bool { n := c.leader(); return n != nil && n != l })
	before := c.leader()
	last, _ := before.node.storage.LastIndex()
	l2 := c.members[l.slot-1]
	l2.node.leading = true // as it was before its Ready: the window
	l2.node.head = l2.node.applied
	_, _, err := l2.node.Commit(&txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), "x", "batch"))}})
	if err == nil {
		t.Fatal("a deposed leader's commit was taken (raft forwarded it to the new leader)")
	}
	c.process(l2)
	for range 50 {
		c.step()
	}
	ents, _ := before.node.storage.Entries(last+1, func() uint64 { i, _ := before.node.storage.LastIndex(); return i + 1 }(), 1<<30)
	for _, e := range ents {
		if from, seq := entryHeader(e.Data); from == l2.id && seq != recordSeq && e.GetTerm() == *before.node.Status().Term {
			t.Fatalf("the new leader's log holds entry %d proposed by the deposed leader", e.GetIndex())
		}
	}
}
