package server

import (
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers "proto"
	"google.golang.org/grpc/mem"
)

// rawMsg is a message already in its wire encoding: a watch's revision,
// encoded once for every watcher (txn.WriteSet.AppendChunks).
type rawMsg struct{ b []byte }

// rawCodec is gRPC's proto codec, but a *rawMsg goes out as its bytes. Its
// name is "proto": on the wire nothing changes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }
