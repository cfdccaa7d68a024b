package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"
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
//	"t" + uid    → task meta and spec: omegav1.Task without status; written once
//	"s" + uid    → task status: 8-byte big-endian version, then omegav1.TaskStatus
//
// A claim, an eviction or a status report rewrites only the task's small
// status record; meta and spec are written once, at creation.
const (
	prefixRevision = 'R'
	prefixMachine  = 'm'
	prefixJob      = 'j'
	prefixTask     = 't'
	prefixStatus   = 's'
)

var revisionKey = []byte{prefixRevision}

func objectKey(buf []byte, prefix byte, uid uuid.UUID) []byte {
	buf = append(buf[:0], prefix)
	return append(buf, uid[:]...)
}

// encoder appends a write set's records to a pebble batch, reusing its
// buffers across changes.
type encoder struct {
	key []byte
	val []byte
	mo  proto.MarshalOptions
}

// EncodeWriteSet appends ws's records, and the revision record, to b. It is
// the store's whole durable encoding of a commit; the raw-pebble baseline of
// the benchmark writes exactly these bytes.
func EncodeWriteSet(b *pebble.Batch, ws *txn.WriteSet) error {
	var e encoder
	return e.encode(b, ws)
}

func (e *encoder) encode(b *pebble.Batch, ws *txn.WriteSet) error {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Derived {
			continue
		}
		if err := e.change(b, c); err != nil {
			return fmt.Errorf("encode revision %d: %w", ws.Revision, err)
		}
	}
	var rev [8]byte
	binary.BigEndian.PutUint64(rev[:], ws.Revision)
	return b.Set(revisionKey, rev[:], nil)
}

func (e *encoder) change(b *pebble.Batch, c *txn.Change) error {
	var err error
	switch {
	case c.Task != nil:
		t := c.Task
		if c.Deleted {
			if err := b.Delete(objectKey(e.key, prefixTask, t.UID), nil); err != nil {
				return err
			}
			return b.Delete(objectKey(e.key, prefixStatus, t.UID), nil)
		}
		if c.Created {
			e.val, err = e.mo.MarshalAppend(e.val[:0], t.SpecProto())
			if err != nil {
				return err
			}
			if err := b.Set(objectKey(e.key, prefixTask, t.UID), e.val, nil); err != nil {
				return err
			}
		}
		e.val = binary.BigEndian.AppendUint64(e.val[:0], t.Version)
		e.val = appendTaskStatus(e.val, t)
		return b.Set(objectKey(e.key, prefixStatus, t.UID), e.val, nil)
	case c.Job != nil:
		if c.Deleted {
			return b.Delete(objectKey(e.key, prefixJob, c.Job.UID), nil)
		}
		e.val, err = e.mo.MarshalAppend(e.val[:0], c.Job.Proto())
		if err != nil {
			return err
		}
		return b.Set(objectKey(e.key, prefixJob, c.Job.UID), e.val, nil)
	case c.Machine != nil:
		m := c.Machine
		if c.Deleted {
			return b.Delete(objectKey(e.key, prefixMachine, m.UID), nil)
		}
		p := m.Proto()
		p.Status = &omegav1.MachineStatus{State: m.State, AgentAddress: m.Agent}
		e.val, err = e.mo.MarshalAppend(e.val[:0], p)
		if err != nil {
			return err
		}
		return b.Set(objectKey(e.key, prefixMachine, m.UID), e.val, nil)
	}
	return fmt.Errorf("change with no object")
}

// load rebuilds the state held in db: every object, each machine's
// allocation derived from the tasks placed on it, and every machine's
// coarse sequence number set to the revision reopened at (conservative: a
// view from before the restart conflicts on every machine in coarse mode).
func load(db *pebble.DB) (*txn.State, error) {
	var rev uint64
	v, closer, err := db.Get(revisionKey)
	switch {
	case err == pebble.ErrNotFound:
		return txn.NewState(), nil
	case err != nil:
		return nil, fmt.Errorf("read revision: %w", err)
	}
	if len(v) != 8 {
		closer.Close()
		return nil, fmt.Errorf("%w: revision record has %d bytes", ErrCorrupt, len(v))
	}
	rev = binary.BigEndian.Uint64(v)
	closer.Close()

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
	// Tasks: the "t" and "s" ranges are both sorted by uid, so walk them in
	// lockstep; every task has exactly one of each.
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
		if !ss.Valid() || len(ss.Key()) != 17 || uuid.UUID(ss.Key()[1:]) != uid {
			return nil, fmt.Errorf("%w: task %s has no status record", ErrCorrupt, uid)
		}
		p := &omegav1.Task{}
		if err := proto.Unmarshal(ts.Value(), p); err != nil {
			return nil, fmt.Errorf("%w: task %s: %v", ErrCorrupt, uid, err)
		}
		val := ss.Value()
		if len(val) < 8 {
			return nil, fmt.Errorf("%w: status of task %s has %d bytes", ErrCorrupt, uid, len(val))
		}
		p.Status = &omegav1.TaskStatus{}
		if err := proto.Unmarshal(val[8:], p.Status); err != nil {
			return nil, fmt.Errorf("%w: status of task %s: %v", ErrCorrupt, uid, err)
		}
		if err := r.Task(p, binary.BigEndian.Uint64(val[:8])); err != nil {
			return nil, fmt.Errorf("%w: task %s: %v", ErrCorrupt, uid, err)
		}
		ss.Next()
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
