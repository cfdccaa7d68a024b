package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/txnfuzz"
	"github.com/omega-cell/omega/txn"
)

// FuzzCommit runs programs of transactions and expiries built from the
// fuzzer's bytes (internal/txnfuzz: every field of every operation, strings
// as raw bytes, committer clocks and expiry times at their edges) against a
// durable store on pebble's in-memory filesystem, with the invariants
// checked after every commit (Options.CheckInvariants panics if one
// breaks), checkpoints every KB and log segments of 512 bytes. It checks
// the store's promises about bad input: an error is one of the typed ones
// and changes nothing; the store never stops (ErrFailed); afterwards it
// still commits a good transaction, a watcher from the start saw exactly
// the committed revisions in order, and both a crash image (the last
// checkpoint and the log after it) and a reopen after a clean close hold
// the state from before.
//
//	go test ./store -run '^$' -fuzz FuzzCommit -fuzztime 5m
func FuzzCommit(f *testing.F) {
	for _, s := range txnfuzz.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runStoreProgram(t, data) })
}

// TestCommitRandomPrograms is the short run of FuzzCommit that stays in the
// test suite: random programs from a printed seed.
func TestCommitRandomPrograms(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_FUZZ_SEED")
	rng := rand.New(rand.NewPCG(seed, 2))
	n := 150
	if testing.Short() {
		n = 30
	}
	for i := range n {
		data := txnfuzz.RandomProgram(rng.Uint32, rng.IntN(300))
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("seed %d, program %d: %x", seed, i, data)
				}
			}()
			runStoreProgram(t, data)
		})
		if t.Failed() {
			return
		}
	}
}

var badInput = []error{txn.ErrInvalid, txn.ErrNotFound, txn.ErrAlreadyExists, txn.ErrTooLarge, txn.ErrNotPending,
	txn.ErrIllegalState, txn.ErrInUse, txn.ErrFutureRevision}

func fuzzOptions(fs vfs.FS) Options {
	o := DefaultOptions("/db")
	o.FS = noLink{fs}
	o.Logger = quietLogger()
	o.MemTableSize = 1 << 20
	o.CheckInvariants = true
	o.Limits = txnfuzz.Limits()
	o.Retention = time.Minute
	// Checkpoints every few KB, in the syncer (at known points, so a
	// program runs the same each time), and small log segments: a program
	// crosses checkpoints, and the crash image below replays a log.
	o.CheckpointBytes, o.LogSegmentBytes, o.checkpointInline = 1<<10, 512, true
	return o
}

func runStoreProgram(t *testing.T, data []byte) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Open(fuzzOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for _, tx := range txnfuzz.Setup() {
		mustCommitAll(t, s, tx)
	}
	start := s.Snapshot()
	w, err := s.Watch(start.Revision())
	if err != nil {
		t.Fatal(err)
	}
	var committed []uint64
	d := txnfuzz.NewDecoder(data, txnfuzz.Limits())
	for step := 0; d.More() && step < 48; step++ {
		before := s.Snapshot()
		if d.Action() == txnfuzz.ActExpire {
			now := time.Unix(0, txnfuzz.SetupNanos).Add(time.Duration(d.Int()))
			n, err := s.Expire(ctx, now)
			if errors.Is(err, txn.ErrInvalid) && !time.Unix(0, now.UnixNano()).Equal(now) {
				continue // a time int64 nanoseconds cannot hold: refused, nothing changed
			}
			if err != nil {
				t.Fatalf("step %d: Expire(%v): %v", step, now, err)
			}
			if n > 0 {
				for r := before.Revision() + 1; r <= s.Revision(); r++ {
					committed = append(committed, r)
				}
			}
			continue
		}
		tx := d.Txn(before)
		res, err := s.Commit(ctx, tx)
		after := s.Snapshot()
		switch {
		case err != nil:
			known := false
			for _, e := range badInput {
				known = known || errors.Is(err, e)
			}
			if !known {
				t.Fatalf("step %d: Commit: %v, which is not bad input (the store must not stop)", step, err)
			}
			if after != before {
				t.Fatalf("step %d: bad input (%v) changed the store: revision %d → %d", step, err, before.Revision(), after.Revision())
			}
		case res.Revision != 0:
			if res.Revision != before.Revision()+1 || after.Revision() != res.Revision {
				t.Fatalf("step %d: committed at %d, store went %d → %d", step, res.Revision, before.Revision(), after.Revision())
			}
			committed = append(committed, res.Revision)
		default:
			if after != before {
				t.Fatalf("step %d: nothing committed, but the store moved %d → %d", step, before.Revision(), after.Revision())
			}
		}
	}

	// The store still takes good work.
	goodTx := func(st *txn.State, n byte) *txn.Txn {
		m := uuid.UUID{'G', 'M', n, 1, 5: 1, 15: 1}
		tk := uuid.UUID{'G', 'T', n, 1, 5: 1, 15: 1}
		return &txn.Txn{ViewRevision: st.Revision(), Component: "good", UnixNanos: txnfuzz.SetupNanos, Ops: []txn.Op{
			txn.CreateMachine(machineProto(m, 1000, 1000)),
			txn.CreateTask(taskProto(tk, uuid.Nil, 10, 10)),
			txn.Claim(tk, m, res(10, 10), 0),
		}}
	}
	committed = append(committed, mustCommitAll(t, s, goodTx(s.Snapshot(), 0)).Revision)
	final := s.Snapshot()
	if err := txn.CheckInvariants(final); err != nil {
		t.Fatal(err)
	}

	// A watcher from the start saw every committed revision, in order, and
	// applying them to the start rebuilds the final state.
	sets, _, err := w.Poll(0)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	if len(sets) != len(committed) {
		t.Fatalf("watcher saw %d revisions, %d were committed", len(sets), len(committed))
	}
	st := start
	for i, ws := range sets {
		if ws.Revision != committed[i] {
			t.Fatalf("watcher's revision %d is %d, want %d", i, ws.Revision, committed[i])
		}
		// As a remote client applies it: the store's own revisions always
		// pass the check.
		next, err := st.ApplyChecked(ws)
		if err != nil {
			t.Fatalf("watched revision %d fails the remote check: %v", ws.Revision, err)
		}
		st = next
	}
	if diff := diffStates(final, st, false); diff != "" {
		t.Fatalf("the watched write sets build another state: %s", diff)
	}

	// Whatever was acknowledged reopens, equal: from a crash image (the
	// last checkpoint and the log after it) and after a clean close.
	crashed, err := Open(fuzzOptions(fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})))
	if err != nil {
		t.Fatalf("reopen the crash image: %v", err)
	}
	diff := diffStates(final, crashed.Snapshot(), true)
	crashed.Close()
	if diff != "" {
		t.Fatalf("after a crash: %s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s, err = Open(fuzzOptions(fs))
	if err != nil {
		t.Fatalf("reopen after acknowledged commits: %v", err)
	}
	if diff := diffStates(final, s.Snapshot(), true); diff != "" {
		t.Fatalf("after reopen: %s", diff)
	}
	mustCommitAll(t, s, goodTx(s.Snapshot(), 1))
}
