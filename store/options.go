package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omega-cell/omega/txn"
)

// Durability says when a commit is acknowledged.
type Durability int

const (
	// DurabilitySync acknowledges a commit once its records are in the
	// store's log on stable storage (fdatasync); concurrent commits share
	// one write and one sync, and pebble holds the checkpoints. The
	// default for a server.
	DurabilitySync Durability = iota
	// DurabilityNone keeps the state in memory only (no pebble at all): for
	// simulation, where the store's semantics matter and its disk does not.
	DurabilityNone
)

func (d Durability) String() string {
	switch d {
	case DurabilitySync:
		return "sync"
	case DurabilityNone:
		return "none"
	}
	return fmt.Sprintf("durability(%d)", int(d))
}

// ParseDurability parses "sync" or "none".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "sync":
		return DurabilitySync, nil
	case "none":
		return DurabilityNone, nil
	}
	return 0, fmt.Errorf("durability %s: want sync or none", txn.Quote(s))
}

// Options configures a Store. Start from DefaultOptions.
type Options struct {
	// Dir is the pebble directory. Required with DurabilitySync.
	Dir string
	// FS is the filesystem pebble uses. Default vfs.Default; tests pass
	// vfs.NewMem() or vfs.NewCrashableMem().
	FS vfs.FS
	// Durability: DurabilitySync (default) or DurabilityNone.
	Durability Durability
	// Policy decides what the store checks beyond the transaction rules.
	// Default Raw() (Omega: expose the raw state).
	Policy Policy
	// Limits bounds one transaction and what it carries. Each zero field
	// takes its default from txn.DefaultLimits(), where each default's
	// reason is given.
	Limits txn.Limits
	// HistoryChanges bounds the changes kept for watchers, counted over
	// whole revisions (the newest revision is always kept). A watcher that
	// falls further behind gets ErrCompacted and re-lists. Default (and
	// when zero) 200,000: about a thousand scheduler commits, tens of MB.
	HistoryChanges int
	// Retention is how long terminal tasks and finished jobs stay in the
	// live state before Expire deletes them, on the store's clock: counted
	// from the first Expire that saw them terminal, never from a
	// committer's finish time. DefaultOptions sets 15 minutes: long enough
	// for every component to see the outcome. Zero (an Options built by
	// hand) deletes them at the first Expire that sees them.
	Retention time.Duration
	// JobsManaged says a job controller writes every job's status in this
	// cell (the server and the simulation run one). Retention then holds a
	// terminal task of a job whose status was never written, as it holds
	// one whose status was written from a view without the task's end, so
	// a controller that was down or behind for longer than the window
	// still finds the task to count. Off, a job never written is taken to
	// have no controller, and its tasks expire on the window alone.
	JobsManaged bool
	// MemTableSize is pebble's memtable size. Default 64 MiB. The store's
	// checkpoints are ingested and never pass through a memtable; what
	// does is the log replayed at an open (flushed at its end), and every
	// commit of the benchmark's raw-pebble baseline, which uses it too
	// (with pebble's 4 MiB default that baseline stalls on rotation).
	MemTableSize uint64
	// CheckpointBytes is how much log the store writes between two
	// checkpoints of its state into pebble. Default 256 MiB: a checkpoint
	// writes each object changed since the last one once, as it is now, so
	// a longer interval writes less (an object created and deleted within
	// it costs nothing) but leaves more log to replay at an open after a
	// crash (a clean Close checkpoints, and the next open replays nothing).
	// The store keeps 24 bytes a change in memory until the checkpoint.
	CheckpointBytes int64
	// LogSegmentBytes is the size at which the log starts a new segment
	// file; a checkpoint removes the segments it covers. Default 64 MiB.
	LogSegmentBytes int64
	// CheckInvariants runs txn.CheckInvariants after every commit and fails
	// the commit path if it breaks. A full scan: for tests only.
	CheckInvariants bool
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Replicator, if set, makes this store one member's copy of a
	// replicated cell (replica): Commit (and Expire's deletions) go to the
	// Replicator, which answers once the write set is committed by a
	// majority and applied, and the member installs every committed write
	// set (Install) before it answers. The store evaluates nothing itself
	// and keeps no log (DurabilityNone): raft's log is the durable one.
	Replicator Replicator

	// checkpointInline makes the syncer write each checkpoint itself, when
	// it is due, instead of waking the checkpointer: tests that need
	// checkpoints at known points of a history.
	checkpointInline bool
}

// DefaultOptions returns the defaults for a durable store in dir.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:             dir,
		Durability:      DurabilitySync,
		Policy:          Raw(),
		Limits:          txn.DefaultLimits(),
		HistoryChanges:  200_000,
		Retention:       15 * time.Minute,
		MemTableSize:    64 << 20,
		CheckpointBytes: 256 << 20,
		LogSegmentBytes: 64 << 20,
	}
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	if o.Replicator != nil && o.Durability != DurabilityNone {
		return fmt.Errorf("store options: a replicated store (Replicator) keeps no log of its own: want DurabilityNone")
	}
	switch o.Durability {
	case DurabilitySync:
		if o.Dir == "" {
			return errors.New("store options: Dir is required with durability sync")
		}
	case DurabilityNone:
	default:
		return fmt.Errorf("store options: unknown Durability %d", o.Durability)
	}
	if o.HistoryChanges < 0 {
		return fmt.Errorf("store options: HistoryChanges %d is negative", o.HistoryChanges)
	}
	if o.Retention < 0 {
		return fmt.Errorf("store options: Retention %v is negative", o.Retention)
	}
	if o.CheckpointBytes < 0 || o.LogSegmentBytes < 0 {
		return fmt.Errorf("store options: CheckpointBytes %d and LogSegmentBytes %d must not be negative", o.CheckpointBytes, o.LogSegmentBytes)
	}
	if o.MemTableSize >= 4<<30 {
		return fmt.Errorf("store options: MemTableSize %d: pebble takes less than 4 GiB", o.MemTableSize)
	}
	if err := o.Limits.Validate(); err != nil {
		return fmt.Errorf("store options: %w", err)
	}
	return nil
}

// PebbleOptions returns the pebble options the store opens its database
// with; the raw-pebble baseline of the benchmark uses the same.
func (o *Options) PebbleOptions() *pebble.Options {
	po := &pebble.Options{FS: o.FS}
	if o.MemTableSize > 0 {
		po.MemTableSize = o.MemTableSize
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	po.Logger = pebbleLogger{lg}
	po.EnsureDefaults()
	return po
}

// storePebbleOptions are PebbleOptions without pebble's WAL: the store's
// own log is its write-ahead log, and pebble holds checkpoints, each
// ingested as sstables (durable once Ingest returns).
func (o *Options) storePebbleOptions() *pebble.Options {
	po := o.PebbleOptions()
	po.DisableWAL = true
	// An ingest that overlaps a memtable waits for its flush instead of
	// joining the flush queue: without a WAL, a queued ingest would not be
	// durable when Ingest returns, and the checkpoint then drops log
	// segments. (Nothing writes to pebble's memtables while the store runs,
	// so the case does not arise today; this keeps it from arising.)
	po.Experimental.DisableIngestAsFlushable = func() bool { return true }
	return po
}

// pebbleLogger sends pebble's log to slog: its chatter at debug level, its
// errors at error level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// Replicator commits a transaction in a replicated cell (replica/live's
// driver, forwarding to the leader when it is not one).
type Replicator interface {
	Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error)
}
