package agents

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/minheap"
	"github.com/omega-cell/omega/txn"
)

// MemberEvent is a change in which machines of the cell are alive.
type MemberEvent struct {
	Machine uuid.UUID
	// At is when it happened, Unix nanoseconds.
	At int64
	// Up is false when the machine died, true when it came back.
	Up bool
	// Version, for a comeback, is the machine's version its death was
	// written at: the UP write expects it.
	Version uint64
}

// Membership says which machines died and which came back. Whichever
// component acts on it writes the change through the store — a death as
// MachineDown's transaction, a comeback as the machine put UP — and tells
// the membership how that went. The simulation's membership
// (SimMembership) draws failures from a Poisson process and repairs them
// after a while; the live cell's follows the gossip membership, whose
// events arrive on memberlist's goroutines and are handed out here.
type Membership interface {
	// Due appends the changes due at or before now not handed out yet to
	// into and returns it: deaths first, in the order they happened, then
	// comebacks.
	Due(now int64, into []MemberEvent) []MemberEvent
	// Settled says whether the change's write committed (at revision rev)
	// or was dropped because the machine moved on meanwhile; now is the
	// time of the transaction.
	Settled(e MemberEvent, committed bool, rev uint64, now int64)
	// Unsent takes back a change whose transaction failed to commit, to
	// hand out again.
	Unsent(e MemberEvent)
	// Next is when the next change falls due; ok is false when none is
	// foreseen.
	Next() (at int64, ok bool)
}

// failure is a machine failure the membership has drawn and not seen
// written.
type failure struct {
	at      int64 // when it happened, Unix nanoseconds
	machine uuid.UUID
}

// SimMembership is the simulation's membership: machines fail as a Poisson
// process in virtual time (FleetConfig.FailuresPerDay), each failure a
// machine drawn uniformly among those UP and not already held DOWN, and
// come back RepairTime after their DOWN write committed. It follows the
// cell's machines from the tracker's events (the fleet forwards them), and
// a machine someone else changed after its DOWN write is no longer its to
// repair. Randomness is FleetConfig.Rand: the same history and seed draw
// the same failures.
type SimMembership struct {
	tr   *Tracker
	rate float64 // failures per day
	fix  time.Duration
	rand *rand.Rand

	up           uidSet // UP machines that may fail, in history order
	armed        bool
	next         int64 // the next failure, Unix nanoseconds
	pendingFails []failure
	repairs      minheap.Heap[repairEntry]
	failed       map[uuid.UUID]uint64 // machines held DOWN → the version the DOWN write gave them
	last         int64                // the last Due's now
}

// NewSimMembership makes the simulation's membership for the machines tr
// follows, from cfg's failure rate, repair time and randomness.
func NewSimMembership(tr *Tracker, cfg FleetConfig) *SimMembership {
	cfg = cfg.withDefaults()
	return &SimMembership{
		tr: tr, rate: cfg.FailuresPerDay, fix: cfg.RepairTime, rand: cfg.Rand,
		up:      newUIDSet(),
		repairs: minheap.New(repairLess),
		failed:  map[uuid.UUID]uint64{},
	}
}

// Arm starts the failure process at from; later calls do nothing.
func (s *SimMembership) Arm(from int64) {
	if s.armed || s.rate <= 0 {
		return
	}
	s.armed = true
	s.next = addSat(from, s.gap())
}

// gap draws the time to the next failure in the cell: exponential with
// mean one day / rate.
func (s *SimMembership) gap() int64 {
	g := s.rand.ExpFloat64() * float64(24*time.Hour) / s.rate
	switch {
	case g >= 1<<62:
		return 1 << 62
	case g < 1:
		return 1
	}
	return int64(g)
}

func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Down reports whether the membership holds the machine DOWN: it wrote its
// death and has not repaired it.
func (s *SimMembership) Down(machine uuid.UUID) bool {
	_, ok := s.failed[machine]
	return ok
}

// Relisted forgets the machines (the re-list notes them again) and the
// machines held DOWN that are gone or moved on.
func (s *SimMembership) Relisted(v *txn.State) {
	s.up = newUIDSet()
	for u, ver := range s.failed { // deletes only: order does not matter
		if m, ok := v.Machine(u); !ok || m.Version > ver {
			delete(s.failed, u)
		}
	}
}

// MachineChanged follows a machine's newest version.
func (s *SimMembership) MachineChanged(m *txn.Machine) {
	if s.rate <= 0 {
		return // no failures are drawn, none are held: the UP set is never read
	}
	v, held := s.failed[m.UID]
	if held && m.Version > v {
		// Someone else changed the machine since its DOWN write: its repair
		// is no longer the membership's to make.
		delete(s.failed, m.UID)
		held = false
	}
	if m.State == stateUp && !held {
		s.up.Add(m.UID)
	} else {
		s.up.Remove(m.UID)
	}
}

// MachineDeleted forgets a machine.
func (s *SimMembership) MachineDeleted(uid uuid.UUID) {
	delete(s.failed, uid)
	s.up.Remove(uid)
}

// Due hands out the failures due (those put back first, then the Poisson
// process) and the repairs due.
func (s *SimMembership) Due(now int64, into []MemberEvent) []MemberEvent {
	s.last = now
	for _, fl := range s.pendingFails {
		if s.up.Has(fl.machine) {
			s.up.Remove(fl.machine)
			into = append(into, MemberEvent{Machine: fl.machine, At: fl.at})
		}
	}
	s.pendingFails = s.pendingFails[:0]
	for s.armed && s.next <= now {
		t := s.next
		s.next = addSat(t, s.gap())
		if s.up.Len() == 0 {
			continue // nothing left to fail
		}
		m := s.up.At(s.rand.IntN(s.up.Len()))
		s.up.Remove(m)
		into = append(into, MemberEvent{Machine: m, At: t})
	}
	var later []repairEntry
	for s.repairs.Len() > 0 && s.repairs.Peek().at <= now {
		r := s.repairs.Pop()
		if v, held := s.failed[r.machine]; !held || v != r.version {
			continue // someone else changed the machine: not the membership's to repair
		}
		m, ok := s.tr.Machine(r.machine)
		if !ok {
			delete(s.failed, r.machine)
			continue
		}
		if m.Version < r.version {
			later = append(later, r) // the DOWN write is not watched yet
			continue
		}
		into = append(into, MemberEvent{Machine: r.machine, At: r.at, Up: true, Version: r.version})
	}
	for _, r := range later {
		s.repairs.Push(r)
	}
	return into
}

// Settled holds a machine whose DOWN write committed and queues its
// repair; a comeback, written or not, ends the hold.
func (s *SimMembership) Settled(e MemberEvent, committed bool, rev uint64, now int64) {
	if e.Up {
		delete(s.failed, e.Machine)
		return
	}
	if committed {
		s.failed[e.Machine] = rev
		s.repairs.Push(repairEntry{at: addSat(now, int64(s.fix)), machine: e.Machine, version: rev})
	}
}

// Unsent puts a change back: a failure of a machine still UP is retried at
// the next Due, a repair stays queued.
func (s *SimMembership) Unsent(e MemberEvent) {
	if e.Up {
		s.repairs.Push(repairEntry{at: e.At, machine: e.Machine, version: e.Version})
		return
	}
	if m, ok := s.tr.Machine(e.Machine); ok && m.State == stateUp {
		s.up.Add(e.Machine)
		s.pendingFails = append(s.pendingFails, failure{at: e.At, machine: e.Machine})
	}
}

// Next is the earliest of the next failure, the next repair, and — when a
// failure was put back — the last Due's time.
func (s *SimMembership) Next() (int64, bool) {
	best, found := int64(math.MaxInt64), false
	if s.armed {
		best, found = s.next, true
	}
	if s.repairs.Len() > 0 {
		best, found = min(best, s.repairs.Peek().at), true
	}
	if len(s.pendingFails) > 0 {
		best, found = min(best, s.last), true
	}
	return best, found
}
