package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// crashedHistory commits buildHistory's varied history to a store on a
// crashable in-memory filesystem and returns a crash clone of it holding
// only what was synced (the store is never closed: no last checkpoint),
// with the state the store had published.
func crashedHistory(t *testing.T, seed uint64, mod func(*Options)) (*vfs.MemFS, *txn.State, *Store) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s := openTest(t, "db", func(o *Options) {
		o.FS = noLink{fs}
		if mod != nil {
			mod(o)
		}
	})
	buildHistory(t, s, seed)
	st := s.Snapshot()
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), st, s
}

func openOn(fs vfs.FS, mod func(*Options)) (*Store, error) {
	o := DefaultOptions("db")
	o.FS = noLink{fs}
	o.Logger = quietLogger()
	o.CheckInvariants = true
	if mod != nil {
		mod(&o)
	}
	return Open(o)
}

// TestLogReplay: a store that crashed reopens at exactly the state it had
// published, whether pebble's checkpoint holds none of the history (all of
// it replayed from the log), some of it (checkpoints every few KB, log
// segments made and removed), or all of it but the last revision
// (a checkpoint after every sync). The history has what a checkpoint must
// get right: tasks created and deleted between two checkpoints, tasks
// created before one and changed after, deleted jobs and machines, and a
// uid made again after its deletion.
func TestLogReplay(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_LOG_SEED")
	for _, tc := range []struct {
		name      string
		ck, seg   int64
		minCk     int64
		minSegs   int64
		replayAll bool
	}{
		{name: "log only", ck: 1 << 40, seg: 1 << 30},
		{name: "checkpoints and segments", ck: 16 << 10, seg: 4 << 10, minCk: 3, minSegs: 5},
		{name: "checkpoint every sync", ck: 1, seg: 1 << 10, minCk: 50, minSegs: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := func(o *Options) {
				o.CheckpointBytes, o.LogSegmentBytes = tc.ck, tc.seg
				o.checkpointInline = true // at known points: the counts below do not depend on scheduling
			}
			clone, want, live := crashedHistory(t, seed, mod)
			if c, g := live.made.checkpoints.Load(), live.made.segments.Load(); c < tc.minCk || g < tc.minSegs {
				t.Fatalf("the history wrote %d checkpoints and %d new segments, want at least %d and %d", c, g, tc.minCk, tc.minSegs)
			}
			// The syncer checkpoints after it has woken the committers, so
			// the last checkpoint may still be running: wait for it.
			ls := live.LogStats()
			for deadline := time.Now().Add(10 * time.Second); tc.ck == 1 && ls.CheckpointRevision < want.Revision() && time.Now().Before(deadline); ls = live.LogStats() {
				runtime.Gosched()
			}
			if ls.Checkpoints > live.made.checkpoints.Load() || ls.Checkpoints < tc.minCk || ls.CheckpointRevision > want.Revision() || (tc.ck == 1 && ls.CheckpointRevision != want.Revision()) || ls.Segments < 1 {
				t.Fatalf("log stats %+v after %d checkpoints, published revision %d", ls, live.made.checkpoints.Load(), want.Revision())
			}
			live.Close()
			s, err := openOn(clone, mod)
			if err != nil {
				t.Fatalf("seed %d: reopen after the crash: %v", seed, err)
			}
			defer s.Close()
			if d := diffStates(want, s.Snapshot(), true); d != "" {
				t.Fatalf("seed %d: reopened state differs from the published one: %s", seed, d)
			}
			// The open replayed the log into pebble and started a new one:
			// reopening again (after a clean close) changes nothing.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := openOn(clone, mod)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if d := diffStates(want, s2.Snapshot(), true); d != "" {
				t.Fatalf("seed %d: second reopen differs: %s", seed, d)
			}
		})
	}
}

// logSegments returns the log's segment paths in fs, oldest first.
func logSegments(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	segs, err := listSegments(fs, fs.PathJoin("db", logDirName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sg := range segs {
		out = append(out, fs.PathJoin("db", logDirName, sg.name))
	}
	return out
}

func readAll(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := readFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// A copy: pebble's in-memory files scribble over what they were given
	// in race builds (its invariants mode), and b may be a fuzz seed.
	if _, err := f.Write(slices.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// recordEnds returns the offsets at which the records of a segment end.
func recordEnds(t testing.TB, b []byte) []int {
	t.Helper()
	var ends []int
	for off := 0; off < len(b); {
		_, _, n, err := parseLogRecord(b[off:])
		if err != nil {
			break
		}
		off += n
		ends = append(ends, off)
	}
	return ends
}

// TestLogDamage: what the open does with a damaged log. A record torn at
// the end of the newest segment (a write never acknowledged) ends the log
// there; a bad byte in an older segment, a missing segment and a foreign
// file are ErrCorrupt, naming the file (and the offset), and leave the
// files as they were.
func TestLogDamage(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_LOG_SEED")
	mod := func(o *Options) { o.CheckpointBytes, o.LogSegmentBytes = 1<<40, 4<<10 }
	clone, want, live := crashedHistory(t, seed, mod)
	live.Close()
	segs := logSegments(t, clone)
	if len(segs) < 4 {
		t.Fatalf("%d log segments, want at least 4", len(segs))
	}

	t.Run("torn tail", func(t *testing.T) {
		fs := clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		newest := segs[len(segs)-1]
		b := readAll(t, fs, newest)
		ends := recordEnds(t, b)
		if len(ends) == 0 {
			t.Fatalf("seed %d: the newest segment has no records", seed)
		}
		// Cut the last record in half (it may be the segment's only one:
		// some seeds rotate the segment just before the last commit).
		start := 0
		if len(ends) >= 2 {
			start = ends[len(ends)-2]
		}
		cut := start + (ends[len(ends)-1]-start)/2
		writeAll(t, fs, newest, b[:cut])
		s, err := openOn(fs, mod)
		if err != nil {
			t.Fatalf("seed %d: open with a torn tail: %v", seed, err)
		}
		defer s.Close()
		if got := s.Revision(); got != want.Revision()-1 {
			t.Fatalf("seed %d: reopened at %d after the last record was torn, want %d", seed, got, want.Revision()-1)
		}
	})
	refused := func(t *testing.T, fs vfs.FS, wantIn ...string) {
		t.Helper()
		var s *Store
		before := map[string][]byte{}
		dir := fs.PathJoin("db", logDirName)
		names, err := fs.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			before[fs.PathJoin(dir, n)] = readAll(t, fs, fs.PathJoin(dir, n))
		}
		s, err = openOn(fs, mod)
		if err == nil {
			s.Close()
			t.Fatalf("seed %d: the store opened", seed)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("seed %d: %v, want ErrCorrupt", seed, err)
		}
		for _, w := range wantIn {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("seed %d: %q does not say %q", seed, err, w)
			}
		}
		for p, b := range before {
			if got := readAll(t, fs, p); string(got) != string(b) {
				t.Fatalf("the refused open changed %s", p)
			}
		}
	}
	t.Run("bad byte in an older segment", func(t *testing.T) {
		fs := clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		old := segs[1]
		b := readAll(t, fs, old)
		ends := recordEnds(t, b)
		at := ends[0] + logHeaderSize + 3 // inside the second record's payload
		b[at] ^= 0x40
		writeAll(t, fs, old, b)
		refused(t, fs, old, fmt.Sprintf("offset %d", ends[0]), "checksum")
	})
	t.Run("missing segment", func(t *testing.T) {
		fs := clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		if err := fs.Remove(segs[2]); err != nil {
			t.Fatal(err)
		}
		refused(t, fs, "missing")
	})
	t.Run("older segment emptied", func(t *testing.T) {
		fs := clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		// Its records lost, the file still there, and nothing written to
		// the newest yet: no record after the gap shows it.
		writeAll(t, fs, segs[len(segs)-2], nil)
		writeAll(t, fs, segs[len(segs)-1], nil)
		refused(t, fs, segs[len(segs)-1], "starts at revision", "missing")
	})
	t.Run("foreign file", func(t *testing.T) {
		fs := clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		writeAll(t, fs, fs.PathJoin("db", logDirName, "notes.txt"), []byte("x"))
		refused(t, fs, "notes.txt", "not a log segment")
	})
}

// TestFormatMigration: a store of format 1 — its records in pebble, the
// newest of them in pebble's WAL only, as that format left them — opens
// with every object, is stamped format 2, and reopens from its checkpoint.
func TestFormatMigration(t *testing.T) {
	fs := vfs.NewMem()
	o := DefaultOptions("db")
	o.FS = fs
	o.Logger = quietLogger()
	db, err := pebble.Open("db", o.PebbleOptions())
	if err != nil {
		t.Fatal(err)
	}
	src := txn.NewState()
	for i := range 3 {
		m := testUID(uidMachine, 0, uint32(i))
		tx := &txn.Txn{Ops: []txn.Op{txn.CreateMachine(machineProto(m, 1000, 1<<30))}}
		if i == 2 {
			tk := testUID(uidTask, 0, 1)
			tx.Ops = append(tx.Ops, txn.CreateTask(taskProto(tk, uuid.Nil, 10, 10)), txn.Claim(tk, m, res(10, 10), 0))
		}
		_, ws, err := txn.Evaluate(src, tx, src.Revision()+1, txn.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		src = src.Apply(ws)
		b := db.NewBatch()
		if err := EncodeWriteSet(b, ws); err != nil {
			t.Fatal(err)
		}
		if err := db.Apply(b, pebble.Sync); err != nil { // in pebble's WAL, format 1's log
			t.Fatal(err)
		}
	}
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], 1)
	if err := db.Set(versionKey, v[:], pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		s, err := Open(o)
		if err != nil {
			t.Fatalf("open %d of a format 1 store: %v", round, err)
		}
		if d := diffStates(src, s.Snapshot(), true); d != "" {
			t.Fatalf("open %d: state differs: %s", round, d)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err = pebble.Open("db", o.PebbleOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, c, err := db.Get(versionKey)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := binary.BigEndian.Uint32(b); got != FormatVersion {
		t.Fatalf("migrated store records format %d, want %d", got, FormatVersion)
	}
}

// TestCheckpointOverCheckpoint: a history checkpointed, then changed and
// checkpointed again — every task and job deleted, a task made again under
// a deleted uid, the rest left as they were — reopens from pebble alone at
// the state published, with no record of a deleted object left behind
// (load refuses a status record without its task).
func TestCheckpointOverCheckpoint(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_LOG_SEED")
	fs := vfs.NewCrashableMem()
	mod := func(o *Options) { o.FS, o.CheckpointBytes = noLink{fs}, 1<<40 } // the checkpointer never wakes: the test checkpoints
	s := openTest(t, "db", mod)
	buildHistory(t, s, seed)
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	st := s.Snapshot()
	var ops []txn.Op
	var again uuid.UUID
	st.RangeTasks(func(tk *txn.Task) bool {
		if again == uuid.Nil && tk.Version != tk.CreateRev {
			again = tk.UID // it has a status record
		}
		ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk.UID, tk.Version))
		return true
	})
	if again == uuid.Nil {
		t.Fatal("no task changed after its creation")
	}
	mustCommitAll(t, s, &txn.Txn{ViewRevision: st.Revision(), Ops: ops})
	mustCommitAll(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(again, uuid.Nil, 1, 1))}})
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	want := s.Snapshot()
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	// Pebble alone: without the log, the open sees only the checkpoint.
	if err := clone.RemoveAll(clone.PathJoin("db", logDirName)); err != nil {
		t.Fatal(err)
	}
	s2, err := openOn(clone, func(o *Options) { o.CheckpointBytes = 1 << 40 })
	if err != nil {
		t.Fatalf("seed %d: open the checkpoint: %v", seed, err)
	}
	defer s2.Close()
	if d := diffStates(want, s2.Snapshot(), true); d != "" {
		t.Fatalf("seed %d: the checkpoint differs from the published state: %s", seed, d)
	}
}

// failingFS fails the n-th write to a segment of the store's log, writing nothing, and
// counts the writes after it.
type failingFS struct {
	vfs.FS
	mu     sync.Mutex
	writes int
	failAt int
	after  int // log writes after the failed one
}

type failingFile struct {
	vfs.File
	fs *failingFS
}

func (f *failingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	if err != nil || !strings.Contains(name, "/"+logDirName+"/") { // the store's log, not pebble's files
		return file, err
	}
	return failingFile{file, f}, nil
}

func (f failingFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	n, past := f.fs.writes, f.fs.writes > f.fs.failAt
	if past {
		f.fs.after++
	}
	f.fs.mu.Unlock()
	if n == f.fs.failAt {
		return 0, errors.New("injected write error")
	}
	return f.File.Write(p)
}

// TestLogWriteFails: a failed write to the log stops the store at once —
// the commits in it and after it fail with ErrFailed, nothing more is
// written to the log (a later group would follow a gap), Close says the
// store failed — and the store reopens at a revision no later than the
// last acknowledged one and no earlier than the last before the failure.
func TestLogWriteFails(t *testing.T) {
	mem := vfs.NewMem()
	fsys := &failingFS{FS: mem, failAt: 30}
	s := openTest(t, "db", func(o *Options) { o.FS = fsys; o.CheckInvariants = false })
	ctx := context.Background()
	var (
		mu     sync.Mutex
		maxAck uint64
		failed int
		wg     sync.WaitGroup
	)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				tk := testUID(uidTask, uint32(g), uint32(i))
				r, err := s.Commit(ctx, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1))}})
				mu.Lock()
				if err != nil {
					if !errors.Is(err, ErrFailed) {
						t.Errorf("commit after the failure: %v, want ErrFailed", err)
					}
					failed++
					mu.Unlock()
					return
				}
				maxAck = max(maxAck, r.Revision)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != 4 {
		t.Fatalf("%d committers saw the failure", failed)
	}
	if err := s.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close of a failed store: %v, want ErrFailed", err)
	}
	if fsys.after != 0 {
		t.Fatalf("%d log writes after the failed one", fsys.after)
	}
	s2, err := openOn(mem, nil)
	if err != nil {
		t.Fatalf("reopen after a failed write: %v", err)
	}
	defer s2.Close()
	if got := s2.Revision(); got < maxAck {
		t.Fatalf("reopened at %d, but %d was acknowledged", got, maxAck)
	}
}

// logImage is a store's directory after a short history and a crash, as an
// in-memory filesystem, with its newest log segment's bytes.
func logImage(t testing.TB) (*vfs.MemFS, string, []byte) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s := openTest(t, "db", func(o *Options) { o.FS = noLink{fs} })
	ms, err := registerMachines(context.Background(), s, 3, 1000, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		tk := testUID(uidTask, 7, uint32(i))
		mustCommit(t, s, &txn.Txn{Ops: []txn.Op{txn.CreateTask(taskProto(tk, uuid.Nil, 1, 1)), txn.Claim(tk, ms[i%len(ms)], res(1, 1), 0)}})
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	segs, err := listSegments(clone, clone.PathJoin("db", logDirName))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v: %v", segs, err)
	}
	path := clone.PathJoin("db", logDirName, segs[0].name)
	return clone, path, readAll(t, clone, path)
}

// FuzzReplayLog replays a log whose segment holds the fuzzer's bytes
// (seeded with a real segment, cut and flipped): as the newest segment, or
// as an older one with a real segment after it. The replay never panics;
// it fails only with ErrCorrupt naming the segment; the revisions it hands
// on run 1, 2, 3... with no gap, each the real record's bytes; as the
// newest segment a damaged tail only ends the log, while as an older
// segment any damage, and any record it lost, is an error.
//
//	go test ./store -run '^$' -fuzz FuzzReplayLog -fuzztime 2m
func FuzzReplayLog(f *testing.F) {
	_, _, real := logImage(f)
	for _, older := range []byte{0, 1} {
		f.Add(older, real)
		f.Add(older, real[:len(real)/2])
		flipped := slices.Clone(real)
		flipped[len(flipped)/3] ^= 1
		f.Add(older, flipped)
		f.Add(older, []byte{})
	}
	payloads := map[uint64]string{}
	for off := 0; off < len(real); {
		rev, payload, n, err := parseLogRecord(real[off:])
		if err != nil {
			f.Fatal(err)
		}
		payloads[rev] = string(payload)
		off += n
	}
	f.Fuzz(func(t *testing.T, older byte, data []byte) {
		fs := vfs.NewMem()
		dir := "log"
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := fs.PathJoin(dir, segmentName(1))
		writeAll(t, fs, path, data)
		if older%2 == 1 { // a newer segment after it, starting past the real log
			writeAll(t, fs, fs.PathJoin(dir, segmentName(uint64(len(payloads))+1)), nil)
		}
		var revs []uint64
		last, err := replayLog(fs, dir, 0, func(rev uint64, payload []byte) error {
			if want, ok := payloads[rev]; !ok || want != string(payload) {
				t.Fatalf("replayed revision %d with bytes the real log does not hold", rev)
			}
			revs = append(revs, rev)
			return nil
		})
		for i, r := range revs {
			if r != uint64(i)+1 {
				t.Fatalf("replayed revisions %v: not 1, 2, 3...", revs)
			}
		}
		if last != uint64(len(revs)) {
			t.Fatalf("last %d after replaying %d revisions", last, len(revs))
		}
		switch {
		case err != nil && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "log segment "+dir+"/")):
			t.Fatalf("replay: %v; want ErrCorrupt naming a segment", err)
		case err == nil && older%2 == 1 && string(data) != string(real) && len(revs) < len(payloads):
			t.Fatalf("an older segment cut short (at revision %d of %d) replayed without an error", len(revs), len(payloads))
		case string(data) == string(real) && (err != nil || len(revs) != len(payloads)):
			t.Fatalf("the real segment replayed %d of %d revisions: %v", len(revs), len(payloads), err)
		}
	})
}
