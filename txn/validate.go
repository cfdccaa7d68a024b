package txn

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Validation of what a transaction carries, by the rules the store's
// encoder applies. A proto3 string must be valid UTF-8 — proto.Marshal
// refuses it otherwise, and so does proto.Unmarshal when the store reopens —
// so every string of every object a transaction creates or puts, the
// message of an evict or a status report, the transaction's component, and
// the names of a claim's extended resources are checked here, before
// anything is evaluated; and every string, object and transaction is
// bounded in bytes (Limits). Evaluate runs these checks, so a transaction
// that evaluates without an error encodes: the store never installs a state
// it then cannot write or cannot read back.
//
// The walkers below name each string field by hand, for speed (a created
// task is on the commit path's hot loop); TestValidationCoversEveryString
// walks the messages' descriptors and fails when a string field is added to
// the schema and not here.

// checker checks strings against one limit and keeps the first failure.
type checker struct {
	max  int // longest string in bytes; 0: no bound
	what string
	err  error
}

func (c *checker) fail(path, why string, tooLarge bool) {
	if c.err != nil {
		return
	}
	sentinel := ErrInvalid
	if tooLarge {
		sentinel = ErrTooLarge
	}
	c.err = fmt.Errorf("%w: %s: %s %s", sentinel, c.what, path, why)
}

// ok reports whether s is acceptable; it does not build a path.
func (c *checker) ok(s string) bool {
	return (c.max <= 0 || len(s) <= c.max) && utf8.ValidString(s)
}

func (c *checker) why(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8", false
	}
	return fmt.Sprintf("is %d bytes, the limit is %d", len(s), c.max), true
}

// str checks one string field.
func (c *checker) str(path, s string) {
	if !c.ok(s) {
		why, large := c.why(s)
		c.fail(path, why, large)
	}
}

// strs checks a repeated string field.
func (c *checker) strs(path string, ss []string) {
	for i, s := range ss {
		if !c.ok(s) {
			why, large := c.why(s)
			c.fail(path+"["+strconv.Itoa(i)+"]", why, large)
			return
		}
	}
}

// strMap checks a map<string, string> field, keys and values.
func (c *checker) strMap(path string, m map[string]string) {
	for k, v := range m {
		if !c.ok(k) {
			why, large := c.why(k)
			c.fail(fmt.Sprintf("%s key %q", path, k), why, large)
			return
		}
		if !c.ok(v) {
			why, large := c.why(v)
			c.fail(fmt.Sprintf("%s[%q]", path, k), why, large)
			return
		}
	}
}

// keys checks the keys of a map<string, int64> field.
func keys[V any](c *checker, path string, m map[string]V) {
	for k := range m {
		if !c.ok(k) {
			why, large := c.why(k)
			c.fail(fmt.Sprintf("%s key %q", path, k), why, large)
			return
		}
	}
}

func (c *checker) resources(path string, r *omegav1.Resources) {
	keys(c, path+".extended", r.GetExtended())
}

func (c *checker) meta(m *omegav1.ObjectMeta) {
	c.str("meta.uid", m.GetUid())
	c.str("meta.name", m.GetName())
	c.strMap("meta.labels", m.GetLabels())
	c.strMap("meta.annotations", m.GetAnnotations())
	for i, o := range m.GetOwnerReferences() {
		if !c.ok(o.GetKind()) || !c.ok(o.GetUid()) || !c.ok(o.GetName()) {
			p := "meta.owner_references[" + strconv.Itoa(i) + "]"
			c.str(p+".kind", o.GetKind())
			c.str(p+".uid", o.GetUid())
			c.str(p+".name", o.GetName())
			return
		}
	}
}

func (c *checker) command(path string, cmd *omegav1.Command) {
	if cmd == nil {
		return
	}
	c.str(path+".path", cmd.GetPath())
	c.strs(path+".args", cmd.GetArgs())
	c.strMap(path+".env", cmd.GetEnv())
}

func (c *checker) constraints(path string, cs []*omegav1.Constraint) {
	for i, k := range cs {
		if !c.ok(k.GetAttribute()) || !c.ok(k.GetValue()) {
			p := path + "[" + strconv.Itoa(i) + "]"
			c.str(p+".attribute", k.GetAttribute())
			c.str(p+".value", k.GetValue())
			return
		}
	}
}

func (c *checker) taskSpec(s *omegav1.TaskSpec) {
	if s == nil {
		return
	}
	c.resources("spec.resources", s.GetResources())
	c.command("spec.command", s.GetCommand())
	c.constraints("spec.constraints", s.GetConstraints())
}

func (c *checker) taskStatus(s *omegav1.TaskStatus) {
	if s == nil {
		return
	}
	c.str("status.machine_uid", s.GetMachineUid())
	c.resources("status.claimed", s.GetClaimed())
	c.str("status.scheduler", s.GetScheduler())
	c.str("status.message", s.GetMessage())
}

func (c *checker) jobSpec(s *omegav1.JobSpec) {
	if s == nil {
		return
	}
	c.str("spec.scheduler", s.GetScheduler())
	if t := s.GetTemplate(); t != nil {
		c.resources("spec.template.resources", t.GetResources())
		c.command("spec.template.command", t.GetCommand())
		c.constraints("spec.template.constraints", t.GetConstraints())
		c.strMap("spec.template.labels", t.GetLabels())
	}
}

func (c *checker) machine(m *omegav1.Machine) {
	c.meta(m.GetMeta())
	if s := m.GetSpec(); s != nil {
		c.resources("spec.capacity", s.GetCapacity())
		c.str("spec.failure_domain", s.GetFailureDomain())
		c.strMap("spec.attributes", s.GetAttributes())
	}
	if s := m.GetStatus(); s != nil {
		c.resources("status.allocated", s.GetAllocated())
		c.str("status.agent_address", s.GetAgentAddress())
	}
}

// checkTask, checkJob and checkMachine check every string of an object (what
// names it in errors: "task <uid>"), including the fields the store ignores,
// so that bad input is refused wherever it is.
func checkTask(p *omegav1.Task, what string, lim Limits) error {
	c := checker{max: lim.MaxStringBytes, what: what}
	c.meta(p.GetMeta())
	c.taskSpec(p.GetSpec())
	c.taskStatus(p.GetStatus())
	return c.err
}

func checkJob(p *omegav1.Job, what string, lim Limits) error {
	c := checker{max: lim.MaxStringBytes, what: what}
	c.meta(p.GetMeta())
	c.jobSpec(p.GetSpec())
	c.str("status.message", p.GetStatus().GetMessage())
	return c.err
}

func checkMachine(p *omegav1.Machine, what string, lim Limits) error {
	c := checker{max: lim.MaxStringBytes, what: what}
	c.machine(p)
	return c.err
}

// checkString checks a string an operation carries (a message, a reason,
// the component).
func checkString(what string, s string, lim Limits) error {
	c := checker{max: lim.MaxStringBytes, what: what}
	c.str("", s)
	if c.err != nil {
		// No path: what names the field itself.
		why, large := c.why(s)
		if large {
			return fmt.Errorf("%w: %s %s", ErrTooLarge, what, why)
		}
		return fmt.Errorf("%w: %s %s", ErrInvalid, what, why)
	}
	return nil
}

// checkResourceNames checks the extended resource names of a claim.
func checkResourceNames(what string, r Resources, lim Limits) error {
	c := checker{max: lim.MaxStringBytes, what: what}
	keys(&c, "resources.extended", r.Ext)
	return c.err
}

// --- sizes -------------------------------------------------------------------

// object returns the one object a Create or Put carries (nil if none).
func (op *Op) object() proto.Message {
	switch {
	case op.NewTask != nil:
		return op.NewTask
	case op.NewJob != nil:
		return op.NewJob
	case op.NewMachine != nil:
		return op.NewMachine
	}
	return nil
}

// checkSizes bounds the transaction and each object in it, in bytes of
// their wire encoding (what a client sends the store over gRPC). It is run
// before anything else is looked at, so an oversized transaction costs one
// pass of proto.Size.
func checkSizes(tx *Txn, lim Limits) error {
	if lim.MaxObjectBytes <= 0 && lim.MaxTxnBytes <= 0 {
		return nil
	}
	total := txnHeaderSize(tx)
	for i := range tx.Ops {
		op := &tx.Ops[i]
		n, obj := opSize(op)
		if lim.MaxObjectBytes > 0 && obj > lim.MaxObjectBytes {
			return &OpError{Index: i, Kind: op.Kind, Err: fmt.Errorf("%w: the %s's object is %d bytes, the limit is %d", ErrTooLarge, op.Kind, obj, lim.MaxObjectBytes)}
		}
		total += n
		if lim.MaxTxnBytes > 0 && total > lim.MaxTxnBytes {
			return fmt.Errorf("%w: more than %d bytes by operation %d of %d, the limit is %d", ErrTooLarge, total, i, len(tx.Ops), lim.MaxTxnBytes)
		}
	}
	return nil
}
