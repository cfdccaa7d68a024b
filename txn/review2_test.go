package txn_test

// Second independent review (adversarial): the wire converters under
// hostile input, CheckInvariants, and what crosses the wire's message
// limit. Each test asserts a promise; a failing test is a finding.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/txnfuzz"
	"github.com/omega-cell/omega/txn"
)

// review2Base: machine m1 (10/10), task t1 placed on it claiming 3/3, task
// t2 pending, owned by job j1.
func review2Base(t *testing.T) *txn.State {
	t.Helper()
	c := newCell(t)
	c.commit(c.tx(
		txn.CreateMachine(machineP(m1, res(10, 10))),
		txn.CreateJob(jobP(j1)),
		txn.CreateTask(taskP(t1, res(3, 3), 0)),
		txn.CreateTask(ownedTaskP(t2, j1, res(1, 1))),
		txn.Claim(t1, m1, res(3, 3), 0),
	))
	if err := txn.CheckInvariants(c.s); err != nil {
		t.Fatal(err)
	}
	return c.s
}

func wireMachine(st *txn.State, u uuid.UUID) *omegav1.Machine {
	m, _ := st.Machine(u)
	return proto.Clone(m.Proto()).(*omegav1.Machine)
}

func wireTask(st *txn.State, u uuid.UUID) *omegav1.Task {
	x, _ := st.Task(u)
	return proto.Clone(x.Proto()).(*omegav1.Task)
}

// review2Apply is what a remote client does with a watched revision:
// decode, convert, apply. It returns "refused: ..." if the converter
// refused it, "" if the result satisfies the invariants, or the violation.
func review2Apply(st *txn.State, p *omegav1.RevisionChanges) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("PANIC: %v", r)
		}
	}()
	b, err := proto.Marshal(p)
	if err != nil {
		return "refused (marshal): " + err.Error()
	}
	q := &omegav1.RevisionChanges{}
	if err := proto.Unmarshal(b, q); err != nil {
		return "refused (unmarshal): " + err.Error()
	}
	ws, err := txn.WriteSetFromProto(q)
	if err != nil {
		return "refused: " + err.Error()
	}
	// As a remote client applies a watched revision (client.Cell).
	next, err := st.ApplyChecked(ws)
	if err != nil {
		return "refused (ApplyChecked): " + err.Error()
	}
	if err := txn.CheckInvariants(next); err != nil {
		return err.Error()
	}
	// The pending index (what a scheduler walks) must agree with the tasks.
	var bad string
	next.RangePendingJobs(func(job uuid.UUID, _ int) bool {
		next.RangePendingTasks(job, func(x *txn.Task) bool {
			if x.Job != job || x.State != pending {
				bad = fmt.Sprintf("pending index: task %s (job %s, %s) listed under job %s", x.UID, x.Job, x.State, job)
			}
			return bad == ""
		})
		return bad == ""
	})
	return bad
}

// A remote client applying hostile watch data (a malicious or buggy
// server): WriteSetFromProto + Apply must refuse it or produce a state that
// satisfies CheckInvariants. WriteSetFromProto checks only that each object
// decodes; nothing checks that the changes fit together.
func TestReview2WriteSetHostile(t *testing.T) {
	base := review2Base(t)
	rev := base.Revision() + 1
	chg := func(cs ...*omegav1.Change) *omegav1.RevisionChanges {
		return &omegav1.RevisionChanges{Revision: rev, Changes: cs}
	}
	mch := func(m *omegav1.Machine, del bool) *omegav1.Change {
		return &omegav1.Change{Object: &omegav1.Change_Machine{Machine: m}, Deleted: del}
	}
	tch := func(x *omegav1.Task, del bool) *omegav1.Change {
		return &omegav1.Change{Object: &omegav1.Change_Task{Task: x}, Deleted: del}
	}
	cases := []struct {
		name string
		p    func() *omegav1.RevisionChanges
	}{
		{"machine allocated over capacity", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.Allocated = &omegav1.Resources{CpuMillis: 50, MemoryBytes: 3}
			return chg(mch(m, false))
		}},
		{"machine task count wrong", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.Tasks = -7
			return chg(mch(m, false))
		}},
		{"machine deleted under its placed task", func() *omegav1.RevisionChanges {
			return chg(mch(wireMachine(base, m1), true))
		}},
		{"placed task deleted, machine untouched", func() *omegav1.RevisionChanges {
			return chg(tch(wireTask(base, t1), true))
		}},
		{"task placed on a machine that does not exist", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Status.State = assigned
			x.Status.MachineUid = m3.String()
			x.Status.Claimed = &omegav1.Resources{CpuMillis: 1}
			return chg(tch(x, false))
		}},
		{"pending task with a machine", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Status.MachineUid = m1.String()
			return chg(tch(x, false))
		}},
		{"placed task's claim grown, machine untouched", func() *omegav1.RevisionChanges {
			x := wireTask(base, t1)
			x.Status.Claimed = &omegav1.Resources{CpuMillis: 9, MemoryBytes: 9}
			return chg(tch(x, false))
		}},
		{"pending task moved to another job", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Meta.OwnerReferences = nil
			return chg(tch(x, false))
		}},
		// These the converter refuses (or they are harmless): held.
		{"negative claim", func() *omegav1.RevisionChanges {
			x := wireTask(base, t1)
			x.Status.Claimed = &omegav1.Resources{CpuMillis: -1}
			return chg(tch(x, false))
		}},
		{"task state 99", func() *omegav1.RevisionChanges {
			x := wireTask(base, t1)
			x.Status.State = 99
			return chg(tch(x, false))
		}},
		{"machine state 99", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.State = 99
			return chg(mch(m, false))
		}},
		{"negative allocation", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.Allocated.Extended = map[string]int64{"gpu": -1}
			return chg(mch(m, false))
		}},
		{"delete of what does not exist", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Meta.Uid = t5.String()
			return chg(tch(x, true))
		}},
		{"empty change", func() *omegav1.RevisionChanges { return chg(&omegav1.Change{}) }},
		{"nil object", func() *omegav1.RevisionChanges {
			return chg(&omegav1.Change{Object: &omegav1.Change_Task{}})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := review2Apply(base, tc.p())
			switch {
			case out == "":
				t.Logf("held: applied, invariants hold")
			case strings.HasPrefix(out, "refused"):
				t.Logf("held: %s", out)
			default:
				t.Errorf("BROKEN: hostile write set accepted silently; the client's state now violates: %s", out)
			}
		})
	}
}

// SnapshotReader's Finish promises to fail on a placed task on an unknown
// machine or a machine over capacity, deriving allocations as a reopen
// does. Hostile listings it accepts:
func TestReview2SnapshotReaderHostile(t *testing.T) {
	base := review2Base(t)
	listing := func(mutate func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk) string {
		var chunks []*omegav1.SnapshotChunk
		txn.SnapshotChunks(base, 1<<20, func(c *omegav1.SnapshotChunk) error {
			chunks = append(chunks, proto.Clone(c).(*omegav1.SnapshotChunk))
			return nil
		})
		if len(chunks) != 1 {
			t.Fatalf("%d chunks", len(chunks))
		}
		var r txn.SnapshotReader
		for _, c := range mutate(chunks[0]) {
			if err := r.Add(c); err != nil {
				return "refused: " + err.Error()
			}
		}
		st, err := r.Finish()
		if err != nil {
			return "refused: " + err.Error()
		}
		if err := txn.CheckInvariants(st); err != nil {
			return err.Error()
		}
		return ""
	}
	find := func(c *omegav1.SnapshotChunk, u uuid.UUID) *omegav1.Task {
		for _, x := range c.Tasks {
			if x.GetMeta().GetUid() == u.String() {
				return x
			}
		}
		t.Fatalf("no task %s", u)
		return nil
	}
	for _, tc := range []struct {
		name string
		f    func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk
	}{
		{"placed task listed twice", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Tasks = append(c.Tasks, proto.Clone(find(c, t1)).(*omegav1.Task))
			return []*omegav1.SnapshotChunk{c}
		}},
		{"placed task listed twice, in two chunks, the second copy pending", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			d := proto.Clone(find(c, t1)).(*omegav1.Task)
			d.Status = &omegav1.TaskStatus{State: pending}
			c.Last = false
			return []*omegav1.SnapshotChunk{c, {Revision: c.Revision, Tasks: []*omegav1.Task{d}, Last: true}}
		}},
		{"pending task with a machine", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			find(c, t2).Status.MachineUid = m1.String()
			return []*omegav1.SnapshotChunk{c}
		}},
		// Held (refused):
		{"machine listed twice", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Machines = append(c.Machines, c.Machines[0])
			return []*omegav1.SnapshotChunk{c}
		}},
		{"chunk after the last", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			return []*omegav1.SnapshotChunk{c, c}
		}},
		{"chunks of two revisions", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Last = false
			return []*omegav1.SnapshotChunk{c, {Revision: c.Revision + 1, Last: true}}
		}},
		{"tasks before machines (out of order)", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			ms := c.Machines
			c.Machines, c.Last = nil, false
			return []*omegav1.SnapshotChunk{c, {Revision: c.Revision, Machines: ms, Last: true}}
		}},
		{"nil elements", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Tasks = append(c.Tasks, nil)
			return []*omegav1.SnapshotChunk{c}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			func() {
				defer func() {
					if r := recover(); r != nil {
						out = fmt.Sprintf("PANIC %v", r)
					}
				}()
				out = listing(tc.f)
			}()
			if out == "" || strings.HasPrefix(out, "refused") {
				t.Logf("held: %q", out)
			} else {
				t.Errorf("BROKEN: hostile listing accepted; the state violates: %s", out)
			}
		})
	}
}

// CheckInvariants (and Restorer.Finish) sum a machine's claims in int64:
// three tasks claiming MaxInt64, MaxInt64 and 2 cpu sum to 2^64, i.e. 0,
// so a machine of capacity 0 "holds" them with allocation 0 and every
// check passes. Reached through a hostile listing (SnapshotReader) or a
// hostile watched revision.
func TestReview2ClaimSumWraps(t *testing.T) {
	mw := &omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: m1.String(), Version: 1, CreateRevision: 1},
		Spec: &omegav1.MachineSpec{Capacity: &omegav1.Resources{}}, Status: &omegav1.MachineStatus{Tasks: 3}}
	var tasks []*omegav1.Task
	for i, cpu := range []int64{math.MaxInt64, math.MaxInt64, 2} {
		u := uid(uint64(100 + i))
		tasks = append(tasks, &omegav1.Task{
			Meta:   &omegav1.ObjectMeta{Uid: u.String(), Version: 1, CreateRevision: 1},
			Spec:   &omegav1.TaskSpec{},
			Status: &omegav1.TaskStatus{State: assigned, MachineUid: m1.String(), Claimed: &omegav1.Resources{CpuMillis: cpu}},
		})
	}
	t.Run("listing", func(t *testing.T) {
		var r txn.SnapshotReader
		if err := r.Add(&omegav1.SnapshotChunk{Revision: 1, Machines: []*omegav1.Machine{mw}, Tasks: tasks, Last: true}); err != nil {
			t.Logf("held: %v", err)
			return
		}
		st, err := r.Finish()
		if err != nil {
			t.Logf("held: %v", err)
			return
		}
		if err := txn.CheckInvariants(st); err != nil {
			t.Logf("held: %v", err)
			return
		}
		m, _ := st.Machine(m1)
		t.Errorf("BROKEN: machine of capacity %v holds 3 tasks claiming 2^64 cpu in all (allocation reads %v); Finish and CheckInvariants both pass", m.Capacity, m.Allocated)
	})
	t.Run("watched revision", func(t *testing.T) {
		p := &omegav1.RevisionChanges{Revision: 1, Changes: []*omegav1.Change{{Object: &omegav1.Change_Machine{Machine: mw}, Created: true}}}
		for _, x := range tasks {
			p.Changes = append(p.Changes, &omegav1.Change{Object: &omegav1.Change_Task{Task: x}, Created: true})
		}
		if out := review2Apply(txn.NewState(), p); out == "" {
			t.Errorf("BROKEN: a revision placing 2^64 cpu of claims on a 0-cpu machine passes CheckInvariants")
		} else {
			t.Logf("held: %s", out)
		}
	})
}

// TxnFromProto(tx.Proto()) after marshal/unmarshal must mean what tx means.
func TestReview2TxnRoundTripMeaning(t *testing.T) {
	base := review2Base(t)
	lim := txn.DefaultLimits()
	wire := func(tx *txn.Txn) *txn.Txn {
		b, err := proto.Marshal(tx.Proto())
		if err != nil {
			t.Fatal(err)
		}
		p := &omegav1.Transaction{}
		if err := proto.Unmarshal(b, p); err != nil {
			t.Fatal(err)
		}
		tx2, err := txn.TxnFromProto(p)
		if err != nil {
			t.Fatal(err)
		}
		return tx2
	}
	compare := func(name string, tx *txn.Txn) {
		t.Run(name, func(t *testing.T) {
			tx2 := wire(tx)
			r1, _, e1 := txn.Evaluate(base, tx, base.Revision()+1, lim)
			r2, _, e2 := txn.Evaluate(base, tx2, base.Revision()+1, lim)
			if (e1 == nil) != (e2 == nil) || firstSentinel(e1) != firstSentinel(e2) || fmt.Sprint(codes(r1)) != fmt.Sprint(codes(r2)) {
				t.Errorf("BROKEN: in process: %v %v; after the wire: %v %v", codes(r1), e1, codes(r2), e2)
			}
		})
	}
	x, _ := base.Task(t2)
	// A claim naming an extended resource at 0 whose name is over
	// MaxStringBytes: in process ErrTooLarge; the wire drops zero amounts
	// (ResourcesFromProto), so the server commits it.
	long := strings.Repeat("k", lim.MaxStringBytes+1)
	compare("claim with an over-long zero-amount ext name", &txn.Txn{ViewRevision: base.Revision(),
		Ops: []txn.Op{txn.Claim(t2, m1, txn.Resources{CPU: 1, Ext: map[string]int64{long: 0}}, x.Version)}})
	// Unknown bytes that encode a known field at zero: in process the store
	// refuses them (they would overwrite the known value on reopen); on the
	// wire they are decoded as that known field, so the transaction is
	// another one, which the server judges as it is. The in-process refusal
	// is what is held here.
	m := machineP(m2, res(1000, 1000))
	m.Spec.Capacity.ProtoReflect().SetUnknown(protoreflect.RawFields(
		protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 0)))
	if _, _, err := txn.Evaluate(base, &txn.Txn{ViewRevision: base.Revision(),
		Ops: []txn.Op{txn.CreateMachine(m), txn.Claim(t2, m2, res(500, 1), x.Version)}}, base.Revision()+1, lim); !errors.Is(err, txn.ErrInvalid) {
		t.Errorf("unknown bytes over a known field at zero: %v, want ErrInvalid", err)
	}
}

// MaxTxnBytes is "below MaxWireBytes ... with room for a result's
// outcomes" (txn.go). A conflicting PutMachine's detail prints the
// machine's *current allocation* with every extended resource name, so a
// result grows with the state, not with the transaction: a put of a few
// dozen bytes yields an outcome of up to an object's size (1 MiB), and
// MaxOps (100,000) of them ~100 GiB of detail strings built under the
// commit lock.
func TestReview2ResultAmplification(t *testing.T) {
	lim := txn.DefaultLimits()
	c := newCell(t)
	ext := map[string]int64{}
	for i := range 15 {
		ext[fmt.Sprintf("%02d", i)+strings.Repeat("g", lim.MaxStringBytes-2)] = 1
	}
	cp := res(1, 1)
	cp.Ext = ext
	c.commit(c.tx(txn.CreateMachine(machineP(m1, cp)), txn.CreateTask(taskP(t1, res(0, 0), 0))))
	c.commit(c.tx(txn.Claim(t1, m1, cp, c.ver(t1))))
	// Puts of m1 with zero capacity: each conflicts (capacity below the
	// allocation).
	var ops []txn.Op
	for range 40 {
		ops = append(ops, txn.PutMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: m1.String()}, Spec: &omegav1.MachineSpec{}}, 0))
	}
	tx := c.tx(ops...)
	r, _, err := txn.Evaluate(c.s, tx, c.s.Revision()+1, lim)
	if err != nil {
		t.Fatal(err)
	}
	in, out := tx.WireSize(), proto.Size(r.Proto())
	t.Logf("transaction %d bytes on the wire, result %d bytes (x%d); MaxWireBytes %d", in, out, out/in, txn.MaxWireBytes)
	if out > txn.MaxWireBytes {
		t.Errorf("BROKEN: a %d-byte transaction's result is %d bytes, over MaxWireBytes: the server cannot send it", in, out)
	}
}

// The same without any help from the state: 255 claims, each naming one
// extended resource of MaxStringBytes that does not fit. The detail is
// "... cannot hold cpu=0m mem=0 <name>=1: <name>" — twice the name.
func TestReview2ResultOfMaxTxnClaims(t *testing.T) {
	lim := txn.DefaultLimits()
	c := newCell(t)
	c.commit(c.tx(txn.CreateMachine(machineP(m1, res(10, 10))), txn.CreateTask(taskP(t1, res(0, 0), 0))))
	name := strings.Repeat("g", lim.MaxStringBytes)
	claim := txn.Claim(t1, m1, txn.Resources{Ext: map[string]int64{name: math.MaxInt64}}, c.ver(t1))
	var ops []txn.Op
	tx := c.tx()
	for {
		tx.Ops = append(ops, claim)
		if tx.WireSize() > lim.MaxTxnBytes {
			break
		}
		ops = tx.Ops
	}
	tx.Ops = ops
	r, _, err := txn.Evaluate(c.s, tx, c.s.Revision()+1, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d claims, transaction %d bytes, result %d bytes, MaxWireBytes %d (room left %d)", len(ops), tx.WireSize(), proto.Size(r.Proto()), txn.MaxWireBytes, txn.MaxWireBytes-proto.Size(r.Proto()))
	if proto.Size(r.Proto()) > txn.MaxWireBytes {
		t.Errorf("BROKEN: result over MaxWireBytes")
	}
}

// A watched revision is one message (RevisionChanges) carrying every
// changed object whole. A transaction of a few KiB that claims (or
// finishes) 40 tasks of ~1 MiB (MaxObjectBytes) is a revision of ~40 MiB,
// over MaxWireBytes: no remote watcher can receive it.
func TestReview2WriteSetOverWire(t *testing.T) {
	lim := txn.DefaultLimits()
	c := newCell(t)
	c.commit(c.tx(txn.CreateMachine(machineP(m1, res(1000, 1000)))))
	val := strings.Repeat("v", lim.MaxStringBytes-16)
	var tasks []uuid.UUID
	for b := range 4 {
		var ops []txn.Op
		for i := range 10 {
			u := uid(uint64(1000 + 10*b + i))
			tasks = append(tasks, u)
			p := taskP(u, res(1, 1), 0)
			p.Meta.Annotations = map[string]string{}
			for k := range 15 {
				p.Meta.Annotations[fmt.Sprint(k)] = val
			}
			ops = append(ops, txn.CreateTask(p))
		}
		c.commit(c.tx(ops...))
	}
	var ops []txn.Op
	for _, u := range tasks {
		ops = append(ops, txn.Claim(u, m1, res(1, 1), c.ver(u)))
	}
	tx := c.tx(ops...)
	r, ws, err := txn.Evaluate(c.s, tx, c.s.Revision()+1, lim)
	if err != nil || r.Committed != len(ops) {
		t.Fatalf("%v %+v", err, r.Outcomes)
	}
	size := proto.Size(ws.Proto())
	t.Logf("transaction %d bytes; its revision as watched: %d bytes; MaxWireBytes %d", tx.WireSize(), size, txn.MaxWireBytes)
	// It crosses the wire in pieces, each below the limit, and is joined
	// whole on the far side.
	var rd txn.WriteSetReader
	var got *txn.WriteSet
	pieces := 0
	err = ws.Chunks(0, func(p *omegav1.RevisionChanges) error {
		pieces++
		b, err := proto.Marshal(p)
		if err != nil {
			return err
		}
		if len(b) > txn.MaxWireBytes {
			t.Errorf("BROKEN: a piece of %d bytes, over the limit %d", len(b), txn.MaxWireBytes)
		}
		q := &omegav1.RevisionChanges{}
		if err := proto.Unmarshal(b, q); err != nil {
			return err
		}
		w, err := rd.Add(q)
		if w != nil {
			got = w
		}
		return err
	})
	if err != nil || got == nil || pieces < 2 {
		t.Fatalf("%d pieces, %v, joined %v", pieces, err, got != nil)
	}
	if dump(c.s.Apply(got)) != dump(c.s.Apply(ws)) {
		t.Fatal("the joined revision differs")
	}
}

// A bad string's error message quotes it whole (%q): an invalid-UTF-8 map
// key of n bytes makes a message of ~4n (over MaxStringBytes, too: the
// string whose length is refused is still quoted in full).
func TestReview2ErrorMessageQuotesWholeString(t *testing.T) {
	base := review2Base(t)
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

// WireSize == proto.Size(tx.Proto()) and Limits exactness over the fuzz
// generator's transactions (every op kind, edge values, raw strings).
func TestReview2WireSizePrograms(t *testing.T) {
	lim := txnfuzz.Limits()
	rng := rand.New(rand.NewPCG(20261202, 5))
	n := 0
	for prog := 0; prog < 3000; prog++ {
		st := setupState(t)
		d := txnfuzz.NewDecoder(txnfuzz.RandomProgram(rng.Uint32, 400), lim)
		for step := 0; d.More() && step < 24; step++ {
			if d.Action() == txnfuzz.ActExpire {
				d.Int()
				continue
			}
			tx := d.Txn(st)
			n++
			if w, p := tx.WireSize(), proto.Size(tx.Proto()); w != p {
				t.Fatalf("WireSize %d, proto.Size %d", w, p)
			}
			_, ws, err := txn.Evaluate(st, tx, st.Revision()+1, lim)
			if err == nil && tx.WireSize() > lim.MaxTxnBytes {
				t.Fatalf("accepted a %d-byte transaction, limit %d", tx.WireSize(), lim.MaxTxnBytes)
			}
			if err == nil && len(tx.Ops) > lim.MaxOps {
				t.Fatalf("accepted %d ops", len(tx.Ops))
			}
			if err == nil {
				for i := range tx.Ops {
					op := &tx.Ops[i]
					if (op.Kind == txn.OpCreate || op.Kind == txn.OpPut) && op.NewTask == nil {
						var m proto.Message
						if op.NewJob != nil {
							m = op.NewJob
						} else if op.NewMachine != nil {
							m = op.NewMachine
						}
						if m != nil && proto.Size(m) > lim.MaxObjectBytes {
							t.Fatalf("accepted a %d-byte object", proto.Size(m))
						}
					}
					if op.Kind == txn.OpCreate && op.NewTask != nil && proto.Size(op.NewTask) > lim.MaxObjectBytes {
						t.Fatalf("accepted a %d-byte task", proto.Size(op.NewTask))
					}
				}
			}
			if ws != nil {
				st = st.Apply(ws)
				if err := txn.CheckInvariants(st); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d transactions", n)
}

// ResultFromProto refuses a result that does not fit its transaction or
// itself: callers (schedulers/runner.go, agents/simfleet.go) index
// res.Outcomes[i] by operation, and a short hostile result would panic them.
func TestReview2ResultFromProtoHostile(t *testing.T) {
	ok := func(code omegav1.OutcomeCode) *omegav1.Outcome { return &omegav1.Outcome{Code: code} }
	for _, c := range []struct {
		name string
		p    *omegav1.TransactionResult
		ops  int
	}{
		{"fewer outcomes than operations", &omegav1.TransactionResult{Revision: 9, Committed: 1, Outcomes: []*omegav1.Outcome{ok(0)}}, 2},
		{"an unknown code", &omegav1.TransactionResult{Conflicts: 1, Outcomes: []*omegav1.Outcome{ok(77)}}, 1},
		{"counts against the outcomes", &omegav1.TransactionResult{Revision: 9, Committed: 3, Conflicts: -1, Outcomes: []*omegav1.Outcome{ok(0)}}, 1},
		{"a revision with nothing committed", &omegav1.TransactionResult{Revision: 9, Conflicts: 1, Outcomes: []*omegav1.Outcome{ok(2)}}, 1},
		{"committed with no revision", &omegav1.TransactionResult{Committed: 1, Outcomes: []*omegav1.Outcome{ok(0)}}, 1},
		{"more conflicting claims than conflicts", &omegav1.TransactionResult{Conflicts: 1, ClaimsConflicted: 2, Outcomes: []*omegav1.Outcome{ok(3)}}, 1},
		{"a revision at or below its base", &omegav1.TransactionResult{Revision: 4, Base: 4, Committed: 1, Outcomes: []*omegav1.Outcome{ok(0)}}, 1},
	} {
		if r, err := txn.ResultFromProto(c.p, c.ops); !errors.Is(err, txn.ErrInvalid) {
			t.Errorf("%s: accepted %+v (%v)", c.name, r, err)
		}
	}
	good := &omegav1.TransactionResult{Revision: 5, Base: 4, Committed: 1, Conflicts: 1, ClaimsConflicted: 1, Rejected: 1,
		Outcomes: []*omegav1.Outcome{ok(0), ok(3), {Code: omegav1.OutcomeCode_OUTCOME_CODE_REJECTED, Reason: 3}, ok(1)}}
	if _, err := txn.ResultFromProto(good, 4); err != nil {
		t.Errorf("a good result refused: %v", err)
	}
}

var _ = errors.Is
