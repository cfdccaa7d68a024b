// Package server serves the cell-state store over the network: the gRPC
// API (service omega.v1.Cell: Commit, Snapshot, Watch) over a store.Store,
// for the client library's gRPC transport (client/remote) and for a
// scheduler or agent in any language. It is live code: gRPC runs each call
// on a goroutine of its own, and the store does the deciding.
//
// Still to come with the live cell (issue 8): server-side filters on
// Watch (by machine, by label selector), Get and List, tokens and TLS,
// metrics, and the `omega server` command around it.
package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/grpcerr"
	"github.com/omega-cell/omega/client/transport/rawgrpc"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// WatchHeader is the header key the server sends once a watch is
// established (its value "ok"), so that a client tells a watch that
// started from one refused at once (a compacted revision).
const WatchHeader = "omega-watch"

// MaxMessageBytes bounds a message either way: a transaction at the wire's
// limit (txn.MaxWireBytes), with room for gRPC's framing.
const MaxMessageBytes = txn.MaxWireBytes + 1<<20

// Service is the gRPC service over one store.
type Service struct {
	cellgrpc.UnimplementedCellServer
	st *store.Store
	// ChunkBytes bounds a snapshot chunk and a watch piece (0:
	// txn.DefaultSnapshotChunkBytes).
	ChunkBytes int
	// Metrics, if set, counts what the service does.
	Metrics *Metrics
	// ReadBarrier, if set, makes Snapshot, Get and List linearizable in a
	// replicated cell: it returns once this server has applied everything
	// committed before the call (a raft read index). Nil: a single server,
	// whose state is the cell's.
	ReadBarrier func(ctx context.Context) error
	// Describe, if set, answers Server for a replicated member. Nil: a
	// single server (its role "single" and its revision).
	Describe func(ctx context.Context) (*cellgrpc.ServerStatus, error)
	// ChangeMembers, if set, answers ChangeServers for a replicated member
	// (replica/live's Driver.ChangeServers). Nil: a single server.
	ChangeMembers func(ctx context.Context, req *cellgrpc.ServerChange) (*cellgrpc.ServerChangeResult, error)

	drainOnce sync.Once
	draining  chan struct{} // closed once the commits in flight at the drain are done
	final     uint64        // the store's revision then: every watch sends up to it before it ends
	commitMu  sync.Mutex
	closing   bool           // a drain began: new commits are refused
	inflight  sync.WaitGroup // the commits being served

	// encoded keeps the last revisions as encoded for the wire, so that a
	// revision is encoded once however many watchers send it.
	encMu          sync.Mutex
	encoded        [256]*encodedRev
	encodedPartial [256]*encodedRev // the same with partial changes (WatchRequest.partial_changes)
}

type encodedRev struct {
	rev  uint64
	msgs []*rawgrpc.Msg
}

// encodeOne encodes ws's pieces for the wire (partial: with partial
// changes), by the hand encoder: the bytes Chunks' messages marshal to.
func encodeOne(ws *txn.WriteSet, partial bool, chunk int) ([]*rawgrpc.Msg, error) {
	var msgs []*rawgrpc.Msg
	err := ws.AppendChunks(partial, chunk, func(b []byte) error {
		msgs = append(msgs, &rawgrpc.Msg{B: b})
		return nil
	})
	return msgs, err
}

// encode returns ws's pieces encoded for the wire, from the cache when
// another watcher encoded them already.
func (s *Service) encode(ws *txn.WriteSet, partial bool) ([]*rawgrpc.Msg, error) {
	cache := &s.encoded
	if partial {
		cache = &s.encodedPartial
	}
	slot := &cache[ws.Revision%uint64(len(cache))]
	s.encMu.Lock()
	e := *slot
	s.encMu.Unlock()
	if e != nil && e.rev == ws.Revision {
		return e.msgs, nil
	}
	msgs, err := encodeOne(ws, partial, s.ChunkBytes)
	if err != nil {
		return nil, err
	}
	s.encMu.Lock()
	*slot = &encodedRev{rev: ws.Revision, msgs: msgs}
	s.encMu.Unlock()
	return msgs, nil
}

// New serves st.
func New(st *store.Store) *Service { return &Service{st: st, draining: make(chan struct{})} }

// Drain ends the service's part in the cell for a restart: new commits are
// refused as unavailable (they were not evaluated: a client tries again
// after the restart), the commits in flight finish and are acknowledged,
// and then every watch stream sends what was committed, up to the store's
// last revision, and ends with ERROR_CODE_UNAVAILABLE. A client resumes
// its watch from that revision, which the restarted store opens at, so
// no watcher has to list the cell again. It returns once the commits in
// flight are done.
func (s *Service) Drain() {
	s.drainOnce.Do(func() {
		s.commitMu.Lock()
		s.closing = true
		s.commitMu.Unlock()
		s.inflight.Wait()
		s.final = s.st.Revision()
		close(s.draining)
	})
}

// begin admits a commit unless a drain began.
func (s *Service) begin() bool {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	return true
}

// send sends write sets to one watcher: shared encodings for an
// unfiltered watch, its own for a filtered one (a revision the filter
// empties goes out bare, as progress).
func (s *Service) send(stream grpc.ServerStream, sets []*txn.WriteSet, f filter, partial bool) error {
	for _, ws := range sets {
		var msgs []*rawgrpc.Msg
		var err error
		if f.none() {
			msgs, err = s.encode(ws, partial) // shared by every unfiltered watcher
		} else {
			// A revision the filter empties still goes out, bare, as
			// progress: a client resumes from it after a restart.
			msgs, err = encodeOne(f.changes(ws), false, s.ChunkBytes)
		}
		if err != nil {
			return status(err)
		}
		for _, m := range msgs {
			if err := stream.SendMsg(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendUpTo sends what the watch holds up to revision final.
func (s *Service) sendUpTo(stream grpc.ServerStream, w *store.Watcher, f filter, partial bool, final uint64) error {
	for {
		sets, _, err := w.Poll(0)
		if err != nil || len(sets) == 0 {
			return nil // what could not be sent is for the resumed watch to ask again
		}
		n := 0
		for n < len(sets) && sets[n].Revision <= final {
			n++
		}
		if err := s.send(stream, sets[:n], f, partial); err != nil {
			return err
		}
		if n < len(sets) || sets[len(sets)-1].Revision >= final {
			return nil
		}
	}
}

// Register adds the service to g.
func (s *Service) Register(g *grpc.Server) { cellgrpc.RegisterCellServer(g, s) }

// ServerOptions are the options a gRPC server of the service needs: message
// sizes up to MaxMessageBytes, and keepalive pings both ways.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		// Watches send revisions already encoded (rawgrpc.Msg): gRPC's proto
		// codec, which hands a rawgrpc.Msg's bytes over as they are.
		grpc.ForceServerCodecV2(rawgrpc.Codec{}),
		// Clients ping every 20 s (client/remote.KeepaliveTime) to learn of a
		// dead server; allow it, and ping idle clients the same way.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
}

// status converts a store error for the wire.
func status(err error) error { return grpcerr.Status(err, store.ErrFailed, store.ErrClosed).Err() }

// Commit decodes the transaction (a malformed one is ErrInvalid, naming
// the operation and field), commits it, and encodes the result.
func (s *Service) Commit(ctx context.Context, p *omegav1.Transaction) (*omegav1.TransactionResult, error) {
	if !s.begin() {
		return nil, status(fmt.Errorf("%w: the server is shutting down", transport.ErrUnavailable))
	}
	defer s.inflight.Done()
	start := time.Now()
	tx, err := txn.TxnFromProto(p)
	if err != nil {
		s.Metrics.commit(nil, txn.Result{}, err, time.Since(start).Seconds())
		return nil, status(err)
	}
	if id, ok := IdentityFrom(ctx); ok {
		var err error
		switch {
		case id.Role == RolePeer && !forwarded(ctx):
			err = fmt.Errorf("%w: a peer's token commits only what a member forwards (%s)", ErrPermission, ForwardedHeader)
		case id.Role == RolePeer:
			// A member forwarding its client's commit, which it authorized
			// (role checks, the component set from the client's token).
		default:
			err = Authorize(id, tx)
		}
		if err != nil {
			s.Metrics.commit(nil, txn.Result{}, err, time.Since(start).Seconds())
			return nil, grpcstatus.Error(codes.PermissionDenied, err.Error())
		}
	}
	res, err := s.st.Commit(ctx, tx)
	s.Metrics.commit(tx, res, err, time.Since(start).Seconds())
	if err != nil {
		return nil, status(err)
	}
	return res.Proto(), nil
}

// Snapshot streams the newest state in chunks.
func (s *Service) Snapshot(req *cellgrpc.SnapshotRequest, stream grpc.ServerStreamingServer[omegav1.SnapshotChunk]) error {
	if err := s.linearize(stream.Context(), req.GetStale()); err != nil {
		return status(err)
	}
	if err := txn.SnapshotChunks(s.st.Snapshot(), s.ChunkBytes, stream.Send); err != nil {
		return status(err)
	}
	return nil
}

// ForwardedHeader marks a commit a replicated cell's member forwards to
// the leader (replica/live.Forwarder): the leader does not forward it
// again, and takes it from a peer's token as the member authorized it.
// From any other token it means nothing more than "do not forward".
const ForwardedHeader = "omega-forwarded"

func forwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(ForwardedHeader)) > 0
}

// Server says how this server stands in its cell (Describe).
func (s *Service) Server(ctx context.Context, _ *cellgrpc.ServerRequest) (*cellgrpc.ServerStatus, error) {
	if s.Describe == nil {
		return &cellgrpc.ServerStatus{Role: "single", Revision: s.st.Revision()}, nil
	}
	st, err := s.Describe(ctx)
	if err != nil {
		return nil, status(fmt.Errorf("%w: %v", transport.ErrUnavailable, err))
	}
	return st, nil
}

// ChangeServers changes a replicated cell's membership (ChangeMembers).
func (s *Service) ChangeServers(ctx context.Context, req *cellgrpc.ServerChange) (*cellgrpc.ServerChangeResult, error) {
	if s.ChangeMembers == nil {
		return nil, grpcstatus.Error(codes.FailedPrecondition, "change servers: this is a single server, not a member of a replicated cell; a single server's data becomes a replicated cell's first member as docs/DESIGN.md (Scale-out) says")
	}
	return s.ChangeMembers(ctx, req)
}

// CatchUpWait bounds how long a replicated server's watch waits to apply
// the revision a client resumes from.
var CatchUpWait = 5 * time.Second

// catchUp waits until the store has published rev: a replicated server
// asked to watch from a revision the client saw on another member, which
// this one has not applied yet (CatchUpWait at most, then
// txn.ErrFutureRevision saying how far it is).
func (s *Service) catchUp(ctx context.Context, rev uint64) error {
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	for {
		cur := s.st.Revision()
		if cur >= rev {
			return nil
		}
		w, err := s.st.Watch(cur)
		if err != nil {
			return err
		}
		if _, err := w.Next(ctx, 0); err != nil {
			if errors.Is(err, ctx.Err()) {
				return fmt.Errorf("%w: watch from %d; this server has applied %d, and waited %v for the rest", txn.ErrFutureRevision, rev, s.st.Revision(), CatchUpWait)
			}
			return err
		}
	}
}

// Watch streams the revisions after the request's, each in pieces of
// bounded size, until the client goes away, the store closes, or the
// watcher falls behind the retained history (ERROR_CODE_COMPACTED). A
// replicated server waits for a revision it has not applied yet
// (catchUp); a single server refuses one (ERROR_CODE_FUTURE_REVISION).
func (s *Service) Watch(req *cellgrpc.WatchRequest, stream grpc.ServerStreamingServer[omegav1.RevisionChanges]) error {
	f, err := parseFilter(req.GetLabelSelector(), req.GetMachineUid(), "")
	if err != nil {
		return status(err)
	}
	if from := req.GetFromRevision(); s.ReadBarrier != nil && from > s.st.Revision() {
		if err := s.catchUp(stream.Context(), from); err != nil {
			return status(err)
		}
	}
	w, err := s.st.Watch(req.GetFromRevision())
	if err != nil {
		return status(err)
	}
	if err := stream.SendHeader(metadata.Pairs(WatchHeader, "ok")); err != nil {
		return err
	}
	s.Metrics.watch(1)
	defer s.Metrics.watch(-1)
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() { // a drain ends the wait (the handler's goroutine is gRPC's)
		select {
		case <-s.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		sets, err := w.Next(ctx, 0)
		if err != nil {
			select {
			case <-s.draining:
				// Everything up to the last revision goes out first: the
				// client resumes from it after the restart.
				if err := s.sendUpTo(stream, w, f, req.GetPartialChanges(), s.final); err != nil {
					return err
				}
				return status(fmt.Errorf("%w: the server is shutting down", transport.ErrUnavailable))
			default:
			}
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil // the client went away
			}
			return status(err)
		}
		if err := s.send(stream, sets, f, req.GetPartialChanges()); err != nil {
			return err
		}

	}
}
