package transporttest

import (
	"context"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// testRandomHistory: the randomized history every layer is tested against
// (storekit.Driver: machines, jobs, tasks, quotas and offers made,
// changed and deleted), committed through the transport, crosses its watch
// — and its partial watch, if it has one — so that a copy applying what it
// watched from a snapshot's revision is the newest snapshot, object for
// object; the watch carried a change of every kind omegav1.Change holds.
func testRandomHistory(t *testing.T, b Backend) {
	for seed := uint64(1); seed <= 2; seed++ {
		o := options(t)
		o.Durability = store.DurabilityNone // the transport is under test, not the disk
		tr := b(t, o)
		d := storekit.NewDriverOn(t, tr, seed)
		d.Step()
		base := snapshot(t, tr)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		watches := map[string]transport.Watch{}
		w, err := tr.Watch(ctx, base.Revision())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		watches["whole"] = w
		if pt, ok := tr.(transport.PartialWatcher); ok {
			pw, err := pt.WatchPartial(ctx, base.Revision())
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Close()
			watches["partial"] = pw
		}
		for range 300 {
			d.Step()
		}
		d.RequireEveryKind(t)
		head := snapshot(t, tr)
		for name, w := range watches {
			state := base
			kinds := map[omegav1.ObjectKind]int{}
			for state.Revision() < head.Revision() {
				sets, err := w.Next(ctx, 0)
				if err != nil {
					t.Fatalf("seed %d, %s watch after revision %d: %v", seed, name, state.Revision(), err)
				}
				for _, ws := range sets {
					for _, c := range ws.Changes {
						kinds[c.Kind]++
					}
					if err := ws.Complete(state); err != nil {
						t.Fatalf("seed %d, %s watch: %v", seed, name, err)
					}
					state = state.Apply(ws)
				}
			}
			if err := equalStates(head, state); err != nil {
				t.Fatalf("seed %d: the %s watch's copy differs from the snapshot: %v", seed, name, err)
			}
			if err := txn.CheckInvariants(state); err != nil {
				t.Fatalf("seed %d: the %s watch's copy breaks an invariant: %v", seed, name, err)
			}
			fields := (&omegav1.Change{}).ProtoReflect().Descriptor().Oneofs().ByName("object").Fields()
			for i := range fields.Len() {
				kind := omegav1.ObjectKind(omegav1.ObjectKind_value["OBJECT_KIND_"+strings.ToUpper(string(fields.Get(i).Name()))])
				if kinds[kind] == 0 {
					t.Fatalf("seed %d: the %s watch carried no change of omegav1.Change.%s (by kind: %v)", seed, name, fields.Get(i).Name(), kinds)
				}
			}
		}
	}
}
