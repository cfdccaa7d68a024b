package replica

import (
	"os"
	"testing"

	"github.com/google/uuid"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// realLog is the log a Disk writes for a few entries and hard states.
func realLog(t testing.TB) []byte {
	dir := t.TempDir()
	d, err := OpenDisk(dir, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(2); i < 6; i++ {
		ents := []*raftpb.Entry{{Index: new(i), Term: new(uint64(2)), Data: []byte("entry")}}
		if err := d.Save(&raftpb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(i - 1)}, ents, nil); err != nil {
			t.Fatal(err)
		}
		if err := d.storage.Append(ents); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	b, err := os.ReadFile(d.path("log", d.index))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDiskReopens: what Save synced comes back; a log cut anywhere opens
// with the records before the cut.
func TestDiskReopens(t *testing.T) {
	b := realLog(t)
	for cut := 0; cut <= len(b); cut++ {
		dir := t.TempDir()
		d, err := OpenDisk(dir, []uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if err := os.WriteFile(d.path("log", d.index), b[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		d2, err := OpenDisk(dir, []uint64{1, 2, 3})
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(b), err)
		}
		last, _ := d2.Storage().LastIndex()
		hs, _, _ := d2.Storage().InitialState()
		if cut == len(b) && (last != 5 || hs.GetCommit() != 4 || hs.GetVote() != 1) {
			t.Fatalf("the whole log: last index %d, hard state %v", last, hs)
		}
		if last < 1 || last > 5 {
			t.Fatalf("cut at %d: last index %d", cut, last)
		}
		st, _ := os.Stat(d2.path("log", d2.index))
		if st.Size() > int64(cut) {
			t.Fatalf("cut at %d: the log grew to %d", cut, st.Size())
		}
		d2.Close()
	}
}

// FuzzDiskLog: any bytes as a member's log open or are refused with an
// error; nothing panics.
func FuzzDiskLog(f *testing.F) {
	b := realLog(f)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{0x05, 0, 0, 0, 0, 'Z', 1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, log []byte) {
		dir := t.TempDir()
		d, err := OpenDisk(dir, []uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if err := os.WriteFile(d.path("log", d.index), log, 0o600); err != nil {
			t.Fatal(err)
		}
		if d2, err := OpenDisk(dir, []uint64{1, 2, 3}); err == nil {
			d2.Close()
		}
	})
}

// FuzzDecodeState: a snapshot's data from a peer decodes to a state whose
// invariants hold, or is refused; nothing panics.
func FuzzDecodeState(f *testing.F) {
	st := txn.NewState()
	j := testkit.Job(uuid.NewSHA1(uuid.NameSpaceOID, []byte("j")), "j", "batch")
	_, ws, err := txn.Evaluate(st, &txn.Txn{Component: "f", Ops: []txn.Op{txn.CreateJob(j),
		txn.CreateMachine(testkit.Machine(uuid.NewSHA1(uuid.NameSpaceOID, []byte("m")), "m", testkit.Res(1000, 1000)))}}, 1, txn.DefaultLimits())
	if err != nil {
		f.Fatal(err)
	}
	b, err := EncodeState(st.Apply(ws))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeState(b)
		if err != nil {
			return
		}
		if err := txn.CheckInvariants(st); err != nil {
			t.Fatalf("a decoded state breaks the invariants: %v", err)
		}
	})
}
