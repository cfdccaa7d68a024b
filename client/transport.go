package client

import (
	"context"

	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Transport is how a client reaches the cell-state store. Schedulers and
// agents see only the Client built on it, so they cannot tell an in-process
// store from a remote one.
//
// Implementations are safe for concurrent use.
type Transport interface {
	// Commit sends one transaction; see store.Store.Commit for the result
	// and error contract. Ownership of tx's objects passes to the transport.
	Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error)
	// Snapshot lists the whole cell: the newest durable state.
	Snapshot(ctx context.Context) (*txn.State, error)
	// Watch streams the revisions after fromRevision.
	Watch(ctx context.Context, fromRevision uint64) (Watch, error)
}

// Watch is a stream of published revisions, in order. One goroutine owns it.
type Watch interface {
	// Poll returns the revisions published since the last call without
	// blocking (possibly none). An error wrapping store.ErrCompacted means
	// the stream fell behind: re-list and watch again.
	Poll(max int) ([]*txn.WriteSet, error)
	// Next blocks until at least one revision is available.
	Next(ctx context.Context, max int) ([]*txn.WriteSet, error)
	Close()
}

// ErrCompacted is what a Watch returns (wrapped) when it fell behind the
// store's retained history: re-list with Snapshot and watch again. Agents
// and schedulers check it here, so they need not import the store.
var ErrCompacted = store.ErrCompacted

// SnapshotSharer is implemented by transports that can hand out the store's
// own immutable state (in-process): a Cell then syncs by taking the newest
// state instead of applying watched changes.
type SnapshotSharer interface {
	// Latest returns the newest durable state.
	Latest() *txn.State
	// WaitFor blocks until revision rev is durable and returns the newest
	// durable state.
	WaitFor(ctx context.Context, rev uint64) (*txn.State, error)
}

// InProcessOption configures InProcess.
type InProcessOption func(*inProcess)

// WithoutSharing makes the in-process transport behave like a remote one:
// clients keep their own copy, synced by applying watched write sets. Tests
// use it to exercise the watch path.
func WithoutSharing() InProcessOption { return func(t *inProcess) { t.share = false } }

// InProcess returns a transport straight to s. By default it shares the
// store's immutable snapshots with clients (no copying at all).
func InProcess(s *store.Store, opts ...InProcessOption) Transport {
	t := &inProcess{s: s, share: true}
	for _, o := range opts {
		o(t)
	}
	if t.share {
		return sharingInProcess{t}
	}
	return t
}

type inProcess struct {
	s     *store.Store
	share bool
}

func (t *inProcess) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	return t.s.Commit(ctx, tx)
}

func (t *inProcess) Snapshot(context.Context) (*txn.State, error) { return t.s.Snapshot(), nil }

func (t *inProcess) Watch(_ context.Context, from uint64) (Watch, error) {
	w, err := t.s.Watch(from)
	if err != nil {
		return nil, err
	}
	return storeWatch{w}, nil
}

type sharingInProcess struct{ *inProcess }

func (t sharingInProcess) Latest() *txn.State { return t.s.Snapshot() }

func (t sharingInProcess) WaitFor(ctx context.Context, rev uint64) (*txn.State, error) {
	return t.s.WaitFor(ctx, rev)
}

type storeWatch struct{ w *store.Watcher }

func (w storeWatch) Poll(max int) ([]*txn.WriteSet, error) {
	sets, _, err := w.w.Poll(max)
	return sets, err
}

func (w storeWatch) Next(ctx context.Context, max int) ([]*txn.WriteSet, error) {
	return w.w.Next(ctx, max)
}

func (storeWatch) Close() {}
