package store

import (
	"encoding/hex"
	"maps"
	"slices"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/omega-cell/omega/txn"
)

// appendTaskStatus appends t's status in the wire format of
// omegav1.TaskStatus (what t.StatusProto() marshals to, field for field),
// without building the message: a status record is written on every claim,
// eviction and report, so this is the hottest encoding in the store.
// TestStatusCodecMatchesProto holds it to proto.Unmarshal.
func appendTaskStatus(b []byte, t *txn.Task) []byte {
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
		b = protowire.AppendVarint(b, uint64(resourcesSize(t.Claimed)))
		b = appendResources(b, t.Claimed)
	}
	b = appendString(b, 4, t.Scheduler)
	b = appendInt(b, 5, t.Assigned)
	b = appendInt(b, 6, t.Started)
	b = appendInt(b, 7, t.Finished)
	b = appendInt(b, 8, int64(t.Evictions))
	b = appendString(b, 9, t.Message)
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

func resourcesSize(r txn.Resources) int {
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

func appendResources(b []byte, r txn.Resources) []byte {
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
