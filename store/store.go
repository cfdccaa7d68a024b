// Package store is omega's cell-state store: the authoritative state of a
// cell in memory (an immutable txn.State per revision, indexed for O(1)-ish
// fit checks), made durable by a log of its own with pebble holding
// checkpoints, with a global revision and a watch.
//
// A commit is validate → apply → encode: txn.Evaluate decides the
// transaction against the newest state, the store assigns the next
// revision and encodes the write set as a log record into the log's
// buffer, all under the commit lock (encoding costs a tenth of evaluating;
// done outside it, in parallel, a committer descheduled before it finished
// held up every revision after its own), and the single writer appends
// everything buffered, in revision order, to the store's own log (wal.go)
// with one write. A syncer makes each group durable with one fdatasync — concurrent
// committers share it — and only then publishes the revisions: to
// Snapshot, to watchers, and to the committers waiting in Commit. A
// revision is never visible before it is durable, so a crash never takes
// back a revision anyone has seen, and a crash leaves a prefix of
// revisions.
//
// Pebble is not on that path. It holds a checkpoint (checkpoint.go): every
// so many bytes of log, the checkpointer writes what changed since the last
// checkpoint, each object once as it is now, as sstables that pebble
// ingests (ingest.go), and drops the log segments it covers. Opening
// replays the log after the checkpoint.
//
// The stages overlap: evaluation runs against the newest state, durable or
// not, and the writer appends the next group while the previous one's
// fsync is in flight. If a write fails the store stops: every
// unacknowledged commit fails with ErrFailed and so does every later one;
// reopening rebuilds the durable state.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

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
	po   *pebble.Options
	// ingestFS and ingestDir: where checkpoints write their tables.
	ingestFS  vfs.FS
	ingestDir string
	log       *slog.Logger

	mu        sync.Mutex
	rules     txn.Rules     // the policy's per-operation rules; nil for raw
	head      *txn.State    // newest state, maybe not yet durable
	scratch   txn.Scratch   // evaluation buffers, reused under mu
	published *txn.State    // newest durable state
	queue     []*pending    // evaluated and encoded, not yet written, in revision order
	logBuf    []byte        // the queue's log records, in revision order
	spareBuf  []byte        // the writer's last buffer, written, for the next logBuf
	encBatch  pebble.Batch  // the commit's records, reused under mu
	wake      chan struct{} // signals the writer (capacity 1)
	syncq     chan flight   // groups written, waiting for their sync, in order
	lw        *logWriter    // the writer goroutine's
	segments  []segment     // the log's segments, oldest first
	logSince  int64         // log bytes published since the last checkpoint began
	ckWake    chan struct{} // signals the checkpointer (capacity 1); closed by Close
	ckEnc     encoder       // the checkpointer's
	touched   touchList     // the objects published revisions changed since the last checkpoint began
	ckWG      sync.WaitGroup
	// made counts the checkpoints written and the log segments made, and
	// keeps the revision pebble holds (the checkpointer's "from") and the
	// last checkpoint's duration.
	made struct {
		checkpoints, segments, ckNanos atomic.Int64
		ckRev                          atomic.Uint64
	}
	pubCh     chan struct{} // closed and replaced on every publication
	hist      history
	expiry    expiryQueue
	err       error // sticky: ErrFailed or ErrClosed
	writerWG  sync.WaitGroup
	closing   bool
	expireMu  sync.Mutex // serializes Expire
	expireOps []txn.Op   // Expire's deletions, reused (under expireMu)
	closeOnce sync.Once  // a second Close waits for the first and returns its error
	closeErr  error
	closed    bool // Close finished publishing: nothing more will be published
}

type pending struct {
	ws    *txn.WriteSet
	state *txn.State
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
	def := DefaultOptions("")
	if opts.HistoryChanges == 0 {
		opts.HistoryChanges = def.HistoryChanges
	}
	if opts.CheckpointBytes == 0 {
		opts.CheckpointBytes = def.CheckpointBytes
	}
	if opts.LogSegmentBytes == 0 {
		opts.LogSegmentBytes = def.LogSegmentBytes
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
		var err error
		if state, err = s.openDurable(); err != nil {
			return nil, err
		}
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
	var err error
	if s.db != nil {
		close(s.ckWake)
		s.ckWG.Wait()
		// A last checkpoint, so that the next open replays nothing; a
		// store that failed says so.
		s.mu.Lock()
		failed := s.failedLocked()
		if failed {
			err = s.err
		}
		s.mu.Unlock()
		if !failed {
			err = s.checkpoint()
		}
		err = errors.Join(err, s.lw.f.Close())
	}
	// Everything evaluated is published (or failed): wake the watchers
	// blocked in Next, which now see ErrClosed once they have it all.
	s.mu.Lock()
	s.closed = true
	close(s.pubCh)
	s.pubCh = make(chan struct{})
	s.mu.Unlock()
	if s.db != nil {
		err = errors.Join(err, s.db.Close())
	}
	return err
}

// failed reports whether the store stopped on an error (not on Close).
func (s *Store) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failedLocked()
}

func (s *Store) failedLocked() bool { return s.err != nil && !errors.Is(s.err, ErrClosed) }

// Snapshot returns the newest durable state. It is immutable and shared:
// taking it costs a lock and a pointer copy.
func (s *Store) Snapshot() *txn.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published
}

// Revision returns the newest durable revision.
func (s *Store) Revision() uint64 { return s.Snapshot().Revision() }

// Limits returns the bounds the store holds transactions to (its
// Options.Limits, each zero field at its default).
func (s *Store) Limits() txn.Limits { return s.opts.Limits }

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
	if s.opts.Replicator != nil {
		return s.opts.Replicator.Commit(ctx, tx)
	}
	return s.commit(ctx, func(*txn.State) *txn.Txn { return tx })
}

// Install publishes a write set a replicated cell committed, with the
// state it makes (the member's applied state: st is ws applied to the
// store's newest), to Snapshot, watchers and retention, as a commit of
// the store's own would be. The member calls it in revision order, before
// it answers the commit.
func (s *Store) Install(ws *txn.WriteSet, st *txn.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.head = st
	s.expiry.note(ws)
	s.publishLocked(ws, st)
}

// Reset replaces the whole state (a replicated member restored from a
// snapshot): watchers behind it re-list.
func (s *Store) Reset(st *txn.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head, s.published = st, st
	s.hist = history{base: st.Revision()}
	s.expiry.rebuild(st)
	close(s.pubCh)
	s.pubCh = make(chan struct{})
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
	if s.opts.Replicator != nil {
		tx := build(s.published)
		s.mu.Unlock()
		if tx == nil {
			return txn.Result{}, nil
		}
		return s.opts.Replicator.Commit(ctx, tx)
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
	s.encBatch.Reset()
	if err := EncodeWriteSet(&s.encBatch, ws); err != nil {
		// Unreachable from input: Evaluate validated everything the encoder
		// checks (txn/validate.go), and FuzzCommit holds the store to never
		// stopping. If it happens it is a bug, and the state installed
		// above cannot be taken back from the committers evaluated on it.
		s.failLocked(fmt.Errorf("%w: %v", ErrFailed, err))
	} else {
		s.logBuf = appendLogRecord(s.logBuf, ws.Revision, s.encBatch.Repr())
	}
	s.queue = append(s.queue, p)
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

// writer appends the queued revisions to the log in revision order, all
// of them with one write, and hands each group to the syncer without
// waiting for its sync: the fsync of one group overlaps the write of the
// next.
func (s *Store) writer() {
	defer s.writerWG.Done()
	defer close(s.syncq)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			if s.closing {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			continue
		}
		group, buf := s.queue, s.logBuf
		s.queue, s.logBuf = nil, s.spareBuf[:0]
		s.spareBuf = nil
		failed := s.failedLocked()
		s.mu.Unlock()

		f := flight{group: group}
		if failed {
			f.err = ErrFailed
		} else {
			f = s.write(group, buf)
			if f.err != nil {
				// Stop here, before the syncer sees it: a later group
				// written after this one would follow a gap (or a torn
				// record) in the log, and the log would not open.
				s.mu.Lock()
				s.failLocked(f.err)
				s.mu.Unlock()
			}
		}
		if cap(buf) <= 16<<20 { // a burst's buffer is not kept
			s.mu.Lock()
			s.spareBuf = buf[:0]
			s.mu.Unlock()
		}
		s.syncq <- f
	}
}

// flight is a group written to the log and waiting for its sync.
type flight struct {
	group []*pending
	file  vfs.File // the segment it was written to
	// closeBefore: the segment before file, synced whole by the writer,
	// to close once the groups written to it are published.
	closeBefore vfs.File
	bytes       int64
	err         error // the write failed; nothing to wait for
}

// syncer publishes the groups in order, each once it is synced. It takes
// every group written by the time it is free and syncs them with one
// fdatasync: a segment before the newest was synced whole by the writer
// when it made the next, so only the newest group's segment needs it.
func (s *Store) syncer() {
	defer s.writerWG.Done()
	var batch []flight
	for f := range s.syncq {
		batch = append(batch[:0], f)
	drain:
		for len(batch) < cap(s.syncq) {
			select {
			case g, ok := <-s.syncq:
				if !ok {
					break drain
				}
				batch = append(batch, g)
			default:
				break drain
			}
		}
		good := 0 // the groups before the first failed write
		for good < len(batch) && batch[good].err == nil {
			good++
		}
		var err error
		if good > 0 {
			last := batch[good-1]
			if serr := last.file.SyncData(); serr != nil {
				err = fmt.Errorf("%w: sync revisions %d..%d: %v", ErrFailed, batch[0].group[0].ws.Revision, last.group[len(last.group)-1].ws.Revision, serr)
				good = 0
			}
		}
		if err == nil && good < len(batch) {
			err = batch[good].err
		}
		var published int64
		s.mu.Lock()
		if good > 0 && s.failedLocked() {
			good = 0 // a write before these failed: they may follow a gap
		}
		for i, fl := range batch {
			if i < good {
				for _, p := range fl.group {
					s.publishLocked(p.ws, p.state)
					s.touched.add(p.ws)
				}
				published += fl.bytes
				continue
			}
			if err != nil {
				s.failLocked(err)
			}
			for _, p := range fl.group {
				p.err = s.err
			}
		}
		s.logSince += published
		checkpoint := s.logSince >= s.opts.CheckpointBytes
		s.mu.Unlock()
		for _, fl := range batch {
			if fl.closeBefore != nil {
				if cerr := fl.closeBefore.Close(); cerr != nil {
					s.log.Warn("close a log segment", "err", cerr)
				}
			}
			for _, p := range fl.group {
				close(p.done)
			}
		}
		switch {
		case checkpoint && s.opts.checkpointInline:
			if err := s.checkpoint(); err != nil {
				s.mu.Lock()
				s.failLocked(fmt.Errorf("%w: %v", ErrFailed, err))
				s.mu.Unlock()
			}
		case checkpoint:
			select {
			case s.ckWake <- struct{}{}:
			default:
			}
		}
	}
}

// write appends a group's records (buf) to the log with one write, making
// a new segment first when the newest is full.
func (s *Store) write(group []*pending, buf []byte) flight {
	f := flight{group: group}
	first, last := group[0].ws.Revision, group[len(group)-1].ws.Revision
	lw := s.lw
	if lw.size >= lw.segBytes {
		// The segment before the newest is synced whole before the newest
		// exists: only the newest can end in a torn record.
		if err := lw.f.SyncData(); err != nil {
			f.err = fmt.Errorf("%w: sync log segment before revision %d: %v", ErrFailed, first, err)
			return f
		}
		old := lw.f
		sg, err := lw.create(first)
		if err != nil {
			f.err = fmt.Errorf("%w: %v", ErrFailed, err)
			return f
		}
		f.closeBefore = old
		s.made.segments.Add(1)
		s.mu.Lock()
		s.segments = append(s.segments, sg)
		s.mu.Unlock()
	}
	f.file, f.bytes = lw.f, int64(len(buf))
	_, err := lw.f.Write(buf)
	lw.size += int64(len(buf))
	if err != nil {
		f.err = fmt.Errorf("%w: write revisions %d..%d to the log: %v", ErrFailed, first, last, err)
	}
	return f
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
