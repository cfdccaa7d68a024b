package live

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/txn"
)

// forwardedKey marks a commit a member forwarded: the member it reaches
// commits it or refuses, never forwards it again (a leader that changed
// meanwhile would otherwise bounce it around).
const forwardedKey = "omega-forwarded"

// Forwarder commits through the member when it leads and forwards the
// commit to the leader's API when another member leads (as Consul and
// Nomad servers forward writes), so a client may talk to any server. While
// no member leads, or the leader is not ready, it waits (up to
// ForwardWait) and then says the cell is unavailable: nothing was
// proposed, so the client may try again. A commit whose outcome the
// member cannot know (the leader stepped down with it in flight) is
// replica.ErrOutcomeUnknown: the client reads the cell to learn it.
type Forwarder struct {
	d     *Driver
	mu    sync.Mutex
	conns map[uint64]*remote.Transport
}

// ForwardWait bounds how long a commit waits for a leader.
const ForwardWait = 5 * time.Second

// Forwarder returns the member's committer for its store
// (store.Options.Replicator).
func (d *Driver) Forwarder() *Forwarder {
	return &Forwarder{d: d, conns: map[uint64]*remote.Transport{}}
}

// Commit commits tx in the cell.
func (f *Forwarder) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	forwarded := len(md.Get(forwardedKey)) > 0
	deadline := time.Now().Add(ForwardWait)
	wait := 20 * time.Millisecond
	for {
		res, err := f.d.Commit(ctx, tx)
		var nl *replica.NotLeaderError
		switch {
		case err == nil:
			return res, nil
		case errors.As(err, &nl) && nl.Leader != 0 && nl.Leader != f.d.cfg.Member.ID && !forwarded:
			lead := replica.MemberOf(nl.Leader)
			tr, terr := f.conn(lead)
			if terr != nil {
				return txn.Result{}, fmt.Errorf("%w: forward to member %d: %v", transport.ErrUnavailable, lead, terr)
			}
			fctx := metadata.AppendToOutgoingContext(context.WithoutCancel(ctx), forwardedKey, "1")
			if d, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				fctx, cancel = context.WithDeadline(fctx, d)
				defer cancel()
			}
			return tr.Commit(fctx, tx)
		case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrNotReady):
			if time.Now().After(deadline) || forwarded {
				return txn.Result{}, fmt.Errorf("%w: %v", transport.ErrUnavailable, err)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return txn.Result{}, ctx.Err()
			}
			wait = min(2*wait, 200*time.Millisecond)
		case errors.Is(err, replica.ErrOutcomeUnknown):
			// The leader stepped down with it in flight: transport's
			// ErrUnavailable, whose contract says so (a commit in flight
			// when the store failed is unknown until it is read), so a
			// client tells it from a refusal (a scheduler queues its job
			// again; it had stopped on an unknown error).
			return res, fmt.Errorf("%w: %w", transport.ErrUnavailable, err)
		default:
			return res, err
		}
	}
}

// conn is a transport to a member's API, by its member number.
func (f *Forwarder) conn(id uint64) (*remote.Transport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.conns[id]; ok {
		return t, nil
	}
	addr, ok := f.d.addr(id)
	if !ok {
		return nil, fmt.Errorf("no API address for member %d", id)
	}
	t, err := remote.Dial(addr, f.d.cfg.DialOptions...) // the member's token and TLS
	if err != nil {
		return nil, err
	}
	f.conns[id] = t
	return t, nil
}

// Close closes the forwarding connections.
func (f *Forwarder) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.conns {
		t.Close()
	}
}
