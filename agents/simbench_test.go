package agents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// benchCell is the paper's lightweight cell: machines of 4 cores and
// 16 GiB, filled to 60% with long-running tasks of 500 millicores.
func benchCell(b *testing.B, machines int) (*store.Store, *ids, []uuid.UUID) {
	b.Helper()
	st := openStoreCheck(b, 0, false)
	g := newIDs(1)
	ms := makeMachines(b, st, g, machines)
	var ops []txn.Op
	flush := func() {
		if len(ops) > 0 {
			commitAt(b, st, t0, ops...)
			ops = ops[:0]
		}
	}
	for _, m := range ms {
		for range 5 { // 2.5 of 4 cores
			u := g.next()
			ops = append(ops, txn.CreateTask(taskProto(u, "svc", 500, gib, 0)), txn.Claim(u, m, res(500, gib), 0))
		}
		if len(ops) > 10_000 {
			flush()
		}
	}
	flush()
	return st, g, ms
}

func benchFleet(b *testing.B, st *store.Store) *SimFleet {
	b.Helper()
	cl, err := client.New(context.Background(), inproc.New(st), client.Config{Component: "fleet", Clock: &vclock{now: t0}, Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		b.Fatal(err)
	}
	f, err := NewSimFleet(context.Background(), cl, DefaultFleetConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	return f
}

// BenchmarkNewSimFleet: starting over a full cell lists every placed task.
func BenchmarkNewSimFleet(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			st, _, _ := benchCell(b, n)
			if f := benchFleet(b, st); f.Tracked() != 5*n {
				b.Fatalf("tracked %d", f.Tracked())
			}
			for b.Loop() {
				benchFleet(b, st).Close()
			}
		})
	}
}

// BenchmarkTick: a tick in a 10,000-machine cell, idle (nothing due) or
// reporting tasks that finish (placed by a commit each tick, so the watch
// carries work too).
func BenchmarkTick(b *testing.B) {
	for _, perTick := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("machines=10000/finishing=%d", perTick), func(b *testing.B) {
			st, g, ms := benchCell(b, 10_000)
			f := benchFleet(b, st)
			now := t0
			var ops []txn.Op
			i := 0
			finished := int64(0)
			for b.Loop() {
				now = now.Add(time.Second)
				ops = ops[:0]
				for range perTick {
					u := g.next()
					ops = append(ops, txn.CreateTask(taskProto(u, "batch", 500, gib, time.Second)), txn.Claim(u, ms[i%len(ms)], res(500, gib), 0))
					i++
				}
				if len(ops) > 0 {
					if _, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "sched", UnixNanos: now.UnixNano(), Ops: ops}); err != nil {
						b.Fatal(err)
					}
				}
				r, err := f.Tick(context.Background(), now)
				if err != nil {
					b.Fatal(err)
				}
				finished += int64(r.Committed)
			}
			if perTick > 0 && finished == 0 {
				b.Fatal("nothing finished")
			}
			b.ReportMetric(float64(finished)/float64(b.N), "reports/tick")
		})
	}
}
