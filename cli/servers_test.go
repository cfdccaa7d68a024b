package cli

import (
	"strings"
	"testing"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
)

// The servers' table: a dash where a server has no value (unreachable, or
// single), the leader's view of each member with -o wide.
func TestPrintServers(t *testing.T) {
	peers := []*cellgrpc.PeerStatus{
		{Member: 1, Address: "a:1", RaftId: 1, Match: 9, Progress: "replicate", RecentActive: true},
		{Member: 2, Address: "a:2", RaftId: 2, Match: 9, Progress: "replicate", RecentActive: true},
		{Member: 3, Address: "a:3", RaftId: 3, Match: 4, Progress: "probe"},
	}
	rows := []*cellgrpc.ServerStatus{
		{Member: 1, RaftId: 1, Address: "a:1", Role: "follower", Leader: 2, Term: 5, CommitIndex: 9, AppliedIndex: 9, Revision: 7, Snapshots: 1},
		{Member: 2, RaftId: 2, Address: "a:2", Role: "leader", Leader: 2, Term: 5, CommitIndex: 9, AppliedIndex: 9, Revision: 7, Peers: peers, ProposalsPending: 3, Snapshots: 2},
		{Member: 3, RaftId: 3, Address: "a:3", Role: "unreachable"},
	}
	var b strings.Builder
	if err := printServers(&b, rows, "wide"); err != nil {
		t.Fatal(err)
	}
	want := `MEMBER  ADDRESS  ROLE         LEADER  TERM  COMMIT  APPLIED  REVISION  RAFT-ID  MATCH  PROGRESS   ACTIVE  PENDING  SNAPSHOTS
1       a:1      follower     2       5     9       9        7         1        9      replicate  true    0        1
2       a:2      leader       2       5     9       9        7         2        9      replicate  true    3        2
3       a:3      unreachable  -       -     -       -        -         3        4      probe      false   -        -
`
	if b.String() != want {
		t.Fatalf("wide table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := printServers(&b, []*cellgrpc.ServerStatus{{Address: "h:7070", Role: "single", Revision: 12}}, "table"); err != nil {
		t.Fatal(err)
	}
	want = `MEMBER  ADDRESS  ROLE    LEADER  TERM  COMMIT  APPLIED  REVISION
-       h:7070   single  -       -     -       -        12
`
	if b.String() != want {
		t.Fatalf("single:\n%s\nwant:\n%s", b.String(), want)
	}
}
