package store

import "github.com/omega-cell/omega/txn"

// appendTaskStatus appends t's status in the wire format of
// omegav1.TaskStatus (txn.AppendTaskStatus): a status record is written on
// every claim, eviction and report, so this is the hottest encoding in the
// store. TestStatusCodecMatchesProto holds it to proto.Unmarshal.
func appendTaskStatus(b []byte, t *txn.Task) []byte { return txn.AppendTaskStatus(b, t) }
