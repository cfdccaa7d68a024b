package txn_test

// Tests from an independent review of the bad-input promises (2026-12-01):
// exact limits, WireSize on odd transactions, and Resources.Equal against
// negative extended amounts (which let CheckInvariants miss a drift).

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Resources.Equal (used by CheckInvariants) treats a negative extended
// amount as equal to an absent one: LessEq only walks the receiver's keys.
func TestReviewResourcesEqualNegativeExt(t *testing.T) {
	a := txn.Resources{Ext: map[string]int64{"gpu": -999}}
	if a.Equal(txn.Resources{}) {
		t.Errorf("Resources{gpu:-999}.Equal(Resources{}) = true")
	}
	if (txn.Resources{}).Equal(a) {
		t.Errorf("Resources{}.Equal(Resources{gpu:-999}) = true")
	}
}

// Limits are exact: at the limit accepted, one over rejected with ErrTooLarge.
func TestReviewLimitsExact(t *testing.T) {
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

// WireSize == proto.Size(tx.Proto()) for ops with odd field combinations.
func TestReviewWireSizeOdd(t *testing.T) {
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
