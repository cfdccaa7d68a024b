package txn_test

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
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
