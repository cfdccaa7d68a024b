package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

const crashFSSeedEnv = "OMEGA_STORE_CRASHFS_SEED" // overrides TestCrashCloneFS's first seed

// TestCrashCloneFS runs a store on pebble's crashable in-memory filesystem
// with concurrent committers (so group commit shares syncs), and at random
// moments takes a crash clone that keeps a random fraction of the unsynced
// data. A store opened on the clone must hold every commit acknowledged
// before the clone was taken, satisfy the invariants, and be exactly the
// state the live store had at the clone's revision. This is the test that
// proves the fsync: with UnsyncedDataPercent=0 the clone holds only what
// was synced.
func TestCrashCloneFS(t *testing.T) {
	base := testkit.Seed(t, crashFSSeedEnv)
	seeds, crashes := 6, 10
	if testing.Short() {
		seeds, crashes = 2, 6
	}
	for i := range seeds {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { crashCloneRun(t, seed, crashes) })
	}
}

func crashCloneRun(t *testing.T, seed uint64, crashes int) {
	fatalf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (%s=%d): %s", seed, crashFSSeedEnv, seed, fmt.Sprintf(format, args...))
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	fs := vfs.NewCrashableMem()
	o := DefaultOptions("db")
	o.FS = noLink{fs}
	o.Logger = quietLogger()
	o.MemTableSize = 1 << 20     // small: flushes happen during the run
	o.CheckpointBytes = 16 << 10 // and checkpoints, log segments made and removed: the
	o.LogSegmentBytes = 8 << 10  // acknowledgements waited for alone write about 50 KB
	// Every other seed checkpoints in the syncer, at known points; the
	// others wake the checkpointer, as a server does.
	o.checkpointInline = seed%2 == 1
	s, err := Open(o)
	if err != nil {
		fatalf("open: %v", err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	machines, err := registerMachines(ctx, s, 4, 2000, 2000<<20)
	if err != nil {
		fatalf("register machines: %v", err)
	}

	// rev → digest of the state the live store published at rev.
	var digMu sync.Mutex
	digests := map[uint64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	// progress wakes the test's waits on every acknowledgement and every
	// recorded digest: they wait on events, with a deadline, never sleep.
	progress := make(chan struct{}, 1)
	poke := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	// wait blocks until the next event, failing on a committer's error or
	// at the deadline.
	wait := func(deadline <-chan time.Time, crash int, what func() string) {
		t.Helper()
		select {
		case err := <-errs:
			fatalf("crash %d: %v", crash, err)
		case <-deadline:
			fatalf("crash %d: %s after 20s", crash, what())
		case <-progress:
		}
	}
	st0 := s.Snapshot() // before any committer starts: the recorder sees every revision
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := stateRecorder(ctx, s, st0, func(st *txn.State, d string) {
			digMu.Lock()
			digests[st.Revision()] = d
			digMu.Unlock()
			poke()
		})
		if !errors.Is(err, context.Canceled) {
			errs <- fmt.Errorf("recorder: %w", err)
		}
	}()

	// What has been acknowledged: the newest revision, and how many tasks each
	// committer had created as of its newest acknowledgement.
	var ackMu sync.Mutex
	var maxAck uint64
	created := map[uint32]uint32{}
	var acks atomic.Int64
	for g := range 4 {
		c := newCommitter(uint32(g), seed, machines)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r, err := c.step(ctx, s)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errs <- err
					}
					return
				}
				ackMu.Lock()
				maxAck = max(maxAck, r.Revision)
				created[c.g] = c.created
				ackMu.Unlock()
				acks.Add(1)
				poke()
			}
		}()
	}

	for crash := range crashes {
		want := acks.Load() + 1 + rng.Int64N(60)
		deadline := time.After(20 * time.Second)
		for acks.Load() < want {
			wait(deadline, crash, func() string { return fmt.Sprintf("only %d of %d acknowledgements", acks.Load(), want) })
		}
		// Everything acknowledged so far must be in the clone.
		ackMu.Lock()
		acked, ackedCreated := maxAck, maps.Clone(created)
		ackMu.Unlock()
		p := rng.IntN(101)
		if crash == 0 {
			p = 0 // exactly what was synced: the sharpest test of the fsync
		}
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: p, RNG: rand.New(rand.NewPCG(seed, uint64(crash)+100))})

		o2 := o
		o2.FS = noLink{clone}
		s2, err := Open(o2)
		if err != nil {
			fatalf("crash %d (unsynced kept %d%%): reopen: %v", crash, p, err)
		}
		st := s2.Snapshot()
		rev := st.Revision()
		if rev < acked {
			fatalf("crash %d (unsynced kept %d%%): reopened at revision %d, but %d was acknowledged before the crash", crash, p, rev, acked)
		}
		if err := txn.CheckInvariants(st); err != nil {
			fatalf("crash %d (unsynced kept %d%%): invariants at %d: %v", crash, p, rev, err)
		}
		for g, n := range ackedCreated {
			for i := range n {
				if _, ok := st.Task(testUID(uidTask, g, i)); !ok {
					fatalf("crash %d (unsynced kept %d%%): acknowledged task %d of committer %d missing at %d", crash, p, i, g, rev)
				}
			}
		}
		// The clone may hold revisions written but not yet synced: the live
		// store publishes them soon.
		var want2 string
		deadline = time.After(20 * time.Second)
		for {
			digMu.Lock()
			d, ok := digests[rev]
			n := len(digests)
			digMu.Unlock()
			if ok {
				want2 = d
				break
			}
			wait(deadline, crash, func() string {
				return fmt.Sprintf("(unsynced kept %d%%): the clone is at revision %d, the live store still at %d (%d digests, %d acks)", p, rev, s.Revision(), n, acks.Load())
			})
		}
		if got := digest(st); got != want2 {
			fatalf("crash %d (unsynced kept %d%%): reopened state at %d:\n  %s\nbut the live store had\n  %s", crash, p, rev, got, want2)
		}
		if err := s2.Close(); err != nil {
			fatalf("crash %d: close clone: %v", crash, err)
		}
		t.Logf("crash %d: kept %d%% of unsynced data, acknowledged %d, reopened at %d", crash, p, acked, rev)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		fatalf("%v", err)
	}
	// The crashes fell among checkpoints and new log segments, not only
	// between them.
	if c, g := s.made.checkpoints.Load(), s.made.segments.Load(); (o.checkpointInline && c < 2) || g < 4 {
		fatalf("the run wrote %d checkpoints and made %d log segments: too few to test them", c, g)
	}
}
