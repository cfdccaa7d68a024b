package txn

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Validation of what a transaction carries, by the rules the store's
// encoder applies. A proto3 string must be valid UTF-8 — proto.Marshal
// refuses it otherwise, and so does proto.Unmarshal when the store reopens —
// so every string of every object a transaction creates or puts, the
// message of an evict or a status report, the transaction's component, and
// the names of a claim's extended resources are checked here; and every
// string, object and transaction is bounded in bytes (Limits). Evaluate
// runs validate before it looks at the state, so a transaction that
// evaluates without an error encodes: the store never installs a state it
// then cannot write or cannot read back.
//
// The walkers below name each field by hand, for speed (a created task is
// on the commit path's hot loop, and proto.Size allocates for every map
// entry): TestValidationCoversEveryString walks the messages' descriptors
// and fails when a string field is added to the schema and not here, and
// TestSizeBoundCoversEveryField fails when the size bound falls below
// proto.Size.

// checker walks objects: it checks strings against one limit, keeps the
// first failure, and adds up an upper bound of the wire size (n). Paths are
// built only on failure, so a walk of a good object allocates nothing.
type checker struct {
	max     int       // longest string in bytes; 0: no bound
	what    string    // what is checked ("task"), named in errors with id
	id      string    // the object's uid as given
	claimOf uuid.UUID // or, for a claim, its task's
	n       int       // upper bound of the wire size of what was walked
	err     error
	// spec and specN: the last task spec walked without an error and its
	// bound. A job's tasks share one spec (the workload's, the wire
	// decoder's): it is walked once per transaction, not once per task.
	spec  *omegav1.TaskSpec
	specN int
}

// Upper bounds of an operation's wire size (Txn.WireSize counts each
// exactly), beside its object or strings: a claim (two uids, resources, an
// expected version, in an Operation in the repeated field) before its
// extended resources; an eviction or a report before its message; any
// other operation.
const (
	claimBound  = 2*boundMsg + 2*(boundString+36) + boundMsg + 3*boundScalar
	reportBound = 2*boundMsg + boundString + 36 + 3*boundScalar + boundString
	otherBound  = 2*boundMsg + boundString + 36 + 2*boundScalar
)

// Per-field bounds of the wire size: a tag takes at most 2 bytes here
// (field numbers below 2048), a length at most 5, a varint at most 10.
const (
	boundScalar = 2 + 10   // an integer, enum or bool field
	boundString = 2 + 5    // a string field, beside its bytes
	boundMsg    = 2 + 5    // a nested message field, beside its fields
	boundEntry  = boundMsg // a map entry, beside its key and value fields
	boundIntMap = boundEntry + boundString + boundScalar
)

func (c *checker) fail(parent, field, why string, tooLarge bool) {
	if c.err != nil {
		return
	}
	sentinel := ErrInvalid
	if tooLarge {
		sentinel = ErrTooLarge
	}
	what := c.what
	if c.id == "" && c.claimOf != uuid.Nil {
		what += " " + c.claimOf.String()
	} else if u, err := uuid.Parse(c.id); err == nil {
		what += " " + u.String()
	} else if c.id != "" {
		what += " " + Quote(c.id)
	}
	path := field
	if parent != "" {
		path = parent + "." + field
	}
	c.err = fmt.Errorf("%w: %s: %s %s", sentinel, what, path, why)
}

// ok reports whether s is acceptable.
func (c *checker) ok(s string) bool {
	return (c.max <= 0 || len(s) <= c.max) && utf8.ValidString(s)
}

func (c *checker) why(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8", false
	}
	return fmt.Sprintf("is %d bytes, the limit is %d", len(s), c.max), true
}

// msg counts a nested message that is set: its field's overhead and the
// bytes of fields it does not know. Those are kept as they are and stored
// after the known fields, and a reopen decodes the two together, so what
// they hold must stay unknown: bytes that are no wire format would make
// the store unopenable, and bytes that encode a known field — at any value,
// zero included (set by hand with ProtoReflect().SetUnknown; bytes from the
// wire are decoded as known fields) — would overwrite a checked value with
// an unchecked one: a capacity of zero under placed tasks, a string over
// the limit, a job finished behind the store's back. Only fields of numbers
// the schema does not have pass.
func (c *checker) msg(m proto.Message) {
	r := m.ProtoReflect()
	u := r.GetUnknown()
	c.n += boundMsg + len(u)
	if len(u) == 0 || c.err != nil {
		return
	}
	fields := r.Descriptor().Fields()
	for b := []byte(u); len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			c.fail(string(r.Descriptor().Name()), "unknown fields", "are no wire format: "+protowire.ParseError(n).Error(), false)
			return
		}
		if fd := fields.ByNumber(num); fd != nil {
			c.fail(string(r.Descriptor().Name()), "unknown fields", fmt.Sprintf("encode its known field %s (%d)", fd.Name(), num), false)
			return
		}
		b = b[n:]
	}
}

// str checks one string field.
func (c *checker) str(parent, field, s string) {
	c.n += boundString + len(s)
	if !c.ok(s) {
		why, large := c.why(s)
		c.fail(parent, field, why, large)
	}
}

// strs checks a repeated string field.
func (c *checker) strs(parent, field string, ss []string) {
	for i, s := range ss {
		c.n += boundString + len(s)
		if !c.ok(s) {
			why, large := c.why(s)
			c.fail(parent, field+"["+strconv.Itoa(i)+"]", why, large)
		}
	}
}

// strMap checks a map<string, string> field, keys and values.
func (c *checker) strMap(parent, field string, m map[string]string) {
	for k, v := range m {
		c.n += boundEntry + 2*boundString + len(k) + len(v)
		if !c.ok(k) {
			why, large := c.why(k)
			c.fail(parent, fmt.Sprintf("%s key %s", field, Quote(k)), why, large)
		}
		if !c.ok(v) {
			why, large := c.why(v)
			c.fail(parent, fmt.Sprintf("%s[%s]", field, Quote(k)), why, large)
		}
	}
}

// keys checks the keys of a map<string, int64> field.
func keys[V any](c *checker, parent, field string, m map[string]V) {
	for k := range m {
		c.n += boundIntMap + len(k)
		if !c.ok(k) {
			why, large := c.why(k)
			c.fail(parent, fmt.Sprintf("%s key %s", field, Quote(k)), why, large)
		}
	}
}

func (c *checker) resources(parent string, r *omegav1.Resources) {
	if r == nil {
		return
	}
	c.msg(r)
	c.n += 2 * boundScalar
	keys(c, parent, "extended", r.GetExtended())
}

func (c *checker) meta(m *omegav1.ObjectMeta) {
	if m == nil {
		return
	}
	c.msg(m)
	c.n += 3 * boundScalar
	c.str("meta", "uid", m.GetUid())
	c.str("meta", "name", m.GetName())
	c.strMap("meta", "labels", m.GetLabels())
	c.strMap("meta", "annotations", m.GetAnnotations())
	for i, o := range m.GetOwnerReferences() {
		c.msg(o)
		c.n += 3*boundString + boundScalar + len(o.GetKind()) + len(o.GetUid()) + len(o.GetName())
		if !c.ok(o.GetKind()) || !c.ok(o.GetUid()) || !c.ok(o.GetName()) {
			n := c.n
			p := "meta.owner_references[" + strconv.Itoa(i) + "]"
			c.str(p, "kind", o.GetKind())
			c.str(p, "uid", o.GetUid())
			c.str(p, "name", o.GetName())
			c.n = n
		}
	}
}

func (c *checker) command(parent string, cmd *omegav1.Command) {
	if cmd == nil {
		return
	}
	c.msg(cmd)
	c.str(parent, "path", cmd.GetPath())
	c.strs(parent, "args", cmd.GetArgs())
	c.strMap(parent, "env", cmd.GetEnv())
	c.str(parent, "working_dir", cmd.GetWorkingDir())
}

// lifecycle walks a template's or a spec's health check, beside its three
// lifecycle scalars (restart policy, grace period, restart delay).
func (c *checker) lifecycle(parent string, hc *omegav1.HealthCheck) {
	c.n += 3 * boundScalar
	if hc == nil {
		return
	}
	c.msg(hc)
	c.n += 4 * boundScalar
	p := parent + ".health_check"
	if e := hc.GetExec(); e != nil {
		c.msg(e)
		c.str(p+".exec", "path", e.GetPath())
		c.strs(p+".exec", "args", e.GetArgs())
	}
	if h := hc.GetHttp(); h != nil {
		c.msg(h)
		c.n += boundScalar
		c.str(p+".http", "path", h.GetPath())
	}
}

// run walks an agent's report on running a task.
func (c *checker) run(parent string, r *omegav1.TaskRun) {
	if r == nil {
		return
	}
	c.msg(r)
	c.n += 2 * boundScalar
	c.str(parent, "address", r.GetAddress())
	if e := r.GetLastExit(); e != nil {
		c.msg(e)
		c.n += boundScalar
		c.str(parent+".last_exit", "signal", e.GetSignal())
		c.str(parent+".last_exit", "error", e.GetError())
	}
}

func (c *checker) constraints(parent string, cs []*omegav1.Constraint) {
	for i, k := range cs {
		c.msg(k)
		c.n += 2*boundString + boundScalar + len(k.GetAttribute()) + len(k.GetValue())
		if !c.ok(k.GetAttribute()) || !c.ok(k.GetValue()) {
			n := c.n
			p := parent + "[" + strconv.Itoa(i) + "]"
			c.str(p, "attribute", k.GetAttribute())
			c.str(p, "value", k.GetValue())
			c.n = n
		}
	}
}

func (c *checker) task(p *omegav1.Task) {
	c.meta(p.GetMeta())
	if s := p.GetSpec(); s != nil && s == c.spec {
		c.n += c.specN
	} else if s != nil {
		n := c.n
		c.msg(s)
		c.n += 2 * boundScalar
		c.resources("spec.resources", s.GetResources())
		c.command("spec.command", s.GetCommand())
		c.constraints("spec.constraints", s.GetConstraints())
		c.lifecycle("spec", s.GetHealthCheck())
		if c.err == nil {
			c.spec, c.specN = s, c.n-n
		}
	}
	if s := p.GetStatus(); s != nil {
		c.msg(s)
		c.n += 5 * boundScalar
		c.str("status", "machine_uid", s.GetMachineUid())
		c.resources("status.claimed", s.GetClaimed())
		c.str("status", "scheduler", s.GetScheduler())
		c.str("status", "message", s.GetMessage())
		c.run("status.run", s.GetRun())
	}
}

func (c *checker) job(p *omegav1.Job) {
	c.meta(p.GetMeta())
	if s := p.GetSpec(); s != nil {
		c.msg(s)
		c.n += 5 * boundScalar
		c.str("spec", "scheduler", s.GetScheduler())
		if t := s.GetTemplate(); t != nil {
			c.msg(t)
			c.n += boundScalar
			c.resources("spec.template.resources", t.GetResources())
			c.command("spec.template.command", t.GetCommand())
			c.constraints("spec.template.constraints", t.GetConstraints())
			c.strMap("spec.template", "labels", t.GetLabels())
			c.lifecycle("spec.template", t.GetHealthCheck())
		}
		if m := s.GetMapreduce(); m != nil {
			c.msg(m)
			c.n += 3 * boundScalar
		}
	}
	if s := p.GetStatus(); s != nil {
		c.msg(s)
		c.n += 6 * boundScalar
		c.str("status", "message", s.GetMessage())
		if w := s.GetWaiting(); w != nil {
			c.msg(w)
			c.n += 3 * boundScalar
			c.str("status.waiting", "resource", w.GetResource())
			c.str("status.waiting", "message", w.GetMessage())
			c.str("status.waiting", "reporter", w.GetReporter())
		}
	}
}

// offer checks an offer to create (its status, the store's to fill, is
// refused by Evaluate when it has locks).
func (c *checker) offer(o *omegav1.Offer) {
	c.meta(o.GetMeta())
	if s := o.GetSpec(); s != nil {
		c.msg(s)
		c.str("spec", "framework", s.GetFramework())
	}
	if s := o.GetStatus(); s != nil {
		c.msg(s)
	}
}

func (c *checker) machine(m *omegav1.Machine) {
	c.meta(m.GetMeta())
	if s := m.GetSpec(); s != nil {
		c.msg(s)
		c.resources("spec.capacity", s.GetCapacity())
		c.str("spec", "failure_domain", s.GetFailureDomain())
		c.strMap("spec", "attributes", s.GetAttributes())
	}
	if s := m.GetStatus(); s != nil {
		c.msg(s)
		c.n += 3 * boundScalar
		c.resources("status.allocated", s.GetAllocated())
		c.str("status", "agent_address", s.GetAgentAddress())
	}
}

// object walks the object of a Create or Put (every one it carries; more
// than one is an error Evaluate reports) and returns the bound of its wire
// size. Every string is checked, including the fields the store ignores,
// so bad input is refused wherever it is.
func (c *checker) object(op *Op) int {
	n := c.n
	c.claimOf = uuid.Nil
	if p := op.NewTask; p != nil {
		c.what, c.id = "task", p.GetMeta().GetUid()
		c.msg(p)
		c.task(p)
	}
	if p := op.NewJob; p != nil {
		c.what, c.id = "job", p.GetMeta().GetUid()
		c.msg(p)
		c.job(p)
	}
	if p := op.NewMachine; p != nil {
		c.what, c.id = "machine", p.GetMeta().GetUid()
		c.msg(p)
		c.machine(p)
	}
	if p := op.NewOffer; p != nil {
		c.what, c.id = "offer", p.GetMeta().GetUid()
		c.msg(p)
		c.offer(p)
	}
	if p := op.NewLease; p != nil {
		c.what, c.id = "lease", p.GetMeta().GetUid()
		c.msg(p)
		c.meta(p.GetMeta())
		if s := p.GetSpec(); s != nil {
			c.msg(s)
			c.str("spec", "holder", s.GetHolder())
			c.str("spec", "role", s.GetRole())
			c.str("spec", "scheduler_kind", s.GetSchedulerKind())
		}
	}
	if p := op.NewQuota; p != nil {
		c.what, c.id = "quota", p.GetMeta().GetUid()
		c.msg(p)
		c.meta(p.GetMeta())
		if s := p.GetSpec(); s != nil {
			c.msg(s)
			c.str("spec", "scheduler", s.GetScheduler())
			c.resources("spec.limit", s.GetLimit())
		}
	}
	return c.n - n
}

// objectSizeBound returns the upper bound of proto.Size of op's object that
// validate uses (for the tests that hold it to be one).
func objectSizeBound(op *Op) int {
	var c checker
	return c.object(op)
}

// validate checks everything in tx that does not depend on the state: the
// strings (UTF-8, MaxStringBytes), each object's size (MaxObjectBytes) and
// the transaction's (MaxTxnBytes), both in bytes of their wire encoding.
// Sizes are first bounded from above while the strings are walked; only an
// object or transaction whose bound is over its limit is measured exactly
// (proto.Size), so the limits are exact and the common case is cheap.
func validate(tx *Txn, lim Limits) error {
	c := checker{max: lim.MaxStringBytes}
	if !c.ok(tx.Component) {
		why, large := c.why(tx.Component)
		return fmt.Errorf("%w: component %s", sentinelFor(large), why)
	}
	bound := txnHeaderSize(tx)
	for i := range tx.Ops {
		op := &tx.Ops[i]
		c.err = nil
		var err error
		switch op.Kind {
		case OpCreate, OpPut:
			obj := c.object(op)
			if err = c.err; err == nil && lim.MaxObjectBytes > 0 && obj > lim.MaxObjectBytes {
				if m := op.object(); m != nil {
					if size := proto.Size(m); size > lim.MaxObjectBytes {
						err = fmt.Errorf("%w: %s %s is %d bytes, the limit is %d", ErrTooLarge, c.what, c.id, size, lim.MaxObjectBytes)
					}
				}
			}
			bound += 2*boundMsg + boundScalar + obj // Operation, CreateOp or PutOp, expect version
		case OpClaim:
			bound += claimBound
			if len(op.Resources.Ext) > 0 {
				c.what, c.id, c.claimOf = "claim of task", "", op.Task
				n := c.n
				keys(&c, "resources", "extended", op.Resources.Ext)
				bound += c.n - n
				err = c.err
			}
		case OpEvict, OpSetStatus:
			if !c.ok(op.Message) {
				why, large := c.why(op.Message)
				what := "evict reason"
				if op.Kind == OpSetStatus {
					what = "set-status message"
				}
				err = fmt.Errorf("%w: %s for task %s %s", sentinelFor(large), what, op.Task, why)
			}
			bound += reportBound + len(op.Message)
			if op.Run != nil {
				if op.Kind != OpSetStatus {
					err = fmt.Errorf("%w: a run report on an evict of task %s", ErrInvalid, op.Task)
				} else if rerr := validateRun(op.Run); rerr != nil {
					err = fmt.Errorf("%w: set-status run for task %s: %v", ErrInvalid, op.Task, rerr)
				} else {
					c.what, c.id, c.claimOf = "set-status of task", "", op.Task
					n := c.n
					c.run("run", op.Run)
					bound += c.n - n + boundMsg
					err = c.err
				}
			}
		default:
			bound += otherBound
		}
		if err != nil {
			return &OpError{Index: i, Kind: op.Kind, Err: err}
		}
	}
	if lim.MaxTxnBytes > 0 && bound > lim.MaxTxnBytes {
		if size := tx.WireSize(); size > lim.MaxTxnBytes {
			return fmt.Errorf("%w: %d bytes in %d operations, the limit is %d", ErrTooLarge, size, len(tx.Ops), lim.MaxTxnBytes)
		}
	}
	return nil
}

func sentinelFor(tooLarge bool) error {
	if tooLarge {
		return ErrTooLarge
	}
	return ErrInvalid
}

// object returns the one object a Create or Put carries (nil if none; the
// first if several).
func (op *Op) object() proto.Message {
	switch {
	case op.NewTask != nil:
		return op.NewTask
	case op.NewJob != nil:
		return op.NewJob
	case op.NewMachine != nil:
		return op.NewMachine
	case op.NewOffer != nil:
		return op.NewOffer
	case op.NewQuota != nil:
		return op.NewQuota
	case op.NewLease != nil:
		return op.NewLease
	}
	return nil
}

// CheckWire reports what would keep tx from crossing the wire, as the
// store would report it: a nil transaction, a string that is not valid
// UTF-8 anywhere in it (protobuf refuses to encode one), or an object's
// unknown fields that are not wire format — ErrInvalid, naming the
// operation and the field. It checks no limit: that is the store's,
// whose limits a client does not know. A remote transport runs it before
// it encodes.
func CheckWire(tx *Txn) error {
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	return validate(tx, Limits{})
}
