package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/omega-cell/omega/txn"
)

// Handler is what a component that keeps state derived from the cell —
// an agent's tracker, the job controller, a scheduler process's intake —
// gives an Informer.
type Handler interface {
	// Relisted hands a fresh view of the cell, at the start and whenever the
	// watch fell behind the store's retained history: drop what was
	// derived from earlier changes and rebuild from s.
	Relisted(s *txn.State) error
	// Apply hands one revision after the last one handed, in order.
	Apply(ws *txn.WriteSet) error
}

// Informer follows the cell for a Handler: a view (ListAndWatch), then the
// watch after it, and a fresh view whenever the watch falls behind — the
// one place a component re-lists (Kubernetes' informer is the model). It
// belongs to one goroutine and starts none: Poll takes in what arrived
// without blocking (decision code, the simulation), Wait blocks for it
// (live code, under a context's deadline).
type Informer struct {
	c       *Client
	h       Handler
	w       Watch
	rev     uint64
	relists int64
	stale   bool // the handler failed on a revision: list again before going on
}

// NewInformer makes an informer over c for h. It does not list: call List.
func NewInformer(c *Client, h Handler) (*Informer, error) {
	if c == nil || h == nil {
		return nil, errors.New("new informer: client and handler are required")
	}
	return &Informer{c: c, h: h}, nil
}

// List takes a fresh view, hands it to the handler, and watches from its
// revision.
func (in *Informer) List(ctx context.Context) error {
	st, w, err := in.c.ListAndWatch(ctx)
	if err != nil {
		return err
	}
	if in.w != nil {
		in.w.Close()
	}
	in.w, in.rev = w, st.Revision()
	if err := in.h.Relisted(st); err != nil {
		in.stale = true // what the handler derived is unknown: list again next time
		return err
	}
	return nil
}

// Poll hands the handler what the watch delivered since the last call,
// without blocking. A watch that fell behind is not an error: the informer
// lists again. An error is the watch's (the store closed, say) or the
// handler's; after the handler's, the next call lists again, so no change
// is lost.
func (in *Informer) Poll(ctx context.Context) error {
	if in.w == nil {
		return errors.New("informer: Poll before List")
	}
	if in.stale {
		return in.relist(ctx)
	}
	sets, err := in.w.Poll(0)
	return in.take(ctx, sets, err)
}

func (in *Informer) relist(ctx context.Context) error {
	in.relists++
	if err := in.List(ctx); err != nil {
		return err
	}
	in.stale = false
	return nil
}

// Wait blocks until the watch delivers something (or ctx ends: then it
// returns ctx's error) and hands it to the handler, as Poll does.
func (in *Informer) Wait(ctx context.Context) error {
	if in.w == nil {
		return errors.New("informer: Wait before List")
	}
	if in.stale {
		return in.relist(ctx)
	}
	sets, err := in.w.Next(ctx, 0)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return in.take(ctx, sets, err)
}

func (in *Informer) take(ctx context.Context, sets []*txn.WriteSet, err error) error {
	if errors.Is(err, ErrCompacted) {
		return in.relist(ctx)
	}
	if err != nil {
		return fmt.Errorf("watch after revision %d: %w", in.rev, err)
	}
	for _, ws := range sets {
		if ws.Revision <= in.rev {
			continue
		}
		if err := in.h.Apply(ws); err != nil {
			in.stale = true // the rest of sets, and ws, would be lost: list again next time
			return err
		}
		in.rev = ws.Revision
	}
	return nil
}

// Revision is the revision handed to the handler last.
func (in *Informer) Revision() uint64 { return in.rev }

// Relists counts the fresh views taken after the watch fell behind or the
// handler failed.
func (in *Informer) Relists() int64 { return in.relists }

// Close stops watching.
func (in *Informer) Close() {
	if in.w != nil {
		in.w.Close()
		in.w = nil
	}
}
