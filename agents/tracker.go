package agents

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/uidmap"
	"github.com/omega-cell/omega/txn"
)

// Placement is a task the tracker knows is placed on one of its machines.
type Placement struct {
	Machine uuid.UUID
	// Version is the task's version as last watched: a report about the
	// task expects it.
	Version uint64
	// Assigned is the claim's time (Unix nanoseconds); with Machine, it
	// names the placement.
	Assigned int64
	// Gen is the tracker's sequence number for this placement, unique over
	// the tracker's life: something queued for a placement (a finish, a
	// process) is still current when Current(uid, Gen) says so.
	Gen uint64
}

// TrackerEvents is what a tracker tells its owner, in the order the cell's
// history gives it. A tracker calls it from inside List and Poll, on the
// caller's goroutine.
type TrackerEvents interface {
	// Relisted says the tracker is rebuilding from a fresh view s (after a
	// watch fell behind the retained history, or at the start): everything
	// derived from earlier events is stale; the view's machines and
	// placements follow as MachineChanged and Placed events.
	Relisted(s *txn.State)
	// MachineChanged gives a machine's newest version; MachineDeleted its
	// deletion.
	MachineChanged(m *txn.Machine)
	MachineDeleted(uid uuid.UUID)
	// Placed gives a new placement (a task that became ASSIGNED on one of
	// the tracker's machines, or moved to another placement). A newer
	// version of the same placement (a RUNNING report, say) only updates
	// Version and is not an event.
	Placed(t *txn.Task, p Placement)
	// Unplaced says a placement ended in the cell: the task left
	// ASSIGNED/RUNNING (evicted, finished, lost), was deleted, moved to
	// another placement, or was forgotten by its owner.
	Unplaced(uid uuid.UUID, p Placement)
}

// TrackerConfig configures a Tracker.
type TrackerConfig struct {
	// Machines, if set, says which machines are the tracker's: tasks placed
	// elsewhere are ignored. A node agent tracks its own machine; the
	// simulated fleet (nil) tracks them all.
	Machines func(uuid.UUID) bool
	// ByMachine keeps the placements of each machine, for On (a machine's
	// death reports them all). Off, On returns nothing.
	ByMachine bool
}

// Tracker follows which tasks are placed on a set of machines, and the
// machines themselves, from a view of the cell and the watch after it — the
// part of an agent that knows what it should be running. It follows the
// cell through a client.Informer (which re-lists when the watch falls
// behind the retained history) and tells its owner what changed through
// TrackerEvents. It belongs to one goroutine, reads no clock and starts
// none.
type Tracker struct {
	cfg TrackerConfig
	ev  TrackerEvents
	inf *client.Informer
	gen uint64

	tasks     *uidmap.Map[Placement]
	onMachine map[uuid.UUID]map[uuid.UUID]struct{} // machine → placed tasks on it (sets kept when empty)
	machines  map[uuid.UUID]*txn.Machine           // as last watched
}

// trackerFeed is the tracker as its informer's handler.
type trackerFeed struct{ tr *Tracker }

func (f trackerFeed) Relisted(s *txn.State) error  { f.tr.reset(s); return nil }
func (f trackerFeed) Apply(ws *txn.WriteSet) error { f.tr.Ingest(ws); return nil }

// NewTracker makes a tracker over c that reports to ev. It does not list:
// call List.
func NewTracker(c *client.Client, cfg TrackerConfig, ev TrackerEvents) (*Tracker, error) {
	if c == nil {
		return nil, errors.New("new tracker: client is nil")
	}
	if ev == nil {
		return nil, errors.New("new tracker: events are nil")
	}
	tr := &Tracker{cfg: cfg, ev: ev}
	inf, err := client.NewInformer(c, trackerFeed{tr})
	if err != nil {
		return nil, err
	}
	tr.inf = inf
	return tr, nil
}

// List takes a fresh view of the cell, rebuilds what the tracker knows from
// it, and watches from its revision.
func (tr *Tracker) List(ctx context.Context) error { return tr.inf.List(ctx) }

func (tr *Tracker) reset(s *txn.State) {
	tr.tasks = uidmap.New[Placement](s.NumTasks() / 4)
	tr.onMachine = make(map[uuid.UUID]map[uuid.UUID]struct{}, s.NumMachines())
	tr.machines = make(map[uuid.UUID]*txn.Machine, s.NumMachines())
	tr.ev.Relisted(s)
	// Range orders depend only on the sets of uids: the same state rebuilds
	// the same tracker and the same events.
	s.RangeMachines(func(m *txn.Machine) bool {
		tr.noteMachine(m)
		return true
	})
	s.RangeTasks(func(t *txn.Task) bool {
		if t.Placed() {
			tr.track(t)
		}
		return true
	})
}

// Poll takes in what the watch has delivered since the last call, without
// blocking. An error means the watch failed (the store closed, say); a
// watch that fell behind the retained history is not an error: the tracker
// lists again.
func (tr *Tracker) Poll(ctx context.Context) error {
	if err := tr.inf.Poll(ctx); err != nil {
		return fmt.Errorf("tracker: %w", err)
	}
	return nil
}

// Ingest takes in one write set after the tracker's revision (its informer
// feeds them from the watch).
func (tr *Tracker) Ingest(ws *txn.WriteSet) {
	for i := range ws.Changes {
		ch := &ws.Changes[i]
		switch {
		case ch.Task != nil && ch.Created && !ch.Task.Placed():
			// New and not placed: nothing to forget (its uid was never
			// tracked, or its deletion was seen). A deletion is always
			// looked up, even one carrying a terminal version: a
			// transaction that ends a task and deletes it is one change,
			// and a machine's watch turns a task that left the machine
			// (an evict then an end, in one transaction) into a deletion.
		case ch.Task != nil:
			if ch.Deleted || !ch.Task.Placed() {
				tr.Forget(ch.Task.UID)
			} else {
				tr.track(ch.Task)
			}
		case ch.Machine != nil:
			if ch.Deleted {
				delete(tr.machines, ch.Machine.UID)
				tr.ev.MachineDeleted(ch.Machine.UID)
			} else {
				tr.noteMachine(ch.Machine)
			}
		}
	}
}

func (tr *Tracker) noteMachine(m *txn.Machine) {
	if tr.cfg.Machines != nil && !tr.cfg.Machines(m.UID) {
		return
	}
	tr.machines[m.UID] = m
	tr.ev.MachineChanged(m)
}

// track notes a placed task.
func (tr *Tracker) track(t *txn.Task) {
	if tr.cfg.Machines != nil && !tr.cfg.Machines(t.Machine) {
		tr.Forget(t.UID) // moved off the tracker's machines, if it was on them
		return
	}
	if cur, ok := tr.tasks.Get(t.UID); ok {
		if cur.Machine == t.Machine && cur.Assigned == t.Assigned {
			cur.Version = t.Version
			tr.tasks.Set(t.UID, cur)
			return
		}
		tr.Forget(t.UID)
	}
	tr.gen++
	p := Placement{Machine: t.Machine, Version: t.Version, Assigned: t.Assigned, Gen: tr.gen}
	tr.tasks.Set(t.UID, p)
	if tr.cfg.ByMachine {
		set := tr.onMachine[t.Machine]
		if set == nil {
			set = map[uuid.UUID]struct{}{}
			tr.onMachine[t.Machine] = set
		}
		set[t.UID] = struct{}{}
	}
	tr.ev.Placed(t, p)
}

// Forget stops tracking a task (its placement ended, or its owner reported
// it ended); a task not tracked is ignored.
func (tr *Tracker) Forget(uid uuid.UUID) {
	p, ok := tr.tasks.Get(uid)
	if !ok {
		return
	}
	tr.tasks.Delete(uid)
	// An emptied set stays: the machine will hold tasks again, and a map per
	// machine is cheaper kept than made anew for every placement.
	delete(tr.onMachine[p.Machine], uid)
	tr.ev.Unplaced(uid, p)
}

// Task returns a tracked placement.
func (tr *Tracker) Task(uid uuid.UUID) (Placement, bool) {
	p, ok := tr.tasks.Get(uid)
	return p, ok
}

// Current reports whether uid is still tracked at the placement gen names,
// and returns it.
func (tr *Tracker) Current(uid uuid.UUID, gen uint64) (Placement, bool) {
	p, ok := tr.tasks.Get(uid)
	if !ok || p.Gen != gen {
		return Placement{}, false
	}
	return p, true
}

// On returns the tasks placed on a machine (with ByMachine; the set is the
// tracker's: read it, do not keep it).
func (tr *Tracker) On(machine uuid.UUID) map[uuid.UUID]struct{} { return tr.onMachine[machine] }

// Machine returns a machine as last watched.
func (tr *Tracker) Machine(uid uuid.UUID) (*txn.Machine, bool) {
	m, ok := tr.machines[uid]
	return m, ok
}

// Len is how many placements the tracker follows.
func (tr *Tracker) Len() int { return tr.tasks.Len() }

// Revision is the revision the tracker has taken in.
func (tr *Tracker) Revision() uint64 { return tr.inf.Revision() }

// Relists counts the re-lists after the watch fell behind.
func (tr *Tracker) Relists() int64 { return tr.inf.Relists() }

// Close stops watching.
func (tr *Tracker) Close() { tr.inf.Close() }
