// Package rawgrpc is gRPC's proto codec with one addition: a *Msg travels
// as the bytes it holds. The server sends a watch's revisions encoded once
// for every watcher (txn.WriteSet.AppendChunks), and a client decodes them
// from their bytes (txn.WriteSetReader.AddBytes), with no protobuf
// messages in between. Its name is "proto": on the wire nothing changes,
// so other clients (another language's) read the same bytes as messages.
package rawgrpc

import (
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers "proto"
	"google.golang.org/grpc/mem"
)

// Msg is a message in its wire encoding.
type Msg struct{ B []byte }

// Codec is the codec (grpc.ForceCodecV2, grpc.ForceServerCodecV2).
type Codec struct{}

// Marshal sends a *Msg's bytes as they are (shared, never written), and
// anything else as proto does.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*Msg); ok {
		return mem.BufferSlice{mem.SliceBuffer(m.B)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

// Unmarshal copies the bytes into a *Msg (gRPC reuses its buffers once
// this returns), and decodes anything else as proto does.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*Msg); ok {
		m.B = data.Materialize()
		return nil
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// Name is "proto".
func (Codec) Name() string { return "proto" }
