package txn

import (
	"encoding/hex"
	"maps"
	"slices"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Hand-written encoders of the hottest wire forms — a task's status (the
// store writes one on every claim, eviction and report) and a watch's
// revision (the server sends one per revision to every watcher) — without
// building their messages. Their tests hold them to proto.Unmarshal.

// AppendTaskStatus appends t's status in the wire format of
// omegav1.TaskStatus (what t.StatusProto() marshals to, field for field),
// without building the message: a status record is written on every claim,
// eviction and report, so this is the hottest encoding in the store.
// TestStatusCodecMatchesProto (the store's) holds it to proto.Unmarshal.
func AppendTaskStatus(b []byte, t *Task) []byte {
	if t.State != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(t.State))
	}
	if t.Machine != uuid.Nil {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, 36)
		b = appendUUID(b, t.Machine)
	}
	if !t.Claimed.IsZero() {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(resourcesWireSize(t.Claimed)))
		b = appendResources(b, t.Claimed)
	}
	b = appendString(b, 4, t.Scheduler)
	b = appendInt(b, 5, t.Assigned)
	b = appendInt(b, 6, t.Started)
	b = appendInt(b, 7, t.Finished)
	b = appendInt(b, 8, int64(t.Evictions))
	b = appendString(b, 9, t.Message())
	if r := t.Run(); r != nil { // live agents' reports only: rare enough for proto
		b = protowire.AppendTag(b, 10, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(r)))
		b, _ = proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, r)
	}
	return b
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendInt encodes an int64 (or int32) field as proto3 does: omitted when
// zero, negative values as ten-byte varints.
func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func resourcesWireSize(r Resources) int {
	n := 0
	if r.CPU != 0 {
		n += protowire.SizeTag(1) + protowire.SizeVarint(uint64(r.CPU))
	}
	if r.Memory != 0 {
		n += protowire.SizeTag(2) + protowire.SizeVarint(uint64(r.Memory))
	}
	for k, v := range r.Ext {
		e := extEntrySize(k, v)
		n += protowire.SizeTag(3) + protowire.SizeBytes(e)
	}
	return n
}

func extEntrySize(k string, v int64) int {
	n := protowire.SizeTag(1) + protowire.SizeBytes(len(k))
	if v != 0 {
		n += protowire.SizeTag(2) + protowire.SizeVarint(uint64(v))
	}
	return n
}

func appendResources(b []byte, r Resources) []byte {
	b = appendInt(b, 1, r.CPU)
	b = appendInt(b, 2, r.Memory)
	if len(r.Ext) == 0 {
		return b
	}
	for _, k := range slices.Sorted(maps.Keys(r.Ext)) { // deterministic bytes
		v := r.Ext[k]
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(extEntrySize(k, v)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = appendInt(b, 2, v)
	}
	return b
}

// appendUUID appends u in its canonical 36-character form.
func appendUUID(b []byte, u uuid.UUID) []byte {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return append(b, buf[:]...)
}

// AppendChunks encodes ws as Chunks (partial: PartialChunks) would send
// it — the same pieces, each marshalled — handing send each piece's bytes
// (a fresh slice: send may keep it). Whole objects are marshalled with
// proto; partial changes are written field by field.
func (ws *WriteSet) AppendChunks(partial bool, maxBytes int, send func([]byte) error) error {
	if maxBytes <= 0 {
		maxBytes = DefaultSnapshotChunkBytes
	}
	head := func() []byte {
		var b []byte
		if ws.Revision != 0 {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, ws.Revision)
		}
		if ws.UnixNanos != 0 {
			b = protowire.AppendTag(b, 3, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(ws.UnixNanos))
		}
		return b
	}
	header := len(head()) + protowire.SizeTag(4) + 1
	part, size, n := head(), header, 0
	var scratch []byte
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Deleted && c.Created {
			continue // created and deleted by the same transaction: nobody saw it
		}
		var err error
		if scratch, err = appendChange(scratch[:0], c, partial); err != nil {
			return err
		}
		k := protowire.SizeTag(2) + protowire.SizeBytes(len(scratch))
		if n > 0 && size+k > maxBytes {
			part = protowire.AppendTag(part, 4, protowire.VarintType)
			part = protowire.AppendVarint(part, 1)
			if err := send(part); err != nil {
				return err
			}
			part, size, n = head(), header, 0
		}
		part = protowire.AppendTag(part, 2, protowire.BytesType)
		part = protowire.AppendBytes(part, scratch)
		size += k
		n++
	}
	return send(part)
}

// appendChange encodes one omegav1.Change as WriteSet.Proto (partial:
// PartialProto) builds it, as c's entry in changeCodecs says: a partial
// object field by field, without allocating; a whole one marshalled from
// its message.
func appendChange(b []byte, c *Change, partial bool) ([]byte, error) {
	k := c.codec()
	isPartial := partial && k != nil && k.goesPartial(c)
	switch {
	case isPartial:
		b = protowire.AppendTag(b, k.field, protowire.BytesType)
		b = appendLen(b, func(b []byte) []byte { return k.appendPartial(b, c) })
	case k != nil:
		obj := k.message(c)
		b = protowire.AppendTag(b, k.field, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(obj)))
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, obj); err != nil {
			return nil, err
		}
	}
	if c.Deleted {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if c.Created {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if isPartial {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if k != nil && k.prevState && c.PrevState != 0 {
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(c.PrevState))
	}
	return b, nil
}

// appendLen appends what f writes, as a length-delimited value: written
// in place after a reserved one-byte length, moved if it needs more.
func appendLen(b []byte, f func([]byte) []byte) []byte {
	at := len(b)
	b = append(b, 0)
	b = f(b)
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var lenBuf [binaryMaxVarint]byte
	l := protowire.AppendVarint(lenBuf[:0], uint64(n))
	b = append(b, l[1:]...) // grow by the extra length bytes
	copy(b[at+len(l):], b[at+1:at+1+n])
	copy(b[at:], l)
	return b
}

const binaryMaxVarint = 10

func appendMetaIdentity(b []byte, uid uuid.UUID, version uint64) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, 36)
	b = appendUUID(b, uid)
	return appendUint(b, 3, version)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// AppendMeta appends t's meta as exportMeta builds it (the wire form of
// omegav1.ObjectMeta, at version) without building the message: the
// store writes one with every task it creates. Map entries go in the
// maps' order, which any decoder takes (proto.Marshal's is random too);
// TestTaskRecordMatchesProto holds it to proto.Unmarshal.
func AppendMeta(b []byte, t *Task, version uint64) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, 36)
	b = appendUUID(b, t.UID)
	if name := t.Name(); name != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, name)
	}
	if version != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, version)
	}
	b = appendStringMap(b, 4, t.Meta.GetLabels())
	b = appendStringMap(b, 5, t.Meta.GetAnnotations())
	for _, o := range t.Meta.GetOwnerReferences() { // a nil element is an empty message, as proto.Marshal writes it
		kind, uid, name, controller := o.GetKind(), o.GetUid(), o.GetName(), o.GetController()
		var unknown []byte // fields of a later schema, kept as stored (validate.go)
		if o != nil {
			unknown = o.ProtoReflect().GetUnknown()
		}
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		n := len(unknown)
		if kind != "" {
			n += 1 + protowire.SizeBytes(len(kind))
		}
		if uid != "" {
			n += 1 + protowire.SizeBytes(len(uid))
		}
		if name != "" {
			n += 1 + protowire.SizeBytes(len(name))
		}
		if controller {
			n += 2
		}
		b = protowire.AppendVarint(b, uint64(n))
		if kind != "" {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, kind)
		}
		if uid != "" {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendString(b, uid)
		}
		if name != "" {
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			b = protowire.AppendString(b, name)
		}
		if controller {
			b = protowire.AppendTag(b, 4, protowire.VarintType)
			b = protowire.AppendVarint(b, 1)
		}
		b = append(b, unknown...)
	}
	if t.Created != 0 {
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(t.Created))
	}
	if t.CreateRev != 0 {
		b = protowire.AppendTag(b, 8, protowire.VarintType)
		b = protowire.AppendVarint(b, t.CreateRev)
	}
	return b
}

func appendStringMap(b []byte, num protowire.Number, m map[string]string) []byte {
	for k, v := range m {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(len(k))+1+protowire.SizeBytes(len(v))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}
