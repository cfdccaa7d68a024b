package inproc_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/transporttest"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
)

func backend(opts ...inproc.Option) transporttest.Backend {
	return func(t testing.TB, o store.Options) transport.Transport {
		return inproc.New(storekit.Open(t, o), opts...)
	}
}

// TestConformance: the in-process transport, sharing the store's snapshots
// and not, passes the suite every transport runs.
func TestConformance(t *testing.T) {
	t.Run("sharing", func(t *testing.T) { transporttest.Run(t, backend()) })
	t.Run("without-sharing", func(t *testing.T) { transporttest.Run(t, backend(inproc.WithoutSharing())) })
}

// TestCountsRejections: a claim the store's policy refuses is counted as
// rejected, neither committed nor conflicted (DESIGN.md, "Counting").
func TestCountsRejections(t *testing.T) {
	o := store.DefaultOptions(t.TempDir())
	o.Durability, o.Policy = store.DurabilityNone, store.Mediated()
	c, err := client.New(context.Background(), inproc.New(storekit.Open(t, o)), client.Config{
		Component: "batch-0", Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	ids := testkit.NewIDs(1, 1)
	m, job, short, good := ids.Next(), ids.Next(), ids.Next(), ids.Next()
	tx := c.NewTxn(c.View())
	tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(m, "m0", testkit.Res(4000, 4<<30))), txn.CreateJob(testkit.Job(job, "j", "batch")),
		txn.CreateTask(testkit.Task(short, job, "a", testkit.Res(100, 1<<30))), txn.CreateTask(testkit.Task(good, job, "b", testkit.Res(100, 1<<30)))}
	if _, err := c.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := c.Counters()
	tx = c.NewTxn(c.View())
	tx.Ops = []txn.Op{txn.Claim(short, m, testkit.Res(100, 1<<20), 1), txn.Claim(good, m, testkit.Res(100, 1<<30), 1)}
	res, err := c.Commit(context.Background(), tx)
	if err != nil || res.Rejected != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	got := c.Counters()
	if d := got.ClaimsCommitted - before.ClaimsCommitted; d != 1 || got.ClaimsRejected-before.ClaimsRejected != 1 || got.Rejected-before.Rejected != 1 || got.ClaimsConflicted != before.ClaimsConflicted {
		t.Errorf("counters %+v after %+v: want one claim committed, one rejected", got, before)
	}
}
