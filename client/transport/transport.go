// Package transport defines how a client reaches the cell-state store: the
// Transport interface every backend implements (in-process, package
// client/inproc; gRPC, package client/remote) and the conformance suite they
// all run (package transporttest). It imports only txn, so a scheduler or
// agent that talks to a remote store does not link the store or pebble.
package transport

import (
	"context"
	"errors"

	"github.com/omega-cell/omega/txn"
)

// ErrUnavailable: the store cannot take requests now — it stopped after a
// failed write, or is closing. Nothing the request asked for happened, or
// (for a commit in flight when the store failed) it is unknown until the
// store reopens; a client may try again later.
var ErrUnavailable = errors.New("store unavailable")

// Transport is how a client reaches the cell-state store. Schedulers and
// agents see only the Client built on it, so they cannot tell an in-process
// store from a remote one.
//
// Implementations are safe for concurrent use.
type Transport interface {
	// Commit sends one transaction. The result and error contract is the
	// store's (store.Store.Commit): an error means nothing changed and
	// wraps one of txn's sentinels (bad input) or a store failure; a result
	// says per operation what committed and why the rest conflicted, with
	// Base the revision evaluated against. Ownership of tx's objects passes
	// to the transport.
	Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error)
	// Snapshot lists the whole cell: the newest durable state.
	Snapshot(ctx context.Context) (*txn.State, error)
	// Watch streams the revisions after fromRevision. An error wrapping
	// ErrCompacted means they are no longer retained: re-list.
	Watch(ctx context.Context, fromRevision uint64) (Watch, error)
}

// Watch is a stream of published revisions, in order. One goroutine owns it.
type Watch interface {
	// Poll returns the revisions published since the last call without
	// blocking (possibly none). An error wrapping ErrCompacted means the
	// stream fell behind: re-list and watch again.
	Poll(max int) ([]*txn.WriteSet, error)
	// Next blocks until at least one revision is available.
	Next(ctx context.Context, max int) ([]*txn.WriteSet, error)
	Close()
}

// PartialWatcher is implemented by transports that can watch with partial
// changes (txn.Change.Partial: a task's or a derived machine change's uid,
// version and status, the rest being the previous version's). Only a
// reader that holds the whole cell can use them — a client's Cell, which
// completes each write set against its copy (txn.WriteSet.Complete) — so
// a Watch never sends them.
type PartialWatcher interface {
	WatchPartial(ctx context.Context, fromRevision uint64) (Watch, error)
}

// ErrCompacted is what a Watch returns (wrapped) when it fell behind the
// store's retained history: re-list with Snapshot and watch again. It is
// txn.ErrCompacted.
var ErrCompacted = txn.ErrCompacted

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
