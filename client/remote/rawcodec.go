package remote

import (
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers "proto"
	"google.golang.org/grpc/mem"
)

// rawMsg is a message kept in its wire encoding, for a decoder of our own
// (txn.WriteSetReader.AddBytes): a watch's revisions are decoded straight
// into write sets, without protobuf messages in between.
type rawMsg struct{ b []byte }

// rawCodec is gRPC's proto codec, but for a *rawMsg, which it hands over
// as bytes. Its name is "proto": on the wire nothing changes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMsg); ok {
		r.b = data.Materialize() // the buffers go back to gRPC's pool after this
		return nil
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }
