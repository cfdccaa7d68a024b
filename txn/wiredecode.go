package txn

import (
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// A watch's pieces decoded from their bytes (omegav1.RevisionChanges) into
// write sets without the protobuf messages in between: a client that keeps
// a copy of the cell decodes every revision, and a claim's revision is a
// hundred changes of small status messages, which the reflection-driven
// decoder turns into six or seven allocations each. Partial changes (the
// common case: claims, reports) are decoded field by field straight into
// the task or machine; whole objects (created tasks, jobs, machines put)
// go through proto.Unmarshal and the same conversions as WriteSetFromProto.
// FuzzDecodeRevisionChanges holds it to proto.Unmarshal + WriteSetFromProto.

// AddBytes is Add for a piece still in its wire encoding.
func (r *WriteSetReader) AddBytes(b []byte) (*WriteSet, error) {
	var (
		rev, nanos uint64
		more       bool
		changes    []Change
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, wireErr("revision changes", n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			rev, n = protowire.ConsumeVarint(b)
		case num == 2 && typ == protowire.BytesType:
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n >= 0 {
				c, err := decodeChange(v, r.interned())
				if err != nil {
					return nil, fmt.Errorf("revision %d, change %d: %w", rev, len(r.raw)+len(changes), err)
				}
				if c.Kind != 0 || c.Task != nil || c.Job != nil || c.Machine != nil {
					changes = append(changes, c)
				}
			}
		case num == 3 && typ == protowire.VarintType:
			nanos, n = protowire.ConsumeVarint(b)
		case num == 4 && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			more = v != 0
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, wireErr("revision changes", n)
		}
		b = b[n:]
	}
	if r.rawStarted && (rev != r.rawRev || int64(nanos) != r.rawNanos) {
		return nil, fmt.Errorf("%w: a piece of revision %d while joining revision %d", ErrInvalid, rev, r.rawRev)
	}
	if !r.rawStarted {
		r.rawStarted, r.rawRev, r.rawNanos = true, rev, int64(nanos)
	}
	r.raw = append(r.raw, changes...)
	if more {
		return nil, nil
	}
	ws := &WriteSet{Revision: rev, UnixNanos: int64(nanos), Changes: r.raw}
	r.raw, r.rawStarted = nil, false
	return ws, nil
}

func wireErr(what string, n int) error {
	return fmt.Errorf("%w: %s: %v", ErrInvalid, what, protowire.ParseError(n))
}

// decodeChange decodes one omegav1.Change. A change with no object is
// returned empty (WriteSetFromProto refuses it; so does the caller).
func decodeChange(b []byte, in *interned) (Change, error) {
	var c Change
	var obj []byte
	var prev omegav1.TaskState
	objNum := protowire.Number(0)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return c, wireErr("change", n)
		}
		b = b[n:]
		switch {
		case (num >= 1 && num <= 3 || num == 8 || num == 9 || num == 10) && typ == protowire.BytesType:
			obj, n = protowire.ConsumeBytes(b)
			objNum = num // a oneof: the last one wins, as proto.Unmarshal has it
		case num >= 4 && num <= 7 && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			switch num {
			case 4:
				c.Deleted = v != 0
			case 5:
				c.Created = v != 0
			case 6:
				c.Partial = v != 0
			case 7:
				prev = omegav1.TaskState(int32(v)) // as proto.Unmarshal reads an enum
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return c, wireErr("change", n)
		}
		b = b[n:]
	}
	var err error
	switch objNum {
	case 1:
		c.Kind = omegav1.ObjectKind_OBJECT_KIND_TASK
		if c.PrevState, err = prevState(prev); err != nil {
			break
		}
		if c.Partial {
			c.Task, err = in.decodePartialTask(obj)
			break
		}
		c.Task, err = in.decodeCreatedTask(obj)
	case 2:
		c.Kind = omegav1.ObjectKind_OBJECT_KIND_JOB
		p := &omegav1.Job{}
		if err = proto.Unmarshal(obj, p); err == nil {
			c.Job, err = jobFromWire(p)
		}
	case 3:
		c.Kind = omegav1.ObjectKind_OBJECT_KIND_MACHINE
		if c.Partial {
			c.Machine, err = decodePartialMachine(obj)
			break
		}
		p := &omegav1.Machine{}
		if err = proto.Unmarshal(obj, p); err == nil {
			c.Machine, err = machineFromWire(p, true)
		}
	case 9:
		c.Kind = omegav1.ObjectKind_OBJECT_KIND_QUOTA
		p := &omegav1.Quota{}
		if err = proto.Unmarshal(obj, p); err == nil {
			c.Quota, err = quotaFromWire(p)
		}
	case 10:
		c.Kind = omegav1.ObjectKind_OBJECT_KIND_LEASE
		p := &omegav1.Lease{}
		if err = proto.Unmarshal(obj, p); err == nil {
			c.Lease, err = leaseFromWire(p)
		}
	case 8:
		c.Kind = omegav1.ObjectKind_OBJECT_KIND_OFFER
		p := &omegav1.Offer{}
		if err = proto.Unmarshal(obj, p); err == nil {
			c.Offer, err = offerFromWire(p)
		}
	default:
		return c, fmt.Errorf("%w: a change with no object", ErrInvalid)
	}
	if err != nil {
		return Change{}, err
	}
	return c, nil
}

// field is one field of a message: its number, wire type and value (a
// varint's in v, a length-delimited one's bytes in val).
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	val []byte
}

// fieldIter walks a message's fields, skipping those of other wire types
// (nothing the schema has). It lives on its caller's stack: the decoders
// below are on every watched revision's path.
type fieldIter struct {
	b    []byte
	what string
	err  error
}

func (it *fieldIter) next(f *field) bool {
	for len(it.b) > 0 {
		num, typ, n := protowire.ConsumeTag(it.b)
		if n < 0 {
			it.err = wireErr(it.what, n)
			return false
		}
		it.b = it.b[n:]
		skip := false
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(it.b)
		case protowire.BytesType:
			f.val, n = protowire.ConsumeBytes(it.b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, it.b)
			skip = true
		}
		if n < 0 {
			it.err = wireErr(it.what, n)
			return false
		}
		it.b = it.b[n:]
		if !skip {
			f.num, f.typ = num, typ
			return true
		}
	}
	return false
}

func wireString(val []byte, what string) (string, error) {
	if !utf8.Valid(val) {
		return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	return string(val), nil
}

// wireUIDBytes parses a uid field's bytes (a non-nil uuid) without making
// a string of them.
func wireUIDBytes(val []byte, what string) (uuid.UUID, error) {
	u, err := uuid.ParseBytes(val)
	if err != nil || len(val) != 36 {
		return ParseUID(string(val), what) // its error
	}
	if u == uuid.Nil {
		return uuid.Nil, fmt.Errorf("%w: %s is the nil uuid", ErrInvalid, what)
	}
	return u, nil
}

// decodeMetaIdentity reads an ObjectMeta's uid and version.
func decodeMetaIdentity(b []byte, what string) (uuid.UUID, uint64, error) {
	var uid uuid.UUID
	var version uint64
	var err error
	it := fieldIter{b: b, what: "meta"}
	var f field
	for err == nil && it.next(&f) {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			uid, err = wireUIDBytes(f.val, what)
		case f.num == 3 && f.typ == protowire.VarintType:
			version = f.v
		}
	}
	if err == nil {
		err = it.err
	}
	if err != nil {
		return uuid.Nil, 0, err
	}
	if uid == uuid.Nil {
		return uuid.Nil, 0, fmt.Errorf("%w: %s: no uid", ErrInvalid, what)
	}
	return uid, version, nil
}

// decodeResources reads an omegav1.Resources as ResourcesFromProto would
// (zero extended amounts dropped).
func decodeResources(b []byte) (Resources, error) {
	var r Resources
	it := fieldIter{b: b, what: "resources"}
	var f field
	for it.next(&f) {
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			r.CPU = int64(f.v)
		case f.num == 2 && f.typ == protowire.VarintType:
			r.Memory = int64(f.v)
		case f.num == 3 && f.typ == protowire.BytesType:
			var key string
			var amount int64
			var err error
			e := fieldIter{b: f.val, what: "extended resource"}
			var g field
			for err == nil && e.next(&g) {
				switch {
				case g.num == 1 && g.typ == protowire.BytesType:
					key, err = wireString(g.val, "an extended resource's name")
				case g.num == 2 && g.typ == protowire.VarintType:
					amount = int64(g.v)
				}
			}
			if err == nil {
				err = e.err
			}
			if err != nil {
				return r, err
			}
			if amount != 0 {
				if r.Ext == nil {
					r.Ext = map[string]int64{}
				}
				r.Ext[key] = amount
			} else {
				delete(r.Ext, key) // a later entry of the same key wins, as in a map
			}
		}
	}
	return r, it.err
}

// objectParts returns a Task's or a Machine's meta (1) and status (3)
// bytes.
func objectParts(b []byte, what string) (meta, status []byte, err error) {
	it := fieldIter{b: b, what: what}
	var f field
	for it.next(&f) {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			meta = f.val
		case f.num == 3 && f.typ == protowire.BytesType:
			status = f.val
		}
	}
	return meta, status, it.err
}

// decodePartialTask reads a task's partial change: meta (uid, version)
// and status, checked as restoreTaskStatus checks them.
func (in *interned) decodePartialTask(b []byte) (*Task, error) {
	meta, status, err := objectParts(b, "task")
	if err != nil {
		return nil, err
	}
	t := &Task{}
	if t.UID, t.Version, err = decodeMetaIdentity(meta, "task uid"); err != nil {
		return nil, err
	}
	if err := in.decodeTaskStatus(t, status); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeTaskStatus sets t's status from its encoding, checked as
// restoreTaskStatus checks it.
func (in *interned) decodeTaskStatus(t *Task, status []byte) error {
	var err error
	var machine, run []byte
	var msg []byte // the message field, when present
	it := fieldIter{b: status, what: "task status"}
	var f field
	for err == nil && it.next(&f) {
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			t.State = omegav1.TaskState(int32(f.v))
		case f.num == 2 && f.typ == protowire.BytesType:
			machine = f.val
		case f.num == 3 && f.typ == protowire.BytesType:
			t.Claimed, err = decodeResources(f.val)
		case f.num == 4 && f.typ == protowire.BytesType:
			t.Scheduler, err = in.string(f.val, "task scheduler")
		case f.num == 5 && f.typ == protowire.VarintType:
			t.Assigned = int64(f.v)
		case f.num == 6 && f.typ == protowire.VarintType:
			t.Started = int64(f.v)
		case f.num == 7 && f.typ == protowire.VarintType:
			t.Finished = int64(f.v)
		case f.num == 8 && f.typ == protowire.VarintType:
			t.Evictions = int32(f.v)
		case f.num == 9 && f.typ == protowire.BytesType:
			msg = f.val
		case f.num == 10 && f.typ == protowire.BytesType:
			run = f.val
		}
	}
	if err == nil {
		err = it.err
	}
	if err != nil {
		return fmt.Errorf("task %s: %w", t.UID, err)
	}
	if _, ok := omegav1.TaskState_name[int32(t.State)]; !ok || t.State == omegav1.TaskState_TASK_STATE_UNSPECIFIED {
		return fmt.Errorf("%w: task %s state %d", ErrInvalid, t.UID, t.State)
	}
	if len(machine) > 0 {
		if t.State == omegav1.TaskState_TASK_STATE_PENDING {
			return fmt.Errorf("%w: task %s is PENDING on machine %s", ErrInvalid, t.UID, Quote(string(machine)))
		}
		if t.Machine, err = wireUIDBytes(machine, "task machine"); err != nil {
			return err
		}
	}
	if err := t.Claimed.Validate(); err != nil {
		return fmt.Errorf("%w: task %s claimed: %v", ErrInvalid, t.UID, err)
	}
	m, rn := t.Message(), t.Run()
	if msg != nil {
		if m, err = wireString(msg, "task message"); err != nil {
			return fmt.Errorf("task %s: %w", t.UID, err)
		}
	}
	if run != nil {
		r := &omegav1.TaskRun{}
		if err := proto.Unmarshal(run, r); err != nil {
			return fmt.Errorf("%w: task %s run: %v", ErrInvalid, t.UID, err)
		}
		if err := validateRun(r); err != nil {
			return fmt.Errorf("%w: task %s run: %v", ErrInvalid, t.UID, err)
		}
		rn = r
	}
	t.setRare(m, rn)
	return nil
}

// string is wireString for the strings a cell holds few distinct values
// of (scheduler names): one string each, shared by the reader's tasks.
func (in *interned) string(val []byte, what string) (string, error) {
	if len(val) == 0 {
		return "", nil
	}
	if s, ok := in.strings[string(val)]; ok {
		return s, nil
	}
	s, err := wireString(val, what)
	if err == nil && len(val) <= 64 {
		internPut(in.strings, s, s)
	}
	return s, err
}

// decodePartialMachine reads a machine's partial change: meta (uid,
// version) and status, derived fields included.
func decodePartialMachine(b []byte) (*Machine, error) {
	meta, status, err := objectParts(b, "machine")
	if err != nil {
		return nil, err
	}
	m := &Machine{}
	if m.UID, m.Version, err = decodeMetaIdentity(meta, "machine uid"); err != nil {
		return nil, err
	}
	it := fieldIter{b: status, what: "machine status"}
	var f field
	for err == nil && it.next(&f) {
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			m.State = omegav1.MachineState(int32(f.v))
		case f.num == 2 && f.typ == protowire.BytesType:
			m.Allocated, err = decodeResources(f.val)
		case f.num == 3 && f.typ == protowire.BytesType:
			m.Agent, err = wireString(f.val, "machine agent address")
		case f.num == 4 && f.typ == protowire.VarintType:
			m.Tasks = int32(f.v)
		case f.num == 5 && f.typ == protowire.VarintType:
			m.Seq = f.v
		case f.num == 6 && f.typ == protowire.VarintType:
			m.LastClaim = f.v
		}
	}
	if err == nil {
		err = it.err
	}
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", m.UID, err)
	}
	if _, ok := omegav1.MachineState_name[int32(m.State)]; !ok || m.State == omegav1.MachineState_MACHINE_STATE_UNSPECIFIED {
		return nil, fmt.Errorf("%w: machine %s state %d", ErrInvalid, m.UID, m.State)
	}
	if err := m.Allocated.Validate(); err != nil {
		return nil, fmt.Errorf("%w: machine %s allocated: %v", ErrInvalid, m.UID, err)
	}
	return m, nil
}

// internCap bounds each of a reader's intern tables; a full one starts
// over (the objects already decoded keep what they share).
const internCap = 4096

// interned is what a reader shares between the tasks it decodes: a job's
// tasks carry the same spec, labels and owner references (and a cell a few
// scheduler names), so each is decoded once per watch, and the copy's
// tasks share them as the store's own objects do in process. It is the
// reader's own: no lock.
type interned struct {
	specs   map[string]*internedSpec
	labels  map[string]map[string]string
	owners  map[string][]*omegav1.OwnerReference
	strings map[string]string
}

type internedSpec struct {
	spec    *omegav1.TaskSpec
	request Resources
}

func (r *WriteSetReader) interned() *interned {
	if r.in == nil {
		r.in = &interned{specs: map[string]*internedSpec{}, labels: map[string]map[string]string{}, owners: map[string][]*omegav1.OwnerReference{}, strings: map[string]string{}}
	}
	return r.in
}

func internPut[V any](m map[string]V, k string, v V) {
	if len(m) >= internCap {
		clear(m)
	}
	m[k] = v
}

// decodeCreatedTask reads a whole task (a created one) sharing spec,
// labels and owner references with the reader's earlier tasks. Anything
// out of the ordinary — annotations, unknown fields, a spec that does not
// validate — goes the general way (proto.Unmarshal, taskFromWire), so the
// result and the errors are the same.
func (in *interned) decodeCreatedTask(obj []byte) (*Task, error) {
	var meta, spec, status []byte
	it := fieldIter{b: obj, what: "task"}
	var f field
	for it.next(&f) {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType && meta == nil:
			meta = f.val
		case f.num == 2 && f.typ == protowire.BytesType && spec == nil:
			spec = f.val
		case f.num == 3 && f.typ == protowire.BytesType && status == nil:
			status = f.val
		default:
			return slowTask(obj)
		}
	}
	if it.err != nil || meta == nil {
		return slowTask(obj)
	}
	m := &omegav1.ObjectMeta{}
	// The labels (4) and owner references (6) are each a run of entries,
	// as a marshaller writes them: each run's bytes, tags included, are the
	// key of what it decodes to.
	var labels, owners [2]int // [start, end) in meta
	mi := fieldIter{b: meta, what: "task meta"}
	var err error
	for err == nil {
		at := len(meta) - len(mi.b)
		if !mi.next(&f) {
			break
		}
		end := len(meta) - len(mi.b)
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			m.Uid, err = wireString(f.val, "task uid")
		case f.num == 2 && f.typ == protowire.BytesType:
			m.Name, err = wireString(f.val, "task name")
		case f.num == 3 && f.typ == protowire.VarintType:
			m.Version = f.v
		case f.num == 4 && f.typ == protowire.BytesType && (labels[1] == 0 || labels[1] == at):
			if labels[1] == 0 {
				labels[0] = at
			}
			labels[1] = end
		case f.num == 6 && f.typ == protowire.BytesType && (owners[1] == 0 || owners[1] == at):
			if owners[1] == 0 {
				owners[0] = at
			}
			owners[1] = end
		case f.num == 7 && f.typ == protowire.VarintType:
			m.CreationUnixNanos = int64(f.v)
		case f.num == 8 && f.typ == protowire.VarintType:
			m.CreateRevision = f.v
		default:
			return slowTask(obj) // annotations, a field this reader does not know, a run broken
		}
	}
	if err != nil || mi.err != nil {
		return slowTask(obj)
	}
	if labels[1] > 0 {
		span := meta[labels[0]:labels[1]]
		l, ok := in.labels[string(span)]
		if !ok {
			p := &omegav1.ObjectMeta{}
			if err := proto.Unmarshal(span, p); err != nil {
				return slowTask(obj)
			}
			l = p.Labels
			internPut(in.labels, string(span), l)
		}
		m.Labels = l
	}
	if owners[1] > 0 {
		span := meta[owners[0]:owners[1]]
		o, ok := in.owners[string(span)]
		if !ok {
			p := &omegav1.ObjectMeta{}
			if err := proto.Unmarshal(span, p); err != nil {
				return slowTask(obj)
			}
			o = p.OwnerReferences
			internPut(in.owners, string(span), o)
		}
		m.OwnerReferences = o
	}
	sp, ok := in.specs[string(spec)]
	if !ok {
		p := &omegav1.TaskSpec{}
		if err := proto.Unmarshal(spec, p); err != nil {
			return slowTask(obj)
		}
		sp = &internedSpec{spec: p, request: ResourcesFromProto(p.GetResources())}
		internPut(in.specs, string(spec), sp)
	}
	// newTask's checks, with the spec's shared.
	t, err := newTask(&omegav1.Task{Meta: m, Spec: sp.spec}, nil) // m is interned by the reader already
	if err != nil {
		return slowTask(obj)
	}
	t.req = &sp.request // shared by the tasks of the spec
	t.Version, t.CreateRev, t.Created = m.GetVersion(), m.GetCreateRevision(), m.GetCreationUnixNanos()
	if err := in.decodeTaskStatus(t, status); err != nil {
		return nil, err
	}
	return t, nil
}

func slowTask(obj []byte) (*Task, error) {
	p := &omegav1.Task{}
	if err := proto.Unmarshal(obj, p); err != nil {
		return nil, fmt.Errorf("%w: task: %v", ErrInvalid, err)
	}
	return taskFromWire(p)
}
