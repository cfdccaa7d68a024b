package txn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// BenchmarkAppendChunks measures the server's hand encoder of a watched
// revision (WriteSet.AppendChunks), which the server runs once per revision
// and form for all its watchers, on a 1,000-machine cell:
//
//   - rev=claims: 100 claims (a task's change and its machine's derived
//     change each), the commit of a batch scheduler: partial changes on a
//     watch that asked for them, whole objects otherwise;
//   - rev=creates: 100 tasks created and claimed in one transaction, as a
//     submitter's: created tasks go whole in both forms;
//   - rev=offer: a two-level allocator's offer locking every machine, one
//     large object, whole in both forms.
//
// It reports ns per change and the bytes encoded per revision; allocs/op
// counts the pieces handed to send (fresh slices, by contract) and the
// messages of whole objects. Run it with
//
//	go test ./txn -run '^$' -bench BenchmarkAppendChunks -benchmem
func BenchmarkAppendChunks(b *testing.B) {
	for _, rev := range []string{"claims", "creates", "offer"} {
		ws := benchWriteSet(b, rev)
		for _, partial := range []bool{false, true} {
			b.Run(fmt.Sprintf("rev=%s/partial=%v", rev, partial), func(b *testing.B) {
				// The encoding must be the whole revision, or we would time
				// an empty one.
				encoded, changes := 0, 0
				if err := ws.AppendChunks(partial, 0, func(p []byte) error {
					encoded += len(p)
					q := &omegav1.RevisionChanges{}
					if err := proto.Unmarshal(p, q); err != nil {
						return err
					}
					changes += len(q.Changes)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if changes != len(ws.Changes) {
					b.Fatalf("%d of %d changes encoded", changes, len(ws.Changes))
				}
				send := func([]byte) error { return nil }
				b.ReportAllocs()
				b.ResetTimer()
				n := 0
				for b.Loop() {
					if err := ws.AppendChunks(partial, 0, send); err != nil {
						b.Fatal(err)
					}
					n++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*len(ws.Changes)), "ns/change")
				b.ReportMetric(float64(encoded), "bytes/rev")
			})
		}
	}
}

// benchWriteSet builds the write set of BenchmarkAppendChunks's revision
// kind on a 1,000-machine cell.
func benchWriteSet(b *testing.B, rev string) *txn.WriteSet {
	const (
		machines = 1_000
		tasks    = 100
	)
	rng := rand.New(rand.NewPCG(5, 6))
	s := txn.NewState()
	setup := &txn.Txn{}
	mids := make([]uuid.UUID, machines)
	for i := range mids {
		mids[i] = uid(uint64(1_000_000 + i))
		setup.Ops = append(setup.Ops, txn.CreateMachine(machineP(mids[i], res(32_000, 128<<30, "gpu", 8))))
	}
	job := uid(999)
	setup.Ops = append(setup.Ops, txn.CreateJob(jobP(job)))
	tids := make([]uuid.UUID, tasks)
	for i := range tids {
		tids[i] = uid(uint64(2_000_000 + i))
		if rev == "claims" {
			setup.Ops = append(setup.Ops, txn.CreateTask(benchTaskP(tids[i], job)))
		}
	}
	_, ws, err := txn.Evaluate(s, setup, 1, txn.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	s = s.Apply(ws)
	tx := &txn.Txn{ViewRevision: s.Revision(), Component: "batch-0", UnixNanos: 1_700_000_000_000_000_000}
	switch rev {
	case "claims":
		for _, t := range tids {
			tx.Ops = append(tx.Ops, txn.Claim(t, mids[rng.IntN(machines)], res(500, 1<<30), 1))
		}
	case "creates":
		for _, t := range tids {
			tx.Ops = append(tx.Ops, txn.CreateTask(benchTaskP(t, job)), txn.Claim(t, mids[rng.IntN(machines)], res(500, 1<<30), 0))
		}
	case "offer":
		tx.Ops = append(tx.Ops, txn.CreateOffer(&omegav1.Offer{Meta: &omegav1.ObjectMeta{Uid: uid(3_000_000).String(), Name: "offer-1"}, Spec: &omegav1.OfferSpec{Framework: "batch-0"}}))
	}
	r, ws, err := txn.Evaluate(s, tx, s.Revision()+1, txn.DefaultLimits())
	if err != nil || r.Committed != len(tx.Ops) {
		b.Fatalf("%s: %d of %d committed, err %v", rev, r.Committed, len(tx.Ops), err)
	}
	return ws
}

// benchTaskP is a task as a submitter writes one: a name, labels, an owner
// reference and a command.
func benchTaskP(id, job uuid.UUID) *omegav1.Task {
	p := ownedTaskP(id, job, res(500, 1<<30))
	p.Meta.Name = "job-999-task-" + id.String()[:8]
	p.Meta.Labels = map[string]string{"app": "web-frontend", "tier": "batch", "owner": "team-a"}
	p.Spec.Command = &omegav1.Command{Path: "/usr/bin/worker", Args: []string{"--shard", "17", "--input", "/data/in"}}
	return p
}
