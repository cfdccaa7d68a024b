package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/omega-cell/omega/client/transport"

	"github.com/omega-cell/omega/txn"
)

// View is an immutable, consistent snapshot of the cell at one revision. It
// is structurally shared with the cell's other states, so taking one before
// every scheduling decision costs a pointer copy. Safe for any number of
// goroutines.
type View struct {
	*txn.State
}

// Cell is a client's local copy of the cell state, kept in sync with the
// store through Watch (or, in-process, by sharing the store's immutable
// states). A Cell belongs to one goroutine; Views taken from it may be
// shared freely.
type Cell struct {
	tr     Transport
	sharer SnapshotSharer
	state  *txn.State
	watch  Watch
	relist int // times the cell re-listed after falling behind
	// partial: the watch sends partial changes, completed against the copy
	// before they are applied.
	partial bool
}

// NewCell lists the cell through tr and starts watching it.
func NewCell(ctx context.Context, tr Transport) (*Cell, error) {
	c := &Cell{tr: tr}
	if s, ok := tr.(SnapshotSharer); ok {
		c.sharer = s
		c.state = s.Latest()
		return c, nil
	}
	if err := c.list(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// maxListTries bounds how often list takes a fresh snapshot because the
// revisions after the previous one were compacted before it could watch
// them.
const maxListTries = 10

// list takes a snapshot and watches from its revision (ListAndWatch),
// counting each retry as a re-list.
func (c *Cell) list(ctx context.Context) error {
	watch := c.tr.Watch
	if pw, ok := c.tr.(transport.PartialWatcher); ok {
		watch, c.partial = pw.WatchPartial, true // the copy completes them
	}
	st, w, retries, err := listAndWatch(ctx, c.tr, watch)
	c.relist += retries
	if err != nil {
		return err
	}
	if c.watch != nil {
		c.watch.Close()
	}
	c.state, c.watch = st, w
	return nil
}

// ListAndWatch takes a snapshot of the cell and watches from its revision:
// the one way every component (a Cell, an agent's tracker) re-lists after
// its watch fell behind the store's retained history. Commits that land
// between the snapshot and the watch can push the snapshot's successors
// out of a small history (the watch fails with ErrCompacted); then it takes
// a fresh snapshot, at most maxListTries times, and says how many retries
// it took. The watch is the caller's to close.
func ListAndWatch(ctx context.Context, tr Transport) (*txn.State, Watch, int, error) {
	return listAndWatch(ctx, tr, tr.Watch)
}

func listAndWatch(ctx context.Context, tr Transport, watch func(context.Context, uint64) (Watch, error)) (*txn.State, Watch, int, error) {
	for try := 1; ; try++ {
		st, err := tr.Snapshot(ctx)
		if err != nil {
			return nil, nil, try - 1, fmt.Errorf("list cell: %w", err)
		}
		w, err := watch(ctx, st.Revision())
		if errors.Is(err, ErrCompacted) && try < maxListTries {
			continue
		}
		if err != nil {
			return nil, nil, try - 1, fmt.Errorf("watch cell from %d (try %d): %w", st.Revision(), try, err)
		}
		return st, w, try - 1, nil
	}
}

// View returns the local copy as it is now.
func (c *Cell) View() View { return View{c.state} }

// Revision is the local copy's revision.
func (c *Cell) Revision() uint64 { return c.state.Revision() }

// Relists counts how often the cell fell behind the store's retained
// history and re-listed.
func (c *Cell) Relists() int { return c.relist }

// Sync brings the local copy up to what the store has published, without
// waiting for more.
func (c *Cell) Sync(ctx context.Context) error {
	if c.sharer != nil {
		c.state = c.sharer.Latest()
		return nil
	}
	for {
		sets, err := c.watch.Poll(0)
		if errors.Is(err, ErrCompacted) {
			c.relist++
			return c.list(ctx)
		}
		if err != nil {
			return err
		}
		if len(sets) == 0 {
			return nil
		}
		if err := c.apply(sets); err != nil {
			return err
		}
	}
}

// SyncTo blocks until the local copy includes revision rev (a revision the
// store acknowledged, so it is published).
func (c *Cell) SyncTo(ctx context.Context, rev uint64) error {
	if err := c.Sync(ctx); err != nil {
		return err
	}
	if c.sharer != nil && c.state.Revision() < rev {
		st, err := c.sharer.WaitFor(ctx, rev)
		if err != nil {
			return fmt.Errorf("sync to revision %d: %w", rev, err)
		}
		c.state = st
		return nil
	}
	for c.state.Revision() < rev {
		sets, err := c.watch.Next(ctx, 0)
		if errors.Is(err, ErrCompacted) {
			c.relist++
			if err := c.list(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := c.apply(sets); err != nil {
			return err
		}
	}
	return nil
}

// apply applies watched revisions to the copy, each checked to keep the
// invariants (txn.State.ApplyChecked, in time proportional to the
// revision): a revision that does not fit the copy is an error, and the
// copy stays at the revision before it.
func (c *Cell) apply(sets []*txn.WriteSet) error {
	for _, ws := range sets {
		if ws.Revision <= c.state.Revision() {
			continue
		}
		if c.partial {
			if err := ws.Complete(c.state); err != nil {
				return fmt.Errorf("watched revision does not fit the copy at %d: %w", c.state.Revision(), err)
			}
		}
		st, err := c.state.ApplyChecked(ws)
		if err != nil {
			return fmt.Errorf("watched revision does not fit the copy at %d: %w", c.state.Revision(), err)
		}
		c.state = st
	}
	return nil
}

// Close stops watching.
func (c *Cell) Close() {
	if c.watch != nil {
		c.watch.Close()
	}
}
