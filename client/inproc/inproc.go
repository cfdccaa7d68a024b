// Package inproc is the in-process transport: a client straight to a
// store.Store in the same process (the simulation, the demo, tests). It is
// a package of its own so that only binaries that embed a store link it.
package inproc

import (
	"context"

	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Option configures New.
type Option func(*inProcess)

// WithoutSharing makes the in-process transport behave like a remote one:
// clients keep their own copy, synced by applying watched write sets. Tests
// use it to exercise the watch path.
func WithoutSharing() Option { return func(t *inProcess) { t.share = false } }

// New returns a transport straight to s. By default it shares the store's
// immutable snapshots with clients (no copying at all): it then implements
// transport.SnapshotSharer.
func New(s *store.Store, opts ...Option) transport.Transport {
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

func (t *inProcess) Watch(_ context.Context, from uint64) (transport.Watch, error) {
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
