package schedulers

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// scenarioResult is everything a run of the scenario produced.
type scenarioResult struct {
	log        []string // every transaction the schedulers sent, in store order
	final      string   // machines' allocations and every task's placement
	records    string   // the runners' records, counters and busy time
	conflicted int64
	committed  int64
	attempts   int
	resubmits  int
}

// runScenario drives four runners (two batch, a service and a mapreduce
// scheduler, each with its own client) over one cell in virtual time, the
// way the simulation engine does: jobs arrive, each runner begins an
// attempt when a job is ready and finishes it after its decision time,
// tasks finish now and then (freeing room), and one is evicted and its job
// handed back. Everything follows seed.
func runScenario(t *testing.T, seed uint64) scenarioResult {
	t.Helper()
	ctx := context.Background()
	c := newCell(t, seed)
	specs := uniform(16, 4000, 16*gib, 4)
	for i := range specs {
		specs[i].attrs = map[string]string{"zone": []string{"a", "b"}[i%2]}
	}
	c.addMachines(specs...)

	var log txLog
	base := testConfig()
	base.MaxAttemptsNoPlacement, base.RetryDelay = 5, time.Second
	slow := base
	slow.TJob, slow.TTask = 2*time.Second, 10*time.Millisecond
	runners := []*Runner{
		c.runner(NewBatch(), "batch-0", seed*10+1, base, recordInto(&log)),
		c.runner(NewBatch(), "batch-1", seed*10+2, base, recordInto(&log)),
		c.runner(NewService(), "service-0", seed*10+3, slow, recordInto(&log)),
		c.runner(NewMapReduce(RelativeSize), "mapreduce-0", seed*10+4, base, recordInto(&log)),
	}
	owner := map[uuid.UUID]int{}

	// The workload.
	type arrival struct {
		at   time.Time
		name string
		spec jobSpec
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	var arrivals []arrival
	at := t0
	for i := range 40 {
		at = at.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		var s jobSpec
		switch k := rng.IntN(20); {
		case k < 12:
			s = jobSpec{kind: batchKind, scheduler: "batch", tasks: 1 + rng.IntN(8), cpu: 500 + 250*rng.Int64N(7), mem: gib * (1 + rng.Int64N(3)), gang: rng.IntN(5) == 0}
		case k < 16:
			s = jobSpec{kind: serviceKind, scheduler: "service", tasks: 2 + rng.IntN(5), cpu: 1000, mem: 2 * gib}
			switch rng.IntN(3) {
			case 0:
				s.constraints = []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}
			case 1:
				s.constraints = []*omegav1.Constraint{{Attribute: "zone", Operator: omegav1.Constraint_OPERATOR_EQUAL, Value: "b"}}
			}
		default:
			s = mrJob(1+rng.IntN(3), 10_000, &omegav1.MapReduceParams{MaxWorkers: int32(4 + rng.IntN(8))})
		}
		arrivals = append(arrivals, arrival{at: at, name: fmt.Sprintf("j%02d", i), spec: s})
	}
	runnerFor := func(job uuid.UUID, s jobSpec) int {
		switch s.scheduler {
		case "batch":
			return Pick(job, []string{"batch-0", "batch-1"})
		case "service":
			return 2
		}
		return 3
	}

	type flight struct {
		a          *Attempt
		start, end time.Time
	}
	inflight := make([]*flight, len(runners))
	const fleetEvery = 3 * time.Second
	nextFleet := t0.Add(fleetEvery)
	end := t0.Add(90 * time.Second)
	evicted := false
	res := scenarioResult{}

	// fleet finishes the four placed tasks assigned earliest (ties by uid)
	// and, once, evicts the newest placed task and hands its job back.
	fleet := func(now time.Time) {
		var placed []*txn.Task
		c.state().RangeTasks(func(tk *txn.Task) bool {
			if tk.Placed() {
				placed = append(placed, tk)
			}
			return true
		})
		slices.SortFunc(placed, func(a, b *txn.Task) int {
			if a.Assigned != b.Assigned {
				return int(a.Assigned - b.Assigned)
			}
			return bytes.Compare(a.UID[:], b.UID[:])
		})
		if len(placed) == 0 {
			return
		}
		if !evicted && now.Sub(t0) >= 30*time.Second {
			victim := placed[len(placed)-1]
			placed = placed[:len(placed)-1]
			c.commit(txn.ForceEvict(victim.UID, victim.Version, "drain"))
			if i, ok := owner[victim.Job]; ok {
				runners[i].Submit(victim.Job, now)
				res.resubmits++
			}
			evicted = true
		}
		var ops []txn.Op
		for _, tk := range placed[:min(4, len(placed))] {
			ops = append(ops, txn.SetStatus(tk.UID, omegav1.TaskState_TASK_STATE_SUCCEEDED, tk.Version, "done"))
		}
		if len(ops) > 0 {
			c.commit(ops...)
		}
	}

	for step := 0; ; step++ {
		if step > 100_000 {
			t.Fatalf("seed %d: the scenario does not end", seed)
		}
		// The next time anything happens.
		var now time.Time
		consider := func(at time.Time) {
			if now.IsZero() || at.Before(now) {
				now = at
			}
		}
		if len(arrivals) > 0 {
			consider(arrivals[0].at)
		}
		consider(nextFleet)
		for i, r := range runners {
			if f := inflight[i]; f != nil {
				consider(f.end)
			} else if at, ok := r.NextReady(); ok {
				consider(at)
			}
		}
		if now.After(end) {
			break
		}
		// Everything due at now: arrivals, the fleet, commits, then new
		// attempts, each group in a fixed order.
		for len(arrivals) > 0 && !arrivals[0].at.After(now) {
			a := arrivals[0]
			arrivals = arrivals[1:]
			job, _ := c.addJob(a.name, a.spec)
			i := runnerFor(job, a.spec)
			owner[job] = i
			runners[i].Submit(job, now)
		}
		if !nextFleet.After(now) {
			fleet(now)
			nextFleet = nextFleet.Add(fleetEvery)
		}
		for i, r := range runners {
			if f := inflight[i]; f != nil && !f.end.After(now) {
				if _, err := r.Finish(ctx, f.a, now); err != nil {
					t.Fatalf("seed %d: %s: Finish: %v", seed, r.Name(), err)
				}
				inflight[i] = nil
			}
		}
		for i, r := range runners {
			if inflight[i] != nil {
				continue
			}
			a, ok, err := r.Begin(ctx, now)
			if err != nil {
				t.Fatalf("seed %d: %s: Begin: %v", seed, r.Name(), err)
			}
			if ok {
				inflight[i] = &flight{a: a, start: now, end: now.Add(a.DecisionTime)}
				res.attempts++
			}
		}
	}
	c.checkInvariants()

	res.log = log.lines()
	var b strings.Builder
	s := c.state()
	var machines, tasks []uuid.UUID
	s.RangeMachines(func(m *txn.Machine) bool { machines = append(machines, m.UID); return true })
	s.RangeTasks(func(tk *txn.Task) bool { tasks = append(tasks, tk.UID); return true })
	byBytes := func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }
	slices.SortFunc(machines, byBytes)
	slices.SortFunc(tasks, byBytes)
	for _, u := range machines {
		m, _ := s.Machine(u)
		fmt.Fprintf(&b, "machine %s allocated %v tasks %d\n", u, m.Allocated, m.Tasks)
	}
	for _, u := range tasks {
		tk, _ := s.Task(u)
		fmt.Fprintf(&b, "task %s job %s %s on %s by %q v%d %dms\n", u, tk.Job, tk.State, tk.Machine, tk.Scheduler, tk.Version, tk.Spec.GetDurationMillis())
	}
	res.final = b.String()
	b.Reset()
	for _, r := range runners {
		cn := r.Client().Counters()
		res.conflicted += cn.Conflicted
		res.committed += cn.ClaimsCommitted
		fmt.Fprintf(&b, "%s busy %v counters %+v\n", r.Name(), r.Busy(), cn)
		for _, rec := range r.Records() {
			fmt.Fprintf(&b, "  %+v\n", rec)
		}
	}
	res.records = b.String()
	return res
}

// The same seed over two fresh stores gives the same transactions, in the
// same order, and the same final state; another seed does not.
func TestDeterminismSameSeedSameTransactionsAndState(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logSeed(t, seed)
			a := runScenario(t, seed)
			b := runScenario(t, seed)
			if a.conflicted == 0 || a.committed == 0 || a.resubmits == 0 || a.attempts < 20 {
				t.Fatalf("the scenario is too tame to show anything: %d attempts, %d conflicted, %d claims committed, %d resubmits", a.attempts, a.conflicted, a.committed, a.resubmits)
			}
			if len(a.log) != len(b.log) {
				t.Fatalf("%d and %d transactions", len(a.log), len(b.log))
			}
			for i := range a.log {
				if a.log[i] != b.log[i] {
					t.Fatalf("transaction %d differs:\n%s\n%s", i, a.log[i], b.log[i])
				}
			}
			if a.final != b.final {
				t.Fatalf("final states differ:\n%s\n---\n%s", a.final, b.final)
			}
			if a.records != b.records {
				t.Fatalf("records differ:\n%s\n---\n%s", a.records, b.records)
			}
			t.Logf("%d transactions, %d attempts, %d conflicted, %d claims committed", len(a.log), a.attempts, a.conflicted, a.committed)
			if o := runScenario(t, seed+10); slices.Equal(o.log, a.log) {
				t.Fatalf("seed %d and %d give the same transactions", seed, seed+10)
			}
		})
	}
}
