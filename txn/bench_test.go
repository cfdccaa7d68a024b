package txn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// BenchmarkEvaluateClaims measures Evaluate on a 10,000-machine cell with
// transactions of 100 claims each (fine conflicts, incremental commit), the
// shape of a batch scheduler's commit. It reports ns per claim. Evaluate is
// pure, so the same base state serves every iteration; the transactions
// rotate over different tasks and machines.
func BenchmarkEvaluateClaims(b *testing.B) { benchmarkClaims(b, nil) }

// noRules is a policy whose rules pass everything: the cost of the rules
// hook itself (a copy of each operation and an interface call).
type noRules struct{}

func (noRules) Check(txn.Overlay, int, *txn.Op) *txn.Rejection { return nil }

// BenchmarkEvaluateClaimsRules is BenchmarkEvaluateClaims through the
// per-operation rules hook with rules that pass everything.
func BenchmarkEvaluateClaimsRules(b *testing.B) { benchmarkClaims(b, noRules{}) }

func benchmarkClaims(b *testing.B, rules txn.Rules) {
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
	var scratch txn.Scratch
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, _, err := scratch.EvaluateRules(s, batch[i%txns], rev, lim, rules); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*claimsPerTxn), "ns/claim")
}

// BenchmarkEvaluateCreateClaim measures Evaluate on transactions that
// create 100 tasks — each with a name, labels, an owner reference and a
// command, as a submitter or a mapreduce scheduler writes them — and claim
// them in the same transaction, the shape of `omega bench store`'s commits.
// Every task's strings are validated and its wire size taken, so this is
// the benchmark of the bad-input checks. It reports ns per task.
func BenchmarkEvaluateCreateClaim(b *testing.B) {
	const (
		machines   = 1_000
		tasksPerTx = 100
		txns       = 32
	)
	rng := rand.New(rand.NewPCG(3, 4))
	s := txn.NewState()
	setup := &txn.Txn{}
	mids := make([]uuid.UUID, machines)
	for i := range mids {
		mids[i] = uid(uint64(1_000_000 + i))
		setup.Ops = append(setup.Ops, txn.CreateMachine(machineP(mids[i], res(1<<40, 1<<50))))
	}
	job := uid(999)
	setup.Ops = append(setup.Ops, txn.CreateJob(jobP(job)))
	_, ws, err := txn.Evaluate(s, setup, 1, txn.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	s = s.Apply(ws)
	batch := make([]*txn.Txn, txns)
	for i := range batch {
		tx := &txn.Txn{ViewRevision: s.Revision(), Component: "batch-0", UnixNanos: 1}
		for j := range tasksPerTx {
			id := uid(uint64(2_000_000 + i*tasksPerTx + j))
			p := ownedTaskP(id, job, res(500, 1<<30))
			p.Meta.Name = "job-999-task-" + id.String()[:8]
			p.Meta.Labels = map[string]string{"app": "web-frontend", "tier": "batch", "owner": "team-a"}
			p.Spec.Command = &omegav1.Command{Path: "/usr/bin/worker", Args: []string{"--shard", "17", "--input", "/data/in"}}
			tx.Ops = append(tx.Ops, txn.CreateTask(p), txn.Claim(id, mids[rng.IntN(machines)], res(500, 1<<30), 0))
		}
		batch[i] = tx
	}
	rev := s.Revision() + 1
	lim := txn.DefaultLimits()
	for i, tx := range batch {
		if r, _, err := txn.Evaluate(s, tx, rev, lim); err != nil || r.Committed != 2*tasksPerTx {
			b.Fatalf("txn %d: %d of %d committed, err %v", i, r.Committed, 2*tasksPerTx, err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, _, err := txn.Evaluate(s, batch[i%txns], rev, lim); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*tasksPerTx), "ns/task")
}
