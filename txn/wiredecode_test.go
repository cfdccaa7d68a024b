package txn_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// sameWriteSets compares two decoded write sets change by change: flags,
// and each object by its wire form (a partial one by uid, version and
// status).
func sameWriteSets(t testing.TB, a, b *txn.WriteSet) {
	t.Helper()
	if a.Revision != b.Revision || a.UnixNanos != b.UnixNanos || len(a.Changes) != len(b.Changes) {
		t.Fatalf("revision %d/%d, %d/%d changes", a.Revision, b.Revision, len(a.Changes), len(b.Changes))
	}
	for i := range a.Changes {
		x, y := &a.Changes[i], &b.Changes[i]
		if x.Kind != y.Kind || x.Deleted != y.Deleted || x.Created != y.Created || x.Partial != y.Partial || x.PrevState != y.PrevState {
			t.Fatalf("change %d: %+v vs %+v", i, x, y)
		}
		var px, py proto.Message
		switch {
		case x.Task != nil && x.Partial:
			if x.Task.UID != y.Task.UID || x.Task.Version != y.Task.Version {
				t.Fatalf("change %d: task %s@%d vs %s@%d", i, x.Task.UID, x.Task.Version, y.Task.UID, y.Task.Version)
			}
			px, py = x.Task.StatusProto(), y.Task.StatusProto()
		case x.Task != nil:
			px, py = x.Task.Proto(), y.Task.Proto()
		case x.Job != nil:
			px, py = x.Job.Proto(), y.Job.Proto()
		case x.Machine != nil && x.Partial:
			if x.Machine.UID != y.Machine.UID || x.Machine.Version != y.Machine.Version {
				t.Fatalf("change %d: machine identity", i)
			}
			px, py = x.Machine.Proto().GetStatus(), y.Machine.Proto().GetStatus()
		case x.Machine != nil:
			px, py = x.Machine.Proto(), y.Machine.Proto()
		case x.Offer != nil:
			px, py = x.Offer.Proto(), y.Offer.Proto()
		case x.Quota != nil:
			px, py = x.Quota.Proto(), y.Quota.Proto()
		case x.Lease != nil:
			px, py = x.Lease.Proto(), y.Lease.Proto()
		default:
			t.Fatalf("change %d carries no object", i)
		}
		if !proto.Equal(px, py) {
			t.Fatalf("change %d:\n%v\nvs\n%v", i, px, py)
		}
	}
}

// requireEveryKind fails t unless sets change an object of every kind a
// Change carries (omegav1.Change's object oneof).
func requireEveryKind(t testing.TB, sets []*txn.WriteSet) {
	t.Helper()
	seen := map[omegav1.ObjectKind]int{}
	for _, ws := range sets {
		for _, c := range ws.Changes {
			seen[c.Kind]++
		}
	}
	fields := (&omegav1.Change{}).ProtoReflect().Descriptor().Oneofs().ByName("object").Fields()
	for i := range fields.Len() {
		name := "OBJECT_KIND_" + strings.ToUpper(string(fields.Get(i).Name()))
		if seen[omegav1.ObjectKind(omegav1.ObjectKind_value[name])] == 0 {
			t.Fatalf("the history changes no %s (changes by kind: %v)", name, seen)
		}
	}
}

// TestAddBytesMatchesProto: the watch's hand decoder gives exactly what
// proto.Unmarshal and WriteSetFromProto give, on the write sets of a
// randomized history in both wire forms (whole and partial), joined from
// pieces.
func TestAddBytesMatchesProto(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	d := storekit.NewDriver(t, st, 7)
	for range 400 {
		d.Step()
	}
	d.RequireEveryKind(t)
	w, err := st.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	sets, _, err := w.Poll(0)
	if err != nil {
		t.Fatal(err)
	}
	requireEveryKind(t, sets)
	partials := 0
	for _, ws := range sets {
		for _, chunks := range []func(int, func(*omegav1.RevisionChanges) error) error{ws.Chunks, ws.PartialChunks} {
			var viaProto, viaBytes txn.WriteSetReader
			var a, b *txn.WriteSet
			err := chunks(300, func(p *omegav1.RevisionChanges) error {
				bs, err := proto.Marshal(p)
				if err != nil {
					return err
				}
				q := &omegav1.RevisionChanges{}
				if err := proto.Unmarshal(bs, q); err != nil {
					return err
				}
				if a, err = viaProto.Add(q); err != nil {
					return err
				}
				b, err = viaBytes.AddBytes(bs)
				return err
			})
			if err != nil {
				t.Fatalf("revision %d: %v", ws.Revision, err)
			}
			sameWriteSets(t, a, b)
			for _, c := range b.Changes {
				if c.Partial {
					partials++
				}
			}
		}
	}
	if partials == 0 {
		t.Fatal("no partial change in the history")
	}
	prevs := 0
	for _, ws := range sets {
		for _, c := range ws.Changes {
			if c.PrevState != 0 {
				prevs++
			}
		}
	}
	if prevs == 0 {
		t.Fatal("no change in the history carried a prev state")
	}
}

// FuzzAddBytes: whatever the bytes, the hand decoder does not panic, and
// whatever proto.Unmarshal and WriteSetFromProto accept it accepts alike.
func FuzzAddBytes(f *testing.F) {
	st := storekit.Open(f, storekit.Options(f, store.DurabilityNone))
	d := storekit.NewDriver(f, st, 3)
	for range 60 {
		d.Step()
	}
	w, _ := st.Watch(0)
	sets, _, _ := w.Poll(0)
	for _, ws := range sets {
		for _, p := range []*omegav1.RevisionChanges{ws.Proto(), ws.PartialProto()} {
			bs, _ := proto.Marshal(p)
			f.Add(bs)
		}
	}
	f.Fuzz(func(t *testing.T, bs []byte) {
		var r txn.WriteSetReader
		b, berr := r.AddBytes(bs)
		q := &omegav1.RevisionChanges{}
		if proto.Unmarshal(bs, q) != nil {
			return
		}
		var pr txn.WriteSetReader
		a, aerr := pr.Add(q)
		if aerr != nil || a == nil {
			return
		}
		if berr != nil {
			t.Fatalf("the hand decoder refused what proto takes: %v", berr)
		}
		sameWriteSets(t, a, b)
	})
}

// TestAppendChunksMatchesProto: the server's hand encoder writes the pieces
// Chunks and PartialChunks build, byte for byte as proto.Unmarshal reads
// them, on a randomized history and at several piece sizes.
func TestAppendChunksMatchesProto(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	d := storekit.NewDriver(t, st, 11)
	for range 400 {
		d.Step()
	}
	d.RequireEveryKind(t)
	w, err := st.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	sets, _, err := w.Poll(0)
	if err != nil {
		t.Fatal(err)
	}
	requireEveryKind(t, sets)
	for _, ws := range sets {
		for _, partial := range []bool{false, true} {
			for _, max := range []int{200, 1 << 20} {
				var want []*omegav1.RevisionChanges
				chunks := ws.Chunks
				if partial {
					chunks = ws.PartialChunks
				}
				chunks(max, func(p *omegav1.RevisionChanges) error { want = append(want, p); return nil })
				var got [][]byte
				if err := ws.AppendChunks(partial, max, func(b []byte) error { got = append(got, b); return nil }); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("revision %d (partial %v, %d bytes): %d pieces, want %d", ws.Revision, partial, max, len(got), len(want))
				}
				for i := range got {
					p := &omegav1.RevisionChanges{}
					if err := proto.Unmarshal(got[i], p); err != nil {
						t.Fatalf("revision %d piece %d: %v", ws.Revision, i, err)
					}
					if !proto.Equal(p, want[i]) {
						t.Fatalf("revision %d piece %d (partial %v):\n%v\nwant\n%v", ws.Revision, i, partial, p, want[i])
					}
				}
			}
		}
	}
}
