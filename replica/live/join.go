package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

// JoinEvery is how often a joining member asks the peers to take it in.
const JoinEvery = 500 * time.Millisecond

// ErrPeerToken: DialOptions could not read the member's peer token.
var ErrPeerToken = errors.New("the peer token")

// DialOptions are how a server's member dials its peers: over TLS when
// certFile is set (the peers' certificates checked against caFile, else
// the host's roots; certFile and keyFile presented), else in plain text;
// presenting the token in tokenFile when set.
func DialOptions(caFile, certFile, keyFile, tokenFile string) ([]grpc.DialOption, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if certFile != "" {
		tc, err := remote.TLSConfig(caFile, certFile, keyFile, "")
		if err != nil {
			return nil, err
		}
		opts = append(opts, remote.WithTLS(tc))
	}
	if tokenFile != "" {
		tok, err := remote.ReadToken(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPeerToken, err)
		}
		opts = append(opts, remote.WithToken(tok))
	}
	return opts, nil
}

// dialOptions are the options the member dials its peers with.
func (d *Driver) dialOptions() []grpc.DialOption {
	if len(d.cfg.DialOptions) > 0 {
		return d.cfg.DialOptions
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
}

// join asks the peers, in turn, every JoinEvery, to make this member's
// raft id the member's, until it is in the configuration it holds (the
// leader's snapshot came: a voter, or a learner the leader promotes once
// it has caught up) or the driver stops. The first answer gives it the
// cell's id, which it records. Live code: dials and a timer.
func (d *Driver) join() {
	member, id := replica.MemberOf(d.cfg.Member.ID), d.cfg.Member.ID
	addrs := d.Members()
	var peers []uint64
	for m := range addrs {
		if m != member {
			peers = append(peers, m)
		}
	}
	slices.Sort(peers)
	conns := map[uint64]*grpc.ClientConn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	d.log.Info("raft member: joining the cell; asking the leader to take this member in under its new id", "member", member, "id", id, "peers", peers)
	t := time.NewTicker(JoinEvery)
	defer t.Stop()
	var last string
	asked := false
	for !d.inConfig.Load() {
		for _, p := range peers {
			if d.inConfig.Load() {
				break
			}
			c, ok := conns[p]
			if !ok {
				var err error
				if c, err = grpc.NewClient(addrs[p], d.dialOptions()...); err != nil {
					continue
				}
				conns[p] = c
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := cellgrpc.NewPeerClient(c).Join(ctx, &cellgrpc.JoinRequest{Cluster: d.Cluster(), Member: member, Id: id})
			cancel()
			if err == nil && len(resp.GetMembers().GetMembers()) > 0 {
				// Where the leader and the others are, before the snapshot
				// says so: the answers to the leader go there.
				learned := map[uint64]string{}
				for _, m := range resp.GetMembers().GetMembers() {
					learned[m.GetMember()] = m.GetAddress()
				}
				d.learned.Store(&learned)
			}
			if cell := resp.GetCluster(); err == nil && cell != "" && cell != d.Cluster() {
				d.report(func(*replica.Node) {
					if err := d.setCluster(cell); err != nil {
						d.log.Error("raft member: record the cell's id", "err", err)
					}
				})
			}
			if err != nil && status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "was removed from the cell") {
				msg := status.Convert(err).Message()
				d.refused.Store(&msg) // the driver stops: this member is out of the cell
				d.log.Warn("raft member: the cell removed this member; it stops", "member", member, "err", msg)
				return
			}
			switch {
			case err == nil && !asked:
				asked = true
				d.log.Info("raft member: the leader takes this member in; waiting for its snapshot", "member", member, "id", id, "leader", p, "done", resp.GetDone())
			case err != nil && status.Code(err) == codes.FailedPrecondition && !errors.Is(err, context.DeadlineExceeded) && status.Convert(err).Message() != last && !isNotLeader(err):
				// Said once per distinct refusal: the old member still
				// answers, say.
				last = status.Convert(err).Message()
				d.log.Warn("raft member: the leader refuses to take this member in (yet)", "member", member, "from", p, "err", last)
			}
		}
		select {
		case <-d.done:
			return
		case <-t.C:
		}
	}
	d.log.Info("raft member: joined the cell", "member", member, "id", id)
}

// notLeaderPrefix starts the message of a Join sent to a member that does
// not lead.
const notLeaderPrefix = "not the leader"

func isNotLeader(err error) bool {
	msg := status.Convert(err).Message()
	return len(msg) >= len(notLeaderPrefix) && msg[:len(notLeaderPrefix)] == notLeaderPrefix
}

// cellName is a cell id's name: the part before "/" (server.ClusterID).
func cellName(cell string) string {
	name, _, _ := strings.Cut(cell, "/")
	return name
}

// Join is the peer service's: this member, if it leads, takes a joining
// one in (Driver.Join). A member new to the cell may name it by its name
// alone (its --peers, naming itself, make another id): the answer gives
// it the cell's id.
func (p peerServer) Join(ctx context.Context, req *cellgrpc.JoinRequest) (*cellgrpc.JoinResponse, error) {
	cell := p.d.Cluster()
	if req.GetCluster() != cell && cellName(req.GetCluster()) != cellName(cell) {
		return nil, status.Errorf(codes.FailedPrecondition, "join: a member of cell %s; this is cell %s", txn.Quote(req.GetCluster()), txn.Quote(cell))
	}
	if req.GetMember() == 0 || req.GetMember() > replica.MaxMember || replica.MemberOf(req.GetId()) != req.GetMember() || req.GetId() <= replica.MaxMember {
		return nil, status.Errorf(codes.InvalidArgument, "join: raft id %d is not a joining id of member %d (member<<32 | nonce)", req.GetId(), req.GetMember())
	}
	if _, ok := p.d.addr(req.GetMember()); !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "join: member %d is not in the cell's records: add it first (omega server add %d --address ADDR)", req.GetMember(), req.GetMember())
	}
	done, err := p.d.Join(ctx, req.GetMember(), req.GetId())
	var nl *replica.NotLeaderError
	switch {
	case err == nil:
		if !done {
			p.d.log.Info("raft member: a joining member replaces its old id", "member", req.GetMember(), "id", req.GetId())
		}
		var members *omegav1.CellMembers
		if v := p.d.view.Load(); v != nil {
			members = &omegav1.CellMembers{}
			for _, m := range slices.Sorted(maps.Keys(v.addrs)) {
				members.Members = append(members.Members, &omegav1.CellMember{Member: m, Address: v.addrs[m]})
			}
		}
		return &cellgrpc.JoinResponse{Done: done, Cluster: cell, Members: members}, nil
	case errors.As(err, &nl):
		if nl.Leader == 0 {
			return nil, status.Errorf(codes.Unavailable, "join: no leader is known")
		}
		// Asked of a follower: forwarded to the leader once (the joiner's
		// --peers may not name it: a member added since, say).
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(forwardedKey)) == 0 {
			if addr, ok := p.d.addr(replica.MemberOf(nl.Leader)); ok {
				conn, derr := grpc.NewClient(addr, p.d.dialOptions()...)
				if derr == nil {
					defer conn.Close()
					req.Cluster = cell // the joiner may have named the cell by name alone
					return cellgrpc.NewPeerClient(conn).Join(metadata.AppendToOutgoingContext(ctx, forwardedKey, "1"), req)
				}
			}
		}
		return nil, status.Errorf(codes.FailedPrecondition, "%s: member %d leads", notLeaderPrefix, replica.MemberOf(nl.Leader))
	case errors.Is(err, replica.ErrNotReady), errors.Is(err, replica.ErrConfBusy), errors.Is(err, ErrStopped):
		return nil, status.Errorf(codes.Unavailable, "join: %v", err)
	case errors.Is(err, replica.ErrMemberAlive), errors.Is(err, replica.ErrNoSuchMember):
		return nil, status.Errorf(codes.FailedPrecondition, "join: %v", err)
	case errors.Is(err, txn.ErrInvalid):
		return nil, status.Errorf(codes.InvalidArgument, "join: %v", err)
	}
	return nil, status.Error(codes.Unknown, fmt.Sprintf("join: %v", err))
}
