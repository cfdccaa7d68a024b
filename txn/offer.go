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
// An offer is one object however many machines it covers, so making one
// costs the store a pass over the machines, never a write per machine. Its
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
	// machines (sorted by uid) and locks, side by side: what the offer
	// locks on each machine it covers.
	machines []uuid.UUID
	locks    []Resources
}

// Name is the offer's name.
func (o *Offer) Name() string { return o.Meta.GetName() }

// Len is the number of machines the offer covers.
func (o *Offer) Len() int { return len(o.machines) }

// Lock returns what the offer locks on machine m (zero, false if none).
func (o *Offer) Lock(m uuid.UUID) (Resources, bool) {
	i, ok := slices.BinarySearchFunc(o.machines, m, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	if !ok {
		return Resources{}, false
	}
	return o.locks[i], true
}

// lockOn is what the offer locks on m: only on the machine as it was when
// the offer was made (a machine deleted and registered again under its
// uid since is another).
func (o *Offer) lockOn(m *Machine) (Resources, bool) {
	if m.CreateRev > o.CreateRev {
		return Resources{}, false
	}
	return o.Lock(m.UID)
}

// RangeLocks calls f for each machine the offer covers, in uid order, until
// f returns false.
func (o *Offer) RangeLocks(f func(machine uuid.UUID, lock Resources) bool) {
	for i, m := range o.machines {
		if !f(m, o.locks[i]) {
			return
		}
	}
}

// sameLocks reports whether o and p lock the same on the same machines.
func (o *Offer) sameLocks(p *Offer) bool {
	return slices.Equal(o.machines, p.machines) && slices.EqualFunc(o.locks, p.locks, Resources.Equal)
}

// Total is the sum of what the offer locks.
func (o *Offer) Total() Resources {
	var t total
	for _, l := range o.locks {
		t = t.add(l)
	}
	return t.resources()
}

// Proto returns the wire form.
func (o *Offer) Proto() *omegav1.Offer {
	st := &omegav1.OfferStatus{Locks: make([]*omegav1.OfferLock, len(o.machines))}
	for i, m := range o.machines {
		st.Locks[i] = &omegav1.OfferLock{MachineUid: m.String(), Resources: o.locks[i].Proto()}
	}
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
	return &Offer{UID: uid, Meta: p.GetMeta(), Framework: p.GetSpec().GetFramework()}, nil
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
	o.machines, o.locks = make([]uuid.UUID, len(locks)), make([]Resources, len(locks))
	for i, l := range locks {
		if o.machines[i], err = ParseUID(l.GetMachineUid(), "offer lock machine uid"); err != nil {
			return nil, fmt.Errorf("offer %s: %w", uid, err)
		}
		if i > 0 && bytes.Compare(o.machines[i-1][:], o.machines[i][:]) >= 0 {
			return nil, fmt.Errorf("%w: offer %s: locks not in machine uid order at %d", ErrInvalid, uid, i)
		}
		o.locks[i] = ResourcesFromProto(l.GetResources())
		if err := o.locks[i].Validate(); err != nil {
			return nil, fmt.Errorf("%w: offer %s lock on machine %s: %v", ErrInvalid, uid, o.machines[i], err)
		}
	}
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

// Offered returns what the outstanding offers lock on machine m.
func (s *State) Offered(m *Machine) Resources {
	v, _ := s.offered.Get(m.UID)
	return v
}

// OfferView returns the cell as the offer's framework may use it, the
// paper's private cell state of an offer: s's jobs, tasks and quotas (with
// their use, which s's tasks make), and only the machines the offer covers, each with what the offer locks on it as its
// free resources (its allocation is the rest of its capacity), and no
// offers (what it holds is the framework's to claim; transactions
// evaluated on it see no locks). A
// scheduler deciding on it claims only inside the offer. Its machine set
// revision is the offer's creation, so an index of machines built on
// another view is rebuilt.
func (s *State) OfferView(o *Offer) *State {
	b := pmap.New[*Machine]().Transient()
	var capacity, alloc total
	o.RangeLocks(func(uid uuid.UUID, lock Resources) bool {
		m, ok := s.machines.Get(uid)
		if !ok || m.State != omegav1.MachineState_MACHINE_STATE_UP {
			return true
		}
		used := m.Capacity.Sub(lock)
		if !used.Equal(m.Allocated) {
			nm := *m
			nm.Allocated = used
			m = &nm
		} // else the offer locks all the machine has free: the view's machine is the cell's
		b.Set(uid, m)
		capacity, alloc = capacity.add(m.Capacity), alloc.add(m.Allocated)
		return true
	})
	return &State{
		rev: s.rev, machines: b.Persistent(), tasks: s.tasks, jobs: s.jobs, pending: s.pending,
		offers: pmap.New[*Offer](), offered: pmap.New[Resources](), quotas: s.quotas, quotaUse: s.quotaUse,
		capacity: capacity, alloc: alloc, lastDelete: s.lastDelete, machineSet: o.CreateRev,
	}
}

// --- evaluation ----------------------------------------------------------------

// unoffered is what m has free that no outstanding offer locks (each
// dimension at least zero).
func (e *evaluator) unoffered(m *Machine) Resources {
	free := m.Capacity.Sub(m.Allocated)
	if e.offerMode {
		free = free.Sub(e.offeredOn(m))
	}
	return free.atLeastZero()
}

// offeredOn is what the outstanding offers, as this transaction sees them,
// lock on machine m: the base's (its index), less the offer it answered,
// and those it made.
func (e *evaluator) offeredOn(m *Machine) Resources {
	sum, _ := e.base.offered.Get(m.UID)
	if o := e.answering; o != nil {
		if l, ok := o.Lock(m.UID); ok {
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
// machine, as this transaction sees the machines.
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
	type lock struct {
		m uuid.UUID
		r Resources
	}
	var locks []lock
	add := func(m *Machine) {
		if m.State != omegav1.MachineState_MACHINE_STATE_UP {
			return
		}
		if free := e.unoffered(m); !free.IsZero() {
			locks = append(locks, lock{m.UID, free})
		}
	}
	if e.base.avail == nil {
		// No offer before in this line of states: every machine.
		e.base.machines.Range(func(uid uuid.UUID, m *Machine) bool {
			if cur, _, ok := e.machine(uid); ok {
				add(cur)
			}
			return true
		})
		for i := range e.changes { // machines this transaction created
			if c := &e.changes[i]; c.Machine != nil && c.Created && !c.Deleted {
				if _, inBase := e.base.machines.Get(c.Machine.UID); !inBase {
					add(c.Machine)
				}
			}
		}
	} else {
		// Only the machines that may have something unoffered: those that
		// changed or were released since the last offer, and those this
		// transaction changed (the answered offer's included).
		e.base.avail.Range(func(uid uuid.UUID, _ struct{}) bool {
			if _, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_MACHINE, uid}]; !hit {
				if m, ok := e.base.machines.Get(uid); ok {
					add(m)
				}
			}
			return true
		})
		for i := range e.changes {
			if c := &e.changes[i]; c.Machine != nil && !c.Deleted {
				add(c.Machine)
			}
		}
		if o := e.answering; o != nil {
			o.RangeLocks(func(uid uuid.UUID, _ Resources) bool {
				_, inAvail := e.base.avail.Get(uid)
				if _, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_MACHINE, uid}]; !hit && !inAvail {
					if m, ok := e.base.machines.Get(uid); ok {
						add(m)
					}
				}
				return true
			})
		}
	}
	slices.SortFunc(locks, func(a, b lock) int { return bytes.Compare(a.m[:], b.m[:]) })
	o.machines, o.locks = make([]uuid.UUID, len(locks)), make([]Resources, len(locks))
	for i, l := range locks {
		o.machines[i], o.locks[i] = l.m, l.r
	}
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
		return Outcome{}, fmt.Errorf("%w: offer %s is made to %q, not to %q", ErrIllegalState, o.UID, short(o.Framework), short(e.tx.Component))
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

// --- the offers' indexes ---------------------------------------------------------

// What a State keeps so that offers cost the cell's commits little: what
// the outstanding offers lock per machine (offered, so a claim's check is
// one lookup, not one per offer), in total, and the machines that may have
// something no offer locks (avail: since an offer takes everything
// unoffered, the next one needs to look only at the machines that changed
// or were released since, not at every machine). avail is nil until the
// first offer of a line of states is made (the first offer looks at every
// machine); from then on every machine change puts the machine in it if it
// has something unoffered, an answer puts the machines it released, and a
// new offer empties it.

// offerIndex keeps the indexes while a Builder edits a state.
type offerIndex struct {
	base    *State
	offered *pmap.Builder[Resources] // nil until an offer comes or goes
	total   total
	created bool        // an offer was made
	touched []uuid.UUID // machines changed or released, while avail is tracked
}

func newOfferIndex(s *State) offerIndex { return offerIndex{base: s} }

func (x *offerIndex) edit() {
	if x.offered == nil {
		x.offered, x.total = x.base.offered.Transient(), x.base.offeredTotal
	}
}

// lock adds a new offer's locks.
func (x *offerIndex) lock(o *Offer) {
	x.edit()
	x.created = true
	o.RangeLocks(func(m uuid.UUID, r Resources) bool {
		cur, _ := x.offered.Get(m)
		x.offered.Set(m, cur.Add(r))
		x.total = x.total.add(r)
		return true
	})
}

// release takes an answered offer's locks away.
func (x *offerIndex) release(o *Offer) {
	x.edit()
	o.RangeLocks(func(m uuid.UUID, r Resources) bool {
		cur, _ := x.offered.Get(m)
		if left := cur.Sub(r); left.IsZero() {
			x.offered.Delete(m)
		} else {
			x.offered.Set(m, left)
		}
		x.total = x.total.sub(r)
		x.touch(m)
		return true
	})
}

// touch notes a machine that changed (or was released).
func (x *offerIndex) touch(m uuid.UUID) {
	if x.base.avail != nil {
		x.touched = append(x.touched, m)
	}
}

// finish sets st's indexes.
func (x *offerIndex) finish(st *State) {
	st.offered, st.avail, st.offeredTotal = x.base.offered, x.base.avail, x.base.offeredTotal
	if x.offered != nil {
		st.offered, st.offeredTotal = x.offered.Persistent(), x.total
	}
	var b *pmap.Builder[struct{}]
	switch {
	case x.created && x.base.avail == nil:
		// The first offer of this line of states: every machine once.
		b = pmap.New[struct{}]().Transient()
		st.machines.Range(func(uid uuid.UUID, m *Machine) bool {
			if st.hasUnoffered(m) {
				b.Set(uid, struct{}{})
			}
			return true
		})
	case x.created:
		b = pmap.New[struct{}]().Transient() // the offer took everything unoffered
	case len(x.touched) > 0:
		b = st.avail.Transient()
	default:
		return
	}
	for _, uid := range x.touched {
		if m, ok := st.machines.Get(uid); ok && st.hasUnoffered(m) {
			b.Set(uid, struct{}{})
		} else {
			b.Delete(uid)
		}
	}
	st.avail = b.Persistent()
}

// hasUnoffered reports whether m is UP with something free that no offer
// locks.
func (s *State) hasUnoffered(m *Machine) bool {
	if m.State != omegav1.MachineState_MACHINE_STATE_UP {
		return false
	}
	offered, _ := s.offered.Get(m.UID)
	return !m.Capacity.Sub(m.Allocated).Sub(offered).atLeastZero().IsZero()
}

// OfferedTotal is what the outstanding offers lock, in total.
func (s *State) OfferedTotal() Resources { return s.offeredTotal.resources() }

// checkOfferIndex holds the indexes to the offers on machine m: what they
// lock there, and m in avail if it has something unoffered (CheckInvariants).
func (s *State) checkOfferIndex(m *Machine) error {
	var sum Resources
	s.offers.Range(func(_ uuid.UUID, o *Offer) bool {
		if l, ok := o.lockOn(m); ok {
			sum = sum.Add(l)
		}
		return true
	})
	if got, _ := s.offered.Get(m.UID); !got.Equal(sum) {
		return fmt.Errorf("machine %s: the offer index says %v offered, the offers lock %v", m.UID, got, sum)
	}
	if s.avail != nil && s.hasUnoffered(m) {
		if _, ok := s.avail.Get(m.UID); !ok {
			return fmt.Errorf("machine %s has %v unoffered but is not among the machines the next offer looks at", m.UID, m.Capacity.Sub(m.Allocated).Sub(sum))
		}
	}
	return nil
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
