// Package txnfuzz builds transactions from a fuzzer's bytes, for the fuzz
// targets of txn (Evaluate) and store (Commit, reopen). Every field of every
// operation is drawn from the bytes, strings as raw bytes (so invalid UTF-8
// is as likely as any other string), integers biased towards their edges,
// uids and expected versions mostly from a small pool of objects that a
// fixed Setup creates, so that operations hit real objects and conflict as
// often as they fail.
//
// The byte layout is a contract between Decoder and Seed: each choice is
// one byte, a string is a length byte and that many bytes (or one of a few
// special lengths), an integer is a selector byte (and eight more bytes for
// a raw value). Past the end every byte reads as 0, so a short input is a
// short program, and the seeds of the fuzz targets are written with Seed,
// choice by choice.
package txnfuzz

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Limits are small limits for fuzzing, so a short input reaches every bound.
func Limits() txn.Limits {
	return txn.Limits{MaxOps: 24, MaxStringBytes: 64, MaxObjectBytes: 1024, MaxTxnBytes: 4096}
}

// The pool: Setup creates machines 0-2, jobs 0-1 and tasks 0-7; the others
// exist only as names (for creates, and for operations on what is absent).
const (
	NumMachines = 4
	NumJobs     = 3
	NumTasks    = 12
)

func poolUID(kind byte, i int) uuid.UUID {
	var u uuid.UUID
	u[0], u[1] = kind, byte(i)
	u[2] = 0x5a
	u[6] = 0x40
	u[8] = 0x80
	u[15] = 1
	return u
}

// Machine, Job and Task return the pool's uids.
func Machine(i int) uuid.UUID { return poolUID('M', i) }
func Job(i int) uuid.UUID     { return poolUID('J', i) }
func Task(i int) uuid.UUID    { return poolUID('T', i) }

// SetupNanos is the committer clock of Setup's transactions.
const SetupNanos = 1_700_000_000_000_000_000

// Setup returns the transactions that create the starting cell: machine 0
// (4 cores, 4 GiB), machine 1 (2 cores, 2 GiB), machine 2 (4 cores, 4 GiB, 4
// gpus); jobs 0 and 1; tasks 0-3 of job 0 and 4-7 of job 1 (100 millicores,
// 100 bytes each; task 5 also a gpu); tasks 0 and 1 on machine 0, 2 on
// machine 1, 5 on machine 2; task 1 running; task 3 succeeded. Each must
// commit whole.
func Setup() []*txn.Txn {
	var ops []txn.Op
	caps := []*omegav1.Resources{
		{CpuMillis: 4000, MemoryBytes: 4000},
		{CpuMillis: 2000, MemoryBytes: 2000},
		{CpuMillis: 4000, MemoryBytes: 4000, Extended: map[string]int64{"gpu": 4}},
	}
	for i, c := range caps {
		ops = append(ops, txn.CreateMachine(&omegav1.Machine{
			Meta:   &omegav1.ObjectMeta{Uid: Machine(i).String(), Name: fmt.Sprintf("m%d", i), Labels: map[string]string{"rack": "r1"}},
			Spec:   &omegav1.MachineSpec{Capacity: c, FailureDomain: "fd", Attributes: map[string]string{"arch": "amd64"}},
			Status: &omegav1.MachineStatus{AgentAddress: "127.0.0.1:7946"},
		}))
	}
	for j := range 2 {
		ops = append(ops, txn.CreateJob(&omegav1.Job{
			Meta: &omegav1.ObjectMeta{Uid: Job(j).String(), Name: fmt.Sprintf("j%d", j)},
			Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "batch", Replicas: 4, Priority: 10,
				Template: &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 100, MemoryBytes: 100}}},
		}))
	}
	for i := range 8 {
		r := &omegav1.Resources{CpuMillis: 100, MemoryBytes: 100}
		if i == 5 {
			r.Extended = map[string]int64{"gpu": 1}
		}
		ops = append(ops, txn.CreateTask(&omegav1.Task{
			Meta: &omegav1.ObjectMeta{Uid: Task(i).String(), Name: fmt.Sprintf("t%d", i),
				OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: Job(i / 4).String(), Controller: true}}},
			Spec: &omegav1.TaskSpec{Resources: r, Priority: int32(i), Command: &omegav1.Command{Path: "/bin/true"}},
		}))
	}
	claim := func(task, machine int) txn.Op {
		r := txn.Resources{CPU: 100, Memory: 100}
		if task == 5 {
			r.Ext = map[string]int64{"gpu": 1}
		}
		return txn.Claim(Task(task), Machine(machine), r, 0)
	}
	ops = append(ops, claim(0, 0), claim(1, 0), claim(2, 1), claim(5, 2))
	first := &txn.Txn{Component: "setup", UnixNanos: SetupNanos, Ops: ops}
	second := &txn.Txn{ViewRevision: 1, Component: "setup", UnixNanos: SetupNanos + 1, Ops: []txn.Op{
		txn.SetStatus(Task(1), omegav1.TaskState_TASK_STATE_RUNNING, 0, "started"),
		txn.SetStatus(Task(3), omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "done"),
	}}
	return []*txn.Txn{first, second}
}

// Decoder reads a program — transactions and expiries — from bytes.
type Decoder struct {
	data []byte
	pos  int
	lim  txn.Limits
}

// NewDecoder reads data; lim sizes the special long strings.
func NewDecoder(data []byte, lim txn.Limits) *Decoder { return &Decoder{data: data, lim: lim} }

// More reports whether input is left.
func (d *Decoder) More() bool { return d.pos < len(d.data) }

// Byte reads one byte (0 past the end).
func (d *Decoder) Byte() byte {
	if d.pos >= len(d.data) {
		d.pos++
		return 0
	}
	b := d.data[d.pos]
	d.pos++
	return b
}

func (d *Decoder) choice(n int) int { return int(d.Byte()) % n }

// Edge splits every choice that has bad or extreme options: a byte below it
// picks among the good ones, a byte from it among the others. Short random
// programs of small bytes (RandomProgram) are therefore mostly good work,
// and the fuzzer reaches every edge with one byte.
const Edge = 200

// pick reads a choice among good ordinary options (0..good-1) and bad edge
// ones (good..good+bad-1).
func (d *Decoder) pick(good, bad int) int {
	b := int(d.Byte())
	if b < Edge || bad == 0 {
		return b % good
	}
	return good + (b-Edge)%bad
}

// The length byte of a string: below StrRaw, a printable ASCII string of
// (length%32) bytes, each read as one byte; from StrRaw to StrMax-1, that
// many raw bytes minus StrRaw (anything, invalid UTF-8 included); from
// StrMax, the special strings.
const (
	StrRaw       = 128
	StrMax       = 240 // MaxStringBytes bytes
	StrOver      = 241 // MaxStringBytes+1 bytes
	StrBadByte   = 242 // "\xff"
	StrMultibyte = 243 // "é€𝄞"
	StrCutRune   = 244 // MaxStringBytes-1 bytes of "a", then the first byte of a two-byte rune
	StrSurrogate = 245 // an encoded UTF-16 surrogate, which UTF-8 forbids
)

// Str reads a string.
func (d *Decoder) Str() string {
	n := int(d.Byte())
	max := d.lim.MaxStringBytes
	if max <= 0 {
		max = 64
	}
	switch n {
	case StrMax:
		return strings.Repeat("a", max)
	case StrOver:
		return strings.Repeat("a", max+1)
	case StrBadByte:
		return "\xff"
	case StrMultibyte:
		return "é€𝄞"
	case StrCutRune:
		return strings.Repeat("a", max-1) + "\xc3"
	case StrSurrogate:
		return "\xed\xa0\x80"
	}
	if n > StrMax {
		return ""
	}
	if n < StrRaw {
		// Printable ASCII: most strings a program uses should be good ones.
		b := make([]byte, n%32)
		for i := range b {
			b[i] = ' ' + d.Byte()%95
		}
		return string(b)
	}
	n -= StrRaw
	end := min(d.pos+n, len(d.data))
	s := ""
	if d.pos < end {
		s = string(d.data[d.pos:end])
	}
	d.pos += n
	return s
}

// Integer selectors: below Edge, the byte times 25 (IntSmall0+k reads as
// k*25); from Edge, the edges.
const (
	IntSmall0 = 0
	IntZero   = 0
	IntMinus  = Edge + iota - 2
	IntMax64
	IntMin64
	IntMax32
	IntBig // 1 << 40
	IntRaw // eight bytes follow, big endian
	IntOne
)

// Int reads an integer.
func (d *Decoder) Int() int64 {
	switch s := d.Byte(); {
	case s < Edge:
		return int64(s) * 25
	case s == IntMinus:
		return -1
	case s == IntMax64:
		return math.MaxInt64
	case s == IntMin64:
		return math.MinInt64
	case s == IntMax32:
		return math.MaxInt32
	case s == IntBig:
		return 1 << 40
	case s == IntRaw:
		var b [8]byte
		for i := range b {
			b[i] = d.Byte()
		}
		return int64(binary.BigEndian.Uint64(b[:]))
	case s == IntOne:
		return 1
	}
	return 0
}

func (d *Decoder) int32() int32 { return int32(d.Int()) }

// poolIndex selects an object of the pool, or (past it) the nil uid or a
// uid nobody uses.
func (d *Decoder) uid(kind byte, n int) uuid.UUID {
	s := int(d.Byte())
	switch {
	case s < 250:
		return poolUID(kind, s%n)
	case s == 250:
		return uuid.Nil
	}
	return poolUID(kind, 200+s)
}

// taskWhere reads a task uid: below Edge, one of the view's tasks for which
// ok holds (the byte modulo their number, in the view's own order), so that
// claims name pending tasks and evictions placed ones; from Edge, as uid
// reads a byte (the pool, the nil uid, a uid nobody uses).
func (d *Decoder) taskWhere(view *txn.State, ok func(*txn.Task) bool) uuid.UUID {
	s := int(d.Byte())
	if s >= Edge {
		switch {
		case s < 250:
			return poolUID('T', (s-Edge)%NumTasks)
		case s == 250:
			return uuid.Nil
		}
		return poolUID('T', 200+s)
	}
	n := 0
	view.RangeTasks(func(t *txn.Task) bool {
		if ok(t) {
			n++
		}
		return true
	})
	if n == 0 {
		return poolUID('T', s%NumTasks)
	}
	k, u := s%n, uuid.Nil
	view.RangeTasks(func(t *txn.Task) bool {
		if ok(t) {
			if k == 0 {
				u = t.UID
				return false
			}
			k--
		}
		return true
	})
	return u
}

// PoolTask is the byte with which taskWhere names pool task i.
func PoolTask(i int) byte { return byte(Edge + i) }

func pendingTask(t *txn.Task) bool { return t.State == omegav1.TaskState_TASK_STATE_PENDING }
func placedTask(t *txn.Task) bool  { return t.Placed() }
func liveTask(t *txn.Task) bool    { return !t.Terminal() }

// UID selectors in a uid string (after the pool indices).
const (
	UIDNil      = 250 // the nil uuid
	UIDNotAUUID = 251 // "not-a-uuid"
	UIDRaw      = 252 // a string follows
	UIDBraced   = 253 // a pool uid in {braces}: parses, canonicalised on store
)

func (d *Decoder) uidString(kind byte, n int) string {
	s := int(d.Byte())
	switch {
	case s < 250:
		return poolUID(kind, s%n).String()
	case s == UIDNil:
		return uuid.Nil.String()
	case s == UIDNotAUUID:
		return "not-a-uuid"
	case s == UIDRaw:
		return d.Str()
	case s == UIDBraced:
		return "{" + poolUID(kind, 0).String() + "}"
	}
	return ""
}

func (d *Decoder) strMap() map[string]string {
	n := d.choice(4)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.Str()
		m[k] = d.Str()
	}
	return m
}

func (d *Decoder) resources() *omegav1.Resources {
	if d.choice(4) == 0 {
		return nil
	}
	r := &omegav1.Resources{CpuMillis: d.Int(), MemoryBytes: d.Int()}
	if n := d.choice(3); n > 0 {
		r.Extended = map[string]int64{}
		for range n {
			k := d.Str()
			r.Extended[k] = d.Int()
		}
	}
	return r
}

func (d *Decoder) meta(kind byte, n int) *omegav1.ObjectMeta {
	if d.pick(1, 1) == 1 {
		return nil
	}
	m := &omegav1.ObjectMeta{Uid: d.uidString(kind, n), Name: d.Str(), Labels: d.strMap(), Annotations: d.strMap()}
	switch d.pick(5, 1) {
	case 1:
		m.OwnerReferences = []*omegav1.OwnerReference{{Kind: "Job", Uid: d.uidString('J', NumJobs), Controller: true, Name: d.Str()}}
	case 2:
		m.OwnerReferences = []*omegav1.OwnerReference{{Kind: d.Str(), Uid: d.Str(), Name: d.Str()}}
	case 3:
		m.OwnerReferences = []*omegav1.OwnerReference{
			{Kind: "Job", Uid: d.uidString('J', NumJobs)},
			{Kind: "Job", Uid: d.uidString('J', NumJobs), Controller: true},
		}
	case 4:
		m.Version, m.CreateRevision, m.CreationUnixNanos = uint64(d.Int()), uint64(d.Int()), d.Int() // ignored by the store
	case 5:
		// Fields this build does not know, as raw bytes: what a newer
		// client sends, or garbage set by hand.
		m.ProtoReflect().SetUnknown(protoreflect.RawFields(d.Str()))
	}
	return m
}

func (d *Decoder) command() *omegav1.Command {
	if d.choice(3) == 0 {
		return nil
	}
	c := &omegav1.Command{Path: d.Str()}
	for range d.choice(3) {
		c.Args = append(c.Args, d.Str())
	}
	c.Env = d.strMap()
	return c
}

func (d *Decoder) constraints() []*omegav1.Constraint {
	var cs []*omegav1.Constraint
	for range d.choice(3) {
		cs = append(cs, &omegav1.Constraint{Attribute: d.Str(), Operator: omegav1.Constraint_Operator(d.int32()), Value: d.Str()})
	}
	return cs
}

// TaskObj reads a task.
func (d *Decoder) TaskObj() *omegav1.Task {
	t := &omegav1.Task{Meta: d.meta('T', NumTasks)}
	if d.pick(1, 1) == 0 {
		t.Spec = &omegav1.TaskSpec{Resources: d.resources(), Command: d.command(), Constraints: d.constraints(),
			Priority: d.int32(), DurationMillis: d.Int()}
		if d.pick(1, 1) == 1 {
			t.Spec.ProtoReflect().SetUnknown(protoreflect.RawFields(d.Str())) // stored as they are
		}
	}
	if d.choice(3) == 2 {
		t.Status = &omegav1.TaskStatus{State: omegav1.TaskState(d.int32()), MachineUid: d.Str(), Scheduler: d.Str(), Message: d.Str(),
			Claimed: d.resources()}
	}
	return t
}

// JobObj reads a job.
func (d *Decoder) JobObj() *omegav1.Job {
	j := &omegav1.Job{Meta: d.meta('J', NumJobs)}
	if d.pick(1, 1) == 0 {
		j.Spec = &omegav1.JobSpec{Kind: omegav1.JobKind(d.int32()), Scheduler: d.Str(), Priority: d.int32(), Replicas: d.int32(),
			Gang: d.choice(2) == 1, SubmitUnixNanos: d.Int()}
		if d.choice(2) == 1 {
			j.Spec.Template = &omegav1.TaskTemplate{Resources: d.resources(), Command: d.command(), Constraints: d.constraints(),
				DurationMillis: d.Int(), Labels: d.strMap()}
		}
		if d.choice(3) == 2 {
			j.Spec.Mapreduce = &omegav1.MapReduceParams{MapTasks: d.int32(), ReduceTasks: d.int32(), MaxWorkers: d.int32()}
		}
	}
	if d.choice(2) == 1 {
		j.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase(d.choice(9)), Pending: d.int32(), Running: d.int32(),
			FinishUnixNanos: d.Int(), Message: d.Str()}
	}
	return j
}

// MachineObj reads a machine.
func (d *Decoder) MachineObj() *omegav1.Machine {
	m := &omegav1.Machine{Meta: d.meta('M', NumMachines)}
	if d.pick(1, 1) == 0 {
		m.Spec = &omegav1.MachineSpec{Capacity: d.resources(), FailureDomain: d.Str(), Attributes: d.strMap()}
	}
	if d.choice(2) == 1 {
		st := omegav1.MachineState(d.pick(4, 1))
		if st == 4 {
			st = 42
		}
		m.Status = &omegav1.MachineStatus{State: st, AgentAddress: d.Str(), Allocated: d.resources(), Tasks: d.int32()}
	}
	return m
}

// version reads an expected version of the object the view holds at version
// cur (0 if absent).
func (d *Decoder) version(cur uint64) uint64 {
	switch d.pick(1, 3) {
	case 0:
		return cur
	case 1:
		return 0
	case 2:
		return cur + 1
	}
	return uint64(d.Int())
}

func (d *Decoder) claimResources(view *txn.State, task uuid.UUID) txn.Resources {
	switch d.choice(3) {
	case 0:
		if t, ok := view.Task(task); ok {
			return t.Request
		}
		return txn.Resources{CPU: 100, Memory: 100}
	case 1:
		return txn.ResourcesFromProto(d.resources())
	}
	r := txn.Resources{CPU: d.Int(), Memory: d.Int()}
	if d.choice(2) == 1 {
		k := d.Str()
		r.Ext = map[string]int64{k: d.Int()} // a zero amount too
	}
	return r
}

func taskVersion(view *txn.State, u uuid.UUID) uint64 {
	if t, ok := view.Task(u); ok {
		return t.Version
	}
	return 0
}

// Op kinds of the layout.
const (
	OpCreate = iota
	OpClaim
	OpEvict
	OpSetStatus
	OpPut
	OpDelete
	OpCreateClaim // a task created and claimed in one transaction
	OpUnknown     // an operation of no known kind
	numOps
)

// State selectors of a SetStatus: the states a report may set, then at the
// edge those it may not (and one that is no state at all).
const (
	SetRunning = iota
	SetSucceeded
	SetFailed
	SetLost
	SetKilled
)

var setStates = []omegav1.TaskState{
	omegav1.TaskState_TASK_STATE_RUNNING, omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED,
	omegav1.TaskState_TASK_STATE_LOST, omegav1.TaskState_TASK_STATE_KILLED,
	omegav1.TaskState_TASK_STATE_UNSPECIFIED, omegav1.TaskState_TASK_STATE_PENDING, omegav1.TaskState_TASK_STATE_ASSIGNED, 42,
}

// Object selectors of a Create.
const (
	ObjTask = iota
	ObjJob
	ObjMachine
	ObjNone
	ObjTwo
	numObjs
)

func (d *Decoder) op(view *txn.State, ops []txn.Op) []txn.Op {
	switch d.pick(numOps-1, 1) {
	case OpCreate:
		switch d.pick(ObjNone, numObjs-ObjNone) {
		case ObjTask:
			return append(ops, txn.CreateTask(d.TaskObj()))
		case ObjJob:
			return append(ops, txn.CreateJob(d.JobObj()))
		case ObjMachine:
			return append(ops, txn.CreateMachine(d.MachineObj()))
		case ObjNone:
			return append(ops, txn.Op{Kind: txn.OpCreate})
		default:
			return append(ops, txn.Op{Kind: txn.OpCreate, NewTask: d.TaskObj(), NewJob: d.JobObj()})
		}
	case OpClaim:
		task, machine := d.taskWhere(view, pendingTask), d.uid('M', NumMachines-1)
		r := d.claimResources(view, task)
		return append(ops, txn.Claim(task, machine, r, d.version(taskVersion(view, task))))
	case OpEvict:
		task := d.taskWhere(view, placedTask)
		v := d.version(taskVersion(view, task))
		if d.choice(2) == 1 {
			return append(ops, txn.ForceEvict(task, v, d.Str()))
		}
		return append(ops, txn.Evict(task, v, d.int32(), d.Str()))
	case OpSetStatus:
		task := d.taskWhere(view, liveTask)
		st := setStates[d.pick(SetKilled+1, len(setStates)-SetKilled-1)]
		return append(ops, txn.SetStatus(task, st, d.version(taskVersion(view, task)), d.Str()))
	case OpPut:
		switch d.pick(2, 1) {
		case 0:
			j := d.JobObj()
			var cur uint64
			if u, err := uuid.Parse(j.GetMeta().GetUid()); err == nil {
				if old, ok := view.Job(u); ok {
					cur = old.Version
				}
			}
			return append(ops, txn.PutJob(j, d.version(cur)))
		case 1:
			m := d.MachineObj()
			var cur uint64
			if u, err := uuid.Parse(m.GetMeta().GetUid()); err == nil {
				if old, ok := view.Machine(u); ok {
					cur = old.Version
				}
			}
			return append(ops, txn.PutMachine(m, d.version(cur)))
		}
		return append(ops, txn.Op{Kind: txn.OpPut, NewTask: d.TaskObj()})
	case OpDelete:
		var kind omegav1.ObjectKind
		var u uuid.UUID
		var cur uint64
		switch d.pick(3, 2) {
		case 0:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_TASK, d.uid('T', NumTasks)
			cur = taskVersion(view, u)
		case 1:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_JOB, d.uid('J', NumJobs)
			if j, ok := view.Job(u); ok {
				cur = j.Version
			}
		case 2:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_MACHINE, d.uid('M', NumMachines)
			if m, ok := view.Machine(u); ok {
				cur = m.Version
			}
		case 3:
			kind, u = omegav1.ObjectKind_OBJECT_KIND_UNSPECIFIED, d.uid('T', NumTasks)
		default:
			kind, u = 77, d.uid('T', NumTasks)
		}
		return append(ops, txn.Delete(kind, u, d.version(cur)))
	case OpCreateClaim:
		t := d.TaskObj()
		u, err := uuid.Parse(t.GetMeta().GetUid())
		if err != nil {
			u = uuid.Nil
		}
		ops = append(ops, txn.CreateTask(t))
		return append(ops, txn.Claim(u, d.uid('M', NumMachines-1), txn.ResourcesFromProto(t.GetSpec().GetResources()), 0))
	}
	return append(ops, txn.Op{Kind: txn.OpKind(d.Byte() | 0x80)})
}

// View selectors of a transaction.
const (
	ViewHead = iota
	ViewHead2
	ViewZero
	ViewBehind
	ViewAhead // an edge: a view ahead of the store
)

// Txn reads a transaction built against view.
func (d *Decoder) Txn(view *txn.State) *txn.Txn {
	tx := &txn.Txn{}
	switch d.pick(ViewAhead, 1) {
	case ViewZero:
	case ViewBehind:
		if r := view.Revision(); r > 0 {
			tx.ViewRevision = r - 1
		}
	case ViewAhead:
		tx.ViewRevision = view.Revision() + 1
	default:
		tx.ViewRevision = view.Revision()
	}
	// Fine or coarse, incremental or all-or-nothing; at the edge, a mode
	// that does not exist.
	modes := []int32{0, 1, 5}
	tx.Conflict = omegav1.ConflictMode(modes[d.pick(2, 1)])
	tx.Commit = omegav1.CommitMode(modes[d.pick(2, 1)])
	tx.Component = d.Str()
	tx.UnixNanos = d.Int()
	maxOps := d.lim.MaxOps
	if maxOps <= 0 {
		maxOps = 16
	}
	// The count: below 128, one to four operations (one bad operation is
	// bad input for the whole transaction, so short ones commit more);
	// from 128, none to two more than the limit.
	n := int(d.Byte())
	if n < 128 {
		n = max(n%5, 1)
	} else {
		n = (n - 128) % (maxOps + 2)
	}
	for len(tx.Ops) < n {
		tx.Ops = d.op(view, tx.Ops)
	}
	return tx
}

// Action kinds of a program.
const (
	ActTxn = iota
	ActTxn2
	ActTxn3
	ActExpire // an Expire at the time Int() after SetupNanos (store targets)
	numActs
)

// Action reads what to do next: ActTxn (or ActTxn2, ActTxn3) or ActExpire.
func (d *Decoder) Action() int { return d.choice(numActs) }

// Seed writes inputs in the Decoder's layout.
type Seed struct{ b []byte }

// Bytes returns the input.
func (s *Seed) Bytes() []byte { return s.b }

// B appends choice bytes.
func (s *Seed) B(bs ...byte) *Seed { s.b = append(s.b, bs...); return s }

// Str appends a string of raw bytes (at most StrMax-StrRaw-1 of them).
func (s *Seed) Str(v string) *Seed {
	if len(v) >= StrMax-StrRaw {
		panic("txnfuzz: seed string too long")
	}
	s.b = append(s.b, byte(StrRaw+len(v)))
	s.b = append(s.b, v...)
	return s
}

// Raw appends a raw integer.
func (s *Seed) Raw(v int64) *Seed {
	s.b = append(s.b, IntRaw)
	s.b = binary.BigEndian.AppendUint64(s.b, uint64(v))
	return s
}

// SeedProgram is a seed with what its first transaction does on the Setup
// cell: Want is empty if every operation commits, "conflict" if it
// evaluates with a conflict, else a substring of its error.
type SeedProgram struct {
	Name, Want string
	Program    []byte
}

// SeedPrograms returns the inputs both fuzz targets start from: each bad
// input that was once found to stop the store or make it unopenable, the
// edges of every limit, and a few ordinary programs. A test holds each to
// its Want, so a change of the layout cannot quietly turn them into noise.
func SeedPrograms() []SeedProgram {
	head := func(component string) *Seed {
		return new(Seed).B(ActTxn, ViewHead, 0, 0).Str(component).B(IntZero)
	}
	const year = 365 * 24 * 3600e9
	seeds := []struct {
		name, want string
		s          *Seed
	}{
		// Strings the encoder refuses: they used to pass validation and
		// stop the store (objects), or be acknowledged and make it
		// unopenable (messages, reasons, the component).
		{"task name not UTF-8", "meta.name is not valid UTF-8", head("").B(1, OpCreate, ObjTask, 0, 8).Str("\xff")},
		{"task label not UTF-8", `meta.labels["k"] is not valid UTF-8`, head("").B(1, OpCreate, ObjTask, 0, 8).Str("ok").B(1).Str("k").Str("\xff")},
		{"failure domain not UTF-8", "spec.failure_domain is not valid UTF-8",
			head("").B(1, OpCreate, ObjMachine, 0, 3).Str("m3").B(0, 0, 0, 0, 1, IntSmall0+40, IntSmall0+40, 0).Str("\xff")},
		{"status message not UTF-8", "set-status message", head("").B(1, OpSetStatus, 1, SetFailed, 0).Str("\xff")},
		{"status message with a surrogate", "set-status message", head("").B(1, OpSetStatus, 2, SetFailed, 0, StrSurrogate)},
		{"evict reason not UTF-8", "evict reason", head("").B(1, OpEvict, 0, 0, 1).Str("\xc3")},
		{"component not UTF-8", "component is not valid UTF-8", head("\xff").B(1, OpSetStatus, 1, SetSucceeded, 0).Str("ok")},
		{"claim resource name not UTF-8", "resources.extended key",
			head("").B(1, OpClaim, 4, 0, 2, IntSmall0+4, IntSmall0+4, 1).Str("\xff").B(IntZero, 0)},
		{"task spec with unknown bytes that are no wire format", "unknown fields are no wire format",
			head("").B(1, OpCreate, ObjTask, 0, 8).Str("t8").B(0, 0, 0, 0, 0, 0, 0, IntZero, IntZero, Edge).Str("\xff\xff\xff")},
		{"task spec with unknown bytes that set a known field to zero", "encode its known field priority",
			head("").B(1, OpCreate, ObjTask, 0, 8).Str("t8").B(0, 0, 0, 0, 0, 0, 0, IntZero, IntZero, Edge).Str("\x20\x00")},
		// A committer a year ahead finishes a task, then one on time: with
		// expiries between, the second must not wait for the first.
		{"a committer a year ahead", "", new(Seed).B(ActTxn, ViewHead, 0, 0).Str("").Raw(SetupNanos+year).B(1, OpSetStatus, 0, SetSucceeded, 0).Str("").
			B(ActExpire, IntSmall0+1).
			B(ActTxn, ViewHead, 0, 0).Str("").B(IntZero, 1, OpSetStatus, 2, SetSucceeded, 0).Str("").
			B(ActExpire).Raw(1e12).B(ActExpire).Raw(-2e12).B(ActExpire).Raw(year)},
		// Delete a machine that holds tasks, from a stale view (a
		// conflict) and from a current one (in use).
		{"delete of a machine from a stale view", "conflict", new(Seed).B(ActTxn, ViewZero, 0, 0).Str("").B(IntZero, 1, OpDelete, 2, 0, 0)},
		{"delete of a machine in use", "in use", head("").B(1, OpDelete, 2, 0, 0)},
		// Strings at and over the limit; more operations than allowed.
		{"strings at the limit", "", new(Seed).B(ActTxn, ViewHead, 0, 0, StrMax, IntZero, 1, OpSetStatus, 1, SetSucceeded, 0, StrMax)},
		{"component over the limit", "component is 65 bytes", new(Seed).B(ActTxn, ViewHead, 0, 0, StrOver, IntZero, 1, OpSetStatus, 1, SetSucceeded, 0, StrCutRune)},
		{"message cut in a rune", "set-status message", head("").B(1, OpSetStatus, 1, SetSucceeded, 0, StrCutRune)},
		{"too many operations", "25 operations", head("").B(128 + 25)},
		// Machines of math.MaxInt64 cpu (the cell's totals must not wrap).
		{"a machine of MaxInt64", "", head("").B(2, OpCreate, ObjMachine, 0, 3).Str("big").B(0, 0, 0, 0, 1, IntMax64, IntMax64, 0).Str("fd").
			B(0, 0, OpDelete, 2, 3, 0)},
		// Ordinary work: create and claim, claim, finish; evict, put.
		{"create and claim, claim, finish", "", head("batch").B(3,
			OpCreateClaim, 0, 9).Str("t9").B(0, 0, 0, 0, 1, IntSmall0+4, IntSmall0+4, 0, 0, 0, IntZero, IntZero, 0, 0, 0,
			OpClaim, 4, 1, 0, 0,
			OpSetStatus, 1, SetSucceeded, 0).Str("done")},
		{"evict, put a job", "", head("service").B(2, OpEvict, 0, 0, 0, IntSmall0+4).Str("preempted").
			B(OpPut, 0, 0, 0).Str("j0").B(0, 0, 0, 0, IntSmall0+1).Str("batch").B(IntZero, IntSmall0+1, 0, IntZero, 0, 0, 0, 0).
			B(ActTxn, ViewBehind, 1, 1).Str("").B(IntOne, 2, OpClaim, 6, 1, 0, 0, OpDelete, 0, 3, 0)},
	}
	out := make([]SeedProgram, len(seeds))
	for i, s := range seeds {
		out[i] = SeedProgram{Name: s.name, Want: s.want, Program: s.s.Bytes()}
	}
	return out
}

// Seeds returns the seed programs' bytes.
func Seeds() [][]byte {
	var out [][]byte
	for _, s := range SeedPrograms() {
		out = append(out, s.Program)
	}
	return out
}

// RandomProgram returns n bytes of a program for the short random runs that
// stand in for the fuzzer in the test suite. Uniform bytes would make
// nearly every string invalid UTF-8 (and so nearly every transaction bad
// input); here fifteen bytes in sixteen are small, so most choices pick
// the first options, strings are short and valid, integers small and uids
// from the pool, and many transactions do something.
func RandomProgram(next func() uint32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = ProgramByte(next())
	}
	return b
}

// ProgramByte maps a uniform random r to a byte as RandomProgram draws them.
func ProgramByte(r uint32) byte {
	if r%16 != 0 {
		return byte((r >> 8) % 21)
	}
	return byte(r >> 8)
}
