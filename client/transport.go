package client

import "github.com/omega-cell/omega/client/transport"

// Transport, Watch and SnapshotSharer are package transport's: how a
// client reaches the store. The in-process one is package client/inproc.
type (
	Transport      = transport.Transport
	Watch          = transport.Watch
	SnapshotSharer = transport.SnapshotSharer
)

// ErrCompacted is what a Watch returns (wrapped) when it fell behind the
// store's retained history: re-list with Snapshot and watch again. Agents
// and schedulers check it here, so they need not import the store.
var ErrCompacted = transport.ErrCompacted
