package store

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// A snapshot file holds a whole cell at one revision, apart from any store
// (`omega snapshot save` writes one from a running server, `omega snapshot
// restore` builds a new store from it). It does not depend on the store's
// on-disk format (FormatVersion): it carries a cell from a store of one
// format to a store of another. The layout, version 3 (versions 2 and 1,
// still read, have no leases — no 'l' record and four counts in the
// trailer — and version 1 no quotas either — no 'q' record, three counts):
//
//	header   "OMEGASNP" (8 bytes), the file's version (uint32, big endian),
//	         the cell's revision (uint64, big endian)
//	objects  one record per object: a kind byte ('m' machine, 'j' job,
//	         't' task, 'q' quota, 'l' lease), the length of what follows
//	         (uvarint), and the object's protobuf wire form (omegav1.Machine,
//	         Job, Task, Quota or Lease, as the gRPC Snapshot call lists them; a task's
//	         version is its meta's, and a machine's derived status is
//	         ignored)
//	trailer  'E', the number of machines, jobs, tasks, quotas and leases (uint64
//	         each, big endian), then the SHA-256 of every byte before it
//	         (32 bytes); nothing follows
//
// Outstanding offers (a two-level allocator's) are not written: a cell
// restored from a file has none, as a Mesos master's failover rescinds
// the offers it had made, and its frameworks ask again. Leases are
// written, at their versions: a scheduler still running renews its own, and
// one whose holder is gone expires as its readers judge it (from when they
// first saw it).
//
// A reader refuses a file with another magic or version, one that ends
// before its trailer or goes on after it, one whose checksum does not
// match, and one whose objects do not make a valid state (what a store
// refuses on reopen: txn.Restorer's checks).

// SnapshotMagic opens every snapshot file.
const SnapshotMagic = "OMEGASNP"

// SnapshotVersion is the snapshot file's layout this omega writes and
// reads.
const SnapshotVersion = 3

// ErrSnapshot: the file is not a valid snapshot (another magic or
// version, truncated, corrupt, or objects that make no valid state).
var ErrSnapshot = errors.New("not a valid omega snapshot")

const (
	snapHeaderBytes = len(SnapshotMagic) + 4 + 8
	snapMachine     = 'm'
	snapQuota       = 'q'
	snapLease       = 'l'
	snapJob         = 'j'
	snapTask        = 't'
	snapEnd         = 'E'
	// snapMaxRecord bounds one object's record: no object the store accepts
	// comes near it (txn.Limits' MaxObjectBytes), and a corrupt length does
	// not make the reader allocate gigabytes.
	snapMaxRecord = txn.MaxWireBytes
)

// SnapshotInfo describes a snapshot file.
type SnapshotInfo struct {
	Revision              uint64
	Machines, Jobs, Tasks int
	Quotas, Leases        int
	Bytes                 int64
	SHA256                [sha256.Size]byte
}

func (i SnapshotInfo) String() string {
	return fmt.Sprintf("revision %d, %d machines, %d jobs, %d tasks, %d quotas, %d leases, %d bytes, sha256 %x", i.Revision, i.Machines, i.Jobs, i.Tasks, i.Quotas, i.Leases, i.Bytes, i.SHA256[:8])
}

// WriteSnapshot writes st to w in the snapshot file format. Its objects
// must not be marshalled by anyone else meanwhile (a protobuf message's
// size cache is not safe for concurrent marshalling): take st from a
// listing of one's own (a client's Snapshot) or from a closed store.
func WriteSnapshot(w io.Writer, st *txn.State) (SnapshotInfo, error) {
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	info := SnapshotInfo{Revision: st.Revision()}
	var hdr [snapHeaderBytes]byte
	copy(hdr[:], SnapshotMagic)
	binary.BigEndian.PutUint32(hdr[8:], SnapshotVersion)
	binary.BigEndian.PutUint64(hdr[12:], st.Revision())
	if _, err := cw.Write(hdr[:]); err != nil {
		return info, err
	}
	mo := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	var err error
	put := func(kind byte, m proto.Message) bool {
		buf = append(buf[:0], kind)
		buf = binary.AppendUvarint(buf, uint64(mo.Size(m)))
		if buf, err = mo.MarshalAppend(buf, m); err == nil {
			_, err = cw.Write(buf)
		}
		return err == nil
	}
	st.RangeMachines(func(m *txn.Machine) bool { info.Machines++; return put(snapMachine, m.Proto()) })
	if err == nil {
		st.RangeJobs(func(j *txn.Job) bool { info.Jobs++; return put(snapJob, j.Proto()) })
	}
	if err == nil {
		st.RangeTasks(func(t *txn.Task) bool { info.Tasks++; return put(snapTask, t.Proto()) })
	}
	if err == nil {
		st.RangeQuotas(func(q *txn.Quota) bool { info.Quotas++; return put(snapQuota, q.Proto()) })
	}
	if err == nil {
		st.RangeLeases(func(l *txn.Lease) bool { info.Leases++; return put(snapLease, l.Proto()) })
	}
	if err != nil {
		return info, fmt.Errorf("write snapshot: %w", err)
	}
	buf = append(buf[:0], snapEnd)
	for _, n := range []int{info.Machines, info.Jobs, info.Tasks, info.Quotas, info.Leases} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(n))
	}
	if _, err := cw.Write(buf); err != nil {
		return info, err
	}
	copy(info.SHA256[:], h.Sum(nil))
	if _, err := w.Write(info.SHA256[:]); err != nil {
		return info, err
	}
	info.Bytes = cw.n + sha256.Size
	return info, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// SaveSnapshotFile writes st to path atomically: into a temporary file
// beside it (mode 0600: it holds the whole cell), synced, then renamed
// over path, and the directory synced. On an error path is untouched and
// the temporary file removed.
func SaveSnapshotFile(path string, st *txn.State) (info SnapshotInfo, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return info, fmt.Errorf("save snapshot %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("save snapshot %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if info, err = WriteSnapshot(bw, st); err != nil {
		return info, err
	}
	if err = bw.Flush(); err != nil {
		return info, err
	}
	if err = f.Sync(); err != nil {
		return info, err
	}
	if err = f.Close(); err != nil {
		return info, err
	}
	if err = os.Rename(tmp, path); err != nil {
		return info, err
	}
	return info, syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadSnapshot reads a snapshot file from r and rebuilds the state it
// holds, with every check a store makes of its own records on reopen. The
// errors are ErrSnapshot, saying what is wrong and where (or r's own).
func ReadSnapshot(r io.Reader) (*txn.State, SnapshotInfo, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	hr := &hashReader{r: br, h: sha256.New()}
	var info SnapshotInfo
	var hdr [snapHeaderBytes]byte
	if n, err := io.ReadFull(hr, hdr[:]); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, info, err
		}
		if m := min(n, len(SnapshotMagic)); string(hdr[:m]) != SnapshotMagic[:m] || n == 0 {
			return nil, info, fmt.Errorf("%w: it does not start with %q (%d bytes)", ErrSnapshot, SnapshotMagic, n)
		}
		return nil, info, fmt.Errorf("%w: truncated: %d bytes, shorter than the header (%d)", ErrSnapshot, n, snapHeaderBytes)
	}
	if string(hdr[:8]) != SnapshotMagic {
		return nil, info, fmt.Errorf("%w: it starts with %q, not %q", ErrSnapshot, hdr[:8], SnapshotMagic)
	}
	version := binary.BigEndian.Uint32(hdr[8:])
	if version < 1 || version > SnapshotVersion {
		return nil, info, fmt.Errorf("%w: snapshot format version %d; this omega reads versions 1 to %d", ErrSnapshot, version, SnapshotVersion)
	}
	info.Revision = binary.BigEndian.Uint64(hdr[12:])

	// Every record is read and hashed; the objects are decoded as they come,
	// but an object's error is reported only once the checksum holds (a
	// corrupt file is corrupt, whatever its bytes happen to decode to).
	rs := txn.NewRestorer(info.Revision)
	var objErr error
	var buf []byte
	for {
		at := hr.n
		kind, err := hr.ReadByte()
		if err != nil {
			return nil, info, truncated(err, hr.n, "where a record or the trailer should start")
		}
		if kind == snapEnd {
			break
		}
		if kind != snapMachine && kind != snapJob && kind != snapTask && (kind != snapQuota || version < 2) && (kind != snapLease || version < 3) {
			return nil, info, fmt.Errorf("%w: corrupt: unknown record kind 0x%02x at offset %d", ErrSnapshot, kind, at)
		}
		n, err := binary.ReadUvarint(hr)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, info, truncated(err, hr.n, fmt.Sprintf("in the length of the record at offset %d", at))
		} else if err != nil {
			return nil, info, fmt.Errorf("%w: corrupt: the length of the record at offset %d: %v", ErrSnapshot, at, err)
		}
		if n > snapMaxRecord {
			return nil, info, fmt.Errorf("%w: corrupt: the record at offset %d claims %d bytes (at most %d)", ErrSnapshot, at, n, snapMaxRecord)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(hr, buf); err != nil {
			return nil, info, truncated(err, hr.n, fmt.Sprintf("inside the record at offset %d (%d bytes)", at, n))
		}
		switch kind {
		case snapMachine:
			info.Machines++
		case snapJob:
			info.Jobs++
		case snapQuota:
			info.Quotas++
		case snapLease:
			info.Leases++
		default:
			info.Tasks++
		}
		if objErr == nil {
			objErr = restoreRecord(rs, kind, buf, at)
		}
	}
	var countBuf [5 * 8]byte
	counts := countBuf[:(2+version)*8] // three counts in version 1, a count more in each version after
	if _, err := io.ReadFull(hr, counts); err != nil {
		return nil, info, truncated(err, hr.n, "inside its trailer")
	}
	want := hr.h.Sum(nil)
	if n, err := io.ReadFull(br, info.SHA256[:]); err != nil {
		return nil, info, truncated(err, hr.n+int64(n), "inside its checksum")
	}
	info.Bytes = hr.n + sha256.Size
	if !bytes.Equal(want, info.SHA256[:]) {
		return nil, info, fmt.Errorf("%w: corrupt: the checksum does not match its %d bytes (sha256 %x, the trailer says %x)", ErrSnapshot, info.Bytes, want, info.SHA256)
	}
	if extra, _ := io.Copy(io.Discard, br); extra > 0 {
		return nil, info, fmt.Errorf("%w: corrupt: %d bytes after its trailer", ErrSnapshot, extra)
	}
	m, j, t := binary.BigEndian.Uint64(counts[0:]), binary.BigEndian.Uint64(counts[8:]), binary.BigEndian.Uint64(counts[16:])
	var q, l uint64
	if version >= 2 {
		q = binary.BigEndian.Uint64(counts[24:])
	}
	if version >= 3 {
		l = binary.BigEndian.Uint64(counts[32:])
	}
	if m != uint64(info.Machines) || j != uint64(info.Jobs) || t != uint64(info.Tasks) || q != uint64(info.Quotas) || l != uint64(info.Leases) {
		return nil, info, fmt.Errorf("%w: corrupt: its trailer counts %d machines, %d jobs, %d tasks, %d quotas and %d leases; it holds %d, %d, %d, %d and %d",
			ErrSnapshot, m, j, t, q, l, info.Machines, info.Jobs, info.Tasks, info.Quotas, info.Leases)
	}
	if objErr != nil {
		return nil, info, objErr
	}
	st, err := rs.Finish()
	if err != nil {
		return nil, info, fmt.Errorf("%w: its objects make no valid cell: %w", ErrSnapshot, err)
	}
	return st, info, nil
}

// truncated names an end of file where more was due (after size bytes, in
// what), or passes another error on.
func truncated(err error, size int64, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated (or corrupt): it ends after %d bytes, %s", ErrSnapshot, size, what)
	}
	return err
}

// restoreRecord decodes one object's record (at offset at) into rs.
func restoreRecord(rs *txn.Restorer, kind byte, b []byte, at int64) error {
	var err error
	what := "machine"
	switch kind {
	case snapMachine:
		p := &omegav1.Machine{}
		if err = proto.Unmarshal(b, p); err == nil {
			err = rs.Machine(p)
		}
	case snapJob:
		what = "job"
		p := &omegav1.Job{}
		if err = proto.Unmarshal(b, p); err == nil {
			err = rs.Job(p)
		}
	case snapQuota:
		what = "quota"
		p := &omegav1.Quota{}
		if err = proto.Unmarshal(b, p); err == nil {
			err = rs.Quota(p)
		}
	case snapLease:
		what = "lease"
		p := &omegav1.Lease{}
		if err = proto.Unmarshal(b, p); err == nil {
			err = rs.Lease(p)
		}
	default:
		what = "task"
		p := &omegav1.Task{}
		if err = proto.Unmarshal(b, p); err == nil {
			if p.GetStatus() == nil {
				err = fmt.Errorf("%w: task %s has no status", txn.ErrInvalid, p.GetMeta().GetUid())
			} else {
				err = rs.Task(p, p.GetMeta().GetVersion())
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: the %s at offset %d: %w", ErrSnapshot, what, at, err)
	}
	return nil
}

// hashReader hashes and counts what is read through it. It reads from a
// bufio.Reader exactly what it is asked, so the checksum after the trailer
// can be read past it, unhashed.
type hashReader struct {
	r   *bufio.Reader
	h   hash.Hash
	n   int64
	one [1]byte
}

func (r *hashReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	return n, err
}

func (r *hashReader) ReadByte() (byte, error) {
	b, err := r.r.ReadByte()
	if err != nil {
		return 0, err
	}
	r.one[0] = b
	r.h.Write(r.one[:])
	r.n++
	return b, nil
}

// LoadSnapshotFile reads and checks the snapshot file at path (see
// ReadSnapshot); its errors name the file.
func LoadSnapshotFile(path string) (*txn.State, SnapshotInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, SnapshotInfo{}, fmt.Errorf("read snapshot: %w", err)
	}
	defer f.Close()
	st, info, err := ReadSnapshot(f)
	if err != nil {
		return nil, info, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return st, info, nil
}
