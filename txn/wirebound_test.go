package txn_test

// What crosses the wire fits its message limit (MaxWireBytes): a result
// grows with its transaction, not with the state, and a revision larger than
// one message crosses in pieces that are joined whole.

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestConflictDetailsFitTheWire: MaxTxnBytes is "below MaxWireBytes ...
// with room for a result's outcomes" (txn.go). Forty conflicting
// PutMachines of a few dozen bytes each, on a machine whose allocation names
// fifteen extended resources of the longest name, get a result within
// MaxWireBytes: a result grows with the transaction, not with the state.
func TestConflictDetailsFitTheWire(t *testing.T) {
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
		t.Errorf("a %d-byte transaction's result is %d bytes, over MaxWireBytes: the server cannot send it", in, out)
	}
}

// TestResultOfMaxTxnClaimsFitsTheWire: as many claims as MaxTxnBytes holds,
// each naming one extended resource of MaxStringBytes that does not fit,
// get a result within MaxWireBytes (each detail names the resource).
func TestResultOfMaxTxnClaimsFitsTheWire(t *testing.T) {
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
		t.Errorf("result over MaxWireBytes")
	}
}

// TestWriteSetCrossesTheWireInPieces: a transaction of a few KiB that
// claims 40 tasks of ~1 MiB each (MaxObjectBytes) is a revision of ~40 MiB,
// over MaxWireBytes; it crosses the wire in pieces (WriteSet.Chunks), each
// below the limit, and WriteSetReader joins them into the same revision.
func TestWriteSetCrossesTheWireInPieces(t *testing.T) {
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
			t.Errorf("a piece of %d bytes, over the limit %d", len(b), txn.MaxWireBytes)
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
