package store

import (
	"context"
	"fmt"

	"github.com/omega-cell/omega/txn"
)

// history keeps the write sets of the newest published revisions, bounded by
// their total number of changes.
type history struct {
	base    uint64 // revisions ≤ base are not retained
	sets    []*txn.WriteSet
	head    int // index of the oldest retained in sets
	changes int
}

func (h *history) add(ws *txn.WriteSet, maxChanges int) {
	h.sets = append(h.sets, ws)
	h.changes += len(ws.Changes)
	for h.changes > maxChanges && len(h.sets)-h.head > 1 {
		old := h.sets[h.head]
		h.sets[h.head] = nil
		h.head++
		h.changes -= len(old.Changes)
		h.base = old.Revision
	}
	if h.head > 1024 && h.head*2 > len(h.sets) {
		h.sets = append([]*txn.WriteSet(nil), h.sets[h.head:]...)
		h.head = 0
	}
}

// after returns the retained write sets with revision > rev, at most max
// (0: all). ok is false if some of them are no longer retained.
func (h *history) after(rev uint64, max int) (sets []*txn.WriteSet, ok bool) {
	if rev < h.base {
		return nil, false
	}
	live := h.sets[h.head:]
	// Revisions are consecutive only among commits that changed something
	// (every published write set has a fresh revision, and revisions that
	// committed nothing are never assigned), so search.
	lo, hi := 0, len(live)
	for lo < hi {
		mid := (lo + hi) / 2
		if live[mid].Revision <= rev {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	out := live[lo:]
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out, true
}

// Watcher delivers the store's published revisions in order, each revision's
// changes together. One goroutine owns a Watcher.
type Watcher struct {
	s    *Store
	next uint64 // deliver revisions > next
}

// Watch returns a watcher of the revisions after fromRevision (a client
// holding a snapshot at revision R watches from R). It fails with
// ErrCompacted if those revisions are no longer retained.
func (s *Store) Watch(fromRevision uint64) (*Watcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fromRevision > s.published.Revision() {
		return nil, fmt.Errorf("%w: watch from %d, store at %d", txn.ErrFutureRevision, fromRevision, s.published.Revision())
	}
	if fromRevision < s.hist.base {
		return nil, fmt.Errorf("%w: watch from %d, oldest retained is %d", ErrCompacted, fromRevision, s.hist.base+1)
	}
	return &Watcher{s: s, next: fromRevision}, nil
}

// Next blocks until at least one revision after the last delivered one is
// published, then returns up to max of them (0: all retained), in order. The
// write sets are shared and immutable. It returns ErrCompacted if the
// watcher fell behind the retained history, ErrClosed once the store is
// closed and everything published was delivered, or ctx's error.
func (w *Watcher) Next(ctx context.Context, max int) ([]*txn.WriteSet, error) {
	for {
		sets, ch, err := w.Poll(max)
		if err != nil || len(sets) > 0 {
			return sets, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Poll is Next without blocking: it returns what is published now (possibly
// nothing) and a channel closed at the next publication.
func (w *Watcher) Poll(max int) ([]*txn.WriteSet, <-chan struct{}, error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sets, ok := s.hist.after(w.next, max)
	if !ok {
		return nil, nil, fmt.Errorf("%w: watcher at %d, oldest retained is %d", ErrCompacted, w.next, s.hist.base+1)
	}
	if len(sets) == 0 && s.closed {
		return nil, nil, ErrClosed
	}
	if len(sets) > 0 {
		w.next = sets[len(sets)-1].Revision
		sets = append([]*txn.WriteSet(nil), sets...)
	}
	return sets, s.pubCh, nil
}
