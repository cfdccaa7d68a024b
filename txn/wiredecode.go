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
	objNum := protowire.Number(0)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return c, wireErr("change", n)
		}
		b = b[n:]
		switch {
		case num >= 1 && num <= 3 && typ == protowire.BytesType:
			obj, n = protowire.ConsumeBytes(b)
			objNum = num // a oneof: the last one wins, as proto.Unmarshal has it
		case num >= 4 && num <= 6 && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			switch num {
			case 4:
				c.Deleted = v != 0
			case 5:
				c.Created = v != 0
			case 6:
				c.Partial = v != 0
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
		if c.Partial {
			c.Task, err = decodePartialTask(obj)
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
	default:
		return c, fmt.Errorf("%w: a change with no object", ErrInvalid)
	}
	if err != nil {
		return Change{}, err
	}
	return c, nil
}

// fields walks a message's fields, calling f with each field's number,
// type and the bytes of its value (a varint's decoded in v).
func fields(b []byte, what string, f func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireErr(what, n)
		}
		b = b[n:]
		var v uint64
		var val []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			typ = -1 // nothing the schema has: skipped
		}
		if n < 0 {
			return wireErr(what, n)
		}
		b = b[n:]
		if typ >= 0 {
			if err := f(num, typ, v, val); err != nil {
				return err
			}
		}
	}
	return nil
}

func wireString(val []byte, what string) (string, error) {
	if !utf8.Valid(val) {
		return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	return string(val), nil
}

// decodeMetaIdentity reads an ObjectMeta's uid and version.
func decodeMetaIdentity(b []byte, what string) (uuid.UUID, uint64, error) {
	var uid uuid.UUID
	var version uint64
	var err error
	ferr := fields(b, what+" meta", func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			uid, err = ParseUID(string(val), what+" uid")
			return err
		case num == 3 && typ == protowire.VarintType:
			version = v
		}
		return nil
	})
	if ferr != nil {
		return uuid.Nil, 0, ferr
	}
	if uid == uuid.Nil {
		return uuid.Nil, 0, fmt.Errorf("%w: %s has no uid", ErrInvalid, what)
	}
	return uid, version, nil
}

// decodeResources reads an omegav1.Resources as ResourcesFromProto would
// (zero extended amounts dropped).
func decodeResources(b []byte) (Resources, error) {
	var r Resources
	err := fields(b, "resources", func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			r.CPU = int64(v)
		case num == 2 && typ == protowire.VarintType:
			r.Memory = int64(v)
		case num == 3 && typ == protowire.BytesType:
			var key string
			var amount int64
			err := fields(val, "extended resource", func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error {
				var err error
				switch {
				case num == 1 && typ == protowire.BytesType:
					key, err = wireString(val, "an extended resource's name")
				case num == 2 && typ == protowire.VarintType:
					amount = int64(v)
				}
				return err
			})
			if err != nil {
				return err
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
		return nil
	})
	return r, err
}

// decodePartialTask reads a task's partial change: meta (uid, version)
// and status, checked as restoreTaskStatus checks them.
func decodePartialTask(b []byte) (*Task, error) {
	t := &Task{}
	var meta, status []byte
	err := fields(b, "task", func(num protowire.Number, typ protowire.Type, _ uint64, val []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			meta = val
		case num == 3 && typ == protowire.BytesType:
			status = val
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.UID, t.Version, err = decodeMetaIdentity(meta, "task"); err != nil {
		return nil, err
	}
	if err := decodeTaskStatus(t, status); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeTaskStatus sets t's status from its encoding, checked as
// restoreTaskStatus checks it.
func decodeTaskStatus(t *Task, status []byte) error {
	var err error
	var machine string
	var run []byte
	err = fields(status, "task status", func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error {
		var err error
		switch {
		case num == 1 && typ == protowire.VarintType:
			t.State = omegav1.TaskState(int32(v))
		case num == 2 && typ == protowire.BytesType:
			machine = string(val)
		case num == 3 && typ == protowire.BytesType:
			t.Claimed, err = decodeResources(val)
		case num == 4 && typ == protowire.BytesType:
			t.Scheduler, err = wireString(val, "task scheduler")
		case num == 5 && typ == protowire.VarintType:
			t.Assigned = int64(v)
		case num == 6 && typ == protowire.VarintType:
			t.Started = int64(v)
		case num == 7 && typ == protowire.VarintType:
			t.Finished = int64(v)
		case num == 8 && typ == protowire.VarintType:
			t.Evictions = int32(v)
		case num == 9 && typ == protowire.BytesType:
			t.Message, err = wireString(val, "task message")
		case num == 10 && typ == protowire.BytesType:
			run = val
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("task %s: %w", t.UID, err)
	}
	if _, ok := omegav1.TaskState_name[int32(t.State)]; !ok || t.State == omegav1.TaskState_TASK_STATE_UNSPECIFIED {
		return fmt.Errorf("%w: task %s state %d", ErrInvalid, t.UID, t.State)
	}
	if machine != "" {
		if t.State == omegav1.TaskState_TASK_STATE_PENDING {
			return fmt.Errorf("%w: task %s is PENDING on machine %s", ErrInvalid, t.UID, short(machine))
		}
		if t.Machine, err = ParseUID(machine, "task machine"); err != nil {
			return err
		}
	}
	if err := t.Claimed.Validate(); err != nil {
		return fmt.Errorf("%w: task %s claimed: %v", ErrInvalid, t.UID, err)
	}
	if run != nil {
		r := &omegav1.TaskRun{}
		if err := proto.Unmarshal(run, r); err != nil {
			return fmt.Errorf("%w: task %s run: %v", ErrInvalid, t.UID, err)
		}
		if err := validateRun(r); err != nil {
			return fmt.Errorf("%w: task %s run: %v", ErrInvalid, t.UID, err)
		}
		t.Report = r
	}
	return nil
}

// decodePartialMachine reads a machine's partial change: meta (uid,
// version) and status, derived fields included.
func decodePartialMachine(b []byte) (*Machine, error) {
	m := &Machine{}
	var meta, status []byte
	err := fields(b, "machine", func(num protowire.Number, typ protowire.Type, _ uint64, val []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			meta = val
		case num == 3 && typ == protowire.BytesType:
			status = val
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if m.UID, m.Version, err = decodeMetaIdentity(meta, "machine"); err != nil {
		return nil, err
	}
	err = fields(status, "machine status", func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error {
		var err error
		switch {
		case num == 1 && typ == protowire.VarintType:
			m.State = omegav1.MachineState(int32(v))
		case num == 2 && typ == protowire.BytesType:
			m.Allocated, err = decodeResources(val)
		case num == 3 && typ == protowire.BytesType:
			m.Agent, err = wireString(val, "machine agent address")
		case num == 4 && typ == protowire.VarintType:
			m.Tasks = int32(v)
		case num == 5 && typ == protowire.VarintType:
			m.Seq = v
		case num == 6 && typ == protowire.VarintType:
			m.LastClaim = v
		}
		return err
	})
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
// tasks carry the same spec, labels and owner references, so each is
// decoded once per watch, and the copy's tasks share them as the store's
// own objects do in process.
type interned struct {
	specs  map[string]*internedSpec
	labels map[string]map[string]string
	owners map[string][]*omegav1.OwnerReference
}

type internedSpec struct {
	spec    *omegav1.TaskSpec
	request Resources
}

func (r *WriteSetReader) interned() *interned {
	if r.in == nil {
		r.in = &interned{specs: map[string]*internedSpec{}, labels: map[string]map[string]string{}, owners: map[string][]*omegav1.OwnerReference{}}
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
	plain := true
	err := fields(obj, "task", func(num protowire.Number, typ protowire.Type, _ uint64, val []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType && meta == nil:
			meta = val
		case num == 2 && typ == protowire.BytesType && spec == nil:
			spec = val
		case num == 3 && typ == protowire.BytesType && status == nil:
			status = val
		default:
			plain = false
		}
		return nil
	})
	if err != nil || !plain || meta == nil {
		return slowTask(obj)
	}
	m := &omegav1.ObjectMeta{}
	var labels, owners []byte
	err = fields(meta, "task meta", func(num protowire.Number, typ protowire.Type, v uint64, val []byte) error {
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			m.Uid, err = wireString(val, "task uid")
		case num == 2 && typ == protowire.BytesType:
			m.Name, err = wireString(val, "task name")
		case num == 3 && typ == protowire.VarintType:
			m.Version = v
		case num == 4 && typ == protowire.BytesType:
			labels = append(labels, protowire.AppendBytes(nil, val)...)
		case num == 6 && typ == protowire.BytesType:
			owners = append(owners, protowire.AppendBytes(nil, val)...)
		case num == 7 && typ == protowire.VarintType:
			m.CreationUnixNanos = int64(v)
		case num == 8 && typ == protowire.VarintType:
			m.CreateRevision = v
		default:
			plain = false // annotations, or a field this reader does not know
		}
		return err
	})
	if err != nil || !plain {
		return slowTask(obj)
	}
	if labels != nil {
		l, ok := in.labels[string(labels)]
		if !ok {
			p := &omegav1.ObjectMeta{}
			if err := proto.Unmarshal(tagged(4, labels), p); err != nil {
				return slowTask(obj)
			}
			l = p.Labels
			internPut(in.labels, string(labels), l)
		}
		m.Labels = l
	}
	if owners != nil {
		o, ok := in.owners[string(owners)]
		if !ok {
			p := &omegav1.ObjectMeta{}
			if err := proto.Unmarshal(tagged(6, owners), p); err != nil {
				return slowTask(obj)
			}
			o = p.OwnerReferences
			internPut(in.owners, string(owners), o)
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
	t, err := newTask(&omegav1.Task{Meta: m, Spec: sp.spec})
	if err != nil {
		return slowTask(obj)
	}
	t.Request = sp.request
	t.Version, t.CreateRev, t.Created = m.GetVersion(), m.GetCreateRevision(), m.GetCreationUnixNanos()
	if err := decodeTaskStatus(t, status); err != nil {
		return nil, err
	}
	return t, nil
}

// tagged re-frames the concatenated length-prefixed entries b as repeated
// field num.
func tagged(num protowire.Number, b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		out = protowire.AppendTag(out, num, protowire.BytesType)
		out = protowire.AppendBytes(out, v)
		b = b[n:]
	}
	return out
}

func slowTask(obj []byte) (*Task, error) {
	p := &omegav1.Task{}
	if err := proto.Unmarshal(obj, p); err != nil {
		return nil, fmt.Errorf("%w: task: %v", ErrInvalid, err)
	}
	return taskFromWire(p)
}
