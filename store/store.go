// Package store is omega's cell-state store: the authoritative state of a
// cell in memory (an immutable txn.State per revision, indexed for O(1)-ish
// fit checks), made durable in pebble, with a global revision and a watch.
//
// A commit is validate → append → apply: txn.Evaluate decides the
// transaction against the newest state, the store assigns the next revision,
// the write set is encoded into a pebble batch and handed to the single
// writer, which gives every ready batch to pebble in revision order as one
// batch (pebble's WAL keeps that order, so a crash leaves a prefix of
// revisions). A syncer waits for each group's fsync — concurrent committers
// share it — and only then publishes the revisions: to Snapshot, to
// watchers, and to the committers waiting in Commit. A revision is never
// visible before it is durable, so a crash never takes back a revision
// anyone has seen.
//
// The stages overlap: evaluation runs against the newest state, durable or
// not, and the writer hands pebble the next group while the previous one's
// fsync is in flight. If a
// write fails the store stops: every unacknowledged commit fails with
// ErrFailed and so does every later one; reopening rebuilds the durable
// state.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/omega-cell/omega/txn"
)

var (
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrFailed: a durable write failed; the store accepts no more commits.
	ErrFailed = errors.New("store failed")
	// ErrCompacted: a watch asked for revisions the store no longer retains;
	// re-list with Snapshot and watch from its revision. It is
	// txn.ErrCompacted.
	ErrCompacted = txn.ErrCompacted
	// ErrCorrupt: the stored data cannot be decoded.
	ErrCorrupt = errors.New("corrupt store")
	// ErrRejected: the policy refused the transaction. It is
	// txn.ErrRejected.
	ErrRejected = txn.ErrRejected
)

// Store is the cell-state store. All methods are safe for concurrent use.
type Store struct {
	opts Options
	db   *pebble.DB // nil with DurabilityNone
	log  *slog.Logger

	mu        sync.Mutex
	rules     txn.Rules     // the policy's per-operation rules; nil for raw
	head      *txn.State    // newest state, maybe not yet durable
	scratch   txn.Scratch   // evaluation buffers, reused under mu
	published *txn.State    // newest durable state
	queue     []*pending    // evaluated, not yet durable, in revision order
	wake      chan struct{} // signals the writer (capacity 1)
	syncq     chan flight   // groups written, waiting for their sync, in order
	pubCh     chan struct{} // closed and replaced on every publication
	hist      history
	expiry    expiryQueue
	err       error // sticky: ErrFailed or ErrClosed
	writerWG  sync.WaitGroup
	closing   bool
	expireMu  sync.Mutex // serializes Expire
	closeOnce sync.Once  // a second Close waits for the first and returns its error
	closeErr  error
	closed    bool // Close finished publishing: nothing more will be published
}

type pending struct {
	ws    *txn.WriteSet
	state *txn.State
	batch *pebble.Batch
	ready bool          // batch encoded
	err   error         // set before done is closed
	done  chan struct{} // closed once durable (or failed)
}

// Open opens (or creates) a store. With DurabilitySync it opens pebble in
// opts.Dir and rebuilds the state of every acknowledged commit.
func Open(opts Options) (*Store, error) {
	if opts.Policy == nil {
		opts.Policy = Raw()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HistoryChanges == 0 {
		opts.HistoryChanges = DefaultOptions("").HistoryChanges
	}
	opts.Limits = opts.Limits.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		opts:  opts,
		rules: policyRules(opts.Policy),
		log:   opts.Logger,
		wake:  make(chan struct{}, 1),
		pubCh: make(chan struct{}),
	}
	state := txn.NewState()
	if opts.Durability == DurabilitySync {
		db, err := pebble.Open(opts.Dir, opts.PebbleOptions())
		if err != nil {
			return nil, fmt.Errorf("open pebble in %s: %w", opts.Dir, err)
		}
		if err := checkFormat(db, opts.Dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("open %s: %w", opts.Dir, err)
		}
		state, err = load(db)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("load %s: %w", opts.Dir, err)
		}
		s.db = db
		s.syncq = make(chan flight, 64)
		s.writerWG.Add(2)
		go s.writer()
		go s.syncer()
	}
	s.head, s.published = state, state
	s.hist.base = state.Revision()
	s.expiry.rebuild(state)
	return s, nil
}

// Close stops the store after every commit already evaluated is durable (or
// failed). Commits after Close return ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	s.mu.Lock()
	s.closing = true
	if s.err == nil {
		s.err = ErrClosed
	}
	s.mu.Unlock()
	s.signal()
	s.writerWG.Wait()
	// Everything evaluated is published (or failed): wake the watchers
	// blocked in Next, which now see ErrClosed once they have it all.
	s.mu.Lock()
	s.closed = true
	close(s.pubCh)
	s.pubCh = make(chan struct{})
	s.mu.Unlock()
	if s.db != nil {
		return s.db.Close()
	}
	return nil
}

// Snapshot returns the newest durable state. It is immutable and shared:
// taking it costs a lock and a pointer copy.
func (s *Store) Snapshot() *txn.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published
}

// Revision returns the newest durable revision.
func (s *Store) Revision() uint64 { return s.Snapshot().Revision() }

// Policy returns the store's policy.
func (s *Store) Policy() Policy { return s.opts.Policy }

// Commit evaluates tx against the newest state and, if anything committed,
// returns once it is durable. The result's outcomes say which operations
// committed and why the others conflicted. An error means nothing changed:
// bad input (errors.Is with the txn.Err* sentinels), ErrRejected, ErrClosed,
// or ErrFailed (the write failed; the store is stopped, and whether the
// commit survives is known only after reopening).
//
// A transaction is evaluated against the newest state, including
// revisions not yet durable, so committers pipeline behind one sync. A
// conflict (or an error such as ErrAlreadyExists) may therefore be caused by
// a revision that a crash then loses; such a result is conservative, and the
// client's retry sees the state as it is. Result.Base names the revision
// evaluated against: a client that syncs to it has seen the cause.
//
// Commit takes ownership of the objects in tx's Create and Put operations.
// It blocks for at most one group sync; it does not watch ctx once the
// transaction is evaluated, because by then the outcome is decided.
func (s *Store) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	if tx == nil {
		return txn.Result{}, fmt.Errorf("%w: nil transaction", txn.ErrInvalid)
	}
	return s.commit(ctx, func(*txn.State) *txn.Txn { return tx })
}

// commit is Commit with the transaction built under the commit lock from the
// newest state (build may return nil: nothing to do).
func (s *Store) commit(ctx context.Context, build func(head *txn.State) *txn.Txn) (txn.Result, error) {
	if err := ctx.Err(); err != nil {
		return txn.Result{}, err
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return txn.Result{}, err
	}
	tx := build(s.head)
	if tx == nil {
		s.mu.Unlock()
		return txn.Result{}, nil
	}
	if err := s.opts.Policy.Admit(s.head, tx); err != nil {
		s.mu.Unlock()
		return txn.Result{}, err
	}
	res, ws, err := s.scratch.EvaluateRules(s.head, tx, s.head.Revision()+1, s.opts.Limits, s.rules)
	if err != nil || ws == nil {
		s.mu.Unlock()
		return res, err
	}
	next := s.head.Apply(ws)
	if s.opts.CheckInvariants {
		if err := txn.CheckInvariants(next); err != nil {
			s.mu.Unlock()
			panic(fmt.Sprintf("store: invariant broken at revision %d: %v", ws.Revision, err))
		}
	}
	s.head = next
	s.expiry.note(ws)
	if s.db == nil {
		s.publishLocked(ws, next)
		s.mu.Unlock()
		return res, nil
	}
	p := &pending{ws: ws, state: next, done: make(chan struct{})}
	s.queue = append(s.queue, p)
	s.mu.Unlock()

	// Encode outside the lock, so committers encode in parallel; the writer
	// takes batches strictly in revision order.
	b := s.db.NewBatchWithSize(192 * (len(ws.Changes) + 1))
	encErr := EncodeWriteSet(b, ws)
	s.mu.Lock()
	p.batch, p.ready = b, true
	if encErr != nil {
		// Unreachable from input: Evaluate validated everything the encoder
		// checks (txn/validate.go), and FuzzCommit holds the store to never
		// stopping. If it happens it is a bug, and the state installed
		// above cannot be taken back from the committers evaluated on it.
		s.failLocked(fmt.Errorf("%w: %v", ErrFailed, encErr))
	}
	s.mu.Unlock()
	s.signal()
	<-p.done
	if p.err != nil {
		return txn.Result{}, p.err
	}
	return res, nil
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writer makes queued batches durable in revision order, as many ready ones
// per sync as there are. It hands each group to pebble without waiting for
// the sync (pebble appends it to the WAL and the memtable in the order
// given), then goes on with the next group while the syncer waits for the
// sync and publishes: the fsync of one group overlaps the memtable inserts
// of the next.
func (s *Store) writer() {
	defer s.writerWG.Done()
	defer close(s.syncq)
	for {
		s.mu.Lock()
		n := 0
		for n < len(s.queue) && s.queue[n].ready {
			n++
		}
		if n == 0 {
			if s.closing && len(s.queue) == 0 {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			continue
		}
		group := s.queue[:n:n]
		s.queue = s.queue[n:]
		failed := s.err != nil && !errors.Is(s.err, ErrClosed)
		s.mu.Unlock()

		f := flight{group: group}
		if failed {
			f.err = ErrFailed
		} else {
			f.err = s.write(group)
		}
		s.syncq <- f
	}
}

// flight is a group handed to pebble and waiting for its sync.
type flight struct {
	group []*pending
	err   error // the write failed; nothing to wait for
}

// syncer waits, group after group in order, for each group's sync, and
// publishes it (or fails it).
func (s *Store) syncer() {
	defer s.writerWG.Done()
	for f := range s.syncq {
		err := f.err
		if err == nil {
			if werr := f.group[0].batch.SyncWait(); werr != nil {
				err = fmt.Errorf("%w: sync revisions %d..%d: %v", ErrFailed, f.group[0].ws.Revision, f.group[len(f.group)-1].ws.Revision, werr)
			}
		}
		s.mu.Lock()
		if err != nil {
			s.failLocked(err)
			for _, p := range f.group {
				p.err = s.err
			}
		} else {
			for _, p := range f.group {
				s.publishLocked(p.ws, p.state)
			}
		}
		s.mu.Unlock()
		for _, p := range f.group {
			p.batch.Close()
			close(p.done)
		}
	}
}

// write merges a group into its first batch and hands it to pebble, which
// appends it to the WAL and the memtable; the syncer waits for the sync.
func (s *Store) write(group []*pending) error {
	b := group[0].batch
	for _, p := range group[1:] {
		if err := b.Apply(p.batch, nil); err != nil {
			return fmt.Errorf("%w: merge batch of revision %d: %v", ErrFailed, p.ws.Revision, err)
		}
	}
	if err := s.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		return fmt.Errorf("%w: write revisions %d..%d: %v", ErrFailed, group[0].ws.Revision, group[len(group)-1].ws.Revision, err)
	}
	return nil
}

// failLocked stops the store: later commits fail, and so do queued ones.
func (s *Store) failLocked(err error) {
	if s.err == nil || errors.Is(s.err, ErrClosed) {
		s.log.Error("store stopped", "err", err)
		s.err = err
	}
}

func (s *Store) publishLocked(ws *txn.WriteSet, state *txn.State) {
	s.published = state
	s.hist.add(ws, s.opts.HistoryChanges)
	close(s.pubCh)
	s.pubCh = make(chan struct{})
}

// WaitFor blocks until revision rev is published (durable) and returns the
// newest durable state then. It fails if rev was never assigned and the
// store cannot reach it (closed or failed), or with ctx's error.
func (s *Store) WaitFor(ctx context.Context, rev uint64) (*txn.State, error) {
	for {
		s.mu.Lock()
		st, ch := s.published, s.pubCh
		head, err := s.head.Revision(), s.err
		s.mu.Unlock()
		if st.Revision() >= rev {
			return st, nil
		}
		if rev > head {
			return nil, fmt.Errorf("%w: wait for revision %d, store is at %d", txn.ErrFutureRevision, rev, head)
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
