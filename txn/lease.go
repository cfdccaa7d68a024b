package txn

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Lease announces a live component of the cell (omegav1.Lease), renewed
// while it runs, as Kubernetes' coordination.k8s.io Leases announce nodes
// and leaders: each scheduler instance holds one named after itself. The
// store keeps leases as it keeps quotas — created, put at a version,
// deleted — and derives nothing from them; what a lease means (live while
// renewed within its duration) is its readers' to judge, by their own
// clocks.
type Lease struct {
	UID       uuid.UUID
	Version   uint64
	CreateRev uint64
	Created   int64
	Meta      *omegav1.ObjectMeta
	Spec      *omegav1.LeaseSpec
}

// LeaseNamespace is the namespace of LeaseUID's name-based uuids.
var LeaseNamespace = uuid.MustParse("6f6d6567-612e-4c65-8173-652e6f6d6567")

// LeaseUID is the uid of the lease named name: a version-5 (SHA-1) uuid of
// the name in LeaseNamespace, so that one name has one lease and a holder
// that starts again finds its own. The store refuses a lease whose uid is
// not its name's.
func LeaseUID(name string) uuid.UUID { return uuid.NewSHA1(LeaseNamespace, []byte(name)) }

// Name is the lease's name: its holder's component name.
func (l *Lease) Name() string { return l.Meta.GetName() }

// Holder is the process holding the lease (unique per run).
func (l *Lease) Holder() string { return l.Spec.GetHolder() }

// Role is what the holder is ("scheduler").
func (l *Lease) Role() string { return l.Spec.GetRole() }

// SchedulerKind is, for a scheduler's lease, the kind of jobs it places.
func (l *Lease) SchedulerKind() string { return l.Spec.GetSchedulerKind() }

// Duration is how long the lease holds after a renewal.
func (l *Lease) Duration() time.Duration {
	return time.Duration(l.Spec.GetDurationMillis()) * time.Millisecond
}

// RenewUnixNanos is when the holder last renewed it, by the holder's clock.
func (l *Lease) RenewUnixNanos() int64 { return l.Spec.GetRenewUnixNanos() }

// AcquireUnixNanos is when the holder took it, by the holder's clock.
func (l *Lease) AcquireUnixNanos() int64 { return l.Spec.GetAcquireUnixNanos() }

// Proto returns the wire form.
func (l *Lease) Proto() *omegav1.Lease {
	return &omegav1.Lease{Meta: exportMeta(l.Meta, l.UID, l.Version, l.CreateRev, l.Created), Spec: l.Spec}
}

func newLease(p *omegav1.Lease) (*Lease, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: lease has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "lease uid")
	if err != nil {
		return nil, err
	}
	name := p.GetMeta().GetName()
	if err := CheckLabel(name); err != nil {
		return nil, fmt.Errorf("%w: lease %s meta.name: %v", ErrInvalid, uid, err)
	}
	if want := LeaseUID(name); uid != want {
		return nil, fmt.Errorf("%w: lease uid %s is not LeaseUID(%s), %s: a lease's uid is its name's", ErrInvalid, uid, Quote(name), want)
	}
	spec := p.GetSpec()
	switch {
	case spec.GetHolder() == "":
		return nil, fmt.Errorf("%w: lease %s names no holder (spec.holder)", ErrInvalid, Quote(name))
	case spec.GetDurationMillis() <= 0:
		return nil, fmt.Errorf("%w: lease %s spec.duration_millis is %d: want more than 0", ErrInvalid, Quote(name), spec.GetDurationMillis())
	}
	return &Lease{UID: uid, Meta: p.GetMeta(), Spec: spec}, nil
}

func leaseFromWire(p *omegav1.Lease) (*Lease, error) {
	l, err := newLease(p)
	if err != nil {
		return nil, err
	}
	l.Version, l.CreateRev, l.Created = restoreMeta(p.GetMeta())
	return l, nil
}

// CreateLease creates a lease.
func CreateLease(l *omegav1.Lease) Op { return Op{Kind: OpCreate, NewLease: l} }

// PutLease replaces a lease at expectVersion (0: any): a renewal.
func PutLease(l *omegav1.Lease, expectVersion uint64) Op {
	return Op{Kind: OpPut, NewLease: l, ExpectVersion: expectVersion}
}

// Lease returns a lease by uid.
func (s *State) Lease(uid uuid.UUID) (*Lease, bool) { return s.leases.Get(uid) }

// NumLeases counts the leases.
func (s *State) NumLeases() int { return s.leases.Len() }

// RangeLeases calls f for each lease, in an order that depends only on the
// set of uids, until f returns false.
func (s *State) RangeLeases(f func(*Lease) bool) {
	s.leases.Range(func(_ uuid.UUID, l *Lease) bool { return f(l) })
}

// checkLeases holds every lease to what the store takes of one
// (CheckInvariants): a lease restored or applied from elsewhere is one the
// store would have taken.
func (s *State) checkLeases() error {
	var err error
	s.leases.Range(func(uid uuid.UUID, l *Lease) bool {
		if l.UID != uid {
			err = fmt.Errorf("lease %s is held under uid %s", l.UID, uid)
			return false
		}
		if _, e := newLease(l.Proto()); e != nil {
			err = fmt.Errorf("lease %s: %v", uid, e)
		}
		return err == nil
	})
	return err
}

// lease is the lease uid as the transaction sees it so far.
func (e *evaluator) lease(uid uuid.UUID) (cur *Lease, baseVersion uint64, ok bool) {
	b, inBase := e.base.leases.Get(uid)
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_LEASE, uid}]; hit {
		c := &e.changes[i]
		if c.Deleted {
			return nil, 0, false
		}
		if c.Created {
			return c.Lease, 0, true
		}
		return c.Lease, b.Version, true
	}
	if !inBase {
		return nil, 0, false
	}
	return b, b.Version, true
}
