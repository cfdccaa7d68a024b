package txn

import (
	"fmt"

	"github.com/google/uuid"
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
		case op.NewOffer != nil:
			c.Object = &omegav1.CreateOp_Offer{Offer: op.NewOffer}
		case op.NewQuota != nil:
			c.Object = &omegav1.CreateOp_Quota{Quota: op.NewQuota}
		case op.NewLease != nil:
			c.Object = &omegav1.CreateOp_Lease{Lease: op.NewLease}
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
			TaskUid: uidString(op.Task), State: op.State, ExpectVersion: op.ExpectVersion, Message: op.Message, Run: op.Run,
		}}}
	case OpPut:
		p := &omegav1.PutOp{ExpectVersion: op.ExpectVersion}
		switch {
		case op.NewTask != nil:
		case op.NewJob != nil:
			p.Object = &omegav1.PutOp_Job{Job: op.NewJob}
		case op.NewMachine != nil:
			p.Object = &omegav1.PutOp_Machine{Machine: op.NewMachine}
		case op.NewQuota != nil:
			p.Object = &omegav1.PutOp_Quota{Quota: op.NewQuota}
		case op.NewLease != nil:
			p.Object = &omegav1.PutOp_Lease{Lease: op.NewLease}
		}
		return &omegav1.Operation{Op: &omegav1.Operation_Put{Put: p}}
	case OpDelete:
		return &omegav1.Operation{Op: &omegav1.Operation_Delete{Delete: &omegav1.DeleteOp{
			Kind: op.DeleteKind, Uid: uidString(op.DeleteUID), ExpectVersion: op.ExpectVersion,
		}}}
	case OpAnswer:
		return &omegav1.Operation{Op: &omegav1.Operation_Answer{Answer: &omegav1.AnswerOp{OfferUid: uidString(op.DeleteUID)}}}
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
		if op.Run != nil {
			c += sizeMessage(5, proto.Size(op.Run))
		}
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
	case OpAnswer:
		body = sizeMessage(7, sizeString(1, uidSize(op.DeleteUID)))
	}
	return sizeMessage(6, body), object
}

// --- from the wire ------------------------------------------------------------

// wireUID parses a uid field of an operation: a uuid other than the nil
// one (ParseUID). An empty field is refused, naming it, not read as the
// nil uid: the operation names no object.
func wireUID(s, what string) (uuid.UUID, error) { return ParseUID(s, what) }

// claimFromWire is a claim's resources as sent, zero amounts included, so
// that Evaluate judges (and normalizes) them as it does in process. The map
// is p's (TxnFromProto owns p): Evaluate copies a claim's map into the
// state, as it does a caller's in process.
func claimFromWire(p *omegav1.Resources) Resources {
	return Resources{CPU: p.GetCpuMillis(), Memory: p.GetMemoryBytes(), Ext: p.GetExtended()}
}

// TxnFromProto converts a transaction received on the wire. It takes
// ownership of p's objects. A uid that is not a uuid, or an operation with
// nothing set, is an *OpError wrapping ErrInvalid, as Evaluate reports bad
// input; everything else is left for Evaluate to judge, so a transaction
// means the same on the wire as in process.
func TxnFromProto(p *omegav1.Transaction) (*Txn, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	tx := &Txn{
		ViewRevision: p.GetViewRevision(),
		Conflict:     p.GetConflict(),
		Commit:       p.GetCommit(),
		Component:    p.GetComponent(),
		UnixNanos:    p.GetUnixNanos(),
		Ops:          make([]Op, len(p.GetOps())),
	}
	for i, o := range p.GetOps() {
		op, err := opFromProto(o)
		if err != nil {
			return nil, &OpError{Index: i, Kind: op.Kind, Err: err}
		}
		tx.Ops[i] = op
	}
	return tx, nil
}

func opFromProto(o *omegav1.Operation) (Op, error) {
	var err error
	switch x := o.GetOp().(type) {
	case *omegav1.Operation_Create:
		op := Op{Kind: OpCreate}
		switch obj := x.Create.GetObject().(type) {
		case *omegav1.CreateOp_Task:
			op.NewTask = obj.Task
		case *omegav1.CreateOp_Job:
			op.NewJob = obj.Job
		case *omegav1.CreateOp_Machine:
			op.NewMachine = obj.Machine
		case *omegav1.CreateOp_Offer:
			op.NewOffer = obj.Offer
		case *omegav1.CreateOp_Quota:
			op.NewQuota = obj.Quota
		case *omegav1.CreateOp_Lease:
			op.NewLease = obj.Lease
		}
		return op, nil
	case *omegav1.Operation_Claim:
		c := x.Claim
		op := Op{Kind: OpClaim, Resources: claimFromWire(c.GetResources()), ExpectVersion: c.GetExpectVersion()}
		if op.Task, err = wireUID(c.GetTaskUid(), "task_uid"); err != nil {
			return op, err
		}
		op.Machine, err = wireUID(c.GetMachineUid(), "machine_uid")
		return op, err
	case *omegav1.Operation_Evict:
		e := x.Evict
		op := Op{Kind: OpEvict, ExpectVersion: e.GetExpectVersion(), ForPriority: e.GetForPriority(), Force: e.GetForce(), Message: e.GetReason()}
		op.Task, err = wireUID(e.GetTaskUid(), "task_uid")
		return op, err
	case *omegav1.Operation_SetStatus:
		s := x.SetStatus
		op := Op{Kind: OpSetStatus, State: s.GetState(), ExpectVersion: s.GetExpectVersion(), Message: s.GetMessage(), Run: s.GetRun()}
		op.Task, err = wireUID(s.GetTaskUid(), "task_uid")
		return op, err
	case *omegav1.Operation_Put:
		op := Op{Kind: OpPut, ExpectVersion: x.Put.GetExpectVersion()}
		switch obj := x.Put.GetObject().(type) {
		case *omegav1.PutOp_Job:
			op.NewJob = obj.Job
		case *omegav1.PutOp_Machine:
			op.NewMachine = obj.Machine
		case *omegav1.PutOp_Quota:
			op.NewQuota = obj.Quota
		case *omegav1.PutOp_Lease:
			op.NewLease = obj.Lease
		}
		return op, nil
	case *omegav1.Operation_Delete:
		d := x.Delete
		op := Op{Kind: OpDelete, DeleteKind: d.GetKind(), ExpectVersion: d.GetExpectVersion()}
		op.DeleteUID, err = wireUID(d.GetUid(), "uid")
		return op, err
	case *omegav1.Operation_Answer:
		op := Op{Kind: OpAnswer}
		op.DeleteUID, err = wireUID(x.Answer.GetOfferUid(), "offer_uid")
		return op, err
	}
	return Op{}, fmt.Errorf("%w: an operation with none of its kinds set", ErrInvalid)
}

// Proto returns the wire form of the result.
func (r *Result) Proto() *omegav1.TransactionResult {
	p := &omegav1.TransactionResult{
		Revision: r.Revision, Base: r.Base,
		Committed: int32(r.Committed), Conflicts: int32(r.Conflicts), ClaimsConflicted: int32(r.ClaimsConflicted),
		Rejected: int32(r.Rejected), Outcomes: make([]*omegav1.Outcome, len(r.Outcomes)),
	}
	for i, o := range r.Outcomes {
		p.Outcomes[i] = &omegav1.Outcome{Code: o.Code, Detail: o.Detail, Reason: o.Reason}
	}
	return p
}

// ResultFromProto converts the result of a transaction of ops operations
// received on the wire. It refuses a result that does not fit the
// transaction or itself — an outcome per operation, codes it knows, counts
// that agree with the outcomes, a revision exactly when something
// committed — so a caller may index the outcomes by operation.
func ResultFromProto(p *omegav1.TransactionResult, ops int) (Result, error) {
	r := Result{
		Revision: p.GetRevision(), Base: p.GetBase(),
		Committed: int(p.GetCommitted()), Conflicts: int(p.GetConflicts()), ClaimsConflicted: int(p.GetClaimsConflicted()),
		Rejected: int(p.GetRejected()),
	}
	if n := len(p.GetOutcomes()); n != ops {
		return Result{}, fmt.Errorf("%w: a result of %d outcomes for %d operations", ErrInvalid, n, ops)
	}
	var committed, conflicts, rejected int
	if ops > 0 {
		r.Outcomes = make([]Outcome, ops)
	}
	for i, o := range p.GetOutcomes() {
		switch code := o.GetCode(); code {
		case omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED:
			committed++
		case omegav1.OutcomeCode_OUTCOME_CODE_ABORTED:
		case omegav1.OutcomeCode_OUTCOME_CODE_REJECTED:
			rejected++
		default:
			if _, ok := omegav1.OutcomeCode_name[int32(code)]; !ok {
				return Result{}, fmt.Errorf("%w: outcome %d has code %d", ErrInvalid, i, code)
			}
			conflicts++
		}
		r.Outcomes[i] = Outcome{Code: o.GetCode(), Detail: o.GetDetail(), Reason: o.GetReason()}
	}
	switch {
	case committed != r.Committed || conflicts != r.Conflicts || rejected != r.Rejected:
		return Result{}, fmt.Errorf("%w: a result counting %d committed, %d conflicting, %d rejected; its outcomes say %d, %d, %d",
			ErrInvalid, r.Committed, r.Conflicts, r.Rejected, committed, conflicts, rejected)
	case r.ClaimsConflicted < 0 || r.ClaimsConflicted > conflicts:
		return Result{}, fmt.Errorf("%w: %d conflicting claims among %d conflicts", ErrInvalid, r.ClaimsConflicted, conflicts)
	case (r.Revision != 0) != (committed > 0):
		return Result{}, fmt.Errorf("%w: a result at revision %d with %d operations committed", ErrInvalid, r.Revision, committed)
	case r.Revision != 0 && r.Revision <= r.Base:
		return Result{}, fmt.Errorf("%w: a result committed at %d on a base of %d", ErrInvalid, r.Revision, r.Base)
	}
	return r, nil
}

// Proto returns the wire form of the write set: every change whole (a
// machine's derived allocation, task count and sequence number included),
// as watchers receive it. It shares the objects' immutable messages. Each
// kind is encoded as its entry in changeCodecs says.
func (ws *WriteSet) Proto() *omegav1.RevisionChanges {
	p := &omegav1.RevisionChanges{Revision: ws.Revision, UnixNanos: ws.UnixNanos, Changes: make([]*omegav1.Change, 0, len(ws.Changes))}
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Deleted && c.Created {
			continue // created and deleted by the same transaction: nobody saw it
		}
		p.Changes = append(p.Changes, changeProto(c, false))
	}
	return p
}

// Chunks sends the write set's wire form in pieces of about maxBytes of
// encoding each (a change larger than that has a piece of its own; 0:
// DefaultSnapshotChunkBytes), every piece but the last marked More, so that
// a revision of large objects — a few claims on tasks of MaxObjectBytes
// each — never needs one message above the wire's limit. A WriteSetReader
// joins them. It stops at send's first error.
func (ws *WriteSet) Chunks(maxBytes int, send func(*omegav1.RevisionChanges) error) error {
	return chunks(ws.Proto(), maxBytes, send)
}

func chunks(all *omegav1.RevisionChanges, maxBytes int, send func(*omegav1.RevisionChanges) error) error {
	if maxBytes <= 0 {
		maxBytes = DefaultSnapshotChunkBytes
	}
	header := sizeVarint(1, all.Revision) + sizeVarint(3, uint64(all.UnixNanos)) + protowire.SizeTag(4) + 1
	part := &omegav1.RevisionChanges{Revision: all.Revision, UnixNanos: all.UnixNanos}
	size := header
	for _, c := range all.Changes {
		n := 1 + protowire.SizeBytes(proto.Size(c))
		if len(part.Changes) > 0 && size+n > maxBytes {
			part.More = true
			if err := send(part); err != nil {
				return err
			}
			part, size = &omegav1.RevisionChanges{Revision: all.Revision, UnixNanos: all.UnixNanos}, header
		}
		part.Changes = append(part.Changes, c)
		size += n
	}
	return send(part)
}

// WriteSetReader joins the pieces of Chunks into write sets, in order.
type WriteSetReader struct {
	parts []*omegav1.Change
	head  *omegav1.RevisionChanges // the first piece of the revision being joined

	// AddBytes's: the changes of the revision being joined, decoded.
	raw        []Change
	rawStarted bool
	rawRev     uint64
	rawNanos   int64
	in         *interned
}

// Add takes the next piece; it returns the write set when the piece is its
// revision's last (nil before), or an error for a piece of another
// revision than the one being joined.
func (r *WriteSetReader) Add(p *omegav1.RevisionChanges) (*WriteSet, error) {
	if r.head != nil && (p.GetRevision() != r.head.GetRevision() || p.GetUnixNanos() != r.head.GetUnixNanos()) {
		return nil, fmt.Errorf("%w: a piece of revision %d while joining revision %d", ErrInvalid, p.GetRevision(), r.head.GetRevision())
	}
	if r.head == nil {
		r.head = p
	}
	r.parts = append(r.parts, p.GetChanges()...)
	if p.GetMore() {
		return nil, nil
	}
	whole := &omegav1.RevisionChanges{Revision: r.head.GetRevision(), UnixNanos: r.head.GetUnixNanos(), Changes: r.parts}
	r.head, r.parts = nil, nil
	return WriteSetFromProto(whole)
}

// WriteSetFromProto converts a revision received from a watch, so that a
// remote client applies it to its copy as an in-process one applies the
// store's own write set.
func WriteSetFromProto(p *omegav1.RevisionChanges) (*WriteSet, error) {
	ws := &WriteSet{Revision: p.GetRevision(), UnixNanos: p.GetUnixNanos(), Changes: make([]Change, len(p.GetChanges()))}
	for i, w := range p.GetChanges() {
		c := Change{Deleted: w.GetDeleted(), Created: w.GetCreated(), Partial: w.GetPartial()}
		var err error
		switch obj := w.GetObject().(type) {
		case *omegav1.Change_Task:
			if c.PrevState, err = prevState(w.GetPrevState()); err != nil {
				break
			}
			if c.Partial {
				c.Kind = omegav1.ObjectKind_OBJECT_KIND_TASK
				c.Task, err = taskFromPartial(obj.Task)
				break
			}
			c.Kind = omegav1.ObjectKind_OBJECT_KIND_TASK
			c.Task, err = taskFromWire(obj.Task)
		case *omegav1.Change_Job:
			c.Kind = omegav1.ObjectKind_OBJECT_KIND_JOB
			c.Job, err = jobFromWire(obj.Job)
		case *omegav1.Change_Machine:
			c.Kind = omegav1.ObjectKind_OBJECT_KIND_MACHINE
			if c.Partial {
				c.Machine, err = machineFromPartial(obj.Machine)
				break
			}
			c.Machine, err = machineFromWire(obj.Machine, true)
		case *omegav1.Change_Offer:
			c.Kind = omegav1.ObjectKind_OBJECT_KIND_OFFER
			c.Offer, err = offerFromWire(obj.Offer)
		case *omegav1.Change_Quota:
			c.Kind = omegav1.ObjectKind_OBJECT_KIND_QUOTA
			c.Quota, err = quotaFromWire(obj.Quota)
		case *omegav1.Change_Lease:
			c.Kind = omegav1.ObjectKind_OBJECT_KIND_LEASE
			c.Lease, err = leaseFromWire(obj.Lease)
		default:
			err = fmt.Errorf("%w: a change with no object", ErrInvalid)
		}
		if err != nil {
			return nil, fmt.Errorf("revision %d, change %d: %w", ws.Revision, i, err)
		}
		ws.Changes[i] = c
	}
	return ws, nil
}

// prevState checks a change's prev_state: a state the enum names.
func prevState(s omegav1.TaskState) (omegav1.TaskState, error) {
	if _, ok := omegav1.TaskState_name[int32(s)]; !ok {
		return 0, fmt.Errorf("%w: prev_state %d", ErrInvalid, s)
	}
	return s, nil
}

// taskFromWire rebuilds a task from its full wire form (Task.Proto()).
func taskFromWire(p *omegav1.Task) (*Task, error) {
	return restoreTask(p, p.GetMeta().GetVersion(), nil)
}

func jobFromWire(p *omegav1.Job) (*Job, error) {
	j, err := newJob(p)
	if err != nil {
		return nil, err
	}
	j.Version, j.CreateRev, j.Created = restoreMeta(p.GetMeta())
	return j, nil
}

// machineFromWire rebuilds a machine from its wire form; with derived, the
// allocation, task count and sequence number come from its status (a
// watched change), else they are left for a Restorer to derive.
func machineFromWire(p *omegav1.Machine, derived bool) (*Machine, error) {
	m, err := newMachine(p)
	if err != nil {
		return nil, err
	}
	m.Version, m.CreateRev, m.Created = restoreMeta(p.GetMeta())
	if derived {
		st := p.GetStatus()
		m.Allocated = ResourcesFromProto(st.GetAllocated())
		if err := m.Allocated.Validate(); err != nil {
			return nil, fmt.Errorf("%w: machine %s allocated: %v", ErrInvalid, m.UID, err)
		}
		m.Tasks, m.Seq, m.LastClaim = st.GetTasks(), st.GetSeq(), st.GetLastClaim()
	}
	return m, nil
}

// DefaultSnapshotChunkBytes is the size a snapshot chunk aims at: well
// below MaxWireBytes, and large enough that a million-task cell lists in a
// few hundred messages.
const DefaultSnapshotChunkBytes = 1 << 20

// SnapshotChunks lists st for the wire: machines, then jobs, then tasks,
// then offers, then quotas, then leases, in
// chunks of about maxBytes of wire encoding each (an object larger than
// that has a chunk of its own), the last one marked. It calls send for
// each chunk in order and stops at the first error.
func SnapshotChunks(st *State, maxBytes int, send func(*omegav1.SnapshotChunk) error) error {
	if maxBytes <= 0 {
		maxBytes = DefaultSnapshotChunkBytes
	}
	// A chunk's size: the revision and the last flag, then each object as
	// a repeated field (one-byte tag, length, bytes).
	header := sizeVarint(1, st.Revision()) + protowire.SizeTag(5) + 1
	chunk := &omegav1.SnapshotChunk{Revision: st.Revision()}
	size, objects := header, 0
	var err error
	add := func(m proto.Message) {
		n := 1 + protowire.SizeBytes(proto.Size(m))
		if objects > 0 && size+n > maxBytes {
			if err == nil {
				err = send(chunk)
			}
			chunk, size, objects = &omegav1.SnapshotChunk{Revision: st.Revision()}, header, 0
		}
		size += n
		objects++
	}
	st.RangeMachines(func(m *Machine) bool {
		p := m.Proto()
		add(p)
		chunk.Machines = append(chunk.Machines, p)
		return err == nil
	})
	st.RangeJobs(func(j *Job) bool {
		p := j.Proto()
		add(p)
		chunk.Jobs = append(chunk.Jobs, p)
		return err == nil
	})
	st.RangeTasks(func(t *Task) bool {
		p := t.Proto()
		add(p)
		chunk.Tasks = append(chunk.Tasks, p)
		return err == nil
	})
	st.RangeOffers(func(o *Offer) bool {
		p := o.Proto()
		add(p)
		chunk.Offers = append(chunk.Offers, p)
		return err == nil
	})
	st.RangeQuotas(func(q *Quota) bool {
		p := q.Proto()
		add(p)
		chunk.Quotas = append(chunk.Quotas, p)
		return err == nil
	})
	st.RangeLeases(func(l *Lease) bool {
		p := l.Proto()
		add(p)
		chunk.Leases = append(chunk.Leases, p)
		return err == nil
	})
	if err != nil {
		return err
	}
	chunk.Last = true
	return send(chunk)
}

// SnapshotReader rebuilds a state from the chunks of SnapshotChunks, in
// order. The machines' allocations and task counts are derived from the
// tasks, as a reopened store derives them, and their sequence numbers are
// the listing's revision (conservative for coarse conflict detection).
type SnapshotReader struct {
	r    *Restorer
	rev  uint64
	done bool
}

// Add takes the next chunk.
func (s *SnapshotReader) Add(c *omegav1.SnapshotChunk) error {
	switch {
	case s.done:
		return fmt.Errorf("%w: snapshot chunk after the last one", ErrInvalid)
	case s.r == nil:
		s.r, s.rev = NewRestorer(c.GetRevision()), c.GetRevision()
	case c.GetRevision() != s.rev:
		return fmt.Errorf("%w: snapshot chunk of revision %d in a listing of revision %d", ErrInvalid, c.GetRevision(), s.rev)
	}
	for _, m := range c.GetMachines() {
		if err := s.r.Machine(m); err != nil {
			return err
		}
	}
	for _, j := range c.GetJobs() {
		if err := s.r.Job(j); err != nil {
			return err
		}
	}
	for _, t := range c.GetTasks() {
		if err := s.r.Task(t, t.GetMeta().GetVersion()); err != nil {
			return err
		}
	}
	for _, o := range c.GetOffers() {
		if err := s.r.Offer(o); err != nil {
			return err
		}
	}
	for _, q := range c.GetQuotas() {
		if err := s.r.Quota(q); err != nil {
			return err
		}
	}
	for _, l := range c.GetLeases() {
		if err := s.r.Lease(l); err != nil {
			return err
		}
	}
	s.done = c.GetLast()
	return nil
}

// Finish returns the state, once the last chunk was added.
func (s *SnapshotReader) Finish() (*State, error) {
	if !s.done {
		return nil, fmt.Errorf("%w: snapshot ended before its last chunk", ErrInvalid)
	}
	return s.r.Finish()
}
