package replica

// The log's entries and the snapshot's state in their wire forms: each
// entry a write set as a watch sends it (partial changes completed against
// the state it applies to), the state as its listing's chunks.

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// An entry's data: the proposing member's id and its proposal's sequence
// (8 bytes each, big endian), then the write set's wire form as a watch
// sends it to a copy of the cell (omegav1.RevisionChanges, each change
// partial where the members hold the object's previous version: a claim's
// revision is a hundred small status messages, not a hundred tasks), in
// one piece.
func encodeEntry(from, seq uint64, ws *txn.WriteSet) ([]byte, error) {
	b := make([]byte, 16, 16+64*len(ws.Changes))
	binary.BigEndian.PutUint64(b, from)
	binary.BigEndian.PutUint64(b[8:], seq)
	pieces := 0
	err := ws.AppendChunks(true, 1<<62, func(p []byte) error {
		pieces++
		b = append(b, p...)
		return nil
	})
	if err == nil && pieces != 1 {
		err = fmt.Errorf("replica: a write set in %d pieces", pieces)
	}
	return b, err
}

// decodeEntry reads an entry's write set, its partial changes completed
// against st (the state it applies to).
func (n *Node) decodeEntry(b []byte, st *txn.State) (*txn.WriteSet, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: an entry of %d bytes", txn.ErrInvalid, len(b))
	}
	ws, err := n.reader.AddBytes(b[16:])
	if err != nil {
		return nil, err
	}
	if ws == nil {
		return nil, fmt.Errorf("%w: an entry holding part of a revision", txn.ErrInvalid)
	}
	if err := ws.Complete(st); err != nil {
		return nil, err
	}
	return ws, nil
}

// EncodeState is a state's snapshot data: its listing's chunks, each
// preceded by its length (uvarint).
func EncodeState(st *txn.State) ([]byte, error) {
	var out []byte
	err := txn.SnapshotChunks(st, txn.DefaultSnapshotChunkBytes, func(c *omegav1.SnapshotChunk) error {
		b, err := proto.Marshal(c)
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
		return err
	})
	return out, err
}

// DecodeState rebuilds the state EncodeState wrote.
func DecodeState(b []byte) (*txn.State, error) {
	var r txn.SnapshotReader
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: a snapshot chunk's length is cut or corrupt", txn.ErrInvalid)
		}
		c := &omegav1.SnapshotChunk{}
		if err := proto.Unmarshal(b[k:k+int(n)], c); err != nil {
			return nil, fmt.Errorf("%w: %v", txn.ErrInvalid, err)
		}
		if err := r.Add(c); err != nil {
			return nil, err
		}
		b = b[k+int(n):]
	}
	return r.Finish()
}

// entryHeader reads an entry's proposer and sequence (0s if it is short).
func entryHeader(b []byte) (from, seq uint64) {
	if len(b) < 16 {
		return 0, 0
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
}
