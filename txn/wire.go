package txn

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Proto returns the wire form of the transaction (omegav1.Transaction). It
// shares the objects of Create and Put operations. A Put of a task has no
// wire form (it is invalid) and is sent as an empty Put.
func (tx *Txn) Proto() *omegav1.Transaction {
	p := &omegav1.Transaction{
		ViewRevision: tx.ViewRevision,
		Conflict:     tx.Conflict,
		Commit:       tx.Commit,
		Component:    tx.Component,
		UnixNanos:    tx.UnixNanos,
		Ops:          make([]*omegav1.Operation, len(tx.Ops)),
	}
	for i := range tx.Ops {
		p.Ops[i] = tx.Ops[i].Proto()
	}
	return p
}

// Proto returns the wire form of the operation.
func (op *Op) Proto() *omegav1.Operation {
	switch op.Kind {
	case OpCreate:
		c := &omegav1.CreateOp{}
		switch {
		case op.NewTask != nil:
			c.Object = &omegav1.CreateOp_Task{Task: op.NewTask}
		case op.NewJob != nil:
			c.Object = &omegav1.CreateOp_Job{Job: op.NewJob}
		case op.NewMachine != nil:
			c.Object = &omegav1.CreateOp_Machine{Machine: op.NewMachine}
		}
		return &omegav1.Operation{Op: &omegav1.Operation_Create{Create: c}}
	case OpClaim:
		return &omegav1.Operation{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{
			TaskUid: uidString(op.Task), MachineUid: uidString(op.Machine),
			Resources: op.Resources.Proto(), ExpectVersion: op.ExpectVersion,
		}}}
	case OpEvict:
		return &omegav1.Operation{Op: &omegav1.Operation_Evict{Evict: &omegav1.EvictOp{
			TaskUid: uidString(op.Task), ExpectVersion: op.ExpectVersion,
			ForPriority: op.ForPriority, Force: op.Force, Reason: op.Message,
		}}}
	case OpSetStatus:
		return &omegav1.Operation{Op: &omegav1.Operation_SetStatus{SetStatus: &omegav1.SetStatusOp{
			TaskUid: uidString(op.Task), State: op.State, ExpectVersion: op.ExpectVersion, Message: op.Message,
		}}}
	case OpPut:
		p := &omegav1.PutOp{ExpectVersion: op.ExpectVersion}
		switch {
		case op.NewTask != nil:
		case op.NewJob != nil:
			p.Object = &omegav1.PutOp_Job{Job: op.NewJob}
		case op.NewMachine != nil:
			p.Object = &omegav1.PutOp_Machine{Machine: op.NewMachine}
		}
		return &omegav1.Operation{Op: &omegav1.Operation_Put{Put: p}}
	case OpDelete:
		return &omegav1.Operation{Op: &omegav1.Operation_Delete{Delete: &omegav1.DeleteOp{
			Kind: op.DeleteKind, Uid: uidString(op.DeleteUID), ExpectVersion: op.ExpectVersion,
		}}}
	}
	return &omegav1.Operation{}
}

// WireSize returns the size in bytes of the transaction's wire encoding,
// proto.Size(tx.Proto()), without building it.
func (tx *Txn) WireSize() int {
	n := txnHeaderSize(tx)
	for i := range tx.Ops {
		s, _ := opSize(&tx.Ops[i])
		n += s
	}
	return n
}

// The sizes of proto3 scalar fields: omitted when zero.
func sizeVarint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

// sizeInt32 is an int32 or enum field: negative values are sign-extended to
// ten bytes.
func sizeInt32(num protowire.Number, v int32) int { return sizeVarint(num, uint64(int64(v))) }

func sizeString(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// sizeMessage is a singular message field that is set (or a oneof member):
// present even when empty.
func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func uidSize(u [16]byte) int {
	if u == [16]byte{} {
		return 0
	}
	return 36
}

// resourcesSize is proto.Size(r.Proto()).
func resourcesSize(r Resources) int {
	n := sizeVarint(1, uint64(r.CPU)) + sizeVarint(2, uint64(r.Memory))
	for k, v := range r.Ext {
		// A map entry always carries its key and value.
		e := protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeVarint(uint64(v))
		n += sizeMessage(3, e)
	}
	return n
}

func txnHeaderSize(tx *Txn) int {
	return sizeVarint(1, tx.ViewRevision) + sizeInt32(2, int32(tx.Conflict)) + sizeInt32(3, int32(tx.Commit)) +
		sizeString(4, len(tx.Component)) + sizeVarint(5, uint64(tx.UnixNanos))
}

// opSize returns the bytes op adds to its transaction's wire form (the
// repeated field's tag and length included), and the size of the object it
// carries (0 if none).
func opSize(op *Op) (total, object int) {
	var body int // the Operation message
	switch op.Kind {
	case OpCreate:
		var c int
		if m := op.object(); m != nil {
			object = proto.Size(m)
			c = sizeMessage(1, object) // the oneof's tags are all one byte
		}
		body = sizeMessage(1, c)
	case OpClaim:
		c := sizeString(1, uidSize(op.Task)) + sizeString(2, uidSize(op.Machine)) +
			sizeMessage(3, resourcesSize(op.Resources)) + sizeVarint(4, op.ExpectVersion)
		body = sizeMessage(2, c)
	case OpEvict:
		c := sizeString(1, uidSize(op.Task)) + sizeVarint(2, op.ExpectVersion) + sizeInt32(3, op.ForPriority) +
			sizeString(5, len(op.Message))
		if op.Force {
			c += protowire.SizeTag(4) + 1
		}
		body = sizeMessage(3, c)
	case OpSetStatus:
		c := sizeString(1, uidSize(op.Task)) + sizeInt32(2, int32(op.State)) + sizeVarint(3, op.ExpectVersion) +
			sizeString(4, len(op.Message))
		body = sizeMessage(4, c)
	case OpPut:
		c := sizeVarint(3, op.ExpectVersion)
		if m := op.object(); m != nil {
			object = proto.Size(m)
			if op.NewTask == nil { // a task has no wire form in a Put (it is invalid)
				c += sizeMessage(1, object)
			}
		}
		body = sizeMessage(5, c)
	case OpDelete:
		c := sizeInt32(1, int32(op.DeleteKind)) + sizeString(2, uidSize(op.DeleteUID)) + sizeVarint(3, op.ExpectVersion)
		body = sizeMessage(6, c)
	}
	return sizeMessage(6, body), object
}
