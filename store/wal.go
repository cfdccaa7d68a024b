package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The store's log: the write-ahead log of its revisions, in place of
// pebble's (the log-plus-state-machine shape of etcd's raft users: a log of
// the store's own, group-committed, and the state applied to pebble
// without pebble's WAL, checkpointed).
//
// It lives in Dir/log, in segments named by the first revision they hold
// (16 hex digits, ".log"). A segment is a sequence of records, one per
// revision, in revision order:
//
//	4 bytes  payload length n (little endian)
//	4 bytes  CRC-32C (Castagnoli) over the revision and the payload
//	8 bytes  revision (little endian)
//	n bytes  payload: the revision's records as a pebble batch (EncodeWriteSet)
//
// The writer appends every group of revisions with one write, and the syncer
// makes it durable with one fdatasync before any of them is published.
// Before a new segment is made, the one before it is synced whole, so only
// the newest segment can end in a torn record (a crash during a write that
// was never acknowledged); a bad record anywhere else is corruption.
//
// Pebble holds a checkpoint: the state at the revision of its "R" record,
// written as sstables and ingested (encodeCheckpoint and ingest.go: what
// changed since the last checkpoint, each object once). Opening replays
// the log's records after that revision into pebble, flushes, and starts a
// new log.
const (
	logDirName       = "log"
	logSuffix        = ".log"
	logHeaderSize    = 16
	maxLogRecordSize = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(first uint64) string { return fmt.Sprintf("%016x%s", first, logSuffix) }

// segment is one log file: the first revision it holds (or will hold).
type segment struct {
	name  string
	first uint64
}

// listSegments returns dir's segments, oldest first; names that are not
// segments are refused (the directory is the store's own).
func listSegments(fs vfs.FS, dir string) ([]segment, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var segs []segment
	for _, n := range names {
		hex, ok := strings.CutSuffix(n, logSuffix)
		first, perr := strconv.ParseUint(hex, 16, 64)
		if !ok || len(hex) != 16 || perr != nil {
			return nil, fmt.Errorf("%w: %s: %q is not a log segment", ErrCorrupt, dir, n)
		}
		segs = append(segs, segment{name: n, first: first})
	}
	slices.SortFunc(segs, func(a, b segment) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	return segs, nil
}

// appendLogRecord appends one revision's record to buf.
func appendLogRecord(buf []byte, rev uint64, payload []byte) []byte {
	var h [logHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(h[8:16], rev)
	crc := crc32.Update(0, castagnoli, h[8:16])
	crc = crc32.Update(crc, castagnoli, payload)
	binary.LittleEndian.PutUint32(h[4:8], crc)
	buf = append(buf, h[:]...)
	return append(buf, payload...)
}

// replayLog hands apply, in order, every record of the log in dir after
// revision from (the checkpoint's), and returns the last revision applied
// (from, if none). A record torn at the end of the newest segment ends the
// log; a bad record anywhere else, a gap between revisions, or a log that
// starts after from+1 is ErrCorrupt, naming the file and offset.
func replayLog(fs vfs.FS, dir string, from uint64, apply func(rev uint64, payload []byte) error) (last uint64, err error) {
	segs, err := listSegments(fs, dir)
	if err != nil {
		return from, err
	}
	last = from
	for i, sg := range segs {
		newest := i == len(segs)-1
		if !newest && segs[i+1].first <= from+1 {
			continue // wholly within the checkpoint
		}
		path := fs.PathJoin(dir, sg.name)
		// A segment holds the revisions from the one it is named by up to
		// the next segment's: one that starts past the revision after the
		// last replayed leaves a gap (a segment before it lost records, or
		// is missing).
		if sg.first > last+1 {
			return last, fmt.Errorf("%w: log segment %s starts at revision %d, but the log before it ends at %d: revisions %d..%d are missing", ErrCorrupt, path, sg.first, last, last+1, sg.first-1)
		}
		data, err := readFile(fs, path)
		if err != nil {
			return last, fmt.Errorf("read log segment %s: %w", path, err)
		}
		for off := 0; off < len(data); {
			rev, payload, n, rerr := parseLogRecord(data[off:])
			if rerr != nil {
				if newest {
					break // torn tail: never acknowledged
				}
				return last, fmt.Errorf("%w: log segment %s, offset %d: %v", ErrCorrupt, path, off, rerr)
			}
			off += n
			if rev <= last {
				if rev <= from {
					continue
				}
				return last, fmt.Errorf("%w: log segment %s, offset %d: revision %d after %d", ErrCorrupt, path, off-n, rev, last)
			}
			if rev != last+1 {
				return last, fmt.Errorf("%w: log segment %s, offset %d: revision %d follows %d: revisions %d..%d are missing", ErrCorrupt, path, off-n, rev, last, last+1, rev-1)
			}
			if err := apply(rev, payload); err != nil {
				return last, fmt.Errorf("replay revision %d from %s: %w", rev, path, err)
			}
			last = rev
		}
	}
	return last, nil
}

// parseLogRecord reads the record at the start of b: its revision, its
// payload and its length.
func parseLogRecord(b []byte) (rev uint64, payload []byte, n int, err error) {
	if len(b) < logHeaderSize {
		return 0, nil, 0, fmt.Errorf("%d bytes of a %d-byte record header", len(b), logHeaderSize)
	}
	size := binary.LittleEndian.Uint32(b[0:4])
	if size > maxLogRecordSize {
		return 0, nil, 0, fmt.Errorf("record of %d bytes", size)
	}
	if uint64(len(b)-logHeaderSize) < uint64(size) {
		return 0, nil, 0, fmt.Errorf("%d bytes of a %d-byte record", len(b)-logHeaderSize, size)
	}
	payload = b[logHeaderSize : logHeaderSize+int(size)]
	crc := crc32.Update(0, castagnoli, b[8:16])
	crc = crc32.Update(crc, castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(b[4:8]) {
		return 0, nil, 0, errors.New("checksum mismatch")
	}
	return binary.LittleEndian.Uint64(b[8:16]), payload, logHeaderSize + int(size), nil
}

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// logWriter appends to the newest segment. It belongs to the store's
// writer goroutine, but for segments, which the checkpointer prunes under
// the store's lock.
type logWriter struct {
	fs       vfs.FS
	dir      string
	segBytes int64
	f        vfs.File // the newest segment
	size     int64    // bytes in f
}

// startLog removes every segment in dir (all of them are in the checkpoint
// by now) and starts a new one at revision first.
func startLog(fs vfs.FS, dir string, first uint64, segBytes int64) (*logWriter, []segment, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("make the log directory %s: %w", dir, err)
	}
	old, err := listSegments(fs, dir)
	if err != nil {
		return nil, nil, err
	}
	w := &logWriter{fs: fs, dir: dir, segBytes: segBytes}
	seg, err := w.create(first)
	if err != nil {
		return nil, nil, err
	}
	for _, sg := range old {
		if sg.name == seg.name {
			continue // create truncated it
		}
		if err := fs.Remove(fs.PathJoin(dir, sg.name)); err != nil {
			w.f.Close()
			return nil, nil, fmt.Errorf("remove log segment %s: %w", sg.name, err)
		}
	}
	if err := syncFSDir(fs, dir); err != nil {
		w.f.Close()
		return nil, nil, err
	}
	return w, []segment{seg}, nil
}

// create makes the segment that starts at revision first the newest and
// syncs the directory, so that the file outlives a crash.
func (w *logWriter) create(first uint64) (segment, error) {
	sg := segment{name: segmentName(first), first: first}
	f, err := w.fs.Create(w.fs.PathJoin(w.dir, sg.name), vfs.WriteCategoryUnspecified)
	if err != nil {
		return sg, fmt.Errorf("create log segment %s: %w", sg.name, err)
	}
	// Its blocks are allocated now, not by each append.
	if err := f.Preallocate(0, w.segBytes); err != nil {
		f.Close()
		return sg, fmt.Errorf("preallocate log segment %s: %w", sg.name, err)
	}
	if err := syncFSDir(w.fs, w.dir); err != nil {
		f.Close()
		return sg, err
	}
	w.f, w.size = f, 0
	return sg, nil
}

func syncFSDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open %s to sync it: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// applyToPebble applies a replayed record's payload, a pebble batch's
// bytes, to db without its WAL (the open flushes after the replay).
func applyToPebble(db *pebble.DB) func(rev uint64, payload []byte) error {
	return func(rev uint64, payload []byte) error {
		b := db.NewBatch()
		defer b.Close()
		if err := b.SetRepr(slices.Clone(payload)); err != nil {
			return fmt.Errorf("%w: the record of revision %d is not a batch: %v", ErrCorrupt, rev, err)
		}
		return db.Apply(b, pebble.NoSync)
	}
}
