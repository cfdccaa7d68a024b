package store

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omega-cell/omega/txn"
)

// openDurable opens pebble in the store's directory, migrates or refuses
// another on-disk format, replays the log after pebble's checkpoint, starts
// a new log, and loads the state. It starts the writer, the syncer and the
// checkpointer.
func (s *Store) openDurable() (*txn.State, error) {
	opts := &s.opts
	po := opts.storePebbleOptions()
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("open pebble in %s: %w", opts.Dir, err)
	}
	fail := func(err error) (*txn.State, error) {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", opts.Dir, err)
	}
	if err := checkFormat(db, opts.Dir, s.log); err != nil {
		return fail(err)
	}
	rev, err := readRevision(db)
	if err != nil {
		return fail(err)
	}
	// The log goes to the filesystem itself, not to pebble's wrapping of it
	// (whose health check refuses a write while a sync is in flight, which
	// is the log's pipeline).
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	logDir := fs.PathJoin(opts.Dir, logDirName)
	if err := fs.MkdirAll(logDir, 0o755); err != nil {
		return fail(fmt.Errorf("make the log directory: %w", err))
	}
	if err := syncFSDir(fs, opts.Dir); err != nil { // the log directory outlives a crash
		return fail(err)
	}
	last, err := replayLog(fs, logDir, rev, applyToPebble(db))
	if err != nil {
		return fail(err)
	}
	if last != rev {
		if err := db.Flush(); err != nil {
			return fail(fmt.Errorf("flush revisions %d..%d replayed from the log: %w", rev+1, last, err))
		}
		s.log.Info("replayed the store's log", "dir", opts.Dir, "from", rev+1, "to", last)
	}
	ingestDir := fs.PathJoin(opts.Dir, ingestDirName)
	if err := clearIngestDir(fs, ingestDir); err != nil {
		return fail(err)
	}
	lw, segs, err := startLog(fs, logDir, last+1, opts.LogSegmentBytes)
	if err != nil {
		return fail(err)
	}
	state, err := load(db)
	if err != nil {
		lw.f.Close()
		db.Close()
		return nil, fmt.Errorf("load %s: %w", opts.Dir, err)
	}
	s.db, s.po, s.lw, s.segments = db, po, lw, segs
	s.ingestFS, s.ingestDir = fs, ingestDir
	s.made.ckRev.Store(state.Revision())
	s.syncq = make(chan flight, 64)
	s.ckWake = make(chan struct{}, 1)
	s.writerWG.Add(2)
	go s.writer()
	go s.syncer()
	s.ckWG.Add(1)
	go s.checkpointer()
	return state, nil
}

// checkpointChunk is how many objects a checkpoint encodes before it hands
// their records (about 400 KB) to its tables: the memory it holds at once.
const checkpointChunk = 1_000

// checkpointer writes a checkpoint each time the syncer says the log has
// grown by CheckpointBytes since the last one began.
func (s *Store) checkpointer() {
	defer s.ckWG.Done()
	for range s.ckWake {
		if s.failed() {
			continue
		}
		if err := s.checkpoint(); err != nil {
			s.mu.Lock()
			s.failLocked(fmt.Errorf("%w: %v", ErrFailed, err))
			s.mu.Unlock()
		}
	}
}

// checkpoint brings pebble to the newest durable state: what the
// revisions since the last checkpoint changed, each object once as it is
// now (encodeCheckpoint), written as sstables and ingested (ingest.go);
// then the log segments wholly within it are removed. A crash before the
// ingest ends leaves the checkpoint before, and the log still holds every
// revision after it.
func (s *Store) checkpoint() error {
	start := time.Now() // for LogStats only: the checkpoint decides nothing by it
	s.mu.Lock()
	st, tl := s.published, s.touched
	s.touched = touchList{}
	s.logSince = 0
	s.mu.Unlock()
	ts := tl.flat() // the blocks go with tl
	from := s.made.ckRev.Load()
	if st.Revision() == from {
		return nil
	}
	sink := newIngestSink(s.ingestFS, s.ingestDir, s.db, s.po, st.Revision())
	err := s.ckEnc.encodeCheckpoint(sink, checkpointChunk, from, st, ts)
	s.ckEnc.shrink()
	if err != nil {
		sink.abort()
		return fmt.Errorf("checkpoint at revision %d: %w", st.Revision(), err)
	}
	s.made.checkpoints.Add(1)
	s.made.ckRev.Store(st.Revision())
	s.made.ckNanos.Store(int64(time.Since(start)))
	s.mu.Lock()
	// Every record of a segment is at or below the checkpoint when the
	// next segment starts at or below the revision after it; the newest
	// segment is never removed.
	n := 0
	for n+1 < len(s.segments) && s.segments[n+1].first <= st.Revision()+1 {
		n++
	}
	drop := append([]segment(nil), s.segments[:n]...)
	s.segments = append(s.segments[:0], s.segments[n:]...)
	s.mu.Unlock()
	fs := s.lw.fs
	for _, sg := range drop {
		if err := fs.Remove(fs.PathJoin(s.lw.dir, sg.name)); err != nil {
			return fmt.Errorf("remove log segment %s after the checkpoint at revision %d: %w", sg.name, st.Revision(), err)
		}
	}
	return nil
}

// LogStats describes the store's log and its checkpoints.
type LogStats struct {
	// Checkpoints written since the store opened.
	Checkpoints int64
	// CheckpointRevision is the revision pebble's checkpoint holds.
	CheckpointRevision uint64
	// LastCheckpoint is how long the last checkpoint took (zero before
	// the first).
	LastCheckpoint time.Duration
	// Segments is the number of log segment files; BytesSinceCheckpoint
	// the log bytes published since the last checkpoint began.
	Segments             int
	BytesSinceCheckpoint int64
}

// LogStats returns the log's statistics (zero for a store without
// durability).
func (s *Store) LogStats() LogStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return LogStats{}
	}
	return LogStats{
		Checkpoints:          s.made.checkpoints.Load(),
		CheckpointRevision:   s.made.ckRev.Load(),
		LastCheckpoint:       time.Duration(s.made.ckNanos.Load()),
		Segments:             len(s.segments),
		BytesSinceCheckpoint: s.logSince,
	}
}

// checkpointSink takes a checkpoint's records: chunk by chunk, each
// chunk's sorted by key, and every chunk's keys of one prefix after the
// chunk before's; finish adds the revision record (the sink knows the
// revision it checkpoints) and makes it all durable.
type checkpointSink interface {
	write(recs []record, vals []byte) error
	finish() error
}

// encodeCheckpoint hands out the records that bring the checkpoint at
// revision from to cur, whose revisions after from touched the objects in
// ts (in revision order): each object once, as it is in cur, and cur's
// revision record. An object created and deleted since from costs nothing,
// and a task created before from and changed since costs its status
// record only. ts is sorted in place.
//
// It hands the records to out in chunks of about chunk objects, so the
// memory it holds is a chunk's, and the revision record last. The touched
// list is in (kind, uid) order, and a uid's records are all in one chunk,
// so each key prefix's records come out in key order across the chunks:
// what an sstable writer needs.
func (e *encoder) encodeCheckpoint(out checkpointSink, chunk int, from uint64, cur *txn.State, ts []touch) error {
	e.reset(min(len(ts), 2*chunk))
	e.radix = sortTouches(ts, e.radix)
	objects, warmedTo := 0, 0
	for i := 0; i < len(ts); {
		if i >= warmedTo {
			// The tasks ahead, walked side by side (txn.State.WarmTasks):
			// the lookups below then find them in the cache.
			e.warm = e.warm[:0]
			for warmedTo = i; warmedTo < len(ts) && len(e.warm) < checkpointWarm; warmedTo++ {
				if w := &ts[warmedTo]; w.kind == prefixTask && (len(e.warm) == 0 || e.warm[len(e.warm)-1] != w.uid) {
					e.warm = append(e.warm, w.uid)
				}
			}
			e.warmed += cur.WarmTasks(e.warm)
		}
		if objects == chunk {
			if err := out.write(e.sorted(), e.vals); err != nil {
				return err
			}
			e.reset(2 * chunk)
			objects = 0
		}
		objects++
		t := ts[i]
		// Its first touch since from says whether the checkpoint has it.
		newSince := t.created
		for i < len(ts) && ts[i].kind == t.kind && ts[i].uid == t.uid {
			i++
		}
		var err error
		switch t.kind {
		case prefixTask:
			task, ok := cur.Task(t.uid)
			switch {
			case !ok:
				if !newSince {
					e.del(prefixTask, t.uid)
					e.del(prefixStatus, t.uid) // it may have one: a tombstone either way
				}
			case task.CreateRev > from:
				// This incarnation is new since the checkpoint: its task
				// record, and its status record if it changed since its
				// creation (else no status record of an earlier
				// incarnation may stay).
				if err = e.taskRecord(task, task.CreateRev); err != nil {
					break
				}
				if task.Version != task.CreateRev {
					e.status(task)
				} else if !newSince {
					e.del(prefixStatus, t.uid)
				}
			default:
				e.status(task)
			}
		case prefixJob:
			job, ok := cur.Job(t.uid)
			switch {
			case ok:
				err = e.marshal(prefixJob, t.uid, job.Proto())
			case !newSince:
				e.del(prefixJob, t.uid)
			}
		case prefixQuota:
			q, ok := cur.Quota(t.uid)
			switch {
			case ok:
				err = e.marshal(prefixQuota, t.uid, q.Proto())
			case !newSince:
				e.del(prefixQuota, t.uid)
			}
		case prefixLease:
			l, ok := cur.Lease(t.uid)
			switch {
			case ok:
				err = e.marshal(prefixLease, t.uid, l.Proto())
			case !newSince:
				e.del(prefixLease, t.uid)
			}
		case prefixOffer:
			o, ok := cur.Offer(t.uid)
			switch {
			case ok:
				err = e.marshal(prefixOffer, t.uid, o.Proto())
			case !newSince:
				e.del(prefixOffer, t.uid)
			}
		case prefixMachine:
			m, ok := cur.Machine(t.uid)
			switch {
			case ok:
				err = e.machine(m)
			case !newSince:
				e.del(prefixMachine, t.uid)
			}
		}
		if err != nil {
			return fmt.Errorf("checkpoint from revision %d to %d: %w", from, cur.Revision(), err)
		}
	}
	if err := out.write(e.sorted(), e.vals); err != nil {
		return err
	}
	return out.finish()
}

// checkpointWarm is how many tasks a checkpoint warms at a time.
const checkpointWarm = 64
