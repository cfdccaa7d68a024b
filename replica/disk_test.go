package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// realLog is the log a Disk writes for a few entries and hard states.
func realLog(t testing.TB) []byte {
	dir := t.TempDir()
	d, err := OpenDisk(dir, 1, []uint64{1, 2, 3})
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
		d, err := OpenDisk(dir, 1, []uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if err := os.WriteFile(d.path("log", d.index), b[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		d2, err := OpenDisk(dir, 1, []uint64{1, 2, 3})
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
		d, err := OpenDisk(dir, 1, []uint64{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if err := os.WriteFile(d.path("log", d.index), log, 0o600); err != nil {
			t.Fatal(err)
		}
		if d2, err := OpenDisk(dir, 1, []uint64{1, 2, 3}); err == nil {
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

// FuzzDecodeSnapshot: a snapshot's data from a peer (member records, then
// the state) decodes to records and a state whose invariants hold, or is
// refused; nothing panics; what decodes encodes again to the same records.
func FuzzDecodeSnapshot(f *testing.F) {
	st := txn.NewState()
	_, ws, err := txn.Evaluate(st, &txn.Txn{Component: "f", Ops: []txn.Op{
		txn.CreateMachine(testkit.Machine(uuid.NewSHA1(uuid.NameSpaceOID, []byte("m")), "m", testkit.Res(1000, 1000)))}}, 1, txn.DefaultLimits())
	if err != nil {
		f.Fatal(err)
	}
	recs := &omegav1.CellMembers{Members: []*omegav1.CellMember{{Member: 1, Address: "10.0.0.1:7070"}, {Member: 4, Address: "10.0.0.4:7070"}},
		Removed: []uint64{2}, Incarnations: []*omegav1.Incarnation{{RaftId: 1, Incarnation: 77}}}
	b, err := EncodeSnapshot(st.Apply(ws), recs)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[:len(snapMagic)+3])
	f.Fuzz(func(t *testing.T, b []byte) {
		st, m, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		if err := txn.CheckInvariants(st); err != nil {
			t.Fatalf("a decoded state breaks the invariants: %v", err)
		}
		if m == nil { // a first-format snapshot's: no records, encoded as empty ones
			m = &omegav1.CellMembers{}
		}
		again, err := EncodeSnapshot(st, m)
		if err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
		if _, m2, err := DecodeSnapshot(again); err != nil || !proto.Equal(m, m2) {
			t.Fatalf("the records do not survive a second round: %v, %v against %v", err, m2, m)
		}
	})
}

// TestDiskJoining: a joining member's directory records its raft id and
// opens empty, again and again, until a snapshot comes; then it opens as
// any member's. A directory of format 0 (no member file) takes the id
// given and gets the file; a member file that is garbage or of a later
// format is refused, naming the file.
func TestDiskJoining(t *testing.T) {
	dir := t.TempDir()
	id := JoinID(2, 0xbeef)
	d, err := OpenDisk(dir, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID() != id || !d.Joining() {
		t.Fatalf("new joining directory: id %d joining %v, want %d true", d.ID(), d.Joining(), id)
	}
	hs := &raftpb.HardState{Term: new(uint64(7)), Vote: new(uint64(0)), Commit: new(uint64(0))}
	if err := d.Save(hs, nil, nil); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// Reopened with another id (the flag's) and peers: still the joiner.
	d, err = OpenDisk(dir, 2, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := d.Storage().InitialState(); d.ID() != id || !d.Joining() || got.GetTerm() != 7 {
		t.Fatalf("reopened: id %d joining %v term %d, want %d true 7", d.ID(), d.Joining(), got.GetTerm(), id)
	}
	// The leader's snapshot arrives.
	data, err := EncodeState(txn.NewState())
	if err != nil {
		t.Fatal(err)
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(7)),
		ConfState: &raftpb.ConfState{Voters: []uint64{1, 3, id}}}}
	if err := d.Storage().ApplySnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := d.Save(&raftpb.HardState{Term: new(uint64(7)), Vote: new(uint64(0)), Commit: new(uint64(40))}, nil, snap); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err = OpenDisk(dir, 2, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := d.Storage().FirstIndex(); d.ID() != id || d.Joining() || first != 41 {
		t.Fatalf("after the snapshot: id %d joining %v first index %d, want %d false 41", d.ID(), d.Joining(), first, id)
	}
	d.Close()
	if _, err := os.Stat(d.path("log", 0)); !os.IsNotExist(err) {
		t.Fatalf("the joining log is still there after the snapshot: %v", err)
	}

	// Format 0: a snapshot and no member file.
	old := t.TempDir()
	d, err = OpenDisk(old, 3, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	os.Remove(filepath.Join(old, memberFile))
	if d, err = OpenDisk(old, 3, []uint64{1, 2, 3}); err != nil || d.ID() != 3 {
		t.Fatalf("format 0: %v, id %d", err, d.ID())
	}
	d.Close()
	b, err := os.ReadFile(filepath.Join(old, memberFile))
	var inc uint64
	if _, serr := fmt.Sscanf(string(b), "omega raft member\nformat 3\nid 3\nincarnation %d\n", &inc); err != nil || serr != nil || inc == 0 {
		t.Fatalf("format 0 given its member file: %q %v %v", b, err, serr)
	}

	// Format 2 records the cell's id, format 3 the incarnation too; format
	// 1 reads as having neither and is given an incarnation.
	os.WriteFile(filepath.Join(old, memberFile), []byte("omega raft member\nformat 1\nid 3\n"), 0o600)
	if d, err = OpenDisk(old, 3, []uint64{1, 2, 3}); err != nil || d.Cell() != "" || d.Incarnation() == 0 {
		t.Fatalf("format 1: %v, cell %q incarnation %d", err, d.Cell(), d.Incarnation())
	}
	inc = d.Incarnation()
	if err := d.RecordCell("omega/00ff"); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordCell("two words"); err == nil {
		t.Fatal("a cell id with a space was recorded")
	}
	d.Close()
	if b, err := os.ReadFile(filepath.Join(old, memberFile)); err != nil || string(b) != fmt.Sprintf("omega raft member\nformat 3\nid 3\ncell omega/00ff\nincarnation %d\n", inc) {
		t.Fatalf("format 3's member file: %q %v", b, err)
	}
	if d, err = OpenDisk(old, 3, []uint64{1, 2, 3}); err != nil || d.Cell() != "omega/00ff" || d.ID() != 3 || d.Incarnation() != inc {
		t.Fatalf("format 3 reopened: %v, id %d cell %q incarnation %d, want %d", err, d.ID(), d.Cell(), d.Incarnation(), inc)
	}
	d.Close()
	// Format 2 (a cell, no incarnation) reads, and is given one.
	os.WriteFile(filepath.Join(old, memberFile), []byte("omega raft member\nformat 2\nid 3\ncell omega/00ff\n"), 0o600)
	if d, err = OpenDisk(old, 3, []uint64{1, 2, 3}); err != nil || d.Cell() != "omega/00ff" || d.Incarnation() == 0 {
		t.Fatalf("format 2: %v, cell %q incarnation %d", err, d.Cell(), d.Incarnation())
	}
	d.Close()

	for body, want := range map[string]string{
		"omega raft member\nformat 2\nid 3\n":                "not a member file",
		strings.Repeat("x", 100):                             `not a member file: "xxxx`,
		"omega raft member\nformat 9\nid 3\n":                "format 9 is newer than this omega's (3)",
		"omega raft member\nformat 3\nid 3\nincarnation 0\n": "not a member file",
		"omega raft member\nformat 3\nid 3\nid 4\n":          "not a member file",
		"omega raft member\nformat 3\nid 3\ncolour red\n":    "not a member file",
		"omega raft member\nformat 1\nid 0\n":                "not a member file",
	} {
		os.WriteFile(filepath.Join(old, memberFile), []byte(body), 0o600)
		_, err := OpenDisk(old, 3, []uint64{1, 2, 3})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), memberFile) || len(err.Error()) > 400 {
			t.Fatalf("member file %q: %v, want an error naming the file with %q", body, err, want)
		}
	}
}
