package txn_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/txnfuzz"
	"github.com/omega-cell/omega/txn"
)

// TestWireRoundTrip holds the converters to what crosses the wire, over
// random programs (internal/txnfuzz, from rapid's bytes) on the fuzz setup
// cell. For every transaction: what proto.Marshal refuses (a string that is
// not UTF-8) the store refuses too, so nothing the wire
// cannot carry is accepted in process; what it takes, marshalled,
// unmarshalled and converted back, evaluates exactly as the original does
// (the same error, or the same outcomes, counts and resulting state); the
// result and the write set survive their own round trips, and applying the
// received write set gives the same state. At the end, the state listed in
// chunks of a random size rebuilds to the same state.
func TestWireRoundTrip(t *testing.T) {
	lim := txnfuzz.Limits()
	wireStats = struct{ txns, committed, claims int }{}
	defer func() {
		t.Logf("%d transactions, %d committed something, %d claims committed", wireStats.txns, wireStats.committed, wireStats.claims)
		// The generator must reach the interesting paths, or the property
		// proves little.
		if !t.Failed() && (wireStats.committed < wireStats.txns/10 || wireStats.claims < 3) {
			t.Errorf("too few transactions did anything: %+v", wireStats)
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		// A program as txnfuzz.RandomProgram draws it (mostly small bytes),
		// so that many transactions are good enough to do something; from a
		// drawn seed, since rapid's own small numbers would be all zeros.
		seed := rapid.Uint64().Draw(rt, "seed")
		rng := rand.New(rand.NewPCG(seed, 3))
		data := txnfuzz.RandomProgram(rng.Uint32, 300+rng.IntN(300))
		st := setupState(t)
		d := txnfuzz.NewDecoder(data, lim)
		for step := 0; d.More() && step < 32; step++ {
			if d.Action() == txnfuzz.ActExpire {
				d.Int()
				continue
			}
			tx := d.Txn(st)
			st = wireStep(rt, st, tx, lim)
		}
		chunkBytes := rapid.IntRange(1, 4000).Draw(rt, "chunk bytes")
		var r txn.SnapshotReader
		chunks := 0
		err := txn.SnapshotChunks(st, chunkBytes, func(c *omegav1.SnapshotChunk) error {
			chunks++
			b, err := proto.Marshal(c)
			if err != nil {
				return err
			}
			if len(b) > chunkBytes && len(c.GetMachines())+len(c.GetJobs())+len(c.GetTasks()) > 1 {
				rt.Fatalf("chunk of %d bytes, the aim was %d, with more than one object", len(b), chunkBytes)
			}
			got := &omegav1.SnapshotChunk{}
			if err := proto.Unmarshal(b, got); err != nil {
				return err
			}
			return r.Add(got)
		})
		if err != nil {
			rt.Fatalf("snapshot: %v", err)
		}
		back, err := r.Finish()
		if err != nil {
			rt.Fatalf("snapshot of %d chunks: %v", chunks, err)
		}
		if a, b := noSeq(dump(st)), noSeq(dump(back)); a != b {
			rt.Fatalf("the listed state differs:\n%s", diff(a, b))
		}
	})
}

var seqRE = regexp.MustCompile(` ?(seq|last_claim)[: ]\d+`)

// noSeq drops the machines' coarse sequence numbers, which a listing sets
// to its revision.
func noSeq(s string) string { return seqRE.ReplaceAllString(s, "") }

// firstSentinel names the sentinel err wraps, for comparing errors.
func firstSentinel(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// wireStats counts what TestWireRoundTrip's programs did (rapid runs them
// one at a time).
var wireStats struct{ txns, committed, claims int }

func wireStep(rt *rapid.T, st *txn.State, tx *txn.Txn, lim txn.Limits) *txn.State {
	wireStats.txns++
	for i := range tx.Ops {
		op := &tx.Ops[i]
		n := 0
		for _, set := range []bool{op.NewTask != nil, op.NewJob != nil, op.NewMachine != nil} {
			if set {
				n++
			}
		}
		if n > 1 || op.Kind == txn.OpPut && op.NewTask != nil {
			// Two objects in one operation, or a put of a task, have no wire
			// form: a client on the wire cannot send them. Evaluate refuses
			// them in process.
			if _, _, err := txn.Evaluate(st, tx, st.Revision()+1, lim); err == nil {
				rt.Fatalf("an operation with %d objects evaluates", n)
			}
			return st
		}
	}
	rev := st.Revision() + 1
	b, merr := proto.Marshal(tx.Proto())
	r1, ws1, e1 := txn.Evaluate(st, tx, rev, lim)
	if merr != nil {
		if e1 == nil {
			rt.Fatalf("the wire cannot carry the transaction (%v), but Evaluate says %v", merr, e1)
		}
		return st
	}
	p := &omegav1.Transaction{}
	if err := proto.Unmarshal(b, p); err != nil {
		// Unknown fields set by hand that are no wire format: they encode
		// (as raw bytes) but do not decode, and the store refuses them.
		if e1 == nil {
			rt.Fatalf("the transaction does not decode (%v), but Evaluate says %v", err, e1)
		}
		return st
	}
	if e1 != nil && strings.Contains(e1.Error(), "unknown fields encode its known field") {
		// Unknown bytes set by hand that encode a known field: in process
		// the store refuses them (they would overwrite a checked value on
		// reopen); on the wire they are decoded as that known field, and
		// the transaction is another one.
		return st
	}
	tx2, err := txn.TxnFromProto(p)
	if err != nil {
		// An operation of no known kind is sent as one with nothing set,
		// which the conversion refuses (as ErrInvalid), as Evaluate refuses
		// the original (which may find another fault first: too many
		// operations, say).
		var o *txn.OpError
		if !errors.Is(err, txn.ErrInvalid) || !errors.As(err, &o) || e1 == nil {
			rt.Fatalf("TxnFromProto of a marshalled transaction: %v; in process: %v", err, e1)
		}
		return st
	}
	r2, ws2, e2 := txn.Evaluate(st, tx2, rev, lim)
	if (e1 == nil) != (e2 == nil) || firstSentinel(e1) != firstSentinel(e2) {
		rt.Fatalf("in process: %v; after the wire: %v", e1, e2)
	}
	if e1 != nil {
		var o1, o2 *txn.OpError
		if errors.As(e1, &o1) != errors.As(e2, &o2) || (o1 != nil && o1.Index != o2.Index) {
			rt.Fatalf("in process: %v; after the wire: %v", e1, e2)
		}
		return st
	}
	if r1.Revision != r2.Revision || r1.Base != r2.Base || r1.Committed != r2.Committed || r1.Conflicts != r2.Conflicts ||
		r1.ClaimsConflicted != r2.ClaimsConflicted || len(r1.Outcomes) != len(r2.Outcomes) {
		rt.Fatalf("results differ: %+v vs %+v", r1, r2)
	}
	for i := range r1.Outcomes {
		if r1.Outcomes[i].Code != r2.Outcomes[i].Code {
			rt.Fatalf("outcome %d: %s vs %s", i, r1.Outcomes[i].Code, r2.Outcomes[i].Code)
		}
	}
	// The result's own round trip.
	rb, err := proto.Marshal(r1.Proto())
	if err != nil {
		rt.Fatalf("the result does not encode: %v", err)
	}
	rp := &omegav1.TransactionResult{}
	if err := proto.Unmarshal(rb, rp); err != nil {
		rt.Fatal(err)
	}
	if got, err := txn.ResultFromProto(rp, len(tx.Ops)); err != nil || !resultsEqual(got, r1) {
		rt.Fatalf("result round trip: %+v (%v), was %+v", got, err, r1)
	}
	if ws1 == nil {
		if ws2 != nil {
			rt.Fatal("a write set after the wire only")
		}
		return st
	}
	wireStats.committed++
	for i, o := range r1.Outcomes {
		if o.Committed() && tx.Ops[i].Kind == txn.OpClaim {
			wireStats.claims++
		}
	}
	next := st.Apply(ws1)
	if a, b := dump(next), dump(st.Apply(ws2)); a != b {
		rt.Fatalf("the state after the wire differs:\n%s", diff(a, b))
	}
	// The write set as a watcher receives it.
	wb, err := proto.Marshal(ws1.Proto())
	if err != nil {
		rt.Fatalf("the write set does not encode: %v", err)
	}
	wp := &omegav1.RevisionChanges{}
	if err := proto.Unmarshal(wb, wp); err != nil {
		rt.Fatal(err)
	}
	got, err := txn.WriteSetFromProto(wp)
	if err != nil {
		rt.Fatalf("WriteSetFromProto: %v", err)
	}
	if got.Revision != ws1.Revision || got.UnixNanos != ws1.UnixNanos {
		rt.Fatalf("write set %d@%d, was %d@%d", got.Revision, got.UnixNanos, ws1.Revision, ws1.UnixNanos)
	}
	if a, b := dump(next), dump(st.Apply(got)); a != b {
		rt.Fatalf("applying the watched write set gives another state:\n%s", diff(a, b))
	}
	for i, c := range got.Changes {
		if c.Created && c.Deleted {
			rt.Fatalf("change %d is created and deleted: it should not cross the wire", i)
		}
	}
	// In pieces of a few hundred bytes, joined, applied as a remote client
	// applies it (checked).
	var rd txn.WriteSetReader
	var joined *txn.WriteSet
	if err := ws1.Chunks(300, func(p *omegav1.RevisionChanges) error {
		b, err := proto.Marshal(p)
		if err != nil {
			return err
		}
		q := &omegav1.RevisionChanges{}
		if err := proto.Unmarshal(b, q); err != nil {
			return err
		}
		w, err := rd.Add(q)
		if w != nil {
			joined = w
		}
		return err
	}); err != nil || joined == nil {
		rt.Fatalf("write set in pieces: %v (joined: %v)", err, joined != nil)
	}
	checked, err := st.ApplyChecked(joined)
	if err != nil {
		rt.Fatalf("a store's own revision fails the remote client's check: %v", err)
	}
	if a, b := dump(next), dump(checked); a != b {
		rt.Fatalf("the joined revision gives another state:\n%s", diff(a, b))
	}
	return next
}

func resultsEqual(a, b txn.Result) bool {
	if a.Revision != b.Revision || a.Base != b.Base || a.Committed != b.Committed || a.Conflicts != b.Conflicts ||
		a.ClaimsConflicted != b.ClaimsConflicted || a.Rejected != b.Rejected || len(a.Outcomes) != len(b.Outcomes) {
		return false
	}
	for i := range a.Outcomes {
		if a.Outcomes[i] != b.Outcomes[i] {
			return false
		}
	}
	return true
}

// TestTxnFromProtoRejects: what only the wire can carry wrong — a uid that
// is not a uuid, an operation with nothing set — is ErrInvalid naming the
// operation.
func TestTxnFromProtoRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   *omegav1.Operation
		kind txn.OpKind
	}{
		{"claim task uid", &omegav1.Operation{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{TaskUid: "nope", MachineUid: m1.String()}}}, txn.OpClaim},
		{"claim machine uid", &omegav1.Operation{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{TaskUid: t1.String(), MachineUid: "x"}}}, txn.OpClaim},
		{"evict", &omegav1.Operation{Op: &omegav1.Operation_Evict{Evict: &omegav1.EvictOp{TaskUid: "zz"}}}, txn.OpEvict},
		{"set-status", &omegav1.Operation{Op: &omegav1.Operation_SetStatus{SetStatus: &omegav1.SetStatusOp{TaskUid: "1-2"}}}, txn.OpSetStatus},
		{"delete", &omegav1.Operation{Op: &omegav1.Operation_Delete{Delete: &omegav1.DeleteOp{Kind: kindTask, Uid: "?"}}}, txn.OpDelete},
		{"empty", &omegav1.Operation{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := &omegav1.Operation{Op: &omegav1.Operation_SetStatus{SetStatus: &omegav1.SetStatusOp{TaskUid: t1.String(), State: killed}}}
			_, err := txn.TxnFromProto(&omegav1.Transaction{Ops: []*omegav1.Operation{ok, tc.op}})
			var oe *txn.OpError
			if !errors.Is(err, txn.ErrInvalid) || !errors.As(err, &oe) || oe.Index != 1 || oe.Kind != tc.kind {
				t.Fatalf("TxnFromProto: %v, want ErrInvalid at op 1 (%s)", err, tc.kind)
			}
		})
	}
	if _, err := txn.TxnFromProto(nil); !errors.Is(err, txn.ErrInvalid) {
		t.Fatalf("nil: %v", err)
	}
}

// A claim received on the wire shares the message's extended map
// (TxnFromProto owns the message); the committed task must not: a server
// that reuses the message afterwards changes nothing in the state.
func TestTxnFromProtoClaimMapNotShared(t *testing.T) {
	c := std(t)
	p := &omegav1.Transaction{ViewRevision: c.s.Revision(), Ops: []*omegav1.Operation{{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{
		TaskUid: t1.String(), MachineUid: m1.String(), ExpectVersion: c.ver(t1),
		Resources: &omegav1.Resources{CpuMillis: 1000, MemoryBytes: 1000, Extended: map[string]int64{"gpu": 1, "none": 0}},
	}}}}}
	tx, err := txn.TxnFromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.commit(tx); r.Committed != 1 {
		t.Fatalf("claim: %+v", r.Outcomes)
	}
	p.Ops[0].GetClaim().Resources.Extended["gpu"] = 2
	wantRes(t, "claimed", c.task(t1).Claimed, res(1000, 1000, "gpu", 1))
	wantRes(t, "allocated", c.machine(m1).Allocated, res(1000, 1000, "gpu", 1))
	if _, ok := c.task(t1).Claimed.Ext["none"]; ok {
		t.Fatal("a zero amount kept in the claim")
	}
}

// TestWireSizeOfOddOps: WireSize == proto.Size(tx.Proto()) for operations
// with odd field combinations (fields their kind does not use, extreme
// integers, long strings).
func TestWireSizeOfOddOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ints := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 127, 128, 1 << 35}
	pick := func() int64 { return ints[rng.IntN(len(ints))] }
	for iter := 0; iter < 3000; iter++ {
		var ops []txn.Op
		for k := 0; k < 1+rng.IntN(4); k++ {
			op := txn.Op{
				Kind:          txn.OpKind(rng.IntN(9)),
				ExpectVersion: uint64(pick()),
				State:         omegav1.TaskState(pick()),
				ForPriority:   int32(pick()),
				Force:         rng.IntN(2) == 0,
				Message:       strings.Repeat("m", rng.IntN(3)*70),
				DeleteKind:    omegav1.ObjectKind(pick()),
			}
			if rng.IntN(2) == 0 {
				op.Task = uid(uint64(rng.IntN(3)))
				op.Machine = uid(uint64(rng.IntN(3)))
				op.DeleteUID = uid(uint64(rng.IntN(3)))
			}
			if rng.IntN(2) == 0 {
				op.Resources = txn.Resources{CPU: pick(), Memory: pick(), Ext: map[string]int64{"": pick(), "g": pick()}}
			}
			if rng.IntN(3) == 0 {
				op.NewTask = taskP(uid(5), res(pick(), pick()), int32(pick()))
			}
			if rng.IntN(3) == 0 {
				op.NewJob = jobP(uid(6))
			}
			if rng.IntN(3) == 0 {
				op.NewMachine = machineP(uid(7), res(pick(), pick()))
			}
			ops = append(ops, op)
		}
		tx := &txn.Txn{ViewRevision: uint64(pick()), Conflict: omegav1.ConflictMode(pick()), Commit: omegav1.CommitMode(pick()),
			UnixNanos: pick(), Component: strings.Repeat("c", rng.IntN(2)*200), Ops: ops}
		if w, p := tx.WireSize(), proto.Size(tx.Proto()); w != p {
			t.Fatalf("iter %d: WireSize %d, proto.Size %d: %+v", iter, w, p, tx)
		}
	}
}

// TestWireSizeAndLimitsOverFuzzPrograms: WireSize == proto.Size(tx.Proto())
// and no accepted transaction over a limit, over the fuzz generator's
// transactions (every op kind, edge values, raw strings).
func TestWireSizeAndLimitsOverFuzzPrograms(t *testing.T) {
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

// TestTxnRoundTripKeepsMeaning: TxnFromProto(tx.Proto()), after marshal and
// unmarshal, means what tx means: a claim naming an over-long extended
// resource at 0 is judged the same in process and after the wire, and
// unknown bytes that encode a known field at zero are refused in process.
func TestTxnRoundTripKeepsMeaning(t *testing.T) {
	base := onePlacedOnePending(t)
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
				t.Errorf("in process: %v %v; after the wire: %v %v", codes(r1), e1, codes(r2), e2)
			}
		})
	}
	x, _ := base.Task(t2)
	// A claim naming an extended resource at 0 whose name is over
	// MaxStringBytes: the wire drops zero amounts (ResourcesFromProto), and
	// both sides judge it alike.
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

// TestResultFromProtoHostile: ResultFromProto refuses a result that does not fit its transaction or
// itself: callers (schedulers/runner.go, agents/simfleet.go) index
// res.Outcomes[i] by operation, and a short hostile result would panic them.
func TestResultFromProtoHostile(t *testing.T) {
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
