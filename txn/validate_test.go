package txn_test

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// A string leaf of a message: the fields leading to it, and for a map
// whether the key or the value is the string.
type stringLeaf struct {
	path []protoreflect.FieldDescriptor
	part string // "", "key" or "value"
}

func (l stringLeaf) String() string {
	var names []string
	for _, fd := range l.path {
		names = append(names, string(fd.Name()))
	}
	s := strings.Join(names, ".")
	if l.part != "" {
		s += " " + l.part
	}
	return s
}

// stringLeaves lists every string a message of md can hold, by its
// descriptor: singular, repeated, map keys and values, in nested messages.
func stringLeaves(t *testing.T, md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor) []stringLeaf {
	var out []stringLeaf
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := append(append([]protoreflect.FieldDescriptor(nil), prefix...), fd)
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind {
				out = append(out, stringLeaf{path, "key"})
			}
			switch fd.MapValue().Kind() {
			case protoreflect.StringKind:
				out = append(out, stringLeaf{path, "value"})
			case protoreflect.MessageKind:
				t.Fatalf("%s: a map of messages; teach stringLeaves and setLeaf", fd.FullName())
			}
		case fd.Kind() == protoreflect.StringKind:
			out = append(out, stringLeaf{path, ""})
		case fd.Kind() == protoreflect.MessageKind:
			if len(prefix) > 6 {
				t.Fatalf("%s: nested too deep (a recursive message?)", fd.FullName())
			}
			out = append(out, stringLeaves(t, fd.Message(), path)...)
		}
	}
	return out
}

// setLeaf puts s at the leaf of m, creating the messages on the way (one
// new element of a repeated message).
func setLeaf(m protoreflect.Message, l stringLeaf, s string) {
	for _, fd := range l.path[:len(l.path)-1] {
		if fd.IsList() {
			m = m.Mutable(fd).List().AppendMutable().Message()
		} else {
			m = m.Mutable(fd).Message()
		}
	}
	fd := l.path[len(l.path)-1]
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		if l.part == "key" {
			mp.Set(protoreflect.ValueOfString(s).MapKey(), mp.NewValue())
		} else {
			mp.Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString(s))
		}
	case fd.IsList():
		m.Mutable(fd).List().Append(protoreflect.ValueOfString(s))
	default:
		m.Set(fd, protoreflect.ValueOfString(s))
	}
}

// completeProbes fills what a health check's probe requires beside the
// string a test sets in it (an exec probe's path, an http probe's port), so
// that only the string decides.
func completeProbes(p proto.Message) {
	var hc *omegav1.HealthCheck
	switch x := p.(type) {
	case *omegav1.Task:
		hc = x.GetSpec().GetHealthCheck()
	case *omegav1.Job:
		hc = x.GetSpec().GetTemplate().GetHealthCheck()
	}
	if e := hc.GetExec(); e != nil && e.Path == "" {
		e.Path = "/bin/true"
	}
	if h := hc.GetHttp(); h != nil && h.Port == 0 {
		h.Port = 80
	}
}

// TestValidationCoversEveryString: for every string field the schema gives
// a task, a job or a machine — found by walking the descriptors, so a field
// added to cell.proto is covered the day it is added — a Create (and a Put,
// for jobs and machines) carrying invalid UTF-8 there is ErrInvalid naming
// the field, as proto.Marshal, the store's encoder, refuses it; one over
// MaxStringBytes is ErrTooLarge; one at the limit commits.
func TestValidationCoversEveryString(t *testing.T) {
	lim := txn.DefaultLimits()
	lim.MaxStringBytes = 40
	fresh := uid(500)
	kinds := []struct {
		name string
		base proto.Message
		ops  func(p proto.Message) []txn.Op
	}{
		{"task", taskP(fresh, res(10, 10), 1), func(p proto.Message) []txn.Op {
			return []txn.Op{txn.CreateTask(p.(*omegav1.Task))}
		}},
		{"job", jobP(fresh), func(p proto.Message) []txn.Op { return []txn.Op{txn.CreateJob(p.(*omegav1.Job))} }},
		{"job put", jobP(j1), func(p proto.Message) []txn.Op { return []txn.Op{txn.PutJob(p.(*omegav1.Job), 0)} }},
		{"machine", machineP(fresh, res(100, 100)), func(p proto.Message) []txn.Op {
			return []txn.Op{txn.CreateMachine(p.(*omegav1.Machine))}
		}},
		{"machine put", machineP(m1, res(4000, 4000, "gpu", 2)), func(p proto.Message) []txn.Op {
			return []txn.Op{txn.PutMachine(p.(*omegav1.Machine), 0)}
		}},
		{"lease", leaseP("batch-0", "h1", 9), func(p proto.Message) []txn.Op { return []txn.Op{txn.CreateLease(p.(*omegav1.Lease))} }},
	}
	covered := 0
	for _, k := range kinds {
		leaves := stringLeaves(t, k.base.ProtoReflect().Descriptor(), nil)
		if len(leaves) < 8 {
			t.Fatalf("%s: only %d string leaves found", k.name, len(leaves))
		}
		for _, l := range leaves {
			if k.name == "lease" && len(l.path) == 2 && l.path[0].Name() == "meta" && (l.path[1].Name() == "name" || l.path[1].Name() == "uid") {
				continue // a DNS label and its name's uid: TestLeaseRules
			}
			isUID := l.path[len(l.path)-1].Name() == "uid"
			t.Run(k.name+"/"+l.String(), func(t *testing.T) {
				try := func(s string) error {
					c := std(t)
					c.lim = lim
					c.commit(c.tx(txn.CreateJob(jobP(j1))))
					p := proto.Clone(k.base)
					setLeaf(p.ProtoReflect(), l, s)
					completeProbes(p)
					if isUID && l.path[0].Name() == "meta" && len(l.path) == 2 {
						return c.mustErr(c.tx(k.ops(p)...), txn.ErrInvalid, 0) // not a uuid
					}
					_, _, err := c.eval(c.tx(k.ops(p)...))
					return err
				}
				bad := "ok\xff"
				if p := proto.Clone(k.base); true {
					setLeaf(p.ProtoReflect(), l, bad)
					if _, err := proto.Marshal(p); err == nil {
						t.Fatalf("proto.Marshal takes invalid UTF-8 at %s: the test's premise is wrong", l)
					}
				}
				err := try(bad)
				if !errors.Is(err, txn.ErrInvalid) {
					t.Fatalf("invalid UTF-8 at %s: %v, want ErrInvalid", l, err)
				}
				field := string(l.path[len(l.path)-1].Name())
				if !isUID && !strings.Contains(err.Error(), field) {
					t.Errorf("error %q does not name the field %s", err, field)
				}
				if isUID {
					return // a uid is parsed: its length is bounded by that
				}
				if err := try(strings.Repeat("é", 20) + "x"); !errors.Is(err, txn.ErrTooLarge) {
					t.Errorf("41 bytes at %s: %v, want ErrTooLarge", l, err)
				}
				if err := try(strings.Repeat("é", 20)); err != nil && !errors.Is(err, txn.ErrNotFound) {
					t.Errorf("40 bytes at %s: %v", l, err)
				}
			})
			covered++
		}
	}
	t.Logf("%d string fields checked", covered)
}

// TestOpStringsValidated: the strings an operation carries besides objects
// — an evict reason, a status message, the component, a claim's extended
// resource names — are held to the same rules.
func TestOpStringsValidated(t *testing.T) {
	lim := txn.DefaultLimits()
	lim.MaxStringBytes = 16
	long := strings.Repeat("x", 17)
	for _, tc := range []struct {
		name  string
		build func(c *cell) *txn.Txn
		want  error
		index int
	}{
		{"status message", func(c *cell) *txn.Txn {
			return c.tx(txn.SetStatus(t1, killed, 0, "bad \xc3("))
		}, txn.ErrInvalid, 0},
		{"long status message", func(c *cell) *txn.Txn { return c.tx(txn.SetStatus(t1, killed, 0, long)) }, txn.ErrTooLarge, 0},
		{"evict reason", func(c *cell) *txn.Txn {
			c.place(m1, res(1, 1), t2)
			return c.tx(txn.SetStatus(t1, killed, 0, ""), txn.ForceEvict(t2, c.ver(t2), "\xed\xa0\x80"))
		}, txn.ErrInvalid, 1},
		{"claim resource name", func(c *cell) *txn.Txn {
			return c.tx(txn.Claim(t1, m1, res(1, 1, "gp\xffu", 1), c.ver(t1)))
		}, txn.ErrInvalid, 0},
		{"long claim resource name", func(c *cell) *txn.Txn {
			return c.tx(txn.Claim(t1, m1, res(1, 1, long, 0), c.ver(t1)))
		}, txn.ErrTooLarge, 0},
		{"component", func(c *cell) *txn.Txn {
			tx := c.tx(txn.SetStatus(t1, killed, 0, ""))
			tx.Component = "sched\xff"
			return tx
		}, txn.ErrInvalid, -1},
		{"long component", func(c *cell) *txn.Txn {
			tx := c.tx(txn.SetStatus(t1, killed, 0, ""))
			tx.Component = long
			return tx
		}, txn.ErrTooLarge, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := std(t)
			c.lim = lim
			tx := tc.build(c)
			err := c.mustErr(tx, tc.want, tc.index)
			var oe *txn.OpError
			if tc.index < 0 && errors.As(err, &oe) {
				t.Errorf("a transaction-level error names op %d: %v", oe.Index, err)
			}
		})
	}
	// A claim whose extended amount is zero is stored without it (what a
	// reopened store reads back).
	c := std(t)
	c.commit(c.tx(txn.Claim(t1, m1, res(1, 1, "gpu", 0), c.ver(t1))))
	if got := c.task(t1).Claimed; got.Ext != nil {
		t.Errorf("claimed %v keeps a zero amount", got)
	}
}

// TestSizeLimits: MaxObjectBytes bounds each object by its wire size and
// MaxTxnBytes the whole transaction (Txn.WireSize), each at its exact edge,
// and MaxOps the count; over any of them is ErrTooLarge and changes nothing.
func TestSizeLimits(t *testing.T) {
	t.Run("object", func(t *testing.T) {
		c := std(t)
		p := taskP(uid(600), res(1, 1), 0)
		p.Meta.Annotations = map[string]string{"a": strings.Repeat("x", 300)}
		c.lim.MaxObjectBytes = proto.Size(p)
		c.commit(c.tx(txn.CreateTask(p)))
		q := taskP(uid(601), res(1, 1), 0)
		q.Meta.Annotations = map[string]string{"a": strings.Repeat("x", 301)}
		err := c.mustErr(c.tx(txn.CreateTask(taskP(uid(602), res(1, 1), 0)), txn.CreateTask(q)), txn.ErrTooLarge, 1)
		if !strings.Contains(err.Error(), "bytes") {
			t.Errorf("error %q does not give the size", err)
		}
	})
	t.Run("transaction", func(t *testing.T) {
		c := std(t)
		var ops []txn.Op
		for _, id := range []uuid.UUID{t1, t2, t3} {
			ops = append(ops, txn.Claim(id, m1, res(10, 10), c.ver(id)))
		}
		tx := c.tx(ops...)
		c.lim.MaxTxnBytes = tx.WireSize()
		if got := proto.Size(tx.Proto()); got != c.lim.MaxTxnBytes {
			t.Fatalf("WireSize %d, wire form %d bytes", c.lim.MaxTxnBytes, got)
		}
		c.lim.MaxTxnBytes--
		c.mustErr(tx, txn.ErrTooLarge, -1)
		c.lim.MaxTxnBytes++
		c.commit(tx)
	})
	t.Run("every kind at its edge", func(t *testing.T) {
		// One operation of each kind, alone: the transaction at exactly its
		// wire size passes, a byte less is refused (so the bound validation
		// takes before measuring is never below the truth).
		c := std(t)
		c.place(m1, res(10, 10), t1)
		long := strings.Repeat("é", 30)
		for _, op := range []txn.Op{
			txn.Claim(t2, m1, res(10, 10, "gpu", 1, long, 0), c.ver(t2)),
			txn.ForceEvict(t1, c.ver(t1), long),
			txn.Evict(t1, c.ver(t1), -5, long),
			txn.SetStatus(t1, succeeded, c.ver(t1), long),
			txn.Delete(kindTask, t3, c.ver(t3)),
			txn.CreateTask(taskP(uid(700), res(1, 1), 0)),
			txn.PutMachine(machineP(m2, res(2000, 2000)), 0),
		} {
			tx := c.tx(op)
			tx.Component = long
			lim := c.lim
			c.lim.MaxTxnBytes = tx.WireSize()
			if _, _, err := c.eval(tx); errors.Is(err, txn.ErrTooLarge) {
				t.Errorf("%s at exactly its size: %v", op.Kind, err)
			}
			c.lim.MaxTxnBytes--
			c.mustErr(tx, txn.ErrTooLarge, -1)
			c.lim = lim
		}
	})
	t.Run("tasks sharing a spec", func(t *testing.T) {
		// A job's tasks share one spec, walked once per transaction: each
		// task still counts its spec's bytes towards the transaction's
		// size, and a shared spec that is bad is named with the first task
		// that carries it.
		c := std(t)
		spec := taskP(uid(800), res(1, 1), 0).Spec
		spec.Command = &omegav1.Command{Path: "run", Args: []string{strings.Repeat("x", 200)}}
		var ops []txn.Op
		for i := range 4 {
			p := taskP(uid(uint64(801+i)), res(1, 1), 0)
			p.Spec = spec
			ops = append(ops, txn.CreateTask(p))
		}
		tx := c.tx(ops...)
		c.lim.MaxTxnBytes = tx.WireSize()
		c.lim.MaxTxnBytes--
		c.mustErr(tx, txn.ErrTooLarge, -1)
		c.lim.MaxTxnBytes++
		if _, _, err := c.eval(tx); err != nil {
			t.Fatalf("at exactly its size: %v", err)
		}
		bad := taskP(uid(810), res(1, 1), 0).Spec
		bad.Command = &omegav1.Command{Path: "run", Args: []string{"\xff"}}
		ops = ops[:0]
		for i := range 3 {
			p := taskP(uid(uint64(811+i)), res(1, 1), 0)
			if i > 0 {
				p.Spec = bad
			}
			ops = append(ops, txn.CreateTask(p))
		}
		err := c.mustErr(c.tx(ops...), txn.ErrInvalid, 1)
		if !strings.Contains(err.Error(), uid(812).String()) {
			t.Errorf("error %q does not name the first task with the bad spec", err)
		}
	})
	t.Run("operations", func(t *testing.T) {
		c := std(t)
		c.lim.MaxOps = 2
		c.mustErr(c.tx(txn.SetStatus(t1, killed, 0, ""), txn.SetStatus(t2, killed, 0, ""), txn.SetStatus(t3, killed, 0, "")), txn.ErrTooLarge, -1)
	})
	t.Run("limits", func(t *testing.T) {
		if err := txn.DefaultLimits().Validate(); err != nil {
			t.Fatal(err)
		}
		if d := (txn.Limits{MaxOps: 7}).WithDefaults(); d.MaxOps != 7 || d.MaxTxnBytes != txn.DefaultLimits().MaxTxnBytes || d.MaxStringBytes == 0 || d.MaxObjectBytes == 0 {
			t.Fatalf("WithDefaults: %+v", d)
		}
		for _, l := range []txn.Limits{{MaxOps: -1}, {MaxStringBytes: -1}, {MaxObjectBytes: -1}, {MaxTxnBytes: -1}, {MaxTxnBytes: txn.MaxWireBytes + 1}} {
			if err := l.Validate(); err == nil {
				t.Errorf("%+v validates", l)
			}
		}
	})
}

// TestNilTransaction: Evaluate of no transaction is ErrInvalid, not a panic.
func TestNilTransaction(t *testing.T) {
	if _, _, err := txn.Evaluate(txn.NewState(), nil, 1, txn.DefaultLimits()); !errors.Is(err, txn.ErrInvalid) {
		t.Fatalf("Evaluate(nil): %v", err)
	}
}

// TestDeleteMachineStaleView: deleting a machine that was empty in the
// caller's view but holds tasks now is a conflict (the view is stale, the
// retry sees the tasks); with tasks the view saw, or placed by the same
// transaction, it is ErrInUse.
func TestDeleteMachineStaleView(t *testing.T) {
	c := std(t)
	view := c.s.Revision() // m2 empty
	c.place(m2, res(1, 1), t1)
	tx := c.tx(txn.Delete(kindMachine, m2, 0))
	tx.ViewRevision = view
	r := c.commit(tx)
	wantCodes(t, r, cMachChanged)
	c.mustErr(c.tx(txn.Delete(kindMachine, m2, 0)), txn.ErrInUse, 0) // the current view sees the task
	c.mustErr(c.tx(txn.Claim(t2, m1, res(1, 1), c.ver(t2)), txn.Delete(kindMachine, m1, 0)), txn.ErrInUse, 1)

	// A view that saw the task: other changes to the machine since (its
	// agent moved, another task on it finished) do not make it stale.
	c.place(m2, res(1, 1), t3)
	view = c.s.Revision()
	moved := machineP(m2, res(2000, 2000))
	moved.Status = &omegav1.MachineStatus{AgentAddress: "127.0.0.2:7946"}
	c.commit(c.tx(txn.PutMachine(moved, 0)))
	c.commit(c.tx(txn.SetStatus(t3, succeeded, 0, "")))
	tx = c.tx(txn.Delete(kindMachine, m2, 0))
	tx.ViewRevision = view
	c.mustErr(tx, txn.ErrInUse, 0)
}

// TestTotalsDoNotOverflow: the cell's total capacity is exact however large
// the machines (two of math.MaxInt64 cpu used to sum to a negative
// capacity); it reads saturated, and comes back exactly as machines leave.
func TestTotalsDoNotOverflow(t *testing.T) {
	c := newCell(t)
	big1, big2, small := uid(700), uid(701), uid(702)
	c.commit(c.tx(
		txn.CreateMachine(machineP(big1, res(math.MaxInt64, math.MaxInt64, "gpu", math.MaxInt64))),
		txn.CreateMachine(machineP(big2, res(math.MaxInt64, 5, "gpu", math.MaxInt64))),
		txn.CreateMachine(machineP(small, res(3, 3))),
	))
	wantRes(t, "capacity", c.s.Capacity(), res(math.MaxInt64, math.MaxInt64, "gpu", math.MaxInt64))
	if err := txn.CheckInvariants(c.s); err != nil {
		t.Fatal(err)
	}
	c.commit(c.tx(txn.Delete(kindMachine, big1, 0)))
	wantRes(t, "capacity after one left", c.s.Capacity(), res(math.MaxInt64, 8, "gpu", math.MaxInt64))
	c.commit(c.tx(txn.Delete(kindMachine, big2, 0)))
	wantRes(t, "capacity after both left", c.s.Capacity(), res(3, 3))
	if err := txn.CheckInvariants(c.s); err != nil {
		t.Fatal(err)
	}
}

// fillAll sets every field of m, recursively, to a value as large on the
// wire as the schema allows: integers of ten-byte varints, strings of 3,000
// bytes (two-byte lengths), three elements in every list and map.
func fillAll(m protoreflect.Message, depth int) {
	long := strings.Repeat("s", 3000)
	fields := m.Descriptor().Fields()
	scalar := func(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
		switch fd.Kind() {
		case protoreflect.StringKind:
			return protoreflect.ValueOfString(long + strconv.Itoa(i))
		case protoreflect.BoolKind:
			return protoreflect.ValueOfBool(true)
		case protoreflect.EnumKind:
			return protoreflect.ValueOfEnum(-1)
		case protoreflect.Int32Kind:
			return protoreflect.ValueOfInt32(-1)
		case protoreflect.Int64Kind:
			return protoreflect.ValueOfInt64(-1)
		case protoreflect.Uint64Kind:
			return protoreflect.ValueOfUint64(math.MaxUint64)
		case protoreflect.Uint32Kind:
			return protoreflect.ValueOfUint32(math.MaxUint32)
		}
		panic(fmt.Sprintf("fillAll: teach me %s", fd.Kind()))
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for k := range 3 {
				key := scalar(fd.MapKey(), k).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					fillAll(mp.Mutable(key).Message(), depth+1)
				} else {
					mp.Set(key, scalar(fd.MapValue(), k))
				}
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := range 3 {
				if fd.Kind() == protoreflect.MessageKind {
					fillAll(l.AppendMutable().Message(), depth+1)
				} else {
					l.Append(scalar(fd, k))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 8 {
				fillAll(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, scalar(fd, 0))
		}
	}
}

// TestSizeBoundCoversEveryField: the size bound validation computes while
// it walks an object is never below proto.Size, for objects with every
// field the schema has set to its largest wire form (so a field added to
// cell.proto and not counted by the walk fails here), with unknown fields,
// and for small ones.
func TestSizeBoundCoversEveryField(t *testing.T) {
	for _, m := range []proto.Message{&omegav1.Task{}, &omegav1.Job{}, &omegav1.Machine{}} {
		fillAll(m.ProtoReflect(), 0)
		// Bytes of a field this build does not know, as a newer client may send.
		m.ProtoReflect().Mutable(m.ProtoReflect().Descriptor().Fields().ByNumber(1)).Message().SetUnknown(
			protoreflect.RawFields(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), long300())))
		var op txn.Op
		switch m := m.(type) {
		case *omegav1.Task:
			op = txn.CreateTask(m)
		case *omegav1.Job:
			op = txn.CreateJob(m)
		case *omegav1.Machine:
			op = txn.CreateMachine(m)
		}
		bound, size := txn.ObjectSizeBound(&op), proto.Size(m)
		if bound < size {
			t.Errorf("%T: bound %d below proto.Size %d", m, bound, size)
		}
		t.Logf("%T: bound %d, proto.Size %d", m, bound, size)
	}
	small := txn.CreateTask(taskP(uid(1), res(1, 1), 0))
	if b, n := txn.ObjectSizeBound(&small), proto.Size(small.NewTask); b < n || b > 4*n+100 {
		t.Errorf("small task: bound %d, size %d", b, n)
	}
}

func long300() string { return strings.Repeat("u", 300) }

// TestLimitsExact: every limit is exact: a string, an extended resource's
// name, an object, a transaction and a count of operations at the limit are
// accepted, one over it refused with ErrTooLarge.
func TestLimitsExact(t *testing.T) {
	lim := txn.Limits{MaxOps: 5, MaxStringBytes: 50, MaxObjectBytes: 400, MaxTxnBytes: 1500}
	base := newCell(t)
	base.lim = lim
	base.commit(base.tx(txn.CreateTask(taskP(t1, res(1, 1), 0)), txn.CreateMachine(machineP(m1, res(10, 10)))))
	st := base.s
	eval := func(tx *txn.Txn) error {
		_, _, err := txn.Evaluate(st, tx, st.Revision()+1, lim)
		return err
	}
	check := func(what string, build func(n int) *txn.Txn, size func(tx *txn.Txn) int, limit int) {
		t.Helper()
		// find n with size == limit
		n := -1
		for i := 0; i < 5000; i++ {
			if size(build(i)) == limit {
				n = i
				break
			}
		}
		if n < 0 {
			t.Fatalf("%s: no n reaches %d exactly", what, limit)
		}
		if err := eval(build(n)); err != nil {
			t.Errorf("%s at the limit (%d): %v", what, limit, err)
		}
		for m := n + 1; m < n+5000; m++ {
			if size(build(m)) > limit {
				if err := eval(build(m)); !errors.Is(err, txn.ErrTooLarge) {
					t.Errorf("%s one over (%d > %d): %v", what, size(build(m)), limit, err)
				}
				break
			}
		}
	}
	str := func(n int) string { return strings.Repeat("x", n) }
	check("string", func(n int) *txn.Txn {
		return &txn.Txn{Ops: []txn.Op{txn.SetStatus(t1, omegav1.TaskState_TASK_STATE_KILLED, 0, str(n))}}
	}, func(tx *txn.Txn) int { return len(tx.Ops[0].Message) }, lim.MaxStringBytes)
	check("claim ext key", func(n int) *txn.Txn {
		return &txn.Txn{Ops: []txn.Op{txn.Claim(t1, m1, txn.Resources{Ext: map[string]int64{str(n): 0}}, 0)}}
	}, func(tx *txn.Txn) int {
		for k := range tx.Ops[0].Resources.Ext {
			return len(k)
		}
		return 0
	}, lim.MaxStringBytes)
	// Object: a task with many short labels.
	objTx := func(n int) *txn.Txn {
		p := taskP(t2, res(1, 1), 0)
		p.Meta.Labels = map[string]string{}
		for i := 0; i < n/40; i++ {
			p.Meta.Labels[strings.Repeat("k", 10)+string(rune('a'+i%26))+string(rune('a'+i/26))] = str(20)
		}
		p.Meta.Annotations = map[string]string{"a": str(n % 40)}
		return &txn.Txn{Ops: []txn.Op{txn.CreateTask(p)}}
	}
	check("object", objTx, func(tx *txn.Txn) int { return proto.Size(tx.Ops[0].NewTask) }, lim.MaxObjectBytes)
	// Transaction: status messages.
	txTx := func(n int) *txn.Txn {
		var ops []txn.Op
		for i := 0; i < n/51; i++ {
			ops = append(ops, txn.SetStatus(t1, omegav1.TaskState_TASK_STATE_KILLED, 0, str(50)))
		}
		ops = append(ops, txn.SetStatus(t1, omegav1.TaskState_TASK_STATE_KILLED, 0, str(n%51)))
		return &txn.Txn{Ops: ops}
	}
	_ = txTx
	lim2 := lim
	lim2.MaxTxnBytes = 0
	for i := 0; i < 2000 && lim2.MaxTxnBytes == 0; i++ {
		if w := txTx(i).WireSize(); w >= 300 {
			lim2.MaxTxnBytes = w
		}
	}
	lim2.MaxOps = 0
	lim = lim2
	check("transaction", txTx, func(tx *txn.Txn) int { return tx.WireSize() }, lim.MaxTxnBytes)
	// ops
	opsTx := func(n int) *txn.Txn {
		ops := make([]txn.Op, n)
		for i := range ops {
			ops[i] = txn.SetStatus(t1, omegav1.TaskState_TASK_STATE_KILLED, 0, "")
		}
		return &txn.Txn{Ops: ops}
	}
	lim.MaxOps = 5
	check("ops", opsTx, func(tx *txn.Txn) int { return len(tx.Ops) }, lim.MaxOps)
}

// TestErrorMessageQuotesABoundedString: the error refusing a bad string (a
// map key of 1 MiB, invalid UTF-8 or over MaxStringBytes) quotes a bounded
// part of it: the message stays within 4*MaxStringBytes.
func TestErrorMessageQuotesABoundedString(t *testing.T) {
	base := onePlacedOnePending(t)
	for _, key := range []string{strings.Repeat("\x80", 1<<20), strings.Repeat("k", 1<<20)} {
		p := taskP(t5, res(1, 1), 0)
		p.Meta.Labels = map[string]string{key: "v"}
		_, _, err := txn.Evaluate(base, &txn.Txn{Ops: []txn.Op{txn.CreateTask(p)}}, base.Revision()+1, txn.DefaultLimits())
		if err == nil {
			t.Fatal("accepted")
		}
		t.Logf("%d-byte key: %d-byte error message (sentinel %v)", len(key), len(err.Error()), firstSentinel(err))
		if len(err.Error()) > 4*txn.DefaultLimits().MaxStringBytes {
			t.Errorf("error message of %d bytes for a %d-byte key", len(err.Error()), len(key))
		}
	}
}
