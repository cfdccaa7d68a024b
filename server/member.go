package server

// A server as a member of a replicated cell: its raft member started over
// the store, the cell's id, what it says of itself, the data directory's
// kind, and a single server's data made the first member (Upgrade).

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/grpc"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/replica"
	replicalive "github.com/omega-cell/omega/replica/live"
	"github.com/omega-cell/omega/store"
)

// checkDataDir refuses a data directory of the other kind: a single
// server's store (pebble's files) for a replicated member, whose state is
// in DataDir/raft and would start without it, and a replicated member's
// for a single server, which would open an empty store beside it.
func checkDataDir(c Config) error {
	_, rerr := os.Stat(filepath.Join(c.DataDir, "raft"))
	manifests, _ := filepath.Glob(filepath.Join(c.DataDir, "MANIFEST-*"))
	switch {
	case len(c.Peers) > 0 && len(manifests) > 0:
		return &ConfigError{Field: "DataDir", Why: fmt.Sprintf("%s holds a single server's store; a replicated cell's member keeps the cell in %s and would start without it. Start the member on an empty directory, or make the single server's data the first member with omega server upgrade",
			c.DataDir, filepath.Join(c.DataDir, "raft"))}
	case len(c.Peers) == 0 && rerr == nil:
		return &ConfigError{Field: "DataDir", Why: fmt.Sprintf("%s holds a replicated cell's member (%s): start it with --peers and --member as before", c.DataDir, filepath.Join(c.DataDir, "raft"))}
	}
	return nil
}

// peerDialOptions are how a member dials its peers (replica/live's
// DialOptions from the server's TLS and peer token files).
func peerDialOptions(c Config) ([]grpc.DialOption, error) {
	opts, err := replicalive.DialOptions(c.TLSCA, c.TLSCert, c.TLSKey, c.PeerTokenFile)
	if err != nil {
		field := "TLSCert"
		if errors.Is(err, replicalive.ErrPeerToken) {
			field = "PeerTokenFile"
		}
		return nil, &ConfigError{Field: field, Err: err}
	}
	return opts, nil
}

// describeMember is a replicated member's answer to Server.
func describeMember(ctx context.Context, c Config, member *replicalive.Driver, addr string, rev uint64) (*cellgrpc.ServerStatus, error) {
	ms, err := member.Status(ctx)
	if err != nil {
		return nil, err
	}
	out := &cellgrpc.ServerStatus{Member: c.Member, RaftId: ms.ID, Address: addr, Role: ms.State, Leader: replica.MemberOf(ms.Leader),
		Term: ms.Term, CommitIndex: ms.Commit, AppliedIndex: ms.Applied, Revision: rev,
		ProposalsPending: uint64(ms.Pending), Snapshots: ms.Snapshots, Compactions: ms.Compactions}
	if !ms.Voter {
		out.Role = "joining"
	}
	if !ms.Voter && slices.Contains(ms.Learners, ms.ID) {
		out.Role = "learner"
	}
	ids := map[uint64]uint64{} // member → raft id in the configuration
	learner := map[uint64]bool{}
	for _, id := range ms.Voters {
		ids[replica.MemberOf(id)] = id
	}
	for _, id := range ms.Learners {
		ids[replica.MemberOf(id)], learner[replica.MemberOf(id)] = id, true
	}
	members := member.Members()
	for _, m := range slices.Sorted(maps.Keys(members)) {
		p := &cellgrpc.PeerStatus{Member: m, Address: members[m], RaftId: ids[m], Learner: learner[m]}
		if pr, ok := ms.Progress[ids[m]]; ok && ids[m] != 0 {
			p.Match, p.Progress, p.RecentActive = pr.Match, pr.State, pr.RecentActive
		}
		out.Peers = append(out.Peers, p)
	}
	return out, nil
}

// ClusterID is what a replicated cell's members tell each other apart from
// other cells by (every peer message and join names it): the cell's name
// ("omega" when empty) and a hash of its members' numbers and addresses,
// so that two cells of the same name on one host — tests, or a cell
// started again on other ports — refuse each other's messages when one's
// member finds a port the other's used to have.
func ClusterID(name string, peers map[uint64]string) string {
	if name == "" {
		name = "omega"
	}
	h := fnv.New64a()
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		fmt.Fprintf(h, "%d=%s,", id, peers[id])
	}
	return fmt.Sprintf("%s/%016x", name, h.Sum64())
}

// startMember starts this server's raft member over st (Config.Peers).
func startMember(c Config, st *store.Store, log *slog.Logger) (*replicalive.Driver, error) {
	var peers []uint64
	for id := range c.Peers {
		peers = append(peers, id)
	}
	slices.Sort(peers)
	if _, ok := c.Peers[c.Member]; !ok || c.Member == 0 {
		return nil, &ConfigError{Field: "Member", Why: fmt.Sprintf("%d is not among the peers' ids %v", c.Member, peers)}
	}
	if peers[len(peers)-1] > replica.MaxMember {
		return nil, &ConfigError{Field: "Peers", Why: fmt.Sprintf("member number %d is over %d", peers[len(peers)-1], uint64(replica.MaxMember))}
	}
	cluster := ClusterID(c.Cluster, c.Peers)
	dial, err := peerDialOptions(c)
	if err != nil {
		return nil, err
	}
	drv, err := replicalive.Start(replicalive.Config{
		Member: replica.Config{ID: c.Member, Peers: peers}, Dir: filepath.Join(c.DataDir, "raft"),
		Addrs: c.Peers, Cluster: cluster, Logger: log, Tick: c.RaftTick, Join: c.Join, DialOptions: dial,
	}, replicalive.Hooks{OnApply: st.Install, OnRestore: st.Reset})
	if err != nil {
		return nil, fmt.Errorf("start raft member %d in %s: %w", c.Member, c.DataDir, err)
	}
	log.Info("raft member", "member", c.Member, "id", drv.ID(), "peers", c.Peers, "cluster", cluster, "joining", !drv.Voter())
	return drv, nil
}

// Upgrade makes a single server's data directory (the server stopped) the
// first member of a replicated cell, in a directory of its own, toDir:
// member 1 at addr, the one voter, holding the store's state at its
// revision (replica.BootstrapDisk); the cell's id is the one a member
// started with --cluster cluster and --peers 1=addr makes. The single
// server's directory is left as it was. It returns the revision and the
// cell's id.
func Upgrade(dataDir, toDir, addr, cluster string) (uint64, string, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "raft")); err == nil {
		return 0, "", &ConfigError{Field: "DataDir", Why: fmt.Sprintf("%s holds a replicated cell's member already", dataDir)}
	}
	if manifests, _ := filepath.Glob(filepath.Join(dataDir, "MANIFEST-*")); len(manifests) == 0 {
		return 0, "", &ConfigError{Field: "DataDir", Why: fmt.Sprintf("%s holds no single server's store (no pebble MANIFEST)", dataDir)}
	}
	if ents, err := os.ReadDir(toDir); err == nil && len(ents) > 0 {
		return 0, "", &ConfigError{Field: "To", Why: fmt.Sprintf("%s is not empty: the first member starts in a directory of its own", toDir)}
	}
	opts := store.DefaultOptions(dataDir)
	opts.Logger = slog.New(slog.DiscardHandler)
	st, err := store.Open(opts)
	if err != nil {
		return 0, "", fmt.Errorf("open the single server's store in %s (is its server stopped?): %w", dataDir, err)
	}
	state := st.Snapshot()
	if err := st.Close(); err != nil {
		return 0, "", err
	}
	cell := ClusterID(cluster, map[uint64]string{1: addr})
	if err := replica.BootstrapDisk(filepath.Join(toDir, "raft"), state, 1, addr, cell); err != nil {
		return 0, "", err
	}
	return state.Revision(), cell, nil
}
