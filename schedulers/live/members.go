package live

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/omega-cell/omega/membership"
)

// Membership is a scheduler instance's member of the cell's gossip
// membership, and the bridge from it to its Driver: Run turns
// memberlist's events into the live instances of the kind, delivered on
// Members for Driver.Members.
type Membership struct {
	ml             *memberlist.Memberlist
	changes        membership.Changes
	kind, instance string
	list           func() []string // the live instances of the kind
	members        chan []string
	closed         sync.Once
	// Logger says when the instances change; nil: slog.Default().
	Logger *slog.Logger
}

// JoinMembership makes the instance of a scheduler kind a member of the
// cell's gossip membership (cfg's address, profile, key and joins; its
// Name, Meta and Events are the instance's own: "scheduler/KIND/INSTANCE",
// membership.Scheduler, the bridge's), and joins it. The caller runs Run
// and, when done, Close.
func JoinMembership(cfg membership.Config, kind, instance string) (*Membership, error) {
	m := &Membership{changes: membership.NewChanges(), kind: kind, instance: instance, members: make(chan []string, 1)}
	cfg.Name, cfg.Meta, cfg.Events = "scheduler/"+kind+"/"+instance, membership.Scheduler(kind, instance), m.changes
	var err error
	if m.ml, err = membership.Start(cfg); err != nil {
		return nil, err
	}
	m.list = func() []string { return membership.Instances(m.ml, kind) }
	return m, nil
}

// Members delivers the live instances of the kind, this one included,
// sorted, whenever they change (the first list as soon as Run starts).
// It holds at most one list: a newer one replaces one the Driver has not
// taken yet, so the Driver never reads a stale list and Run never waits
// on it.
func (m *Membership) Members() <-chan []string { return m.members }

// Run follows the membership until ctx is done (it returns ctx.Err()),
// reading the instances of the kind (membership.Instances) after each
// change memberlist reports and delivering them on Members when they
// differ from the last delivered. Live code: it blocks, on the caller's
// goroutine; one Run per Membership.
func (m *Membership) Run(ctx context.Context) error {
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	var last []string
	m.changes.Poke() // the first list, whatever happened before
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.changes:
		}
		names := m.list()
		if !slices.Contains(names, m.instance) {
			// memberlist lists the member itself; this is belt and braces.
			names = append(names, m.instance)
			slices.Sort(names)
		}
		if slices.Equal(names, last) {
			continue
		}
		last = names
		select { // the newest replaces one not taken yet
		case <-m.members:
		default:
		}
		m.members <- slices.Clone(names)
		log.Info("instances", "kind", m.kind, "members", names) // once delivered
	}
}

// Close leaves the membership, so that the other instances take this
// one's jobs over at once (waiting at most leave for the news to go
// out), and stops the member. Call it after Run has returned; a second
// Close does nothing (nil).
func (m *Membership) Close(leave time.Duration) (err error) {
	m.closed.Do(func() {
		err = m.ml.Leave(leave)
		if serr := m.ml.Shutdown(); serr != nil {
			err = serr
		}
	})
	return err
}
