package txn

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// changeCodec is how one kind of object a Change carries crosses a watch
// (one field of omegav1.Change's object oneof), for every encoder of a
// Change: the message form (WriteSet.Proto), the partial form
// (WriteSet.PartialProto) and the server's hand encoder (appendChange,
// under WriteSet.AppendChunks). The three dispatch through changeCodecs
// only, so a kind cannot be handled by one and forgotten by another;
// TestChangeCodecsCoverTheOneof holds the table to omegav1.Change's
// descriptor.
type changeCodec struct {
	kind  omegav1.ObjectKind
	field protowire.Number // its field in omegav1.Change's object oneof
	// has reports whether c carries an object of this kind.
	has func(c *Change) bool
	// message is c's object whole (its Proto: shared immutable messages).
	message func(c *Change) proto.Message
	// set puts m, a message of this kind (message's or partialMessage's),
	// into w's object oneof.
	set func(w *omegav1.Change, m proto.Message)
	// prevState: the change carries prev_state (omegav1.Change.prev_state).
	prevState bool

	// The partial form (omegav1.Change.partial), for a kind whose changes
	// may go partial; all nil for a kind that always goes whole.
	//
	// partial reports whether c goes partial on a watch that asked for
	// partial changes: the watcher holds c's previous version and c changed
	// only its status.
	partial func(c *Change) bool
	// partialMessage is c's partial form as a message (PartialProto): its
	// meta's uid and version and its status.
	partialMessage func(c *Change) proto.Message
	// appendPartial appends the bytes of partialMessage's message, by hand
	// and without allocating (AppendChunks: the server's encoder of every
	// revision for its watchers).
	appendPartial func(b []byte, c *Change) []byte
	// complete fills c, a partial change read from a watch, from the
	// version s holds (WriteSet.Complete).
	complete func(c *Change, s *State, rev uint64) error
}

// changeCodecs has one entry per field of omegav1.Change's object oneof,
// the most frequent kind first (a change's codec is found by a scan).
//
// Which kinds go partial, and why (DESIGN.md "Partial changes"): a task's
// meta and spec never change after it is created, so any change of an
// existing task is its status; a machine's change the store derived (a
// claim's, a release's) is its status. Jobs, offers, quotas and leases always go
// whole: a job's or a quota's put changes its spec, which a partial form
// would drop, and an offer never changes in place (it is created, with the
// locks the store took, and deleted by its answer; Builder.Apply releases
// a deleted offer's locks from the change itself) — as every created or
// deleted object goes whole, whatever its kind.
var changeCodecs = [...]changeCodec{
	{
		kind: omegav1.ObjectKind_OBJECT_KIND_TASK, field: 1,
		has:       func(c *Change) bool { return c.Task != nil },
		message:   func(c *Change) proto.Message { return c.Task.Proto() },
		set:       func(w *omegav1.Change, m proto.Message) { w.Object = &omegav1.Change_Task{Task: m.(*omegav1.Task)} },
		prevState: true,
		partial:   func(c *Change) bool { return !c.Created && !c.Deleted },
		partialMessage: func(c *Change) proto.Message {
			t := c.Task
			return &omegav1.Task{Meta: &omegav1.ObjectMeta{Uid: t.UID.String(), Version: t.Version}, Status: t.StatusProto()}
		},
		appendPartial: func(b []byte, c *Change) []byte {
			t := c.Task
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = appendLen(b, func(b []byte) []byte { return appendMetaIdentity(b, t.UID, t.Version) })
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			return appendLen(b, func(b []byte) []byte { return AppendTaskStatus(b, t) })
		},
		complete: func(c *Change, s *State, rev uint64) error {
			prev, ok := s.Task(c.Task.UID)
			if !ok {
				return fmt.Errorf("%w: revision %d: a partial change of task %s, which the copy does not hold", ErrInvalid, rev, c.Task.UID)
			}
			t := c.Task
			t.Job, t.CreateRev, t.Created, t.Meta, t.name, t.Spec, t.req = prev.Job, prev.CreateRev, prev.Created, prev.Meta, prev.name, prev.Spec, prev.req
			return nil
		},
	},
	{
		kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, field: 3,
		has:     func(c *Change) bool { return c.Machine != nil },
		message: func(c *Change) proto.Message { return c.Machine.Proto() },
		set: func(w *omegav1.Change, m proto.Message) {
			w.Object = &omegav1.Change_Machine{Machine: m.(*omegav1.Machine)}
		},
		partial: func(c *Change) bool { return c.Derived && !c.Created && !c.Deleted },
		partialMessage: func(c *Change) proto.Message {
			m := c.Machine.Proto()
			m.Meta = &omegav1.ObjectMeta{Uid: m.Meta.Uid, Version: m.Meta.Version}
			m.Spec = nil
			return m
		},
		appendPartial: func(b []byte, c *Change) []byte {
			m := c.Machine
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = appendLen(b, func(b []byte) []byte { return appendMetaIdentity(b, m.UID, m.Version) })
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			return appendLen(b, func(b []byte) []byte {
				b = appendInt(b, 1, int64(m.State))
				b = protowire.AppendTag(b, 2, protowire.BytesType) // allocated: always set, as Proto sets it
				b = appendLen(b, func(b []byte) []byte { return appendResources(b, m.Allocated) })
				b = appendString(b, 3, m.Agent)
				b = appendInt(b, 4, int64(m.Tasks))
				b = appendUint(b, 5, m.Seq)
				return appendUint(b, 6, m.LastClaim)
			})
		},
		complete: func(c *Change, s *State, rev uint64) error {
			prev, ok := s.Machine(c.Machine.UID)
			if !ok {
				return fmt.Errorf("%w: revision %d: a partial change of machine %s, which the copy does not hold", ErrInvalid, rev, c.Machine.UID)
			}
			m := c.Machine
			m.CreateRev, m.Created, m.Meta, m.Spec, m.Capacity = prev.CreateRev, prev.Created, prev.Meta, prev.Spec, prev.Capacity
			return nil
		},
	},
	{
		kind: omegav1.ObjectKind_OBJECT_KIND_JOB, field: 2,
		has:     func(c *Change) bool { return c.Job != nil },
		message: func(c *Change) proto.Message { return c.Job.Proto() },
		set:     func(w *omegav1.Change, m proto.Message) { w.Object = &omegav1.Change_Job{Job: m.(*omegav1.Job)} },
	},
	{
		kind: omegav1.ObjectKind_OBJECT_KIND_OFFER, field: 8,
		has:     func(c *Change) bool { return c.Offer != nil },
		message: func(c *Change) proto.Message { return c.Offer.Proto() },
		set:     func(w *omegav1.Change, m proto.Message) { w.Object = &omegav1.Change_Offer{Offer: m.(*omegav1.Offer)} },
	},
	{
		kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, field: 9,
		has:     func(c *Change) bool { return c.Quota != nil },
		message: func(c *Change) proto.Message { return c.Quota.Proto() },
		set:     func(w *omegav1.Change, m proto.Message) { w.Object = &omegav1.Change_Quota{Quota: m.(*omegav1.Quota)} },
	},
	{
		kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, field: 10,
		has:     func(c *Change) bool { return c.Lease != nil },
		message: func(c *Change) proto.Message { return c.Lease.Proto() },
		set:     func(w *omegav1.Change, m proto.Message) { w.Object = &omegav1.Change_Lease{Lease: m.(*omegav1.Lease)} },
	},
}

// codec returns the entry of c's object's kind (nil for a change with no
// object, which no evaluation makes).
func (c *Change) codec() *changeCodec {
	for i := range changeCodecs {
		if changeCodecs[i].has(c) {
			return &changeCodecs[i]
		}
	}
	return nil
}

// goesPartial reports whether c goes partial on a watch that asked for
// partial changes.
func (k *changeCodec) goesPartial(c *Change) bool { return k.partial != nil && k.partial(c) }

// changeProto is c's message form (partial: with a partial object where
// c's kind allows one), for Proto and PartialProto.
func changeProto(c *Change, partial bool) *omegav1.Change {
	w := &omegav1.Change{Deleted: c.Deleted, Created: c.Created}
	k := c.codec()
	if k == nil {
		return w
	}
	if k.prevState {
		w.PrevState = c.PrevState
	}
	if partial && k.goesPartial(c) {
		w.Partial = true
		k.set(w, k.partialMessage(c))
	} else {
		k.set(w, k.message(c))
	}
	return w
}
