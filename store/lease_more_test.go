package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func leaseProto(name, holder string, renew int64) *omegav1.Lease {
	return &omegav1.Lease{
		Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID(name).String(), Name: name},
		Spec: &omegav1.LeaseSpec{Holder: holder, Role: "scheduler", SchedulerKind: "batch", DurationMillis: 15000, AcquireUnixNanos: 1, RenewUnixNanos: renew},
	}
}

const kindLease = omegav1.ObjectKind_OBJECT_KIND_LEASE

// TestReopenLeases: leases survive a reopen with their versions, creation
// revisions and specs, whether the store holds them in a checkpoint, in
// the log after it, or both (a lease renewed after the checkpoint that
// wrote it; one deleted after it; one made and deleted between two
// checkpoints), under both policies, which take leases as they come; and
// the reopened store goes on renewing at the version it kept.
func TestReopenLeases(t *testing.T) {
	for _, p := range []Policy{Raw(), Mediated()} {
		t.Run(p.Name(), func(t *testing.T) {
			dir := t.TempDir()
			mod := func(o *Options) { o.CheckpointBytes, o.Policy = 1<<40, p } // the test checkpoints
			s := openTest(t, dir, mod)
			commit := func(ops ...txn.Op) {
				t.Helper()
				mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Snapshot().Revision(), Component: "batch-0", Ops: ops})
			}
			ver := func(name string) uint64 {
				l, ok := s.Snapshot().Lease(txn.LeaseUID(name))
				if !ok {
					t.Fatalf("no lease %s", name)
				}
				return l.Version
			}
			commit(txn.CreateLease(leaseProto("batch-0", "h1", 1)), txn.CreateLease(leaseProto("gone-before", "h1", 1)),
				txn.CreateLease(leaseProto("gone-after", "h1", 1)))
			commit(txn.PutLease(leaseProto("batch-0", "h1", 2), ver("batch-0")), txn.Delete(kindLease, txn.LeaseUID("gone-before"), 0))
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			commit(txn.PutLease(leaseProto("batch-0", "h1", 3), ver("batch-0")), txn.Delete(kindLease, txn.LeaseUID("gone-after"), 0),
				txn.CreateLease(leaseProto("service-0", "h2", 3)))
			commit(txn.CreateLease(leaseProto("between", "h3", 4)))
			commit(txn.Delete(kindLease, txn.LeaseUID("between"), ver("between")))
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			commit(txn.PutLease(leaseProto("service-0", "h2", 5), ver("service-0")))
			before := s.Snapshot()
			if before.NumLeases() != 2 {
				t.Fatalf("%d leases before the reopen, want 2", before.NumLeases())
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				s = openTest(t, dir, mod)
				after := s.Snapshot()
				if d := diffStates(before, after, true); d != "" {
					t.Fatalf("reopen %d: %s", round, d)
				}
				for _, name := range []string{"batch-0", "service-0"} {
					b, _ := before.Lease(txn.LeaseUID(name))
					a, ok := after.Lease(txn.LeaseUID(name))
					if !ok || a.Version != b.Version || a.CreateRev != b.CreateRev || a.Created != b.Created || a.RenewUnixNanos() != b.RenewUnixNanos() || a.Version == a.CreateRev {
						t.Fatalf("reopen %d: lease %s is %+v, was %+v", round, name, a, b)
					}
				}
				if round == 0 {
					if err := s.checkpoint(); err != nil { // the reopened leases written again
						t.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s = openTest(t, dir, mod)
			defer s.Close()
			r := mustCommit(t, s, &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.PutLease(leaseProto("batch-0", "h1", 9), ver("batch-0"))}})
			if r.Committed != 1 {
				t.Fatalf("a renewal at the reopened version: %+v", r.Outcomes)
			}
			r = mustCommit(t, s, &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.PutLease(leaseProto("service-0", "h9", 9), before.Revision()-1)}})
			if r.Committed != 0 || r.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH {
				t.Fatalf("a takeover at a stale version after the reopen: %+v", r.Outcomes)
			}
		})
	}
}

// TestLeaseRefusedByTheStore: a lease the store cannot take is refused
// through Commit with ErrInvalid saying why, and nothing is written.
func TestLeaseRefusedByTheStore(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	bad := leaseProto("batch-0", "h", 1)
	bad.Meta.Uid = txn.LeaseUID("batch-1").String()
	_, err := s.Commit(context.Background(), &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.CreateLease(bad)}})
	if !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), `is not LeaseUID("batch-0")`) {
		t.Fatalf("a lease under another name's uid: %v", err)
	}
	if st := s.Snapshot(); st.Revision() != 0 || st.NumLeases() != 0 {
		t.Fatalf("a refused lease moved the store to revision %d with %d leases", st.Revision(), st.NumLeases())
	}
}

// TestSnapshotFileLeases: a snapshot file (version 3) carries the leases
// with their versions, counted in its info and trailer, and a store
// restored from it holds them; a lease record in a version 2 file is
// corrupt, and a version 2 file (quotas, no leases) is still read; a lease
// whose uid is not its name's is refused naming it.
func TestSnapshotFileLeases(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	mustCommitAll(t, s, &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.CreateLease(leaseProto("batch-0", "h", 1)), txn.CreateLease(leaseProto("service-0", "h", 1))}})
	l, _ := s.Snapshot().Lease(txn.LeaseUID("batch-0"))
	mustCommitAll(t, s, &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.PutLease(leaseProto("batch-0", "h", 2), l.Version)}})
	st := s.Snapshot()
	b := snapshotBytes(t, st)
	if v := b[len(SnapshotMagic)+3]; v != 3 {
		t.Fatalf("the file's version is %d, want 3", v)
	}
	read, info, err := ReadSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if info.Leases != 2 || read.NumLeases() != 2 || !strings.Contains(info.String(), "2 leases") {
		t.Fatalf("read %v with %d leases", info, read.NumLeases())
	}
	if d := diffStates(st, read, true); d != "" {
		t.Fatalf("the file's state: %s", d)
	}
	got, _ := read.Lease(txn.LeaseUID("batch-0"))
	if want, _ := st.Lease(txn.LeaseUID("batch-0")); got.Version != want.Version || got.CreateRev != want.CreateRev || got.Version == got.CreateRev {
		t.Fatalf("the lease read back at version %d (created %d), want %d (%d)", got.Version, got.CreateRev, want.Version, want.CreateRev)
	}
	dir := t.TempDir() + "/restored"
	if err := Restore(Options{Dir: dir, Logger: quietLogger()}, read, info.Revision); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, dir, nil)
	if d := diffStates(st, r.Snapshot(), true); d != "" {
		t.Fatalf("the restored store: %s", d)
	}
	r.Close()

	lp := l.Proto()
	read2 := func(b []byte) error { _, _, err := ReadSnapshot(bytes.NewReader(b)); return err }
	if err := read2(rawSnapshot(2, 5, [2]any{byte('l'), lp})); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "unknown record kind 0x6c") {
		t.Fatalf("a lease in a version 2 file: %v", err)
	}
	q := &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: testUID('Q', 0, 0).String(), Name: "q"}, Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 100}}}
	if st, info, err := ReadSnapshot(bytes.NewReader(rawSnapshot(2, 5, [2]any{byte('q'), q}))); err != nil || st.NumQuotas() != 1 || info.Leases != 0 || st.NumLeases() != 0 {
		t.Fatalf("a version 2 file: %v (%+v)", err, info)
	}
	if st, info, err := ReadSnapshot(bytes.NewReader(rawSnapshot(3, 5, [2]any{byte('q'), q}, [2]any{byte('l'), lp}))); err != nil || st.NumLeases() != 1 || info.Leases != 1 {
		t.Fatalf("a hand-made version 3 file: %v (%+v)", err, info)
	}
	bad := proto.Clone(lp).(*omegav1.Lease)
	bad.Meta.Name = "other"
	if err := read2(rawSnapshot(3, 5, [2]any{byte('l'), bad})); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "the lease at offset") ||
		!strings.Contains(err.Error(), "is not LeaseUID") {
		t.Fatalf("a lease whose uid is not its name's: %v", err)
	}
	twice := rawSnapshot(3, 5, [2]any{byte('l'), lp}, [2]any{byte('l'), lp})
	if err := read2(twice); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("a lease listed twice: %v", err)
	}
}

// TestRestoreRefusesLeaseAboveRevision: a lease's version and creation
// revision are held to the revision restored at, as the other objects'.
func TestRestoreRefusesLeaseAboveRevision(t *testing.T) {
	r := txn.NewRestorer(5)
	p := leaseProto("batch-0", "h", 1)
	p.Meta.Version, p.Meta.CreateRevision = 9, 3
	if err := r.Lease(p); err != nil {
		t.Fatal(err)
	}
	bad, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := Restore(Options{Dir: t.TempDir() + "/restored"}, bad, 5); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("restore of a lease above the revision: %v", err)
	}
}
