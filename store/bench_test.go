package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// benchCommitter is one scheduler-like client of BenchmarkCommit. Its
// transaction i creates a batch of tasks and claims them on random
// machines, finishes the batch claimed two transactions earlier (releasing
// its resources) and deletes the batch finished the transaction before: the
// cell stays in steady state, about three batches live per committer.
type benchCommitter struct {
	g        uint32
	rng      *rand.Rand
	machines []uuid.UUID
	batch    int
	i        int
	revs     []uint64 // revision of each transaction
}

func (c *benchCommitter) uid(iter, k int) uuid.UUID {
	return testUID(uidTask, c.g, uint32(iter*c.batch+k))
}

func (c *benchCommitter) next() *txn.Txn {
	tx := &txn.Txn{Component: "bench", UnixNanos: int64(c.i), Ops: make([]txn.Op, 0, 4*c.batch)}
	for k := range c.batch {
		u := c.uid(c.i, k)
		tx.Ops = append(tx.Ops,
			txn.CreateTask(taskProto(u, uuid.Nil, 100, 1<<20)),
			txn.Claim(u, c.machines[c.rng.IntN(len(c.machines))], res(100, 1<<20), 0))
	}
	if c.i >= 2 {
		for k := range c.batch {
			tx.Ops = append(tx.Ops, txn.SetStatus(c.uid(c.i-2, k), omegav1.TaskState_TASK_STATE_SUCCEEDED, c.revs[c.i-2], ""))
		}
	}
	if c.i >= 3 {
		for k := range c.batch {
			tx.Ops = append(tx.Ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, c.uid(c.i-3, k), c.revs[c.i-1]))
		}
	}
	return tx
}

func (c *benchCommitter) step(ctx context.Context, s *Store) error {
	tx := c.next()
	r, err := s.Commit(ctx, tx)
	if err != nil {
		return err
	}
	if r.Committed != len(tx.Ops) {
		for i, o := range r.Outcomes {
			if !o.Committed() {
				return fmt.Errorf("committer %d txn %d: op %d (%s) %s: %s", c.g, c.i, i, tx.Ops[i].Kind, o.Code, o.Detail)
			}
		}
	}
	c.revs = append(c.revs, r.Revision)
	c.i++
	return nil
}

// BenchmarkCommit measures durable commits of scheduler transactions:
// committers concurrent clients, each committing transactions of claimsPerTxn
// claims (plus the creates, finishes and deletes that keep the cell steady)
// against a cell of machines machines, DurabilitySync in a temp dir. One op
// is one transaction; claims/s is the store's claim throughput.
func BenchmarkCommit(b *testing.B) {
	const claimsPerTxn = 100
	for _, machines := range []int{10000} {
		for _, committers := range []int{1, 4} {
			b.Run(fmt.Sprintf("machines=%d/committers=%d/claims=%d", machines, committers, claimsPerTxn), func(b *testing.B) {
				o := DefaultOptions(b.TempDir())
				o.Logger = quietLogger()
				s, err := Open(o)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				ms, err := registerMachines(ctx, s, machines, 64000, 256<<30)
				if err != nil {
					b.Fatal(err)
				}
				cs := make([]*benchCommitter, committers)
				for g := range cs {
					cs[g] = &benchCommitter{g: uint32(g), rng: rand.New(rand.NewPCG(1, uint64(g))), machines: ms, batch: claimsPerTxn}
					// Warm up into steady state, checking every operation commits.
					for range 4 {
						if err := cs[g].step(ctx, s); err != nil {
							b.Fatal(err)
						}
					}
				}
				st := s.Snapshot()
				if want := committers * 3 * claimsPerTxn; st.NumTasks() != want {
					b.Fatalf("steady state holds %d tasks, want %d", st.NumTasks(), want)
				}
				if err := txn.CheckInvariants(st); err != nil {
					b.Fatal(err)
				}

				var next atomic.Int64
				var wg sync.WaitGroup
				var failed atomic.Value
				b.ResetTimer()
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if err := c.step(ctx, s); err != nil {
								failed.Store(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N*claimsPerTxn)/b.Elapsed().Seconds(), "claims/s")
				if n := s.Snapshot().NumTasks(); n > committers*3*claimsPerTxn {
					b.Fatalf("the cell grew to %d tasks: not in steady state", n)
				}
			})
		}
	}
}

// BenchmarkOpenAfterCrash times Open on the image of a store that crashed
// with its whole checkpoint interval still in the log: 10,000 machines and
// tasks created and claimed 100 a transaction until the log holds the
// sub-benchmark's size, nothing checkpointed, the directory copied while
// the store is open (everything acknowledged is synced). An open replays
// the log into pebble, flushes, and loads the state; "clean" opens the same
// state after a clean close, which checkpointed it, for comparison.
//
//	go test ./store -run XXX -bench OpenAfterCrash -benchtime 3x
func BenchmarkOpenAfterCrash(b *testing.B) {
	for _, logMiB := range []int64{64, 256} {
		b.Run(fmt.Sprintf("log=%dMiB", logMiB), func(b *testing.B) {
			dir := b.TempDir() + "/db"
			o := DefaultOptions(dir)
			o.Logger = quietLogger()
			o.CheckpointBytes = 1 << 40 // nothing checkpointed: it all stays in the log
			s, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			ms, err := registerMachines(context.Background(), s, 10000, 64000, 256<<30)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; s.LogStats().BytesSinceCheckpoint < logMiB<<20; i++ {
				ops := make([]txn.Op, 0, 200)
				for j := range 100 {
					tk := testUID(uidTask, uint32(i), uint32(j))
					ops = append(ops, txn.CreateTask(taskProto(tk, uuid.Nil, 10, 10)), txn.Claim(tk, ms[(i*100+j)%len(ms)], res(10, 10), 0))
				}
				mustCommit(b, s, &txn.Txn{Ops: ops})
			}
			tasks := s.Snapshot().NumTasks()
			image := b.TempDir() + "/image"
			if out, err := exec.Command("cp", "-r", dir, image).CombinedOutput(); err != nil {
				b.Fatalf("copy the crash image: %v: %s", err, out)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			open := func(b *testing.B, from string) {
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					try := fmt.Sprintf("%s/try%d", b.TempDir(), i)
					if out, err := exec.Command("cp", "-r", from, try).CombinedOutput(); err != nil {
						b.Fatalf("copy: %v: %s", err, out)
					}
					o.Dir = try
					b.StartTimer()
					s, err := Open(o)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if got := s.Snapshot().NumTasks(); got != tasks {
						b.Fatalf("opened with %d tasks, want %d", got, tasks)
					}
					s.Close()
					os.RemoveAll(try)
					b.StartTimer()
				}
				b.ReportMetric(float64(tasks), "tasks")
			}
			b.Run("after-crash", func(b *testing.B) { open(b, image) })
			b.Run("clean", func(b *testing.B) { open(b, dir) })
		})
	}
}

// BenchmarkCheckpoint measures one checkpoint of 50,000 tasks created
// since the last (each a task record written to pebble), in a store of
// 1,000 machines whose tasks accumulate across iterations.
func BenchmarkCheckpoint(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, b.TempDir(), func(o *Options) { o.CheckpointBytes = 1 << 40 }) // the test checkpoints
	ms, err := registerMachines(ctx, s, 1000, 1<<40, 1<<50)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for b.Loop() {
		b.StopTimer()
		for range 50 {
			tx := &txn.Txn{Component: "bench", Ops: make([]txn.Op, 0, 2000)}
			for range 1000 {
				u := testUID(uidTask, 1, uint32(n))
				n++
				tx.Ops = append(tx.Ops,
					txn.CreateTask(taskProto(u, uuid.Nil, 100, 1<<20)),
					txn.Claim(u, ms[rng.IntN(len(ms))], res(100, 1<<20), 0))
			}
			if _, err := s.Commit(ctx, tx); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := s.checkpoint(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/task")
}
