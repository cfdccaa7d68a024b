package transporttest

import (
	"context"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// testLeases: a scheduler's lease crosses the transport whole — created,
// renewed by a put at its version (a renewal at a stale version
// conflicts), deleted — in the watch and in a snapshot.
func testLeases(t *testing.T, b Backend) {
	tr := b(t, options(t))
	base := snapshot(t, tr)
	w, err := tr.Watch(context.Background(), base.Revision())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	u := txn.LeaseUID("batch-0")
	lease := func(renew int64) *omegav1.Lease {
		return &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: u.String(), Name: "batch-0", Labels: map[string]string{"team": "a"}},
			Spec: &omegav1.LeaseSpec{Holder: "host/1/ab", Role: "scheduler", SchedulerKind: "batch", DurationMillis: 15_000, AcquireUnixNanos: 1, RenewUnixNanos: renew}}
	}
	made := commit(t, tr, &txn.Txn{Component: "batch-0", Ops: []txn.Op{txn.CreateLease(lease(1))}})
	renewed := commit(t, tr, &txn.Txn{ViewRevision: made.Revision, Component: "batch-0", Ops: []txn.Op{txn.PutLease(lease(2), made.Revision)}})
	if renewed.Committed != 1 {
		t.Fatalf("renew the lease: %+v", renewed.Outcomes)
	}
	stale := commit(t, tr, &txn.Txn{ViewRevision: renewed.Revision, Component: "batch-0", Ops: []txn.Op{txn.PutLease(lease(3), made.Revision)}})
	if stale.Committed != 0 || stale.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_VERSION_MISMATCH {
		t.Fatalf("a renewal at a stale version: %+v", stale.Outcomes)
	}
	st := snapshot(t, tr)
	got, ok := st.Lease(u)
	if !ok || got.Version != renewed.Revision || got.RenewUnixNanos() != 2 || got.SchedulerKind() != "batch" || got.Holder() != "host/1/ab" {
		t.Fatalf("the snapshot's lease: %+v (found %v)", got, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := base
	for state.Revision() < st.Revision() {
		sets, err := w.Next(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range sets {
			state = state.Apply(ws)
		}
	}
	if err := equalStates(st, state); err != nil {
		t.Fatalf("the watched state differs from the snapshot: %v", err)
	}
	res := commit(t, tr, &txn.Txn{ViewRevision: st.Revision(), Component: "batch-0", Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, u, got.Version)}})
	if res.Committed != 1 || snapshot(t, tr).NumLeases() != 0 {
		t.Fatalf("delete the lease: %+v", res.Outcomes)
	}
}
