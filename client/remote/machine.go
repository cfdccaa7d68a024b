package remote

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/txn"
)

// MachineTransport is the cell as one machine's agent needs it: the
// machine and the tasks placed on it, listed and watched with the server's
// machine filter, so an agent keeps a copy of its own part of the cell —
// not of all of it — and receives only its changes. Commits go to the
// whole cell. It is a transport.Transport: the client built on it, and the
// agent core above, cannot tell it from the whole cell (of which it is a
// consistent projection at every revision).
type MachineTransport struct {
	t       *Transport
	machine uuid.UUID

	mu    sync.Mutex
	lists map[uint64]map[uuid.UUID]struct{} // the tasks on the machine in the last listings, by revision
}

var _ transport.Transport = (*MachineTransport)(nil)

// ForMachine narrows t to one machine's part of the cell.
func (t *Transport) ForMachine(machine uuid.UUID) *MachineTransport {
	return &MachineTransport{t: t, machine: machine, lists: map[uint64]map[uuid.UUID]struct{}{}}
}

// Commit sends a transaction to the cell.
func (m *MachineTransport) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	return m.t.Commit(ctx, tx)
}

// Snapshot lists the machine and its tasks (terminal ones included, until
// they expire) at the newest revision.
func (m *MachineTransport) Snapshot(ctx context.Context) (*txn.State, error) {
	ctx, cancel := m.t.bound(ctx)
	defer cancel()
	stream, err := m.t.c.List(ctx, &cellgrpc.ListRequest{MachineUid: m.machine.String()})
	if err != nil {
		return nil, wireError(err)
	}
	var r txn.SnapshotReader
	mine := map[uuid.UUID]struct{}{}
	for {
		c, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("list machine %s: %w", m.machine, wireError(err))
		}
		if err := r.Add(c); err != nil {
			return nil, err
		}
		for _, t := range c.GetTasks() {
			if u, err := uuid.Parse(t.GetMeta().GetUid()); err == nil {
				mine[u] = struct{}{}
			}
		}
		if c.GetLast() {
			st, err := r.Finish()
			if err != nil {
				return nil, err
			}
			m.mu.Lock()
			if len(m.lists) >= 4 { // a listing is watched from at once: keep the last few
				clear(m.lists)
			}
			m.lists[st.Revision()] = mine
			m.mu.Unlock()
			return st, nil
		}
	}
}

// Watch streams the revisions after fromRevision as they touch the
// machine: the server's machine filter keeps the changes of the tasks
// placed on it before or after each revision, and this watch hands on
// those of tasks that left it (evicted, moved, deleted) as deletions, so
// the copy is the machine's part of the cell. (It also drops any change of
// a task that was never on the machine, which a server that kept every
// eviction, before the filter knew where a task had been, sent.)
func (m *MachineTransport) Watch(ctx context.Context, fromRevision uint64) (transport.Watch, error) {
	w, err := m.t.WatchFiltered(ctx, fromRevision, Filter{Machine: m.machine, Progress: true})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	mine := m.lists[fromRevision]
	m.mu.Unlock()
	if mine != nil {
		mine = cloneSet(mine)
	}
	return &machineWatch{w: w, machine: m.machine, mine: mine}, nil
}

func cloneSet(s map[uuid.UUID]struct{}) map[uuid.UUID]struct{} {
	out := make(map[uuid.UUID]struct{}, len(s))
	for k := range s {
		out[k] = struct{}{}
	}
	return out
}

type machineWatch struct {
	w       transport.Watch
	machine uuid.UUID
	mine    map[uuid.UUID]struct{} // tasks on the machine as of the last revision; nil: unknown
}

func (w *machineWatch) Poll(max int) ([]*txn.WriteSet, error) {
	sets, err := w.w.Poll(max)
	w.narrow(sets)
	return sets, err
}

func (w *machineWatch) Next(ctx context.Context, max int) ([]*txn.WriteSet, error) {
	sets, err := w.w.Next(ctx, max)
	w.narrow(sets)
	return sets, err
}

func (w *machineWatch) Close() { w.w.Close() }

// narrow drops the evictions of tasks that were not on the machine, and
// keeps track of those that are.
func (w *machineWatch) narrow(sets []*txn.WriteSet) {
	if w.mine == nil {
		return
	}
	for _, ws := range sets {
		kept := ws.Changes[:0]
		for _, c := range ws.Changes {
			if t := c.Task; t != nil {
				_, was := w.mine[t.UID]
				switch {
				case t.Machine == w.machine && !c.Deleted:
					w.mine[t.UID] = struct{}{}
				default:
					if !was {
						continue // another machine's
					}
					delete(w.mine, t.UID)
					// Deleted, evicted or moved elsewhere: it left the
					// machine's part of the cell, which is what a deletion
					// says here.
					c.Deleted = true
				}
			}
			kept = append(kept, c)
		}
		ws.Changes = kept
	}
}
