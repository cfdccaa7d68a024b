package txn

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/pmap"
)

// Offer is a two-level allocator's resource offer (DESIGN.md "Two-level
// offers"), the Omega paper's Mesos baseline: when it is created the store
// locks for its framework every resource of every UP machine that is free
// and in no other outstanding offer, and the lock holds until the framework
// answers (OpAnswer). While it is outstanding nobody else may claim what it
// locks; the framework's claims in its answer must fit what it locks.
//
// An offer is one object however many machines it covers, and its locks
// are a persistent table shared with the state's table of what is
// unoffered: making an offer takes that table as it is, and answering one
// puts the locks back into it, each in the time of what changed since the
// offer was made (offer.go's index), not of the machines it covers. Its
// locks are derived by the store, as a machine's allocation is: no client
// writes them.
type Offer struct {
	UID       uuid.UUID
	Version   uint64
	CreateRev uint64
	Created   int64
	Meta      *omegav1.ObjectMeta
	// Framework is the component the offer is made to.
	Framework string
	// locks is what the offer locks on each machine it covers (never
	// zero), and total their sum.
	locks *pmap.Map[Resources]
	total total
	// since is the table of machines of the state the offer was made on
	// (its transaction's base; nil for an offer read from storage or the
	// wire): a machine that is the same object there and in a later state
	// did not change in between, so the answer puts its lock back without
	// looking at it.
	since *pmap.Map[*Machine]
}

// Name is the offer's name.
func (o *Offer) Name() string { return o.Meta.GetName() }

// Len is the number of machines the offer covers.
func (o *Offer) Len() int { return o.locks.Len() }

// Lock returns what the offer locks on machine m (zero, false if none).
func (o *Offer) Lock(m uuid.UUID) (Resources, bool) { return o.locks.Get(m) }

// lockOn is what the offer locks on m: only on the machine as it was when
// the offer was made (a machine deleted and registered again under its
// uid since is another).
func (o *Offer) lockOn(m *Machine) (Resources, bool) {
	if m.CreateRev > o.CreateRev {
		return Resources{}, false
	}
	return o.locks.Get(m.UID)
}

// RangeLocks calls f for each machine the offer covers, in uid order, until
// f returns false. It sorts the machines first: code on a hot path ranges
// o.locks itself, in the table's order.
func (o *Offer) RangeLocks(f func(machine uuid.UUID, lock Resources) bool) {
	ms := make([]uuid.UUID, 0, o.locks.Len())
	o.locks.Range(func(m uuid.UUID, _ Resources) bool { ms = append(ms, m); return true })
	slices.SortFunc(ms, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, m := range ms {
		l, _ := o.locks.Get(m)
		if !f(m, l) {
			return
		}
	}
}

// sameLocks reports whether o and p lock the same on the same machines.
func (o *Offer) sameLocks(p *Offer) bool {
	if o.locks == p.locks {
		return true
	}
	if o.locks.Len() != p.locks.Len() {
		return false
	}
	same := true
	o.locks.Range(func(m uuid.UUID, l Resources) bool {
		pl, ok := p.locks.Get(m)
		same = ok && pl.Equal(l)
		return same
	})
	return same
}

// Total is the sum of what the offer locks.
func (o *Offer) Total() Resources { return o.total.resources() }

// Proto returns the wire form.
func (o *Offer) Proto() *omegav1.Offer {
	st := &omegav1.OfferStatus{Locks: make([]*omegav1.OfferLock, 0, o.locks.Len())}
	o.RangeLocks(func(m uuid.UUID, l Resources) bool {
		st.Locks = append(st.Locks, &omegav1.OfferLock{MachineUid: m.String(), Resources: l.Proto()})
		return true
	})
	return &omegav1.Offer{
		Meta:   exportMeta(o.Meta, o.UID, o.Version, o.CreateRev, o.Created),
		Spec:   &omegav1.OfferSpec{Framework: o.Framework},
		Status: st,
	}
}

// newOffer builds an offer to be created: its locks are the store's to
// fill, so a status is refused.
func newOffer(p *omegav1.Offer) (*Offer, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: offer has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "offer uid")
	if err != nil {
		return nil, err
	}
	if p.GetSpec().GetFramework() == "" {
		return nil, fmt.Errorf("%w: offer %s names no framework", ErrInvalid, uid)
	}
	if len(p.GetStatus().GetLocks()) > 0 {
		return nil, fmt.Errorf("%w: offer %s has locks: an offer's status is the store's to fill", ErrInvalid, uid)
	}
	return &Offer{UID: uid, Meta: p.GetMeta(), Framework: p.GetSpec().GetFramework(), locks: pmap.New[Resources]()}, nil
}

// offerFromWire converts an offer the store made (a watched change, a
// snapshot, a stored record), its locks included.
func offerFromWire(p *omegav1.Offer) (*Offer, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: offer has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "offer uid")
	if err != nil {
		return nil, err
	}
	m := p.GetMeta()
	o := &Offer{UID: uid, Meta: m, Framework: p.GetSpec().GetFramework(), Version: m.GetVersion(), CreateRev: m.GetCreateRevision(), Created: m.GetCreationUnixNanos()}
	locks := p.GetStatus().GetLocks()
	b := pmap.New[Resources]().Transient()
	var prev uuid.UUID
	for i, l := range locks {
		mu, err := ParseUID(l.GetMachineUid(), "offer lock machine uid")
		if err != nil {
			return nil, fmt.Errorf("offer %s: %w", uid, err)
		}
		if i > 0 && bytes.Compare(prev[:], mu[:]) >= 0 {
			return nil, fmt.Errorf("%w: offer %s: locks not in machine uid order at %d", ErrInvalid, uid, i)
		}
		prev = mu
		r := ResourcesFromProto(l.GetResources())
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("%w: offer %s lock on machine %s: %v", ErrInvalid, uid, mu, err)
		}
		if r.IsZero() {
			continue // locks nothing
		}
		b.Set(mu, r)
		o.total = o.total.add(r)
	}
	o.locks = b.Persistent()
	return o, nil
}

// CreateOffer creates an offer to the framework p names; the store locks
// for it everything free and not offered elsewhere.
func CreateOffer(p *omegav1.Offer) Op { return Op{Kind: OpCreate, NewOffer: p} }

// Answer answers the offer: it is deleted and its locks released, and the
// claims after it in the transaction draw on what it locked. Only the
// offer's framework may answer it; an answer with no claims declines it.
func Answer(offer uuid.UUID) Op { return Op{Kind: OpAnswer, DeleteUID: offer} }

// --- the state's offers ------------------------------------------------------

// Offer returns an outstanding offer by uid.
func (s *State) Offer(uid uuid.UUID) (*Offer, bool) { return s.offers.Get(uid) }

// NumOffers counts the outstanding offers.
func (s *State) NumOffers() int { return s.offers.Len() }

// RangeOffers calls f for each outstanding offer, in an order that depends
// only on the set of uids, until f returns false.
func (s *State) RangeOffers(f func(*Offer) bool) {
	s.offers.Range(func(_ uuid.UUID, o *Offer) bool { return f(o) })
}

// Offered returns what the outstanding offers lock on machine m, summed
// over the offers (the index's answer is checked against it,
// CheckInvariants).
func (s *State) Offered(m *Machine) Resources {
	var sum Resources
	s.offers.Range(func(_ uuid.UUID, o *Offer) bool {
		if l, ok := o.lockOn(m); ok {
			sum = sum.Add(l)
		}
		return true
	})
	return sum
}

// offeredOn is what s's outstanding offers lock on m, s's own version of
// the machine: for an UP machine what it has free less what is unoffered
// (one lookup), otherwise the sum over the offers.
func (s *State) offeredOn(m *Machine) Resources {
	if s.offers.Len() == 0 {
		return Resources{}
	}
	if s.unoffered != nil && m.State == omegav1.MachineState_MACHINE_STATE_UP {
		u, _ := s.unoffered.Get(m.UID)
		return m.Capacity.Sub(m.Allocated).Sub(u)
	}
	return s.Offered(m)
}

// unofferedOn is what the machine uid has free that no offer of s locks,
// as s holds it: zero unless it is UP.
func (s *State) unofferedOn(uid uuid.UUID) Resources {
	m, ok := s.machines.Get(uid)
	if !ok || m.State != omegav1.MachineState_MACHINE_STATE_UP {
		return Resources{}
	}
	return m.Capacity.Sub(m.Allocated).Sub(s.Offered(m)).atLeastZero()
}

// OfferView returns the cell as the offer's framework may use it, the
// paper's private cell state of an offer: s's jobs, tasks, quotas and leases (with
// their use, which s's tasks make), and only the machines the offer
// covers that are UP, each with what the offer locks on it as its free
// resources (its allocation is the rest of its capacity), and no offers
// (what it holds is the framework's to claim; transactions evaluated on it
// see no locks). A scheduler deciding on it claims only inside the offer.
// Its machine set revision is the offer's creation. It costs a pass over
// the machines the offer covers; OfferViews makes a framework's views each
// from the last.
func (s *State) OfferView(o *Offer) *State {
	var v OfferViews
	return v.View(s, o)
}

// OfferViews makes one framework's private views of its offers
// (State.OfferView), each from the one before: the machines whose lock or
// whose version changed between the two (pmap.Map.Diff of the offers'
// locks and of the states' machines) are looked at again, the others
// kept, so a view costs what changed since the last one, not the machines
// the offer covers. The zero value is ready; it belongs to one goroutine.
type OfferViews struct {
	locks    *pmap.Map[Resources] // the last view's offer's locks
	cell     *pmap.Map[*Machine]  // and the machines it was made from
	machines *pmap.Map[*Machine]  // the last view's machines
	capacity total
	alloc    total
}

// View returns s.OfferView(o), made from the last view.
func (v *OfferViews) View(s *State, o *Offer) *State {
	var b *pmap.Builder[*Machine]
	look := func(uid uuid.UUID, lock Resources, covered bool) {
		var m *Machine
		if covered {
			if cm, ok := s.machines.Get(uid); ok && cm.State == omegav1.MachineState_MACHINE_STATE_UP {
				m = cm
				if used := m.Capacity.Sub(lock); !used.Equal(m.Allocated) {
					nm := *m
					nm.Allocated = used
					m = &nm
				} // else the offer locks all the machine has free: the view's machine is the cell's
			}
		}
		if m == nil {
			if old, had := b.Remove(uid); had {
				v.capacity, v.alloc = v.capacity.sub(old.Capacity), v.alloc.sub(old.Allocated)
			}
			return
		}
		if old, had := b.Swap(uid, m); had {
			v.capacity, v.alloc = v.capacity.replace(old.Capacity, m.Capacity), v.alloc.replace(old.Allocated, m.Allocated)
			return
		}
		v.capacity, v.alloc = v.capacity.add(m.Capacity), v.alloc.add(m.Allocated)
	}
	if v.machines == nil {
		b = pmap.New[*Machine]().Transient()
		o.locks.Range(func(uid uuid.UUID, lock Resources) bool { look(uid, lock, true); return true })
	} else {
		b = v.machines.Transient()
		again := func(uid uuid.UUID) {
			lock, covered := o.locks.Get(uid)
			look(uid, lock, covered)
		}
		o.locks.Diff(v.locks, Resources.Equal, func(uid uuid.UUID, lock Resources, covered bool) { look(uid, lock, covered) })
		s.machines.Diff(v.cell, func(a, b *Machine) bool { return a == b }, func(uid uuid.UUID, _ *Machine, _ bool) { again(uid) })
	}
	v.locks, v.cell, v.machines = o.locks, s.machines, b.Persistent()
	return &State{
		rev: s.rev, machines: v.machines, tasks: s.tasks, jobs: s.jobs, pending: s.pending,
		offers: pmap.New[*Offer](), quotas: s.quotas, quotaUse: s.quotaUse, leases: s.leases,
		capacity: v.capacity, alloc: v.alloc, lastDelete: s.lastDelete, machineSet: o.CreateRev,
	}
}

// --- evaluation ----------------------------------------------------------------

// unoffered is what m has free that no outstanding offer locks (each
// dimension at least zero), as this transaction sees the offers; zero
// unless m is UP.
func (e *evaluator) unoffered(m *Machine) Resources {
	if m.State != omegav1.MachineState_MACHINE_STATE_UP {
		return Resources{}
	}
	free := m.Capacity.Sub(m.Allocated)
	if e.offerMode {
		free = free.Sub(e.offeredOn(m))
	}
	return free.atLeastZero()
}

// offeredOn is what the outstanding offers, as this transaction sees them,
// lock on machine m: the base's, less the offer it answered, and those it
// made.
func (e *evaluator) offeredOn(m *Machine) Resources {
	var sum Resources
	if e.base.offers.Len() > 0 {
		if mb, ok := e.base.machines.Get(m.UID); ok && mb.CreateRev == m.CreateRev {
			sum = e.base.offeredOn(mb)
		} else {
			sum = e.base.Offered(m)
		}
	}
	if o := e.answering; o != nil {
		if l, ok := o.lockOn(m); ok {
			sum = sum.Sub(l)
		}
	}
	for _, o := range e.newOffers {
		if l, ok := o.lockOn(m); ok {
			sum = sum.Add(l)
		}
	}
	return sum
}

// createOffer makes an offer locking everything unoffered on every UP
// machine, as this transaction sees the machines: the base's table of what
// is unoffered, with the answered offer's locks put back and the machines
// this transaction changed looked at again.
func (e *evaluator) createOffer(op *Op) (Outcome, error) {
	o, err := newOffer(op.NewOffer)
	if err != nil {
		return Outcome{}, err
	}
	if _, exists := e.base.offers.Get(o.UID); exists {
		return Outcome{}, fmt.Errorf("%w: offer %s", ErrAlreadyExists, o.UID)
	}
	if _, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_OFFER, o.UID}]; hit {
		return Outcome{}, fmt.Errorf("%w: offer %s", ErrAlreadyExists, o.UID)
	}
	o.Version, o.CreateRev, o.Created = e.rev, e.rev, e.tx.UnixNanos
	var u unofferedEdit
	look := func(uid uuid.UUID) {
		if cur, _, ok := e.machine(uid); ok {
			u.set(uid, e.unoffered(cur))
		} else {
			u.set(uid, Resources{})
		}
	}
	switch {
	case len(e.newOffers) > 0:
		// An offer this transaction made took everything unoffered: what
		// is left is on the machines the transaction changed.
		u = unofferedEdit{b: pmap.New[Resources]().Transient()}
	case e.base.unoffered == nil:
		// No offer before in this line of states: every machine.
		u = unofferedEdit{b: pmap.New[Resources]().Transient()}
		e.base.machines.Range(func(uid uuid.UUID, _ *Machine) bool { look(uid); return true })
	default:
		u = unofferedEdit{b: e.base.unoffered.Transient(), total: e.base.unofferedTotal}
		if o := e.answering; o != nil {
			u.release(o, e.base.machines, look)
		}
	}
	for i := range e.changes { // the machines this transaction changed, made or deleted
		if c := &e.changes[i]; c.Machine != nil {
			look(c.Machine.UID)
		}
	}
	o.locks, o.total, o.since = u.b.Persistent(), u.total, e.base.machines
	e.offerMode = true
	e.newOffers = append(e.newOffers, o)
	e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_OFFER, Offer: o, Created: true})
	return committed, nil
}

// answer answers an outstanding offer: the claims after it draw on its
// locks.
func (e *evaluator) answer(op *Op) (Outcome, error) {
	if e.answering != nil {
		return Outcome{}, fmt.Errorf("%w: a transaction answers one offer; this one answered %s already", ErrInvalid, e.answering.UID)
	}
	o, ok := e.base.offers.Get(op.DeleteUID)
	if _, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_OFFER, op.DeleteUID}]; hit {
		ok = false // created by this transaction: answer it in a later one
	}
	if !ok {
		return e.missing(omegav1.ObjectKind_OBJECT_KIND_OFFER, "offer", op.DeleteUID)
	}
	if o.Framework != e.tx.Component {
		return Outcome{}, fmt.Errorf("%w: offer %s is made to %s, not to %s", ErrIllegalState, o.UID, Quote(o.Framework), Quote(e.tx.Component))
	}
	e.answering, e.offerMode = o, true
	e.offerUsed = map[uuid.UUID]Resources{}
	e.record(Change{Kind: omegav1.ObjectKind_OBJECT_KIND_OFFER, Offer: o, Deleted: true})
	return committed, nil
}

// offerFit checks a claim of req on m against the offers: after an answer,
// the claim must fit what the answered offer locks on m (less this
// transaction's earlier claims there); otherwise it must fit what no
// outstanding offer locks. An offer this transaction made locks what an
// earlier answer in it released, so after one the claim must fit both:
// the answered offer's lock and what no offer, as the transaction sees
// them, locks. It reports a conflict, or records the claim's use of the
// answered offer and returns ok.
func (e *evaluator) offerFit(m *Machine, req Resources) (Outcome, bool) {
	if o := e.answering; o != nil {
		lock, _ := o.lockOn(m)
		used := e.offerUsed[m.UID]
		if fit, dim := Fits(lock, used, req); !fit {
			return conflict(omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES,
				"the claim is outside offer %s on machine %s: %s", o.UID, m.UID, short(dim)), false
		}
		if len(e.newOffers) > 0 {
			if out, ok := e.unofferedFit(m, req); !ok {
				return out, false
			}
		}
		e.offerUsed[m.UID] = used.Add(req)
		return committed, true
	}
	return e.unofferedFit(m, req)
}

// unofferedFit checks a claim of req on m against what no outstanding
// offer, as this transaction sees them, locks.
func (e *evaluator) unofferedFit(m *Machine, req Resources) (Outcome, bool) {
	offered := e.offeredOn(m)
	if offered.IsZero() {
		return committed, true
	}
	if fit, dim := Fits(m.Capacity, m.Allocated.Add(offered), req); !fit {
		return conflict(omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES,
			"machine %s's free resources are offered to a framework: %s", m.UID, short(dim)), false
	}
	return committed, true
}

// --- what is unoffered -------------------------------------------------------------

// A State keeps, from the first offer of its line of states on, a table of
// what each UP machine has free that no outstanding offer locks (unoffered:
// nonzero entries only; nil before the first offer, when nothing is locked)
// and its sum. With it:
//   - a new offer takes the table as its locks, and the table is empty
//     after it (the offer took everything unoffered);
//   - a claim, a release or any other change of a machine sets its entry
//     again, in the time of the change;
//   - an answer puts the offer's locks back: the table is the union of the
//     two (the larger one taken as it is, the smaller added to it), and the
//     machines that changed since the offer was made (pmap.Map.Changed
//     between the offer's machines and the state's) are looked at again;
//   - what the offers lock on an UP machine is what it has free less its
//     entry, so a claim's check is one lookup, not one per offer.
// So an offer costs the store what changed since the last one, not the
// machines it covers: a framework answered quickly gets nearly the whole
// cell offered again at the cost of the few machines its claims took.

// unofferedEdit edits a table of what is unoffered, keeping its sum.
type unofferedEdit struct {
	b     *pmap.Builder[Resources]
	total total
}

// set makes v machine m's entry (none if v is zero).
func (u *unofferedEdit) set(m uuid.UUID, v Resources) {
	if v.IsZero() {
		if old, had := u.b.Remove(m); had {
			u.total = u.total.sub(old)
		}
		return
	}
	if old, had := u.b.Swap(m, v); had {
		if old.Equal(v) {
			return
		}
		u.total = u.total.sub(old)
	}
	u.total = u.total.add(v)
}

// add adds v to machine m's entry.
func (u *unofferedEdit) add(m uuid.UUID, v Resources) {
	old, had := u.b.Get(m)
	if !had {
		u.b.Set(m, v)
		u.total = u.total.add(v)
		return
	}
	u.b.Set(m, old.Add(v))
	u.total = u.total.add(v)
}

// release puts the answered offer o's locks back into u, which holds what
// is unoffered with o outstanding, now being the machines' table where u
// holds (the state the answer is made on, or its result): the smaller of
// u and o's locks is added to the larger, and look sets again each machine
// o covers that is not the object it was when o was made. Without o.since
// (an offer read from storage), or when machines came or went since,
// every machine o covers is looked at.
func (u *unofferedEdit) release(o *Offer, now *pmap.Map[*Machine], look func(uuid.UUID)) {
	var changed []uuid.UUID
	fast := o.since != nil && now.Changed(o.since, func(a, b *Machine) bool { return a == b }, func(m uuid.UUID, _ *Machine) {
		if _, covered := o.locks.Get(m); covered {
			changed = append(changed, m)
		}
	})
	if !fast {
		o.locks.Range(func(m uuid.UUID, _ Resources) bool { look(m); return true })
		return
	}
	if o.locks.Len() > u.b.Len() {
		small := u.b.Persistent()
		*u = unofferedEdit{b: o.locks.Transient(), total: o.total}
		small.Range(func(m uuid.UUID, v Resources) bool { u.add(m, v); return true })
	} else {
		o.locks.Range(func(m uuid.UUID, l Resources) bool { u.add(m, l); return true })
	}
	for _, m := range changed {
		look(m)
	}
}

// offerIndex keeps the table of what is unoffered while a Builder edits a
// state.
type offerIndex struct {
	base     *State
	created  []*Offer
	released []*Offer
	touched  []uuid.UUID // machines changed
}

func newOfferIndex(s *State) offerIndex { return offerIndex{base: s} }

// lock notes a new offer.
func (x *offerIndex) lock(o *Offer) { x.created = append(x.created, o) }

// release notes an answered offer.
func (x *offerIndex) release(o *Offer) { x.released = append(x.released, o) }

// touch notes a machine that changed.
func (x *offerIndex) touch(m uuid.UUID) {
	if x.base.unoffered != nil || x.base.offers.Len() > 0 {
		x.touched = append(x.touched, m)
	}
}

// finish sets st's table of what is unoffered and the offers' total.
func (x *offerIndex) finish(st *State) {
	st.offeredTotal = x.base.offeredTotal
	for _, o := range x.released {
		st.offeredTotal = st.offeredTotal.minus(o.total)
	}
	for _, o := range x.created {
		st.offeredTotal = st.offeredTotal.plus(o.total)
	}
	if x.base.unoffered == nil && st.offers.Len() == 0 {
		return // nothing offered yet in this line of states
	}
	var u unofferedEdit
	look := func(uid uuid.UUID) { u.set(uid, st.unofferedOn(uid)) }
	switch {
	case x.base.unoffered == nil:
		// The first offer of this line of states (or a restore): every
		// machine once.
		u = unofferedEdit{b: pmap.New[Resources]().Transient()}
		st.machines.Range(func(uid uuid.UUID, _ *Machine) bool { look(uid); return true })
	case len(x.created) > 0:
		// The new offer took everything unoffered as the transaction saw
		// it: what is left is on the machines the transaction changed.
		u = unofferedEdit{b: pmap.New[Resources]().Transient()}
	case len(x.released) == 0 && len(x.touched) == 0:
		st.unoffered, st.unofferedTotal = x.base.unoffered, x.base.unofferedTotal
		return
	default:
		u = unofferedEdit{b: x.base.unoffered.Transient(), total: x.base.unofferedTotal}
		for _, o := range x.released {
			u.release(o, st.machines, look)
		}
	}
	for _, uid := range x.touched {
		look(uid)
	}
	st.unoffered, st.unofferedTotal = u.b.Persistent(), u.total
}

// OfferedTotal is what the outstanding offers lock, in total.
func (s *State) OfferedTotal() Resources { return s.offeredTotal.resources() }

// checkOfferIndex holds the table of what is unoffered to the offers on
// machine m (CheckInvariants).
func (s *State) checkOfferIndex(m *Machine) error {
	if s.unoffered == nil {
		if s.offers.Len() > 0 {
			return fmt.Errorf("%d offers outstanding and no table of what is unoffered", s.offers.Len())
		}
		return nil
	}
	got, _ := s.unoffered.Get(m.UID)
	if want := s.unofferedOn(m.UID); !got.Equal(want) {
		return fmt.Errorf("machine %s: the index says %v unoffered, the offers leave %v", m.UID, got, want)
	}
	return nil
}

// checkOffers holds the offers' sums and the table's entries to the
// machines (CheckInvariants).
func (s *State) checkOffers() error {
	var offered total
	var err error
	s.offers.Range(func(_ uuid.UUID, o *Offer) bool {
		var sum total
		o.locks.Range(func(_ uuid.UUID, l Resources) bool { sum = sum.add(l); return true })
		if !sum.equal(o.total) {
			err = fmt.Errorf("offer %s: its locks sum to %v, it says %v", o.UID, sum.resources(), o.Total())
			return false
		}
		offered = offered.plus(o.total)
		return true
	})
	if err != nil {
		return err
	}
	if !offered.equal(s.offeredTotal) {
		return fmt.Errorf("the offers lock %v in total, the state says %v", offered.resources(), s.OfferedTotal())
	}
	if s.unoffered == nil {
		return nil
	}
	var sum total
	s.unoffered.Range(func(uid uuid.UUID, v Resources) bool {
		sum = sum.add(v)
		if _, ok := s.machines.Get(uid); !ok {
			err = fmt.Errorf("the index of what is unoffered holds %v on machine %s, which does not exist", v, uid)
		}
		return err == nil
	})
	if err == nil && !sum.equal(s.unofferedTotal) {
		err = fmt.Errorf("the index of what is unoffered sums to %v, it says %v", sum.resources(), s.unofferedTotal.resources())
	}
	return err
}

// WithTaken returns s with what the claims among ops declare added to
// their machines' allocations (machines s does not hold are skipped): a
// framework's private view of an offer after some of its decisions, so
// the next decision sees what is left. It changes only machines (an
// Evaluate and Apply would fork the task table for a view nobody commits
// to).
func (s *State) WithTaken(ops []Op) *State {
	var b *pmap.Builder[*Machine]
	alloc := s.alloc
	for i := range ops {
		op := &ops[i]
		if op.Kind != OpClaim {
			continue
		}
		if b == nil {
			b = s.machines.Transient()
		}
		m, ok := b.Get(op.Machine)
		if !ok {
			continue
		}
		nm := *m
		nm.Allocated = m.Allocated.Add(op.Resources)
		b.Set(nm.UID, &nm)
		alloc = alloc.add(op.Resources)
	}
	if b == nil {
		return s
	}
	out := *s
	out.machines, out.alloc = b.Persistent(), alloc
	return &out
}
