package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestConcurrentClaims: N goroutines race to claim tasks from one shared
// pool onto the same few machines, each from its own (possibly stale)
// snapshot, in fine and coarse mode, incremental and all-or-nothing, and
// finish the tasks they placed to make room. The store checks the
// invariants after every commit (Options.CheckInvariants: a machine over
// capacity panics), and at the end every task was claimed by exactly one
// committed claim.
func TestConcurrentClaims(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_STORE_CONCURRENCY_SEED")
	const (
		workers  = 8
		machines = 3
		slots    = 10 // tasks per machine at once
		cpu      = 100
	)
	tasks := 600
	if testing.Short() {
		tasks = 200
	}
	s := openTest(t, t.TempDir(), nil) // CheckInvariants is on
	defer s.Close()
	ctx := context.Background()
	ms, err := registerMachines(ctx, s, machines, slots*cpu, slots*cpu)
	if err != nil {
		t.Fatal(err)
	}
	pool := make([]uuid.UUID, tasks)
	create := &txn.Txn{}
	for i := range pool {
		pool[i] = testUID(uidTask, 7, uint32(i))
		create.Ops = append(create.Ops, txn.CreateTask(taskProto(pool[i], uuid.Nil, cpu, cpu)))
	}
	mustCommitAll(t, s, create)

	var (
		mu       sync.Mutex
		claimsOf = map[uuid.UUID]int{} // committed claims per task
		claimRev = map[uuid.UUID]uint64{}
		claimed  atomic.Int64
		stats    [3]atomic.Int64 // commits, conflicting claims, all-or-nothing aborts
	)
	deadline := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []*txn.Task // placed by this worker, at the version it placed them
			for claimed.Load() < int64(tasks) {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("worker %d: only %d of %d tasks claimed after 60s", g, claimed.Load(), tasks)
					return
				}
				view := s.Snapshot()
				tx := &txn.Txn{ViewRevision: view.Revision(), Component: fmt.Sprintf("w%d", g)}
				if rng.IntN(3) == 0 {
					tx.Conflict = omegav1.ConflictMode_CONFLICT_MODE_COARSE
				}
				if rng.IntN(4) == 0 {
					tx.Commit = omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING
				}
				// Finish some of what this worker placed, to make room.
				for len(mine) > 0 && (len(mine) > 4 || rng.IntN(2) == 0) {
					x := mine[0]
					mine = mine[1:]
					tx.Ops = append(tx.Ops, txn.SetStatus(x.UID, omegav1.TaskState_TASK_STATE_SUCCEEDED, x.Version, ""))
				}
				nFinish := len(tx.Ops)
				// Claim a few pending tasks as the view sees them; other
				// workers pick the same ones.
				start := rng.IntN(tasks)
				for i := 0; i < tasks && len(tx.Ops) < nFinish+3; i++ {
					x, _ := view.Task(pool[(start+i)%tasks])
					if x.State == omegav1.TaskState_TASK_STATE_PENDING && rng.IntN(4) == 0 {
						tx.Ops = append(tx.Ops, txn.Claim(x.UID, ms[rng.IntN(machines)], res(cpu, cpu), x.Version))
					}
				}
				if len(tx.Ops) == 0 {
					continue
				}
				r, err := s.Commit(ctx, tx)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", g, err)
					return
				}
				if r.Revision != 0 {
					stats[0].Add(1)
				}
				stats[1].Add(int64(r.ClaimsConflicted))
				for i, o := range r.Outcomes {
					op := tx.Ops[i]
					switch {
					case o.Code == omegav1.OutcomeCode_OUTCOME_CODE_ABORTED:
						stats[2].Add(1)
					case !o.Committed() && i < nFinish:
						errs <- fmt.Errorf("worker %d: finishing its own task %s conflicted: %s", g, op.Task, o.Detail)
						return
					case o.Committed() && op.Kind == txn.OpClaim:
						mu.Lock()
						claimsOf[op.Task]++
						claimRev[op.Task] = r.Revision
						mu.Unlock()
						claimed.Add(1)
						mine = append(mine, &txn.Task{UID: op.Task, Version: r.Revision})
					}
				}
				// A finish that was aborted (all-or-nothing) is retried.
				for i := range nFinish {
					if !r.Outcomes[i].Committed() {
						mine = append(mine, &txn.Task{UID: tx.Ops[i].Task, Version: tx.Ops[i].ExpectVersion})
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if errors.Is(err, txn.ErrNotPending) {
			t.Errorf("seed %d: a claim at the version the view saw was not pending: %v", seed, err)
			continue
		}
		t.Fatalf("seed %d: %v", seed, err)
	}
	st := s.Snapshot()
	if err := txn.CheckInvariants(st); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	for _, u := range pool {
		if n := claimsOf[u]; n != 1 {
			t.Errorf("seed %d: task %s claimed %d times", seed, u, n)
		}
		x, _ := st.Task(u)
		if x.State == omegav1.TaskState_TASK_STATE_PENDING || x.Machine == uuid.Nil {
			t.Errorf("seed %d: task %s is %s on %s after its claim", seed, u, x.State, x.Machine)
		}
	}
	st.RangeMachines(func(m *txn.Machine) bool {
		if !m.Allocated.LessEq(m.Capacity) || m.Tasks > slots {
			t.Errorf("seed %d: machine %s holds %v over %d tasks, capacity %v", seed, m.UID, m.Allocated, m.Tasks, m.Capacity)
		}
		return true
	})
	t.Logf("%d commits, %d conflicting claims, %d aborted operations", stats[0].Load(), stats[1].Load(), stats[2].Load())
	if stats[1].Load() == 0 {
		t.Logf("seed %d: no claim conflicted; the race was not exercised", seed)
	}
}
