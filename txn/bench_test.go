package txn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/txn"
)

// BenchmarkEvaluateClaims measures Evaluate on a 10,000-machine cell with
// transactions of 100 claims each (fine conflicts, incremental commit), the
// shape of a batch scheduler's commit. It reports ns per claim. Evaluate is
// pure, so the same base state serves every iteration; the transactions
// rotate over different tasks and machines.
func BenchmarkEvaluateClaims(b *testing.B) {
	const (
		machines     = 10_000
		claimsPerTxn = 100
		txns         = 64
	)
	rng := rand.New(rand.NewPCG(1, 2))
	s := txn.NewState()
	setup := &txn.Txn{}
	mids := make([]uuid.UUID, machines)
	for i := range mids {
		mids[i] = uid(uint64(1_000_000 + i))
		capacity := res(32_000, 128<<30)
		if i%4 == 0 {
			capacity = res(32_000, 128<<30, "gpu", 8)
		}
		setup.Ops = append(setup.Ops, txn.CreateMachine(machineP(mids[i], capacity)))
	}
	tids := make([]uuid.UUID, txns*claimsPerTxn)
	for i := range tids {
		tids[i] = uid(uint64(2_000_000 + i))
		setup.Ops = append(setup.Ops, txn.CreateTask(taskP(tids[i], res(500, 1<<30), 0)))
	}
	_, ws, err := txn.Evaluate(s, setup, 1, txn.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	s = s.Apply(ws)
	// Some load on the machines, so fit checks see non-zero allocations.
	load := &txn.Txn{ViewRevision: 1}
	for i := range machines / 2 {
		id := uid(uint64(3_000_000 + i))
		load.Ops = append(load.Ops, txn.CreateTask(taskP(id, res(1000, 1<<30), 0)),
			txn.Claim(id, mids[rng.IntN(machines)], res(1000, 1<<30), 0))
	}
	_, ws, err = txn.Evaluate(s, load, 2, txn.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	s = s.Apply(ws)

	batch := make([]*txn.Txn, txns)
	for i := range batch {
		tx := &txn.Txn{ViewRevision: s.Revision(), Component: "bench", UnixNanos: 1}
		for j := range claimsPerTxn {
			task := tids[i*claimsPerTxn+j]
			r := res(500, 1<<30)
			if j%10 == 0 {
				r = res(500, 1<<30, "gpu", 1)
				tx.Ops = append(tx.Ops, txn.Claim(task, mids[4*rng.IntN(machines/4)], r, 1))
				continue
			}
			tx.Ops = append(tx.Ops, txn.Claim(task, mids[rng.IntN(machines)], r, 1))
		}
		batch[i] = tx
	}
	rev := s.Revision() + 1
	// The claims must actually commit, or we would time the conflict path.
	for i, tx := range batch {
		r, ws, err := txn.Evaluate(s, tx, rev, txn.DefaultLimits())
		if err != nil || ws == nil || r.Committed != claimsPerTxn {
			b.Fatalf("txn %d: %d of %d claims committed, err %v", i, r.Committed, claimsPerTxn, err)
		}
	}
	lim := txn.DefaultLimits()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, _, err := txn.Evaluate(s, batch[i%txns], rev, lim); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*claimsPerTxn), "ns/claim")
}
