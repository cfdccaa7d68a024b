package txn_test

import (
	"strings"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestLeaseLife: a lease is created once, renewed by a put at the version
// its holder wrote (a put at an older one conflicts: another process took
// it meanwhile), and deleted; each is a change of the lease alone.
func TestLeaseLife(t *testing.T) {
	c := newCell(t)
	u := txn.LeaseUID("batch-0")
	r := c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "h1", 9))))
	l, ok := c.s.Lease(u)
	if !ok || l.Version != r.Revision || l.CreateRev != r.Revision || l.Holder() != "h1" || l.SchedulerKind() != "batch" ||
		l.Duration().Seconds() != 15 || l.Name() != "batch-0" || c.s.NumLeases() != 1 {
		t.Fatalf("created: %+v (found %v)", l, ok)
	}
	c.mustErr(c.tx(txn.CreateLease(leaseP("batch-0", "h2", 9))), txn.ErrAlreadyExists, 0)
	v1 := l.Version
	renewed := leaseP("batch-0", "h1", 9)
	renewed.Spec.RenewUnixNanos = 99
	r = c.commit(c.tx(txn.PutLease(renewed, v1)))
	if l, _ = c.s.Lease(u); l.Version != r.Revision || l.CreateRev != v1 || l.RenewUnixNanos() != 99 {
		t.Fatalf("renewed: %+v", l)
	}
	r = c.commit(c.tx(txn.PutLease(leaseP("batch-0", "h2", 9), v1)))
	if r.Committed != 0 || r.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH || !strings.Contains(r.Outcomes[0].Detail, `held by "h1"`) {
		t.Fatalf("a put at a stale version: %+v", r.Outcomes)
	}
	r = c.commit(c.tx(txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, u, l.Version)))
	if _, ok := c.s.Lease(u); ok || r.Committed != 1 || c.s.NumLeases() != 0 {
		t.Fatalf("deleted: %+v, still there %v", r.Outcomes, ok)
	}
	// Its renewal from a view before the delete: gone; from a view after
	// it, no such lease.
	stale := c.tx(txn.PutLease(leaseP("batch-0", "h1", 9), 0))
	stale.ViewRevision = r.Revision - 1
	if r = c.commit(stale); r.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND {
		t.Fatalf("a put of a deleted lease: %+v", r.Outcomes)
	}
	c.mustErr(c.tx(txn.PutLease(leaseP("batch-0", "h1", 9), 0)), txn.ErrNotFound, 0)
	// Made again under its name: the same uid.
	c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "h3", 9))))
	if l, ok := c.s.Lease(u); !ok || l.Holder() != "h3" {
		t.Fatalf("made again: %+v", l)
	}
}

// TestLeaseRules: what the store refuses of a lease, each named.
func TestLeaseRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(l *omegav1.Lease)
		want string
	}{
		{"no meta", func(l *omegav1.Lease) { l.Meta = nil }, "lease has no meta"},
		{"a name that is no DNS label", func(l *omegav1.Lease) {
			l.Meta.Name = "Bad Name!"
			l.Meta.Uid = txn.LeaseUID("Bad Name!").String()
		}, `meta.name: "Bad Name!": not a DNS label`},
		{"another name's uid", func(l *omegav1.Lease) { l.Meta.Uid = txn.LeaseUID("batch-1").String() }, `is not LeaseUID("batch-0")`},
		{"no holder", func(l *omegav1.Lease) { l.Spec.Holder = "" }, `lease "batch-0" names no holder (spec.holder)`},
		{"no duration", func(l *omegav1.Lease) { l.Spec.DurationMillis = 0 }, `spec.duration_millis is 0: want more than 0`},
		{"a negative duration", func(l *omegav1.Lease) { l.Spec.DurationMillis = -5 }, `spec.duration_millis is -5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, put := range []bool{false, true} {
				c := newCell(t)
				c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "h1", 9))))
				p := leaseP("batch-0", "h1", 9)
				tc.edit(p)
				op := txn.CreateLease(p)
				if put {
					op = txn.PutLease(p, 0)
				}
				err := c.mustErr(c.tx(op), txn.ErrInvalid, 0)
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("put=%v: %v, want %q in it", put, err, tc.want)
				}
			}
		})
	}
	if a, b := txn.LeaseUID("batch-0"), txn.LeaseUID("batch-0"); a != b || a == txn.LeaseUID("batch-1") || a.Version() != 5 {
		t.Fatalf("LeaseUID: %s %s %s (version %d)", a, b, txn.LeaseUID("batch-1"), a.Version())
	}
}

// TestLeaseOnTheWire: a lease's change crosses the wire (the watch's
// encoding and the snapshot's chunks) and comes back equal.
func TestLeaseOnTheWire(t *testing.T) {
	c := newCell(t)
	_, ws, err := c.eval(c.tx(txn.CreateLease(leaseP("batch-0", "h1", 9))))
	if err != nil {
		t.Fatal(err)
	}
	back, err := txn.WriteSetFromProto(ws.Proto())
	if err != nil || len(back.Changes) != 1 || back.Changes[0].Lease == nil || back.Changes[0].Lease.Holder() != "h1" ||
		back.Changes[0].Kind != omegav1.ObjectKind_OBJECT_KIND_LEASE {
		t.Fatalf("the write set back: %+v, %v", back, err)
	}
	c.s = c.s.Apply(ws)
	var chunks []*omegav1.SnapshotChunk
	if err := txn.SnapshotChunks(c.s, txn.DefaultSnapshotChunkBytes, func(ch *omegav1.SnapshotChunk) error { chunks = append(chunks, ch); return nil }); err != nil {
		t.Fatal(err)
	}
	var r txn.SnapshotReader
	for _, ch := range chunks {
		if err := r.Add(ch); err != nil {
			t.Fatal(err)
		}
	}
	st, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := st.Lease(txn.LeaseUID("batch-0")); !ok || l.Version != ws.Revision || l.Holder() != "h1" {
		t.Fatalf("the snapshot's lease: %+v (found %v)", l, ok)
	}
}
