package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// watchAll reads w until it has delivered revision last, checking that
// revisions come in order, consecutive, each once, and (check) that no
// delivered revision is ahead of the store's durable revision at delivery.
func watchAll(ctx context.Context, s *Store, w *Watcher, from, last uint64, max int) ([]*txn.WriteSet, error) {
	var out []*txn.WriteSet
	prev := from
	for prev < last {
		sets, err := w.Next(ctx, max)
		if err != nil {
			return out, err
		}
		if len(sets) == 0 {
			return out, fmt.Errorf("Next returned nothing and no error")
		}
		if max > 0 && len(sets) > max {
			return out, fmt.Errorf("Next(max=%d) returned %d revisions", max, len(sets))
		}
		durable := s.Revision()
		for _, ws := range sets {
			if ws.Revision != prev+1 {
				return out, fmt.Errorf("revision %d delivered after %d", ws.Revision, prev)
			}
			if ws.Revision > durable {
				return out, fmt.Errorf("revision %d delivered while the store's durable revision is %d", ws.Revision, durable)
			}
			prev = ws.Revision
			out = append(out, ws)
		}
	}
	return out, nil
}

// TestWatchOrdered: while several committers run, watchers from a snapshot
// get every later revision once, in order, each revision's changes together
// (every task a transaction created is in the write set of the revision
// its commit returned), and applying them to the snapshot yields exactly the
// store's state.
func TestWatchOrdered(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_WATCH_SEED")
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	ctx := context.Background()
	machines, err := registerMachines(ctx, s, 4, 2000, 2000<<20)
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	watchers := map[int]*Watcher{}
	for _, max := range []int{0, 1, 3} {
		if watchers[max], err = s.Watch(snap.Revision()); err != nil {
			t.Fatal(err)
		}
	}

	const committers, steps = 4, 40
	var mu sync.Mutex
	createdAt := map[uint64][]uuid.UUID{} // revision → tasks its transaction created
	var wg sync.WaitGroup
	errs := make(chan error, committers)
	for g := range committers {
		c := newCommitter(uint32(g), seed, machines)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range steps {
				before := c.created
				r, err := c.step(ctx, s)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i := before; i < c.created; i++ {
					createdAt[r.Revision] = append(createdAt[r.Revision], testUID(uidTask, c.g, i))
				}
				mu.Unlock()
			}
		}()
	}
	// The watchers read while the committers run.
	last := snap.Revision() + committers*steps
	type got struct {
		sets []*txn.WriteSet
		err  error
	}
	results := make(map[int]chan got)
	for max, w := range watchers {
		ch := make(chan got, 1)
		results[max] = ch
		go func() {
			sets, err := watchAll(ctx, s, w, snap.Revision(), last, max)
			ch <- got{sets, err}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if s.Revision() != last {
		t.Fatalf("seed %d: store at %d after %d commits from %d", seed, s.Revision(), committers*steps, snap.Revision())
	}
	for max, ch := range results {
		var g got
		select {
		case g = <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("seed %d: watcher max=%d did not reach revision %d", seed, max, last)
		}
		if g.err != nil {
			t.Fatalf("seed %d: watcher max=%d: %v", seed, max, g.err)
		}
		st := snap
		for _, ws := range g.sets {
			in := map[uuid.UUID]bool{}
			for i := range ws.Changes {
				in[ws.Changes[i].UID()] = true
			}
			for _, u := range createdAt[ws.Revision] {
				if !in[u] {
					t.Fatalf("seed %d: watcher max=%d: revision %d lacks task %s its transaction created", seed, max, ws.Revision, u)
				}
			}
			st = st.Apply(ws)
		}
		if d := diffStates(st, s.Snapshot(), false); d != "" {
			t.Fatalf("seed %d: watcher max=%d: snapshot + watched write sets differs from the store: %s", seed, max, d)
		}
	}
}

// TestWatchOnlyDurable: a watcher never sees a revision that is not yet
// durable. On a crashable filesystem, every time the watcher gets revision
// r, a crash clone keeping no unsynced data must reopen at r or later.
func TestWatchOnlyDurable(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_WATCH_DURABLE_SEED")
	fs := vfs.NewCrashableMem()
	o := DefaultOptions("db")
	o.FS, o.Logger = noLink{fs}, quietLogger()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	machines, err := registerMachines(ctx, s, 4, 2000, 2000<<20)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(s.Revision())
	if err != nil {
		t.Fatal(err)
	}
	checks := 20
	if testing.Short() {
		checks = 8
	}
	// The committers commit on tokens the checker hands out, 20 per check,
	// so commits are in flight during every check and the state stays small.
	tokens := make(chan struct{}, 64)
	refill := func(n int) {
		for range n {
			select {
			case tokens <- struct{}{}:
			default:
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		c := newCommitter(uint32(g), seed, machines)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-tokens:
				case <-ctx.Done():
					return
				}
				if _, err := c.step(ctx, s); err != nil {
					if !errors.Is(err, context.Canceled) {
						errs <- err
					}
					return
				}
			}
		}()
	}
	for range checks {
		refill(20) // so the Next below has something coming
		sets, err := w.Next(ctx, 0)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		r := sets[len(sets)-1].Revision
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		o2 := o
		o2.FS = noLink{clone}
		s2, err := Open(o2)
		if err != nil {
			t.Fatalf("seed %d: open clone: %v", seed, err)
		}
		if got := s2.Revision(); got < r {
			t.Fatalf("seed %d: watcher got revision %d, but only %d is durable", seed, r, got)
		}
		s2.Close()
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("seed %d: %v", seed, err)
	}
}

// commitN commits n small transactions (one new task each); it returns the
// last revision.
func commitN(t *testing.T, s *Store, n int, tag uint32) uint64 {
	t.Helper()
	var rev uint64
	for i := range n {
		r := mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Ops: []txn.Op{
			txn.CreateTask(taskProto(testUID(uidTask, tag, uint32(i)), uuid.Nil, 1, 1)),
		}})
		rev = r.Revision
	}
	return rev
}

// TestWatchCompacted: a watcher that falls behind the retained history gets
// ErrCompacted (from Next, and from Watch of a revision no longer retained),
// re-lists with Snapshot and watches again from there.
func TestWatchCompacted(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.HistoryChanges = 10 })
	defer s.Close()
	ctx := context.Background()
	from := commitN(t, s, 3, 1)
	w, err := s.Watch(from)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, s, 30, 2) // 30 changes: more than the history keeps
	if _, err := w.Next(ctx, 0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Next behind the history: %v, want ErrCompacted", err)
	}
	if _, _, err := w.Poll(0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Poll behind the history: %v, want ErrCompacted", err)
	}
	if _, err := s.Watch(from); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Watch(%d) behind the history: %v, want ErrCompacted", from, err)
	}
	// The newest revisions are still retained.
	if _, err := s.Watch(s.Revision() - 5); err != nil {
		t.Fatalf("Watch within the history: %v", err)
	}

	// Re-list and watch again.
	snap := s.Snapshot()
	w, err = s.Watch(snap.Revision())
	if err != nil {
		t.Fatal(err)
	}
	last := commitN(t, s, 3, 3)
	sets, err := watchAll(ctx, s, w, snap.Revision(), last, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := snap
	for _, ws := range sets {
		st = st.Apply(ws)
	}
	if d := diffStates(st, s.Snapshot(), false); d != "" {
		t.Fatalf("re-listed snapshot + watch differs from the store: %s", d)
	}

	// A revision larger than the whole history is still delivered whole.
	big := &txn.Txn{ViewRevision: s.Revision()}
	for i := range 25 {
		big.Ops = append(big.Ops, txn.CreateTask(taskProto(testUID(uidTask, 4, uint32(i)), uuid.Nil, 1, 1)))
	}
	before := s.Revision()
	w, err = s.Watch(before)
	if err != nil {
		t.Fatal(err)
	}
	r := mustCommitAll(t, s, big)
	sets, err = w.Next(ctx, 0)
	if err != nil {
		t.Fatalf("watch of a revision bigger than the history: %v", err)
	}
	if len(sets) != 1 || sets[0].Revision != r.Revision || len(sets[0].Changes) != 25 {
		t.Fatalf("got %d write sets, want revision %d with 25 changes", len(sets), r.Revision)
	}
}

// TestWatchFuture: watching from a revision the store has not reached is an
// error.
func TestWatchFuture(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	rev := commitN(t, s, 2, 1)
	if _, err := s.Watch(rev + 1); !errors.Is(err, txn.ErrFutureRevision) {
		t.Fatalf("Watch(%d) at revision %d: %v, want ErrFutureRevision", rev+1, rev, err)
	}
	if _, err := s.Watch(rev); err != nil {
		t.Fatalf("Watch of the current revision: %v", err)
	}
	if _, err := s.Watch(0); err != nil {
		t.Fatalf("Watch(0) with the whole history retained: %v", err)
	}
}

// TestWatchNextContext: Next blocks until a publication or ctx is done,
// and returns ctx's error then; Poll's channel is closed by the next
// publication.
func TestWatchNextContext(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	rev := commitN(t, s, 1, 1)
	w, err := s.Watch(rev)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := w.Next(ctx, 0)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Next returned before anything was published: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after its context was cancelled")
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	if _, err := w.Next(ctx2, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with an expiring context: %v, want DeadlineExceeded", err)
	}

	// Poll: nothing now, and a channel that the next commit closes.
	sets, ch, err := w.Poll(0)
	if err != nil || len(sets) != 0 {
		t.Fatalf("Poll with nothing new: %d sets, %v", len(sets), err)
	}
	r := commitN(t, s, 1, 2)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Poll's channel not closed by a publication")
	}
	sets, _, err = w.Poll(0)
	if err != nil || len(sets) != 1 || sets[0].Revision != r {
		t.Fatalf("Poll after a commit: %d sets, %v; want revision %d", len(sets), err, r)
	}
	// A cancelled watcher can go on.
	r = commitN(t, s, 1, 3)
	sets, err = w.Next(context.Background(), 0)
	if err != nil || len(sets) != 1 || sets[0].Revision != r {
		t.Fatalf("Next after a cancelled Next: %d sets, %v; want revision %d", len(sets), err, r)
	}
}

// TestWatchClose: a watcher gets what was published, then ErrClosed — also
// one already blocked in Next when the store closes.
func TestWatchClose(t *testing.T) {
	for _, d := range []Durability{DurabilitySync, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			s := openTest(t, t.TempDir(), func(o *Options) { o.Durability = d })
			rev := commitN(t, s, 1, 1)
			blocked, err := s.Watch(rev)
			if err != nil {
				t.Fatal(err)
			}
			lagging, err := s.Watch(0)
			if err != nil {
				t.Fatal(err)
			}
			// What Next waits on: Poll's channel. Close must close it, or a
			// watcher blocked in Next when the store closes never returns.
			sets, ch, err := blocked.Poll(0)
			if err != nil || len(sets) != 0 {
				t.Fatalf("Poll: %d sets, %v", len(sets), err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := blocked.Next(context.Background(), 0)
				done <- err
			}()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not wake watchers: Poll's channel still open")
			}
			select {
			case err := <-done:
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("blocked Next after Close: %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a Next blocked when the store closed never returned")
			}
			// The lagging watcher still gets what was published, then ErrClosed.
			sets, err = lagging.Next(context.Background(), 0)
			if err != nil || len(sets) != 1 || sets[0].Revision != rev {
				t.Fatalf("lagging watcher after Close: %d sets, %v", len(sets), err)
			}
			if _, err := lagging.Next(context.Background(), 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("lagging watcher at the end: %v, want ErrClosed", err)
			}
		})
	}
}

// TestWatchCloseDeliversAcknowledged: a watcher reading while the store
// closes under running committers gets every revision a committer had
// acknowledged before it sees ErrClosed.
func TestWatchCloseDeliversAcknowledged(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_WATCH_CLOSE_SEED")
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		s := openTest(t, t.TempDir(), nil)
		machines, err := registerMachines(context.Background(), s, 4, 2000, 2000<<20)
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.Watch(s.Revision())
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var maxAck uint64
		var wg sync.WaitGroup
		for g := range 4 {
			c := newCommitter(uint32(g), seed+uint64(round), machines)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					r, err := c.step(context.Background(), s)
					if err != nil {
						return // ErrClosed
					}
					mu.Lock()
					maxAck = max(maxAck, r.Revision)
					mu.Unlock()
				}
			}()
		}
		type end struct {
			last uint64
			err  error
		}
		progress := make(chan uint64, 1000)
		ended := make(chan end, 1)
		go func() {
			var last uint64
			for {
				sets, err := w.Next(context.Background(), 0)
				if err != nil {
					ended <- end{last, err}
					return
				}
				last = sets[len(sets)-1].Revision
				select {
				case progress <- last:
				default:
				}
			}
		}()
		for r := uint64(0); r < 20; {
			select {
			case r = <-progress:
			case e := <-ended:
				t.Fatalf("watcher ended early at %d: %v", e.last, e.err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		var e end
		select {
		case e = <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("seed %d round %d: watcher did not end after Close", seed, round)
		}
		if !errors.Is(e.err, ErrClosed) {
			t.Fatalf("seed %d round %d: watcher ended with %v, want ErrClosed", seed, round, e.err)
		}
		if e.last < maxAck {
			t.Fatalf("seed %d round %d: watcher got ErrClosed at revision %d, but %d was acknowledged", seed, round, e.last, maxAck)
		}
	}
}
