package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// snapshotBytes writes st in the snapshot file format.
func snapshotBytes(t testing.TB, st *txn.State) []byte {
	t.Helper()
	var b bytes.Buffer
	info, err := WriteSnapshot(&b, st)
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes != int64(b.Len()) || info.SHA256 != sha256.Sum256(b.Bytes()[:b.Len()-sha256.Size]) {
		t.Fatalf("WriteSnapshot says %d bytes, sha256 %x; wrote %d", info.Bytes, info.SHA256, b.Len())
	}
	return b.Bytes()
}

// historyStore commits buildHistory's varied history to a store in a new
// directory, closes it, and returns the directory and the state.
func historyStore(t *testing.T) (string, *txn.State) {
	t.Helper()
	seed := testkit.Seed(t, "OMEGA_STORE_SNAPSHOT_SEED")
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	buildHistory(t, s, seed)
	st := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, st
}

// TestSnapshotRestore: a state written to a snapshot file, read back and
// restored into a new directory is the same state at the same revision when
// a store opens there — every object field by field and by wire form, the
// same fingerprint and digest as the original store reopened, and the very
// same snapshot bytes. The restored store retains no history: a watch from
// before its revision is compacted (its client lists again), one from it
// starts, and the next commit takes the next revision.
func TestSnapshotRestore(t *testing.T) {
	orig, before := historyStore(t)
	rev := before.Revision()
	file := filepath.Join(t.TempDir(), "cell.snap")
	saved, err := SaveSnapshotFile(file, before)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Revision != rev || saved.Machines != before.NumMachines() || saved.Jobs != before.NumJobs() || saved.Tasks != before.NumTasks() {
		t.Fatalf("saved %v; the state is at %d with %d machines, %d jobs, %d tasks", saved, rev, before.NumMachines(), before.NumJobs(), before.NumTasks())
	}
	read, info, err := LoadSnapshotFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if info != saved {
		t.Fatalf("read %v, saved %v", info, saved)
	}
	if d := diffStates(before, read, true); d != "" {
		t.Fatalf("the snapshot file's state differs: %s", d)
	}

	dir := filepath.Join(t.TempDir(), "restored") // missing: Restore creates it
	if err := Restore(Options{Dir: dir, Logger: quietLogger()}, read, info.Revision); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".restored.restore-*")); len(left) > 0 {
		t.Fatalf("Restore left %v behind", left)
	}
	s := openTest(t, dir, nil)
	after := s.Snapshot()
	if after.Revision() != rev {
		t.Fatalf("the restored store is at revision %d, want %d", after.Revision(), rev)
	}
	if d := diffStates(before, after, true); d != "" {
		t.Fatalf("the restored state differs: %s", d)
	}
	if err := txn.CheckInvariants(after); err != nil {
		t.Fatal(err)
	}
	reopened := openTest(t, orig, nil)
	again := reopened.Snapshot()
	if err := testkit.FingerprintOf(again).Diff(testkit.FingerprintOf(after)); err != nil {
		t.Fatalf("restored against the original reopened: %v", err)
	}
	if got, want := digest(after), digest(again); got != want {
		t.Fatalf("digest %s, the original reopened %s", got, want)
	}
	if !bytes.Equal(snapshotBytes(t, after), snapshotBytes(t, again)) {
		t.Fatal("the restored store's snapshot differs from the original's, reopened")
	}
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Watch(rev - 1); !errors.Is(err, ErrCompacted) {
		t.Fatalf("watch from %d on the store restored at %d: %v, want ErrCompacted", rev-1, rev, err)
	}
	w, err := s.Watch(rev)
	if err != nil {
		t.Fatalf("watch from the restored revision: %v", err)
	}
	r := mustCommitAll(t, s, &txn.Txn{ViewRevision: rev, Ops: []txn.Op{txn.CreateTask(taskProto(testUID(uidTask, 300, 0), uuid.Nil, 1, 1))}})
	if r.Revision != rev+1 {
		t.Fatalf("the first commit after the restore got revision %d, want %d", r.Revision, rev+1)
	}
	if sets, _, err := w.Poll(0); err != nil || len(sets) != 1 || sets[0].Revision != rev+1 {
		t.Fatalf("the watch from the restored revision: %d sets, %v", len(sets), err)
	}
	// Every status change after creation survives another reopen too
	// (a task's creation record and its status record, as the store keeps
	// them).
	if d, err := reopenDiff(t, s, dir, s.Snapshot()); err != nil || d != "" {
		t.Fatalf("reopen after a commit on the restored store: %q %v", d, err)
	}
}

// TestRestoreBumpedRevision: a restore at a revision above the snapshot's
// serves the same objects there, and a watch from the snapshot's own
// revision — one a client of the old store may have reached — is
// compacted too.
func TestRestoreBumpedRevision(t *testing.T) {
	_, before := historyStore(t)
	rev := before.Revision()
	dir := filepath.Join(t.TempDir(), "bumped")
	if err := Restore(Options{Dir: dir}, before, rev+1000); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, dir, nil)
	defer s.Close()
	after := s.Snapshot()
	if after.Revision() != rev+1000 {
		t.Fatalf("restored at %d, want %d", after.Revision(), rev+1000)
	}
	if err := testkit.DiffStates(before, after, testkit.Compare{IgnoreSeq: true, Protos: true}); err == nil || !strings.Contains(err.Error(), "revision") {
		t.Fatalf("only the revision differs: %v", err)
	}
	if err := testkit.FingerprintOf(before).Diff(testkit.FingerprintOf(after)); err == nil {
		t.Fatal("fingerprints at different revisions are equal")
	}
	before.RangeTasks(func(x *txn.Task) bool {
		y, ok := after.Task(x.UID)
		if !ok || y.Version != x.Version || y.State != x.State {
			t.Fatalf("task %s: %v, was version %d %s", x.UID, y, x.Version, x.State)
		}
		return true
	})
	if _, err := s.Watch(rev); !errors.Is(err, ErrCompacted) {
		t.Fatalf("watch from the snapshot's revision %d: %v, want ErrCompacted", rev, err)
	}
	if err := Restore(Options{Dir: filepath.Join(t.TempDir(), "low")}, before, rev-1); err == nil {
		t.Fatal("a restore below the state's revision succeeded")
	}
}

// TestRestoreRefuses: a directory that holds a store, or anything, is
// refused naming it and what it holds, and left as it was; so is a state
// whose versions are above the revision. Nothing is left beside it.
func TestRestoreRefuses(t *testing.T) {
	orig, st := historyStore(t)
	entries := func(dir string) []string {
		es, _ := os.ReadDir(dir)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	was := entries(orig)
	err := Restore(Options{Dir: orig}, st, st.Revision())
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), orig) || !strings.Contains(err.Error(), "holds a store") {
		t.Fatalf("restore onto a store: %v", err)
	}
	if now := entries(orig); strings.Join(now, " ") != strings.Join(was, " ") {
		t.Fatalf("the refused store's directory changed: %v, was %v", now, was)
	}
	if d, err := reopenDiff(t, openTest(t, orig, nil), orig, st); err != nil || d != "" {
		t.Fatalf("the refused store: %q %v", d, err)
	}

	parent := t.TempDir()
	other := filepath.Join(parent, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	err = Restore(Options{Dir: other}, st, st.Revision())
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("restore into a directory with a file: %v", err)
	}
	file := filepath.Join(parent, "file")
	os.WriteFile(file, nil, 0o644)
	if err := Restore(Options{Dir: file}, st, st.Revision()); !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("restore onto a file: %v", err)
	}

	// Versions are revisions: none above the one restored at.
	r := txn.NewRestorer(5)
	m := machineProto(testUID(uidMachine, 0, 0), 10, 10)
	m.Meta.Version = 9
	if err := r.Machine(m); err != nil {
		t.Fatal(err)
	}
	bad, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(parent, "empty")
	os.Mkdir(empty, 0o755)
	if err := Restore(Options{Dir: empty}, bad, 5); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("restore of a version above the revision: %v", err)
	}
	if names := entries(parent); strings.Join(names, " ") != "empty file other" || len(entries(empty)) != 0 || len(entries(other)) != 1 {
		t.Fatalf("after the refusals %s holds %v", parent, names)
	}

	// An empty directory is taken (and pebble's in-memory filesystem works
	// like the disk).
	if err := Restore(Options{Dir: empty}, st, st.Revision()); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, empty, nil)
	if d, err := reopenDiff(t, s, empty, st); err != nil || d != "" {
		t.Fatalf("restored into an empty directory: %q %v", d, err)
	}
	fs := vfs.NewMem()
	if err := Restore(Options{Dir: "cells/a", FS: fs}, st, st.Revision()); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions("cells/a")
	o.FS, o.Logger = fs, quietLogger()
	s, err = Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := diffStates(st, s.Snapshot(), true); d != "" {
		t.Fatalf("restored on a MemFS: %s", d)
	}
	if err := Restore(Options{Dir: "cells/a", FS: fs}, st, st.Revision()); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second restore on the MemFS: %v", err)
	}
}

// rawSnapshot builds a snapshot file from records of the caller's (a kind
// and a message, or raw bytes), with a correct trailer and checksum.
func rawSnapshot(version uint32, rev uint64, recs ...[2]any) []byte {
	b := []byte(SnapshotMagic)
	b = binary.BigEndian.AppendUint32(b, version)
	b = binary.BigEndian.AppendUint64(b, rev)
	var counts [5]uint64
	for _, r := range recs {
		kind := r[0].(byte)
		v, ok := r[1].([]byte)
		if !ok {
			v, _ = proto.Marshal(r[1].(proto.Message))
		}
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
		counts[strings.IndexByte("mjtql", kind)]++
	}
	b = append(b, 'E')
	n := 3 // version 1's trailer: machines, jobs, tasks
	if version >= 2 {
		n = 4 // and quotas
	}
	if version >= 3 {
		n = min(5, 2+int(version)) // and leases
	}
	for _, n := range counts[:n] {
		b = binary.BigEndian.AppendUint64(b, n)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// TestSnapshotCorrupt: every truncation, every flipped byte, bytes after the
// trailer, another magic or version, and objects that make no valid cell
// under a good checksum are each refused with ErrSnapshot saying what is
// wrong; LoadSnapshotFile names the file.
func TestSnapshotCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	m, task, job := testUID(uidMachine, 0, 0), testUID(uidTask, 0, 0), testUID(uidJob, 0, 0)
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{
		txn.CreateMachine(machineProto(m, 1000, 1000)),
		txn.CreateJob(jobProto(job, "j", 1)),
		txn.CreateTask(taskProto(task, job, 10, 10)),
		txn.Claim(task, m, res(10, 10), 0),
	}})
	st := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	good := snapshotBytes(t, st)
	if _, _, err := ReadSnapshot(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	read := func(b []byte) error {
		_, _, err := ReadSnapshot(bytes.NewReader(b))
		if err == nil {
			return errors.New("accepted")
		}
		if !errors.Is(err, ErrSnapshot) {
			t.Fatalf("error without ErrSnapshot: %v", err)
		}
		return err
	}
	for n := range len(good) {
		err := read(good[:n])
		want := "truncated"
		if n == 0 {
			want = "does not start with"
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the first %d of %d bytes: %v, want %q", n, len(good), err, want)
		}
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		err := read(b)
		want := "corrupt"
		switch {
		case i < 8:
			want = "starts with"
		case i < 12:
			want = "version"
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("byte %d of %d flipped: %v, want %q", i, len(good), err, want)
		}
	}
	if err := read(append(bytes.Clone(good), 0)); !strings.Contains(err.Error(), "1 bytes after its trailer") {
		t.Fatalf("a byte after the trailer: %v", err)
	}
	if err := read([]byte("PK\x03\x04 not a snapshot at all, a zip file")); !strings.Contains(err.Error(), "not \"OMEGASNP\"") {
		t.Fatalf("another file: %v", err)
	}
	if err := read(rawSnapshot(4, 1)); !strings.Contains(err.Error(), "version 4; this omega reads versions 1 to 3") {
		t.Fatalf("version 4: %v", err)
	}
	// Version 1 (no quotas) is still read; a quota record in it is corrupt.
	q := &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: testUID('Q', 0, 0).String(), Name: "q"}, Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 100}}}
	if _, _, err := ReadSnapshot(bytes.NewReader(rawSnapshot(1, 1, [2]any{byte('m'), machineProto(m, 1000, 1000)}))); err != nil {
		t.Fatalf("a version 1 file: %v", err)
	}
	if err := read(rawSnapshot(1, 1, [2]any{byte('q'), q})); !strings.Contains(err.Error(), "unknown record kind 0x71") {
		t.Fatalf("a quota in a version 1 file: %v", err)
	}
	if st, info, err := ReadSnapshot(bytes.NewReader(rawSnapshot(2, 1, [2]any{byte('q'), q}))); err != nil || st.NumQuotas() != 1 || info.Quotas != 1 {
		t.Fatalf("a quota in a version 2 file: %v (%+v)", err, info)
	}
	// Version 2 (no leases) is still read; a lease record in it is corrupt.
	l := &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID("batch-0").String(), Name: "batch-0", Version: 1, CreateRevision: 1},
		Spec: &omegav1.LeaseSpec{Holder: "h", Role: "scheduler", SchedulerKind: "batch", DurationMillis: 15_000}}
	if err := read(rawSnapshot(2, 1, [2]any{byte('l'), l})); !strings.Contains(err.Error(), "unknown record kind 0x6c") {
		t.Fatalf("a lease in a version 2 file: %v", err)
	}
	if st, info, err := ReadSnapshot(bytes.NewReader(rawSnapshot(3, 1, [2]any{byte('l'), l}))); err != nil || st.NumLeases() != 1 || info.Leases != 1 {
		t.Fatalf("a lease in a version 3 file: %v (%+v)", err, info)
	}

	// Good checksums over objects that make no valid cell.
	mp, jp, tp := machineProto(m, 1000, 1000), jobProto(job, "j", 1), taskProto(task, job, 10, 10)
	tp.Meta.Version, tp.Status = 1, &omegav1.TaskStatus{State: omegav1.TaskState_TASK_STATE_RUNNING, MachineUid: m.String(), Claimed: &omegav1.Resources{CpuMillis: 10}}
	if _, _, err := ReadSnapshot(bytes.NewReader(rawSnapshot(1, 1, [2]any{byte('m'), mp}, [2]any{byte('j'), jp}, [2]any{byte('t'), tp}))); err != nil {
		t.Fatalf("a hand-made snapshot: %v", err)
	}
	over := proto.Clone(tp).(*omegav1.Task)
	over.Status.Claimed.CpuMillis = 2000
	pendingOn := proto.Clone(tp).(*omegav1.Task)
	pendingOn.Status.State = omegav1.TaskState_TASK_STATE_PENDING
	noStatus := proto.Clone(tp).(*omegav1.Task)
	noStatus.Status = nil
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"a job twice", rawSnapshot(1, 1, [2]any{byte('j'), jp}, [2]any{byte('j'), jp}), "listed twice"},
		{"a task on a missing machine", rawSnapshot(1, 1, [2]any{byte('t'), tp}), "unknown machine"},
		{"a machine over capacity", rawSnapshot(1, 1, [2]any{byte('m'), mp}, [2]any{byte('t'), over}), "over capacity"},
		{"a PENDING task on a machine", rawSnapshot(1, 1, [2]any{byte('m'), mp}, [2]any{byte('t'), pendingOn}), "PENDING on machine"},
		{"a task without status", rawSnapshot(1, 1, [2]any{byte('t'), noStatus}), "has no status"},
		{"a machine that is no machine", rawSnapshot(1, 1, [2]any{byte('m'), &omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: "nope"}}}), "not a uuid"},
		{"a record that is no protobuf", rawSnapshot(1, 1, [2]any{byte('j'), []byte{0xff, 0xff, 0xff}}), "the job at offset 20"},
	} {
		if err := read(c.file); !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// The trailer's counts must agree.
	b := rawSnapshot(1, 1, [2]any{byte('j'), jp})
	binary.BigEndian.PutUint64(b[len(b)-sha256.Size-16:], 2) // two jobs
	sum := sha256.Sum256(b[:len(b)-sha256.Size])
	copy(b[len(b)-sha256.Size:], sum[:])
	if err := read(b); !strings.Contains(err.Error(), "counts 0 machines, 2 jobs") {
		t.Fatalf("wrong counts: %v", err)
	}

	file := filepath.Join(t.TempDir(), "cut.snap")
	os.WriteFile(file, good[:len(good)/2], 0o600)
	if _, _, err := LoadSnapshotFile(file); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a truncated file: %v", err)
	}
	if _, _, err := LoadSnapshotFile(file + ".missing"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), file+".missing") {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestSaveSnapshotFile: a save replaces the file whole and leaves no
// temporary file; a save that fails leaves the old file as it was.
func TestSaveSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cell.snap")
	os.WriteFile(file, []byte("old"), 0o600)
	st := txn.NewState()
	info, err := SaveSnapshotFile(file, st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, snapshotBytes(t, st)) || info.Bytes != int64(len(got)) {
		t.Fatalf("the saved file: %d bytes %v, info %v", len(got), err, info)
	}
	if _, _, err := LoadSnapshotFile(file); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("%s holds %d entries after a save", dir, len(es))
	}
	if _, err := SaveSnapshotFile(filepath.Join(dir, "missing", "cell.snap"), st); err == nil || !strings.Contains(err.Error(), "missing/cell.snap") {
		t.Fatalf("a save into a missing directory: %v", err)
	}
}

// TestRestoreRefusesQuotaAboveRevision: a quota's version and creation
// revision are revisions too, held to the one restored at like the other
// objects'.
func TestRestoreRefusesQuotaAboveRevision(t *testing.T) {
	for _, tc := range []struct {
		name             string
		version, created uint64
	}{{"version", 9, 3}, {"creation revision", 4, 9}} {
		r := txn.NewRestorer(5)
		q := &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: testUID('Q', 0, 0).String(), Name: "q", Version: tc.version, CreateRevision: tc.created},
			Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 1000}}}
		if err := r.Quota(q); err != nil {
			t.Fatal(err)
		}
		bad, err := r.Finish()
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "restored")
		if err := Restore(Options{Dir: dir}, bad, 5); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "quota") || !strings.Contains(err.Error(), "9") {
			t.Errorf("restore of a quota's %s above the revision: %v", tc.name, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the refused restore left %s (%v)", tc.name, dir, err)
		}
	}
}
