package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A checkpoint reaches pebble as sstables, ingested. The records come out
// of encodeCheckpoint in key order within each key prefix, so the
// checkpoint writes one table per prefix it has records for (machines,
// jobs, tasks, task statuses, and the revision record) straight to files
// and ingests them together, atomically. Nothing goes through pebble's
// memtables: no skiplist inserts, no flush that sorts them again, and no
// memtable arenas (outside the Go heap, so RSS) while a checkpoint of a
// million objects runs. The tables' key ranges are disjoint (one prefix
// each), as ingestion requires; an ingested table usually lands in L0,
// since its range overlaps what pebble holds, and compactions take it
// down from there.

// ingestDirName is the directory, inside the store's, where a checkpoint
// writes its tables before pebble ingests them (pebble links them into
// its own directory and removes the names here). A crash leaves at most
// one checkpoint's tables there, removed at the next open.
const ingestDirName = "checkpoint"

// ingestSink writes a checkpoint's records to one sstable per key prefix
// and ingests them at finish.
type ingestSink struct {
	fs    vfs.FS
	dir   string
	wo    sstable.WriterOptions
	db    *pebble.DB
	rev   uint64
	open  map[byte]*sstable.Writer // by key prefix; each takes its keys in order
	paths []string
}

// newIngestSink makes the sink of the checkpoint at revision rev. Its
// tables' names carry rev, so no checkpoint's table ever has the name of
// an earlier one's (whose file pebble may still hold, linked).
func newIngestSink(fs vfs.FS, dir string, db *pebble.DB, po *pebble.Options, rev uint64) *ingestSink {
	return &ingestSink{fs: fs, dir: dir, db: db, rev: rev, wo: po.MakeWriterOptions(0, db.TableFormat()), open: map[byte]*sstable.Writer{}}
}

func (k *ingestSink) writer(prefix byte) (*sstable.Writer, error) {
	if w := k.open[prefix]; w != nil {
		return w, nil
	}
	path := k.fs.PathJoin(k.dir, fmt.Sprintf("%016x-%c.sst", k.rev, prefix))
	f, err := k.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), k.wo)
	k.paths = append(k.paths, path)
	k.open[prefix] = w
	return w, nil
}

func (k *ingestSink) write(recs []record, vals []byte) error {
	for i := range recs {
		r := &recs[i]
		w, err := k.writer(r.key[0])
		if err != nil {
			return err
		}
		if r.del {
			err = w.Delete(r.key[:])
		} else {
			err = w.Set(r.key[:], vals[r.off:r.end])
		}
		if err != nil {
			return fmt.Errorf("write %q to the checkpoint's table: %w", r.key[0], err)
		}
	}
	return nil
}

// finish adds the revision record, closes the tables (each synced as it
// closes) and ingests them: pebble holds the checkpoint, durably, once
// Ingest returns.
func (k *ingestSink) finish() error {
	w, err := k.writer(prefixRevision)
	if err != nil {
		return err
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], k.rev)
	if err := w.Set(revisionKey, b[:]); err != nil {
		return err
	}
	if err := k.closeAll(); err != nil {
		return err
	}
	slices.Sort(k.paths)
	if err := k.db.Ingest(context.Background(), k.paths); err != nil {
		return fmt.Errorf("ingest %d tables: %w", len(k.paths), err)
	}
	k.paths = k.paths[:0] // pebble removed them, keeping its links
	return nil
}

// closeAll closes every open table.
func (k *ingestSink) closeAll() error {
	var errs []error
	for p, w := range k.open {
		if err := w.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the checkpoint's %q table: %w", p, err))
		}
		delete(k.open, p)
	}
	return errors.Join(errs...)
}

// abort drops an unfinished checkpoint's tables.
func (k *ingestSink) abort() {
	for p, w := range k.open {
		w.Close() // its error does not matter: the table is removed
		delete(k.open, p)
	}
	for _, p := range k.paths {
		k.fs.Remove(p) // what is left, the next open removes
	}
	k.paths = k.paths[:0]
}

// clearIngestDir makes the ingest directory and removes what a crash left
// in it.
func clearIngestDir(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, n := range names {
		if err := fs.Remove(fs.PathJoin(dir, n)); err != nil {
			return fmt.Errorf("remove %s left by a checkpoint a crash cut short: %w", fs.PathJoin(dir, n), err)
		}
	}
	return nil
}
