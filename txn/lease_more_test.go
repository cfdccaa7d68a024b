package txn_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

const kindLease = omegav1.ObjectKind_OBJECT_KIND_LEASE

// leaseP is the lease named name, held by holder, renewed at renew.
func leaseP(name, holder string, renew int64) *omegav1.Lease {
	return &omegav1.Lease{
		Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID(name).String(), Name: name, Labels: map[string]string{"role": "scheduler"}},
		Spec: &omegav1.LeaseSpec{Holder: holder, Role: "scheduler", SchedulerKind: "batch", DurationMillis: 15000,
			AcquireUnixNanos: 100, RenewUnixNanos: renew},
	}
}

func (c *cell) lease(name string) *txn.Lease {
	c.t.Helper()
	l, ok := c.s.Lease(txn.LeaseUID(name))
	if !ok {
		c.t.Fatalf("no lease %q", name)
	}
	return l
}

// TestLeaseUID: a lease's uid is the version-5 uuid of its name in
// LeaseNamespace: the same for the same name every time, another for
// another name.
func TestLeaseUID(t *testing.T) {
	a := txn.LeaseUID("batch-0")
	if a != txn.LeaseUID("batch-0") || a == txn.LeaseUID("batch-1") || a == txn.LeaseUID("") {
		t.Fatalf("LeaseUID is not a function of the name alone: %s", a)
	}
	if a.Version() != 5 || a.Variant() != uuid.RFC4122 {
		t.Fatalf("LeaseUID(batch-0) = %s: version %d, variant %s; want a version-5 RFC 4122 uuid", a, a.Version(), a.Variant())
	}
	if want := uuid.NewSHA1(txn.LeaseNamespace, []byte("batch-0")); a != want {
		t.Fatalf("LeaseUID(batch-0) = %s, want uuid.NewSHA1(LeaseNamespace, name) = %s", a, want)
	}
}

// TestLeaseLifecycle: a lease is created at the transaction's revision,
// renewed by a put at the version it holds (its create revision and time
// kept), refused at a stale version naming the lease and its holder,
// taken over by a put at any version (0), refused a second create, and
// deleted — each change in the write set as a lease's.
func TestLeaseLifecycle(t *testing.T) {
	c := newCell(t)
	u := txn.LeaseUID("batch-0")
	r, ws, err := c.eval(c.tx(txn.CreateLease(leaseP("batch-0", "host/1", 100))))
	if err != nil || r.Committed != 1 {
		t.Fatalf("create: %+v %v", r, err)
	}
	if len(ws.Changes) != 1 || ws.Changes[0].Kind != kindLease || ws.Changes[0].Lease == nil || !ws.Changes[0].Created || ws.Changes[0].UID() != u {
		t.Fatalf("the create's write set: %+v", ws.Changes)
	}
	c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "host/1", 100))))
	l := c.lease("batch-0")
	created := l.Version
	if c.s.NumLeases() != 1 || l.UID != u || l.CreateRev != created || l.Name() != "batch-0" || l.Holder() != "host/1" || l.Role() != "scheduler" ||
		l.SchedulerKind() != "batch" || l.Duration() != 15*time.Second || l.AcquireUnixNanos() != 100 || l.RenewUnixNanos() != 100 {
		t.Fatalf("the lease as created: %+v", l)
	}
	if p := l.Proto(); p.GetMeta().GetVersion() != created || p.GetMeta().GetUid() != u.String() || p.GetSpec().GetHolder() != "host/1" {
		t.Fatalf("the lease's wire form: %v", p)
	}

	// A second create of the name: it exists.
	err = c.mustErr(c.tx(txn.CreateLease(leaseP("batch-0", "host/2", 200))), txn.ErrAlreadyExists, 0)
	if !strings.Contains(err.Error(), `"batch-0"`) || !strings.Contains(err.Error(), `"host/1"`) {
		t.Errorf("a second create says %q: want the lease and its holder named", err)
	}

	// The holder renews at its version.
	c.commit(c.tx(txn.PutLease(leaseP("batch-0", "host/1", 500), created)))
	l = c.lease("batch-0")
	renewed := l.Version
	if renewed <= created || l.CreateRev != created || l.RenewUnixNanos() != 500 {
		t.Fatalf("renewed: version %d (was %d), created at %d, renewed at %d", l.Version, created, l.CreateRev, l.RenewUnixNanos())
	}

	// Another process at the stale version: a conflict naming the holder.
	r = c.commit(c.tx(txn.PutLease(leaseP("batch-0", "host/2", 600), created)))
	if r.Committed != 0 || r.Outcomes[0].Code != cVersion ||
		!strings.Contains(r.Outcomes[0].Detail, `"batch-0"`) || !strings.Contains(r.Outcomes[0].Detail, `"host/1"`) {
		t.Fatalf("a put at a stale version: %+v", r.Outcomes)
	}
	if c.lease("batch-0").Holder() != "host/1" {
		t.Fatal("a conflicting put changed the lease")
	}

	// A takeover at any version.
	c.commit(c.tx(txn.PutLease(leaseP("batch-0", "host/2", 700), 0)))
	if l := c.lease("batch-0"); l.Holder() != "host/2" || l.CreateRev != created {
		t.Fatalf("taken over: %+v", l)
	}

	// A delete at a stale version conflicts; at the version, it goes.
	if r := c.commit(c.tx(txn.Delete(kindLease, u, renewed))); r.Committed != 0 || r.Outcomes[0].Code != cVersion {
		t.Fatalf("a delete at a stale version: %+v", r.Outcomes)
	}
	r, ws, err = c.eval(c.tx(txn.Delete(kindLease, u, c.lease("batch-0").Version)))
	if err != nil || r.Committed != 1 || len(ws.Changes) != 1 || !ws.Changes[0].Deleted || ws.Changes[0].Lease == nil || ws.Changes[0].Kind != kindLease {
		t.Fatalf("delete: %+v %v %+v", r, err, ws)
	}
	c.commit(c.tx(txn.Delete(kindLease, u, 0)))
	if _, ok := c.s.Lease(u); ok || c.s.NumLeases() != 0 {
		t.Fatal("the lease outlived its delete")
	}
	c.mustErr(c.tx(txn.Delete(kindLease, u, 0)), txn.ErrNotFound, 0)
	c.mustErr(c.tx(txn.PutLease(leaseP("batch-0", "host/1", 800), 0)), txn.ErrNotFound, 0)

	// A holder that starts again makes it anew under the same uid.
	c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "host/3", 900))))
	if l := c.lease("batch-0"); l.Holder() != "host/3" || l.CreateRev == created {
		t.Fatalf("made again: %+v", l)
	}
}

// TestLeaseInOneTransaction: a transaction that creates a lease sees it:
// a put after the create (at any version, or at 0 the version it had
// before, which is none) and a delete of it commit; a create after the
// delete makes it again.
func TestLeaseInOneTransaction(t *testing.T) {
	c := newCell(t)
	u := txn.LeaseUID("svc-0")
	c.commit(c.tx(
		txn.CreateLease(leaseP("svc-0", "a", 1)),
		txn.PutLease(leaseP("svc-0", "a", 2), 0),
		txn.Delete(kindLease, u, 0),
		txn.CreateLease(leaseP("svc-0", "b", 3)),
	))
	if l := c.lease("svc-0"); l.Holder() != "b" || l.RenewUnixNanos() != 3 {
		t.Fatalf("after create, put, delete, create: %+v", l)
	}
	c.mustErr(c.tx(txn.CreateLease(leaseP("svc-1", "a", 1)), txn.CreateLease(leaseP("svc-1", "b", 1))), txn.ErrAlreadyExists, 1)
}

// TestLeaseBadInput: a lease the store cannot take is ErrInvalid, saying
// what is wrong: no meta, no uid or not one, a name that is no DNS label,
// a uid that is not its name's LeaseUID, no holder, a duration not above
// zero — on a create and on a put alike.
func TestLeaseBadInput(t *testing.T) {
	other := txn.LeaseUID("other")
	for _, tc := range []struct {
		name string
		edit func(l *omegav1.Lease)
		want string
	}{
		{"no meta", func(l *omegav1.Lease) { l.Meta = nil }, "lease has no meta"},
		{"no uid", func(l *omegav1.Lease) { l.Meta.Uid = "" }, "lease uid is empty"},
		{"uid not a uuid", func(l *omegav1.Lease) { l.Meta.Uid = "nope" }, `lease uid "nope" is not a uuid`},
		{"no name", func(l *omegav1.Lease) { l.Meta.Name = ""; l.Meta.Uid = txn.LeaseUID("").String() }, "meta.name"},
		{"name not a label", func(l *omegav1.Lease) { l.Meta.Name = "Batch_0"; l.Meta.Uid = txn.LeaseUID("Batch_0").String() }, `"Batch_0": not a DNS label`},
		{"uid not the name's", func(l *omegav1.Lease) { l.Meta.Uid = other.String() },
			"lease uid " + other.String() + ` is not LeaseUID("batch-0")`},
		{"a random uid", func(l *omegav1.Lease) { l.Meta.Uid = uid(77).String() }, "is not LeaseUID"},
		{"no spec", func(l *omegav1.Lease) { l.Spec = nil }, `lease "batch-0" names no holder (spec.holder)`},
		{"no holder", func(l *omegav1.Lease) { l.Spec.Holder = "" }, `lease "batch-0" names no holder (spec.holder)`},
		{"no duration", func(l *omegav1.Lease) { l.Spec.DurationMillis = 0 }, `lease "batch-0" spec.duration_millis is 0: want more than 0`},
		{"negative duration", func(l *omegav1.Lease) { l.Spec.DurationMillis = -5 }, "spec.duration_millis is -5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCell(t)
			c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "h", 1))))
			for _, op := range []func(*omegav1.Lease) txn.Op{txn.CreateLease, func(l *omegav1.Lease) txn.Op { return txn.PutLease(l, 0) }} {
				l := leaseP("batch-0", "h", 2)
				tc.edit(l)
				err := c.mustErr(c.tx(op(l)), txn.ErrInvalid, 0)
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q, want it to say %q", err, tc.want)
				}
			}
		})
	}
}

// TestLeaseStringsValidated: every string of a lease is checked as the
// other kinds' are: invalid UTF-8 is ErrInvalid naming the field, one
// over MaxStringBytes ErrTooLarge.
func TestLeaseStringsValidated(t *testing.T) {
	lim := txn.DefaultLimits()
	lim.MaxStringBytes = 40
	leaves := stringLeaves(t, (&omegav1.Lease{}).ProtoReflect().Descriptor(), nil)
	names := map[string]bool{}
	for _, l := range leaves {
		names[l.String()] = true
	}
	for _, f := range []string{"spec.holder", "spec.role", "spec.scheduler_kind", "meta.name"} {
		if !names[f] {
			t.Fatalf("no string leaf %s among %v", f, names)
		}
	}
	for _, l := range leaves {
		if l.path[len(l.path)-1].Name() == "uid" {
			continue // parsed: TestLeaseBadInput
		}
		t.Run(l.String(), func(t *testing.T) {
			c := newCell(t)
			c.lim = lim
			try := func(s string) error {
				p := leaseP("batch-0", "h", 1)
				setLeaf(p.ProtoReflect(), l, s)
				_, _, err := c.eval(c.tx(txn.CreateLease(p)))
				return err
			}
			err := try("ok\xff")
			if !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), string(l.path[len(l.path)-1].Name())) {
				t.Fatalf("invalid UTF-8 at %s: %v, want ErrInvalid naming the field", l, err)
			}
			if err := try(strings.Repeat("a", 41)); !errors.Is(err, txn.ErrTooLarge) {
				t.Fatalf("41 bytes at %s: %v, want ErrTooLarge", l, err)
			}
		})
	}
}

// TestLeaseCrossesTheWire: a lease's operations survive the transaction's
// wire form, its changes the write set's (whole and partial: a lease
// always goes whole) and the snapshot's chunks, with their versions; a
// snapshot listing a lease twice, or one whose uid is not its name's, is
// refused.
func TestLeaseCrossesTheWire(t *testing.T) {
	c := newCell(t)
	tx := c.tx(txn.CreateLease(leaseP("batch-0", "h", 1)), txn.PutLease(leaseP("batch-0", "h", 2), 7), txn.Delete(kindLease, txn.LeaseUID("batch-0"), 9))
	back, err := txn.TxnFromProto(tx.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back.Proto(), tx.Proto()) || back.Ops[0].NewLease == nil || back.Ops[1].NewLease == nil || back.Ops[1].ExpectVersion != 7 ||
		back.Ops[2].DeleteKind != kindLease || back.Ops[2].ExpectVersion != 9 {
		t.Fatalf("the transaction from its wire form: %+v", back.Ops)
	}

	c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "h", 1)), txn.CreateLease(leaseP("service-0", "h2", 1))))
	_, ws, err := c.eval(c.tx(txn.PutLease(leaseP("batch-0", "h", 5), 0)))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*omegav1.RevisionChanges{"whole": ws.Proto(), "partial": ws.PartialProto()} {
		if p.Changes[0].GetLease() == nil || p.Changes[0].Partial {
			t.Fatalf("%s: the put's change on the wire: %v", name, p.Changes[0])
		}
		got, err := txn.WriteSetFromProto(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Changes[0].Kind != kindLease || !proto.Equal(got.Changes[0].Lease.Proto(), ws.Changes[0].Lease.Proto()) {
			t.Fatalf("%s: the change read back: %+v", name, got.Changes[0])
		}
	}
	c.commit(c.tx(txn.PutLease(leaseP("batch-0", "h", 5), 0)))

	var chunks []*omegav1.SnapshotChunk
	if err := txn.SnapshotChunks(c.s, 64, func(ch *omegav1.SnapshotChunk) error { chunks = append(chunks, ch); return nil }); err != nil {
		t.Fatal(err)
	}
	var r txn.SnapshotReader
	n := 0
	for _, ch := range chunks {
		n += len(ch.GetLeases())
		if err := r.Add(ch); err != nil {
			t.Fatal(err)
		}
	}
	st, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || st.NumLeases() != 2 {
		t.Fatalf("the snapshot listed %d leases, read back %d; want 2", n, st.NumLeases())
	}
	c.s.RangeLeases(func(l *txn.Lease) bool {
		got, ok := st.Lease(l.UID)
		if !ok || !proto.Equal(got.Proto(), l.Proto()) || got.Version != l.Version || got.CreateRev != l.CreateRev {
			t.Fatalf("lease %s read back as %+v", l.Name(), got)
		}
		return true
	})

	rs := txn.NewRestorer(5)
	p := c.lease("batch-0").Proto()
	if err := rs.Lease(p); err != nil {
		t.Fatal(err)
	}
	if err := rs.Lease(p); !errors.Is(err, txn.ErrAlreadyExists) {
		t.Fatalf("a lease restored twice: %v", err)
	}
	bad := proto.Clone(p).(*omegav1.Lease)
	bad.Meta.Name = "another"
	if err := txn.NewRestorer(5).Lease(bad); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "is not LeaseUID") {
		t.Fatalf("a stored lease whose uid is not its name's: %v", err)
	}
}

// TestLeaseInvariants: CheckInvariants holds the state's leases to the
// rules a create holds them to, and ApplyChecked refuses a revision that
// changes a lease twice.
func TestLeaseInvariants(t *testing.T) {
	c := newCell(t)
	c.commit(c.tx(txn.CreateLease(leaseP("batch-0", "h", 1))))
	good := c.lease("batch-0")
	bad := *good
	bad.Meta = &omegav1.ObjectMeta{Name: "batch-1"} // under batch-0's uid
	st := c.s.Apply(&txn.WriteSet{Revision: c.s.Revision() + 1, Changes: []txn.Change{{Kind: kindLease, Lease: &bad}}})
	if err := txn.CheckInvariants(st); err == nil || !strings.Contains(err.Error(), "is not LeaseUID") {
		t.Fatalf("a lease whose uid is not its name's: CheckInvariants says %v", err)
	}
	ws := &txn.WriteSet{Revision: c.s.Revision() + 1, Changes: []txn.Change{{Kind: kindLease, Lease: good}, {Kind: kindLease, Lease: good, Deleted: true}}}
	if _, err := c.s.ApplyChecked(ws); !errors.Is(err, txn.ErrInvalid) {
		t.Fatalf("a revision changing a lease twice: %v", err)
	}
	st, err := c.s.ApplyChecked(&txn.WriteSet{Revision: c.s.Revision() + 1, Changes: []txn.Change{{Kind: kindLease, Lease: good, Deleted: true}}})
	if err != nil || st.NumLeases() != 0 {
		t.Fatalf("a checked delete of the lease: %v, %d leases", err, st.NumLeases())
	}
}
