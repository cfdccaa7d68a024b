package txnfuzz

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

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
	StrFramework = 246 // OfferFramework(0): a component that may answer an offer
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
	case StrFramework:
		return OfferFramework(0)
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
// OfferObj reads an offer to create: to one of two frameworks (or, at the
// edge, to a string of the decoder's, or to none), at the edge with locks
// of its own, which the store refuses.
func (d *Decoder) OfferObj() *omegav1.Offer {
	o := &omegav1.Offer{Meta: d.meta('O', NumOffers)}
	switch d.pick(2, 2) {
	case 0:
		o.Spec = &omegav1.OfferSpec{Framework: OfferFramework(0)}
	case 1:
		o.Spec = &omegav1.OfferSpec{Framework: OfferFramework(1)}
	case 2:
		o.Spec = &omegav1.OfferSpec{Framework: d.Str()}
	default:
		o.Status = &omegav1.OfferStatus{Locks: []*omegav1.OfferLock{{MachineUid: d.uidString('M', NumMachines), Resources: d.resources()}}}
	}
	return o
}

// QuotaObj reads a quota: on a kind of the cell's schedulers or a string of
// the decoder's, with a limit of its resources.
func (d *Decoder) QuotaObj() *omegav1.Quota {
	q := &omegav1.Quota{Meta: d.meta('Q', NumQuotas)}
	switch d.pick(2, 1) {
	case 0:
		q.Spec = &omegav1.QuotaSpec{Scheduler: OfferFramework(d.choice(2)), Limit: d.resources()}
	case 1:
		q.Spec = &omegav1.QuotaSpec{Scheduler: d.Str(), Limit: d.resources()}
	}
	return q
}

// LeaseObj reads a lease: of one of the fuzzed names (its uid the name's,
// or another uid), or of a string of the decoder's; a holder and a
// duration that may be missing.
func (d *Decoder) LeaseObj() *omegav1.Lease {
	name := LeaseName(d.choice(NumLeases))
	if d.pick(3, 0) == 2 {
		name = d.Str()
	}
	uid := txn.LeaseUID(name).String()
	if d.pick(4, 0) == 3 {
		uid = d.uidString('Q', NumQuotas)
	}
	l := &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: uid, Name: name}, Spec: &omegav1.LeaseSpec{Role: "scheduler", SchedulerKind: d.Str()}}
	if d.pick(4, 0) != 3 {
		l.Spec.Holder = d.Str() + "-h"
	}
	l.Spec.DurationMillis = int64(d.pick(4, 1)) * 1000
	return l
}

// LeaseName names the i-th of the leases the fuzzed transactions touch.
func LeaseName(i int) string { return []string{"sched-a", "sched-b"}[i] }

// OfferFramework names the i-th of the frameworks the fuzzed offers go
// to; a transaction's component is the first when its string's byte is
// StrFramework.
func OfferFramework(i int) string { return []string{"fw-a", "fw-b"}[i] }

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
			return t.Request()
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
