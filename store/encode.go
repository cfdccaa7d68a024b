package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// The key layout in pebble. Every key starts with a one-byte table prefix;
// object keys are prefix + the object's 16-byte uid.
//
//	"R"          → the revision of the last committed transaction (8 bytes, big endian)
//	"m" + uid    → machine: omegav1.Machine (meta with version, spec, status
//	               state and agent address; allocation is derived, not stored)
//	"j" + uid    → job: omegav1.Job
//	"t" + uid    → task: omegav1.Task with meta (version = creation revision),
//	               spec and the status it had at the end of its creating
//	               transaction; written once
//	"o" + uid    → an outstanding offer: omegav1.Offer with its locks (a
//	               two-level allocator's; deleted when it is answered)
//	"q" + uid    → a quota: omegav1.Quota (its use is derived, not stored)
//	"l" + uid    → a lease: omegav1.Lease (a live component's announcement)
//	"s" + uid    → the task's status after later changes: 8-byte big-endian
//	               version, then omegav1.TaskStatus; absent until the first
//	               change after creation, and then it wins over "t"'s status
//
// A claim, an eviction or a status report rewrites only the task's small
// status record; meta and spec are written once, at creation. A task created
// and claimed in one transaction (a mapreduce scheduler's extra workers,
// the benchmark's tasks) is one record.
const (
	prefixRevision = 'R'
	prefixVersion  = 'V' // the on-disk format's version (FormatVersion)
	prefixMachine  = 'm'
	prefixJob      = 'j'
	prefixOffer    = 'o'
	prefixQuota    = 'q'
	prefixLease    = 'l'
	prefixTask     = 't'
	prefixStatus   = 's'
)

var (
	revisionKey = []byte{prefixRevision}
	versionKey  = []byte{prefixVersion}
)

// FormatVersion is the on-disk format this store writes and reads: the
// records above as pebble's checkpoint, without pebble's WAL, and the
// store's own log of revisions beside them (wal.go). A store of another
// version is refused at open with ErrFormat, naming both, except format 1
// (the same records with pebble's WAL as the log, and stores written
// before the version was recorded), which is migrated: pebble replays its
// WAL when it opens, the store flushes what it replayed to pebble's tables
// and records format 2, and pebble's WAL is not written again.
const FormatVersion = 2

// ErrFormat: the directory holds a store of another on-disk format.
var ErrFormat = errors.New("store of another on-disk format")

// checkFormat refuses a store of another format, migrates one of format 1,
// and records the format in a new one.
func checkFormat(db *pebble.DB, dir string, log *slog.Logger) error {
	v, closer, err := db.Get(versionKey)
	got := uint32(1) // written before versions were recorded
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if _, cl, err := db.Get(revisionKey); errors.Is(err, pebble.ErrNotFound) {
			got = FormatVersion // new
		} else if err != nil {
			return fmt.Errorf("read the revision: %w", err)
		} else {
			cl.Close()
		}
	case err != nil:
		return fmt.Errorf("read the format version: %w", err)
	default:
		if len(v) != 4 {
			closer.Close()
			return fmt.Errorf("%w: %s: its format version record has %d bytes", ErrCorrupt, dir, len(v))
		}
		got = binary.BigEndian.Uint32(v)
		closer.Close()
		if got == FormatVersion {
			return nil
		}
	}
	if got != 1 && got != FormatVersion {
		return fmt.Errorf("%w: %s holds on-disk format %d; this omega reads format %d (and migrates format 1): open it with an omega of its version (a snapshot of the cell carries it across)", ErrFormat, dir, got, FormatVersion)
	}
	if got == 1 {
		log.Info("migrating the store to on-disk format 2: pebble's WAL becomes the store's own log", "dir", dir)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], FormatVersion)
	if err := db.Set(versionKey, b[:], pebble.NoSync); err != nil {
		return fmt.Errorf("record the format version: %w", err)
	}
	// Without pebble's WAL, a write is durable once flushed; for format 1
	// the flush also makes durable what pebble replayed from its WAL.
	if err := db.Flush(); err != nil {
		return fmt.Errorf("record the format version: %w", err)
	}
	return nil
}

// readRevision returns the revision of pebble's checkpoint (0 for a new
// store).
func readRevision(db *pebble.DB) (uint64, error) {
	v, closer, err := db.Get(revisionKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read revision: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: revision record has %d bytes", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// encoder turns a write set into pebble records. It collects them first and
// adds them to the batch sorted by key: pebble's memtable insert reuses the
// skiplist position of the previous key, so sorted records cost a short
// walk each instead of a full search — on the commit path that is most of
// the memtable's cost. Each revision's records touch every key at most
// once, so their order within the revision does not matter.
type encoder struct {
	specs  map[*omegav1.TaskSpec][]byte // see specBytes
	warm   []uuid.UUID                  // encodeCheckpoint's tasks to warm, reused
	warmed uint64                       // what the warm walks returned: kept so they are computed
	radix  []int32                      // sortTouches' counts, reused
	recs   []record
	vals   []byte
	tmp    []byte
	mo     proto.MarshalOptions
}

type record struct {
	key      [17]byte
	del      bool
	off, end int // value bytes in vals
}

// EncodeWriteSet appends ws's records, and the revision record, to b. It is
// the store's whole durable encoding of a commit; the raw-pebble baseline of
// the benchmark writes exactly these bytes.
func EncodeWriteSet(b *pebble.Batch, ws *txn.WriteSet) error {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	return e.encode(b, ws)
}

// encoders recycles encoders: their buffers grow to a commit's size once,
// not on every commit (the batch copies what it is given).
var encoders = sync.Pool{New: func() any { return new(encoder) }}

func (e *encoder) encode(b *pebble.Batch, ws *txn.WriteSet) error {
	e.reset(2 * len(ws.Changes))
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Derived {
			continue
		}
		if err := e.change(c); err != nil {
			return fmt.Errorf("encode revision %d: %w", ws.Revision, err)
		}
	}
	return e.flush(b, ws.Revision)
}

func (e *encoder) reset(n int) {
	e.recs = slices.Grow(e.recs[:0], n)
	e.vals = e.vals[:0]
}

// flush adds the collected records to b, in the order of the write set's
// changes, and the revision record. A log record needs no order: a write
// set changes each object once, so its keys are distinct, and replay
// applies the batch whole.
func (e *encoder) flush(b *pebble.Batch, revision uint64) error {
	if err := e.flushRecords(b); err != nil {
		return err
	}
	var rev [8]byte
	binary.BigEndian.PutUint64(rev[:], revision)
	return b.Set(revisionKey, rev[:], nil)
}

// sorted returns the collected records sorted by key.
func (e *encoder) sorted() []record {
	slices.SortFunc(e.recs, func(a, b record) int { return bytes.Compare(a.key[:], b.key[:]) })
	return e.recs
}

// flushRecords adds the collected records to b.
func (e *encoder) flushRecords(b *pebble.Batch) error {
	for i := range e.recs {
		r := &e.recs[i]
		var err error
		if r.del {
			err = b.Delete(r.key[:], nil)
		} else {
			err = b.Set(r.key[:], e.vals[r.off:r.end], nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func recKey(prefix byte, uid uuid.UUID) (k [17]byte) {
	k[0] = prefix
	copy(k[1:], uid[:])
	return k
}

func (e *encoder) del(prefix byte, uid uuid.UUID) {
	e.recs = append(e.recs, record{key: recKey(prefix, uid), del: true})
}

// set records a value that the caller appended to e.vals from off on.
func (e *encoder) set(prefix byte, uid uuid.UUID, off int) {
	e.recs = append(e.recs, record{key: recKey(prefix, uid), off: off, end: len(e.vals)})
}

func (e *encoder) marshal(prefix byte, uid uuid.UUID, m proto.Message) error {
	off := len(e.vals)
	var err error
	if e.vals, err = e.mo.MarshalAppend(e.vals, m); err != nil {
		return err
	}
	e.set(prefix, uid, off)
	return nil
}

func (e *encoder) change(c *txn.Change) error {
	switch {
	case c.Task != nil:
		t := c.Task
		switch {
		case c.Deleted:
			e.delTask(t)
			return nil
		case c.Created:
			return e.taskRecord(t, t.Version)
		}
		e.status(t)
		return nil
	case c.Job != nil:
		if c.Deleted {
			e.del(prefixJob, c.Job.UID)
			return nil
		}
		return e.marshal(prefixJob, c.Job.UID, c.Job.Proto())
	case c.Machine != nil:
		if c.Deleted {
			e.del(prefixMachine, c.Machine.UID)
			return nil
		}
		return e.machine(c.Machine)
	case c.Offer != nil:
		if c.Deleted {
			e.del(prefixOffer, c.Offer.UID)
			return nil
		}
		return e.marshal(prefixOffer, c.Offer.UID, c.Offer.Proto())
	case c.Quota != nil:
		if c.Deleted {
			e.del(prefixQuota, c.Quota.UID)
			return nil
		}
		return e.marshal(prefixQuota, c.Quota.UID, c.Quota.Proto())
	case c.Lease != nil:
		if c.Deleted {
			e.del(prefixLease, c.Lease.UID)
			return nil
		}
		return e.marshal(prefixLease, c.Lease.UID, c.Lease.Proto())
	}
	return fmt.Errorf("change with no object")
}

// delTask deletes t's records: its task record, and its status record if it
// changed after its creation.
func (e *encoder) delTask(t *txn.Task) {
	e.del(prefixTask, t.UID)
	if t.Version != t.CreateRev {
		e.del(prefixStatus, t.UID)
	}
}

// taskRecord records t's task record: the wire form of omegav1.Task with
// its meta (at version) and spec, then its status (field 3), all written
// by hand but the spec, which is marshalled once per shared spec
// (specBytes). TestTaskRecordMatchesProto holds it to proto.Unmarshal.
func (e *encoder) taskRecord(t *txn.Task, version uint64) error {
	off := len(e.vals)
	e.tmp = txn.AppendMeta(e.tmp[:0], t, version)
	e.vals = protowire.AppendTag(e.vals, 1, protowire.BytesType)
	e.vals = protowire.AppendBytes(e.vals, e.tmp)
	spec, err := e.specBytes(t.Spec)
	if err != nil {
		return err
	}
	if t.Spec != nil { // an empty spec too: it is present
		e.vals = protowire.AppendTag(e.vals, 2, protowire.BytesType)
		e.vals = protowire.AppendBytes(e.vals, spec)
	}
	e.tmp = appendTaskStatus(e.tmp[:0], t)
	e.vals = protowire.AppendTag(e.vals, 3, protowire.BytesType)
	e.vals = protowire.AppendBytes(e.vals, e.tmp)
	e.set(prefixTask, t.UID, off)
	return nil
}

// specBytes returns spec marshalled, from the encoder's cache: the tasks
// of a job (or of a shape) share one spec, so most tasks cost a map
// lookup. The cache holds the specs it keys alive, so a spec's bytes are
// never taken for another's; it is dropped whole when it grows past
// maxSpecCache. It relies on what Commit documents: the store owns the
// objects a transaction creates, and a stored spec is never written — a
// client that changed one after committing it would find the change in
// the state but not in the records.
func (e *encoder) specBytes(spec *omegav1.TaskSpec) ([]byte, error) {
	if spec == nil {
		return nil, nil
	}
	if b, ok := e.specs[spec]; ok {
		return b, nil
	}
	b, err := e.mo.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if e.specs == nil || len(e.specs) >= maxSpecCache {
		e.specs = make(map[*omegav1.TaskSpec][]byte)
	}
	e.specs[spec] = b
	return b, nil
}

const maxSpecCache = 256

// status records t's status record: its version, then its status.
func (e *encoder) status(t *txn.Task) {
	off := len(e.vals)
	e.vals = binary.BigEndian.AppendUint64(e.vals, t.Version)
	e.vals = appendTaskStatus(e.vals, t)
	e.set(prefixStatus, t.UID, off)
}

func (e *encoder) machine(m *txn.Machine) error {
	p := m.Proto()
	p.Status = &omegav1.MachineStatus{State: m.State, AgentAddress: m.Agent}
	return e.marshal(prefixMachine, m.UID, p)
}

// load rebuilds the state held in db: every object, each machine's
// allocation derived from the tasks placed on it, and every machine's
// coarse sequence number set to the revision reopened at (conservative: a
// view from before the restart conflicts on every machine in coarse mode).
func load(db *pebble.DB) (*txn.State, error) {
	rev, err := readRevision(db)
	if err != nil || rev == 0 {
		return txn.NewState(), err
	}

	r := txn.NewRestorer(rev)
	if err := scan(db, prefixMachine, func(uid uuid.UUID, val []byte) error {
		p := &omegav1.Machine{}
		if err := proto.Unmarshal(val, p); err != nil {
			return fmt.Errorf("%w: machine %s: %v", ErrCorrupt, uid, err)
		}
		if err := r.Machine(p); err != nil {
			return fmt.Errorf("%w: machine %s: %v", ErrCorrupt, uid, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := scan(db, prefixJob, func(uid uuid.UUID, val []byte) error {
		p := &omegav1.Job{}
		if err := proto.Unmarshal(val, p); err != nil {
			return fmt.Errorf("%w: job %s: %v", ErrCorrupt, uid, err)
		}
		if err := r.Job(p); err != nil {
			return fmt.Errorf("%w: job %s: %v", ErrCorrupt, uid, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := scan(db, prefixQuota, func(uid uuid.UUID, val []byte) error {
		p := &omegav1.Quota{}
		if err := proto.Unmarshal(val, p); err != nil {
			return fmt.Errorf("%w: quota %s: %v", ErrCorrupt, uid, err)
		}
		if err := r.Quota(p); err != nil {
			return fmt.Errorf("%w: quota %s: %v", ErrCorrupt, uid, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := scan(db, prefixLease, func(uid uuid.UUID, val []byte) error {
		p := &omegav1.Lease{}
		if err := proto.Unmarshal(val, p); err != nil {
			return fmt.Errorf("%w: lease %s: %v", ErrCorrupt, uid, err)
		}
		if err := r.Lease(p); err != nil {
			return fmt.Errorf("%w: lease %s: %v", ErrCorrupt, uid, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := scan(db, prefixOffer, func(uid uuid.UUID, val []byte) error {
		p := &omegav1.Offer{}
		if err := proto.Unmarshal(val, p); err != nil {
			return fmt.Errorf("%w: offer %s: %v", ErrCorrupt, uid, err)
		}
		if err := r.Offer(p); err != nil {
			return fmt.Errorf("%w: offer %s: %v", ErrCorrupt, uid, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Tasks: the "t" and "s" ranges are both sorted by uid, so walk them in
	// lockstep; every task has a "t" record and at most one "s" record.
	ts, err := db.NewIter(prefixBounds(prefixTask))
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	ss, err := db.NewIter(prefixBounds(prefixStatus))
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	ts.First()
	ss.First()
	for ; ts.Valid(); ts.Next() {
		if len(ts.Key()) != 17 {
			return nil, fmt.Errorf("%w: key %q", ErrCorrupt, ts.Key())
		}
		uid := uuid.UUID(ts.Key()[1:])
		if ss.Valid() && (len(ss.Key()) != 17 || bytes.Compare(ss.Key()[1:], uid[:]) < 0) {
			return nil, fmt.Errorf("%w: status record %x without its task", ErrCorrupt, ss.Key())
		}
		p := &omegav1.Task{}
		if err := proto.Unmarshal(ts.Value(), p); err != nil {
			return nil, fmt.Errorf("%w: task %s: %v", ErrCorrupt, uid, err)
		}
		if p.GetStatus() == nil {
			return nil, fmt.Errorf("%w: task %s has no status", ErrCorrupt, uid)
		}
		version := p.GetMeta().GetVersion()
		if ss.Valid() && uuid.UUID(ss.Key()[1:]) == uid {
			val := ss.Value()
			if len(val) < 8 {
				return nil, fmt.Errorf("%w: status of task %s has %d bytes", ErrCorrupt, uid, len(val))
			}
			p.Status = &omegav1.TaskStatus{}
			if err := proto.Unmarshal(val[8:], p.Status); err != nil {
				return nil, fmt.Errorf("%w: status of task %s: %v", ErrCorrupt, uid, err)
			}
			version = binary.BigEndian.Uint64(val[:8])
			ss.Next()
		}
		if err := r.Task(p, version); err != nil {
			return nil, fmt.Errorf("%w: task %s: %v", ErrCorrupt, uid, err)
		}
	}
	if ss.Valid() {
		return nil, fmt.Errorf("%w: status record %x without its task", ErrCorrupt, ss.Key())
	}
	if err := errors.Join(ts.Error(), ss.Error()); err != nil {
		return nil, err
	}
	// Finish fails on data that decodes but does not fit together (a placed
	// task on a missing machine, a machine over capacity): corrupt too.
	st, err := r.Finish()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return st, nil
}

func prefixBounds(prefix byte) *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}}
}

func scan(db *pebble.DB, prefix byte, f func(uuid.UUID, []byte) error) error {
	it, err := db.NewIter(prefixBounds(prefix))
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if len(it.Key()) != 17 {
			return fmt.Errorf("%w: key %q", ErrCorrupt, it.Key())
		}
		if err := f(uuid.UUID(it.Key()[1:]), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// shrink lets go of buffers a big checkpoint grew.
func (e *encoder) shrink() {
	if cap(e.vals) > 64<<20 {
		e.vals = nil
	}
	if cap(e.recs) > 1<<20 {
		e.recs = nil
	}
}
