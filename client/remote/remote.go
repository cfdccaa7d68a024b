// Package remote is the client library's gRPC transport: a Transport
// (client/transport) that reaches the cell-state store of another process
// through its gRPC API (package server), so schedulers and agents built on
// the client cannot tell it from the in-process one — it runs the same
// conformance suite (transporttest). It links gRPC and never the store.
//
// It is live code: a watch's stream is received on a goroutine of its own
// (Close ends it), and every call is bounded by a deadline (the caller's,
// or Timeout when it has none).
//
// Still to come with the live cell (issue 8): reconnecting after a server
// restart and resuming a watch from its last revision, filtered watches,
// tokens and TLS.
package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/grpcerr"
	"github.com/omega-cell/omega/client/transport/rawgrpc"
	"github.com/omega-cell/omega/txn"
)

// The header key and value a server sends once a watch is established
// (server.WatchHeader).
const watchHeader = "omega-watch"

// maxMessageBytes matches the server's bound (server.MaxMessageBytes).
const maxMessageBytes = txn.MaxWireBytes + 1<<20

// KeepaliveTime is how often an idle connection pings the server (the
// server permits it: server.ServerOptions).
const KeepaliveTime = 20 * time.Second

// ReconnectMax bounds the wait between attempts to dial a server that
// went away.
const ReconnectMax = 2 * time.Second

// DefaultTimeout bounds a Commit or a Snapshot, and the start of a Watch,
// when the caller's context has no deadline of its own.
const DefaultTimeout = 30 * time.Second

// Transport reaches a store over one gRPC connection. It is safe for
// concurrent use.
type Transport struct {
	conn    *grpc.ClientConn // nil when the caller owns the connection
	c       cellgrpc.CellClient
	Timeout time.Duration // 0: DefaultTimeout
}

var _ transport.Transport = (*Transport)(nil)

// Dial connects to the store's server at target (host:port), in plain
// text for now. The connection is the Transport's: Close closes it.
func Dial(target string, opts ...grpc.DialOption) (*Transport, error) {
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		// A client that only receives (a watch) hears of a dead server or a
		// partition through these pings: the stream fails, and the watch
		// reopens or reports it.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		// A server that restarts (a replicated cell's member killed and
		// started again, a single server upgraded) is dialed again within
		// ReconnectMax: gRPC's default backoff grows to two minutes, during
		// which every call through this connection fails at once.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectMax}, MinConnectTimeout: 5 * time.Second}),
	}, opts...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial store at %s: %w", target, err)
	}
	return &Transport{conn: conn, c: cellgrpc.NewCellClient(conn)}, nil
}

// New uses a connection the caller owns.
func New(conn grpc.ClientConnInterface) *Transport {
	return &Transport{c: cellgrpc.NewCellClient(conn)}
}

// Close closes the connection Dial made.
func (t *Transport) Close() error {
	if t.conn == nil {
		return nil
	}
	return t.conn.Close()
}

func (t *Transport) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	d := t.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// wireError reads a call's error back as the store's typed error.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	return grpcerr.Error(status.Convert(err))
}

// Commit sends one transaction.
func (t *Transport) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	if err := txn.CheckWire(tx); err != nil {
		return txn.Result{}, err // it cannot be encoded: the store would refuse it the same way
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	p, err := t.c.Commit(ctx, tx.Proto())
	if err != nil {
		return txn.Result{}, wireError(err)
	}
	return txn.ResultFromProto(p, len(tx.Ops))
}

// Snapshot lists the cell, chunk by chunk.
func (t *Transport) Snapshot(ctx context.Context) (*txn.State, error) {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	stream, err := t.c.Snapshot(ctx, &cellgrpc.SnapshotRequest{})
	if err != nil {
		return nil, wireError(err)
	}
	var r txn.SnapshotReader
	for {
		c, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", wireError(err))
		}
		if err := r.Add(c); err != nil {
			return nil, err
		}
		if c.GetLast() {
			return r.Finish()
		}
	}
}

// Watch streams the revisions after fromRevision. A revision no longer
// retained is ErrCompacted here, at once: the server says whether the watch
// started before anything is received.
func (t *Transport) Watch(ctx context.Context, fromRevision uint64) (transport.Watch, error) {
	return t.WatchFiltered(ctx, fromRevision, Filter{})
}

// WatchPartial is Watch with partial changes (transport.PartialWatcher):
// what a client's copy of the whole cell watches with.
func (t *Transport) WatchPartial(ctx context.Context, fromRevision uint64) (transport.Watch, error) {
	return t.WatchFiltered(ctx, fromRevision, Filter{Partial: true})
}

// Filter narrows a watch, evaluated by the server: Machine keeps that
// machine and the tasks placed on it before or after each revision (so
// that a task leaving it, evicted, moved or deleted, is seen leaving);
// Selector (Kubernetes syntax) keeps the
// objects whose labels match. A revision with nothing left is not handed
// to the reader (the server sends it bare, as progress, so that a resume
// after a restart starts from the newest revision), so a filtered watch
// skips revisions.
type Filter struct {
	Machine  uuid.UUID
	Selector string
	// Progress hands the reader the revisions the filter empties too, as
	// write sets without changes (consecutive ones joined into the
	// newest), so that the reader's revision keeps up with the cell's: a
	// copy of the filtered part is then the cell's projection at every
	// revision, and a client on it can sync to any revision.
	Progress bool
	// Partial asks for partial changes (omegav1.Change.partial), for a
	// reader that holds the whole cell and completes them against it
	// (txn.WriteSet.Complete). The server ignores it on a filtered watch.
	Partial bool
}

// WatchFiltered is Watch with a filter.
//
// A stream the server ends as unavailable (it drains for a restart) or
// that loses its connection is opened again from the last revision
// delivered, after a pause that grows from 50 ms to 2 s, for as long as
// the watch is open: its reader sees every revision once, in order, across
// the restart. If that revision is no longer retained, the watch fails
// with ErrCompacted and the reader lists again.
func (t *Transport) WatchFiltered(ctx context.Context, fromRevision uint64, f Filter) (transport.Watch, error) {
	req := &cellgrpc.WatchRequest{FromRevision: fromRevision, LabelSelector: f.Selector, PartialChanges: f.Partial}
	if f.Machine != uuid.Nil {
		req.MachineUid = f.Machine.String()
	}
	sctx, cancel := context.WithCancel(context.Background()) // the stream lives until Close
	stream, err := t.open(ctx, sctx, cancel, req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch from revision %d: %w", fromRevision, err)
	}
	w := &watch{cancel: cancel, ready: make(chan struct{}, 1), space: make(chan struct{}, 1), done: make(chan struct{}),
		last: fromRevision, progress: f.Progress, reopen: func(from uint64) (grpc.ServerStreamingClient[omegav1.RevisionChanges], error) {
			r := &cellgrpc.WatchRequest{FromRevision: from, LabelSelector: req.LabelSelector, MachineUid: req.MachineUid, PartialChanges: req.PartialChanges}
			// An attempt of its own: a server that does not answer in time
			// ends this attempt, not the watch.
			actx, acancel := context.WithCancel(sctx)
			stream, err := t.open(sctx, actx, acancel, r)
			if err != nil {
				acancel()
			}
			return stream, err
		}}
	go w.receive(sctx, stream)
	return w, nil
}

// open starts a watch stream on sctx and waits, within ctx's deadline (or
// Timeout), for the server's header: the watch started, or the status says
// why not.
func (t *Transport) open(ctx, sctx context.Context, cancel context.CancelFunc, req *cellgrpc.WatchRequest) (grpc.ServerStreamingClient[omegav1.RevisionChanges], error) {
	stream, err := t.c.Watch(sctx, req, grpc.ForceCodecV2(rawgrpc.Codec{}))
	if err != nil {
		return nil, wireError(err)
	}
	bctx, bcancel := t.bound(ctx)
	defer bcancel()
	started := make(chan struct{})
	timedOut := make(chan bool, 1)
	go func() {
		select {
		case <-bctx.Done():
			timedOut <- true
			cancel()
		case <-started:
			timedOut <- false
		}
	}()
	md, err := stream.Header()
	close(started)
	if <-timedOut {
		return nil, fmt.Errorf("%w: no answer from the server within the deadline", transport.ErrUnavailable)
	}
	if err == nil && len(md.Get(watchHeader)) == 0 {
		// Ended without a header: the status says why.
		err = stream.RecvMsg(&rawgrpc.Msg{})
		if err == nil {
			err = errors.New("watch: the server sent changes before its header")
		}
	}
	if err != nil {
		return nil, wireError(err)
	}
	return stream, nil
}

// maxBuffered bounds the write sets a watch holds that its reader has not
// taken: beyond it the receiving goroutine waits, gRPC's flow control holds
// the server back, and a reader that never catches up finds its watch
// compacted (and re-lists) rather than this process's memory full.
const maxBuffered = 4096

// watch buffers what a stream delivers, joined into write sets.
type watch struct {
	cancel context.CancelFunc
	ready  chan struct{} // a token when sets or err changed
	space  chan struct{} // a token when the reader took some
	done   chan struct{} // closed when receive returned

	// last is the revision of the last write set delivered; reopen starts
	// the stream again after it.
	last     uint64
	progress bool // hand bare revisions to the reader (Filter.Progress)
	reopen   func(from uint64) (grpc.ServerStreamingClient[omegav1.RevisionChanges], error)

	mu   sync.Mutex
	sets []*txn.WriteSet
	err  error
}

func (w *watch) receive(ctx context.Context, stream grpc.ServerStreamingClient[omegav1.RevisionChanges]) {
	defer close(w.done)
	var r txn.WriteSetReader
	pause := 50 * time.Millisecond
	for {
		for w.full() {
			select {
			case <-w.space:
			case <-ctx.Done():
				return
			}
		}
		var m rawgrpc.Msg
		err := stream.RecvMsg(&m)
		var ws *txn.WriteSet
		if err == nil {
			ws, err = r.AddBytes(m.B)
		} else {
			err = wireError(err)
		}
		if errors.Is(err, transport.ErrUnavailable) && ctx.Err() == nil {
			// The server went away (a restart): open the stream again after
			// the last revision delivered; a revision half received comes
			// again whole.
			r = txn.WriteSetReader{}
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, 2*time.Second)
				stream, err = w.reopen(w.last)
				if !errors.Is(err, transport.ErrUnavailable) {
					break
				}
			}
			if err == nil {
				pause = 50 * time.Millisecond
				continue
			}
		}
		w.mu.Lock()
		if err != nil {
			w.err = fmt.Errorf("watch: %w", err)
		} else if ws != nil {
			switch n := len(w.sets); {
			case len(ws.Changes) > 0:
				w.sets = append(w.sets, ws)
			case !w.progress:
				// A bare revision is the server's progress on a filtered
				// watch: the reader is not told.
			case n > 0 && len(w.sets[n-1].Changes) == 0:
				w.sets[n-1] = ws // the newest progress is all a reader needs
			default:
				w.sets = append(w.sets, ws)
			}
			w.last = ws.Revision
		}
		w.mu.Unlock()
		select {
		case w.ready <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

func (w *watch) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sets) >= maxBuffered
}

// take returns up to max buffered write sets (0: all), or the stream's
// error once they are all taken.
func (w *watch) take(max int) ([]*txn.WriteSet, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sets) == 0 {
		return nil, w.err
	}
	n := len(w.sets)
	if max > 0 && max < n {
		n = max
	}
	out := w.sets[:n:n]
	w.sets = w.sets[n:]
	select { // room again for the receiver
	case w.space <- struct{}{}:
	default:
	}
	if len(w.sets) > 0 {
		select { // more is there: the next Next need not wait
		case w.ready <- struct{}{}:
		default:
		}
	}
	return out, nil
}

// Poll returns what arrived since the last call, without blocking.
func (w *watch) Poll(max int) ([]*txn.WriteSet, error) { return w.take(max) }

// Next blocks until at least one revision arrived, the stream failed, or
// ctx ended.
func (w *watch) Next(ctx context.Context, max int) ([]*txn.WriteSet, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sets, err := w.take(max)
		if len(sets) > 0 || err != nil {
			return sets, err
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the stream and waits for its goroutine.
func (w *watch) Close() {
	w.cancel()
	<-w.done
}

// Get returns one object of kind by uid, or by name (ambiguous names are
// an error naming the matches), with the revision it was read at.
func (t *Transport) Get(ctx context.Context, kind omegav1.ObjectKind, uid, name string) (*cellgrpc.GetResponse, error) {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	r, err := t.c.Get(ctx, &cellgrpc.GetRequest{Kind: kind, Uid: uid, Name: name})
	if err != nil {
		return nil, wireError(err)
	}
	return r, nil
}

// Server returns how the server answering stands in its cell (a single
// server, or a replicated member's raft state).
func (t *Transport) Server(ctx context.Context) (*cellgrpc.ServerStatus, error) {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	r, err := t.c.Server(ctx, &cellgrpc.ServerRequest{})
	if err != nil {
		return nil, wireError(err)
	}
	return r, nil
}

// ChangeServers asks a replicated cell to add or remove a member or hand
// its lead over (an admin's token; the server forwards it to the leader).
// A membership change waits for the change to be applied, so the call is
// bounded by 30 s rather than the transport's timeout.
func (t *Transport) ChangeServers(ctx context.Context, req *cellgrpc.ServerChange) (*cellgrpc.ServerChangeResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	r, err := t.c.ChangeServers(ctx, req)
	if err != nil {
		return nil, wireError(err)
	}
	return r, nil
}

// Listing is what List returns: the matching objects at one revision.
type Listing struct {
	Revision uint64
	Machines []*omegav1.Machine
	Jobs     []*omegav1.Job
	Tasks    []*omegav1.Task
	Offers   []*omegav1.Offer
	Quotas   []*omegav1.Quota
	Leases   []*omegav1.Lease
}

// List returns the objects the request selects.
func (t *Transport) List(ctx context.Context, req *cellgrpc.ListRequest) (*Listing, error) {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	stream, err := t.c.List(ctx, req)
	if err != nil {
		return nil, wireError(err)
	}
	var l Listing
	for {
		c, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("list: %w", wireError(err))
		}
		l.Revision = c.GetRevision()
		l.Machines = append(l.Machines, c.GetMachines()...)
		l.Jobs = append(l.Jobs, c.GetJobs()...)
		l.Tasks = append(l.Tasks, c.GetTasks()...)
		l.Offers = append(l.Offers, c.GetOffers()...)
		l.Quotas = append(l.Quotas, c.GetQuotas()...)
		l.Leases = append(l.Leases, c.GetLeases()...)
		if c.GetLast() {
			return &l, nil
		}
	}
}
