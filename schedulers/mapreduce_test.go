package schedulers

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestMapReduceWorkers(t *testing.T) {
	capacity := txn.Resources{CPU: 100_000, Memory: 100 * gib}
	req := txn.Resources{CPU: 1000, Memory: gib}
	free := func(cpu, mem int64) txn.Resources { return txn.Resources{CPU: cpu, Memory: mem} }
	used := func(cpu, mem int64) txn.Resources { return capacity.Sub(free(cpu, mem)) } // free after using cpu, mem
	cases := []struct {
		policy            MapReducePolicy
		requested, useful int
		req, free         txn.Resources
		want              int
	}{
		// Max parallelism: as many as the free resources allow, bounded by
		// useful, never fewer than requested.
		{MaxParallelism, 2, 100, req, free(10_000, 50*gib), 10},
		{MaxParallelism, 2, 8, req, free(10_000, 50*gib), 8},
		{MaxParallelism, 1, 100, req, free(3000, 50*gib), 3},
		{MaxParallelism, 1, 100, req, free(2999, 50*gib), 2},
		{MaxParallelism, 5, 100, req, free(3000, 50*gib), 5},
		{MaxParallelism, 1, 100, req, free(50_000, 4*gib-1), 3}, // memory binds
		{MaxParallelism, 1, 100, req, free(50_000, 4*gib), 4},
		{MaxParallelism, 1, 100, req, free(0, 0), 1},
		{MaxParallelism, 1, 7, txn.Resources{}, free(0, 0), 7}, // a zero request: useful bounds it
		// Global cap at 60%: room under the cap is 0.6 × capacity − used,
		// per dimension; none above it.
		{GlobalCap, 1, 1000, req, capacity, 60},
		{GlobalCap, 1, 16, req, capacity, 16},
		{GlobalCap, 1, 1000, req, used(58_000, 10*gib), 2},
		{GlobalCap, 1, 1000, req, used(58_001, 10*gib), 1},
		{GlobalCap, 1, 1000, req, used(59_001, 10*gib), 1},
		{GlobalCap, 3, 1000, req, used(58_000, 10*gib), 3},   // at least requested
		{GlobalCap, 3, 1000, req, used(60_000, 10*gib), 3},   // exactly at the cap
		{GlobalCap, 3, 1000, req, used(70_000, 10*gib), 3},   // above it
		{GlobalCap, 1, 1000, req, used(10_000, 58*gib), 2},   // memory under the cap
		{GlobalCap, 1, 1000, req, used(10_000, 58*gib+1), 1}, // memory binds
		{GlobalCap, 2, 1000, req, used(10_000, 60*gib), 2},   // memory at the cap
		{GlobalCap, 2, 1000, req, used(10_000, 95*gib), 2},   // memory far above
		{GlobalCap, 1, 1000, req, used(50_000, 20*gib), 10},  // 50% used: 10 up to the cap
		{GlobalCap, 1, 1000, req, used(50_000, 50*gib+1), 9}, // the tighter dimension
		{GlobalCap, 1, 5, req, used(50_000, 20*gib), 5},      // useful bounds it
		// Relative size: at most 4x requested.
		{RelativeSize, 2, 100, req, free(50_000, 50*gib), 8},
		{RelativeSize, 2, 100, req, free(5000, 50*gib), 5},
		{RelativeSize, 2, 100, req, free(1000, 50*gib), 2},
		{RelativeSize, 2, 6, req, free(50_000, 50*gib), 6},
		{RelativeSize, 3, 100, req, free(12_000, 50*gib), 12},
		{RelativeSize, 3, 100, req, free(13_000, 50*gib), 12},
		{RelativeSize, 3, 100, req, free(11_999, 50*gib), 11},
	}
	for _, tc := range cases {
		s := NewMapReduce(tc.policy)
		if got := s.Workers(tc.requested, tc.useful, tc.req, tc.free, capacity); got != tc.want {
			t.Errorf("%s: Workers(requested %d, useful %d, req %v, free %v) = %d, want %d", tc.policy, tc.requested, tc.useful, tc.req, tc.free, got, tc.want)
		}
	}
}

func TestMapReducePolicyNames(t *testing.T) {
	for _, p := range []MapReducePolicy{MaxParallelism, GlobalCap, RelativeSize} {
		got, err := ParseMapReducePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParseMapReducePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseMapReducePolicy("greedy"); err == nil {
		t.Errorf("ParseMapReducePolicy(greedy): no error")
	}
}

// mrJob is a MapReduce job submitted without tasks: replicas workers of
// 1000 millicores and 1 GiB, each running duration millis.
func mrJob(replicas int, duration int64, params *omegav1.MapReduceParams) jobSpec {
	return jobSpec{kind: mapreduceKind, scheduler: "mapreduce", replicas: replicas, cpu: 1000, mem: gib, duration: duration, mapreduce: params}
}

// checkCreateClaimPairs checks that d is a run of CreateTask each followed
// by the Claim of that task at version 0 and returns the created tasks.
func checkCreateClaimPairs(t *testing.T, d Decision, job uuid.UUID) []*omegav1.Task {
	t.Helper()
	if len(d.Ops)%2 != 0 {
		t.Fatalf("%d ops: not create/claim pairs\n%s", len(d.Ops), opsString(d.Ops))
	}
	var out []*omegav1.Task
	for i := 0; i < len(d.Ops); i += 2 {
		cr, cl := d.Ops[i], d.Ops[i+1]
		if cr.Kind != txn.OpCreate || cr.NewTask == nil || cl.Kind != txn.OpClaim {
			t.Fatalf("ops %d, %d are %s, %s: want a created task and its claim", i, i+1, cr.Kind, cl.Kind)
		}
		if cl.Task.String() != cr.NewTask.GetMeta().GetUid() || cl.ExpectVersion != 0 {
			t.Fatalf("op %d claims %s at version %d; want the task created just before (%s) at version 0", i+1, cl.Task, cl.ExpectVersion, cr.NewTask.GetMeta().GetUid())
		}
		if !cl.Resources.Equal(txn.Resources{CPU: 1000, Memory: gib}) {
			t.Fatalf("claim declares %v, the worker asks for 1000m and 1 GiB", cl.Resources)
		}
		if got := cr.NewTask.GetMeta().GetLabels()["job"]; got != "mr" {
			t.Fatalf("worker labelled job=%q, want the job's name (mr)", got)
		}
		owners := cr.NewTask.GetMeta().GetOwnerReferences()
		if len(owners) != 1 || owners[0].GetKind() != "Job" || owners[0].GetUid() != job.String() || !owners[0].GetController() {
			t.Fatalf("worker's owner references %v: want the job %s as controller", owners, job)
		}
		out = append(out, cr.NewTask)
	}
	return out
}

// On a cell of 4 machines x 4000m x 16 GiB, a job asking for 2 workers of
// 1000m runs 60 s. Each policy gives it W workers of 60 s x 2 / W each,
// created and claimed in one decision; committing it places them all.
func TestMapReduceDecideCreatesAndClaimsWorkers(t *testing.T) {
	const (
		replicas = 2
		duration = 60_000
	)
	cases := []struct {
		policy     MapReducePolicy
		prefill    int64 // millicores used on each machine by another job
		workers    int
		considered int // workers the policy asked for, placed or not
	}{
		{MaxParallelism, 0, 16, 16}, // all 16 slots (useful 32)
		{GlobalCap, 0, 9, 9},        // 60% of 16000m is 9600m: 9 workers
		{RelativeSize, 0, 8, 8},     // 4 x 2
		{GlobalCap, 2600, 2, 2},     // 65% used: only the requested
		// 4 x 1400m free add up to 5 workers; one fits on each machine.
		{MaxParallelism, 2600, 4, 5},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/prefill=%d", tc.policy, tc.prefill), func(t *testing.T) {
			forSeeds(t, 3, func(t *testing.T, seed uint64) {
				c := newCell(t, seed)
				ms := c.addMachines(uniform(4, 4000, 16*gib, 2)...)
				if tc.prefill > 0 {
					c.fill(tc.prefill, gib, ms...)
				}
				job, _ := c.addJob("mr", mrJob(replicas, duration, nil))
				v := c.view()
				req := request(t, v, job)
				if len(req.Pending) != 0 {
					t.Fatalf("the job was submitted without tasks, the view shows %d pending", len(req.Pending))
				}
				d := NewMapReduce(tc.policy).Decide(v, req, env(seed))
				created := checkCreateClaimPairs(t, d, job)
				if len(created) != tc.workers || d.Unplaceable != 0 || d.AllOrNothing {
					t.Fatalf("%d workers, %d unplaceable, all-or-nothing %t; want %d, 0, false", len(created), d.Unplaceable, d.AllOrNothing, tc.workers)
				}
				if d.Considered != tc.considered {
					t.Fatalf("considered %d, want %d", d.Considered, tc.considered)
				}
				want := int64(duration * replicas / tc.workers)
				for _, w := range created {
					if got := w.GetSpec().GetDurationMillis(); got != want {
						t.Fatalf("worker runs %d ms; %d workers share 2 x 60 s: want %d", got, tc.workers, want)
					}
				}
				checkClaimsFit(t, v, d)
				res := c.commitDecision(v, d)
				if res.Conflicted() || res.Committed != 2*tc.workers {
					t.Fatalf("committed %d of %d ops, %d conflicts", res.Committed, 2*tc.workers, res.Conflicts)
				}
				c.checkInvariants()
				placed := 0
				c.state().RangeTasks(func(tk *txn.Task) bool {
					if tk.Job == job {
						if tk.State != assignedState {
							t.Errorf("worker %s is %s", tk.UID, tk.State)
						}
						placed++
					}
					return true
				})
				if placed != tc.workers {
					t.Fatalf("%d workers of the job in the store, want %d", placed, tc.workers)
				}
			})
		})
	}
}

// The job's max_workers and map_tasks bound how many workers it can use.
func TestMapReduceUsefulWorkers(t *testing.T) {
	cases := []struct {
		params *omegav1.MapReduceParams
		want   int
	}{
		{&omegav1.MapReduceParams{MaxWorkers: 5}, 5},
		{&omegav1.MapReduceParams{MapTasks: 6}, 6},
		{&omegav1.MapReduceParams{MaxWorkers: 3, MapTasks: 6}, 3},
		{&omegav1.MapReduceParams{MaxWorkers: 1}, 2}, // never below the request
		{nil, 16}, // 16 x 2, bounded by the 16 slots
	}
	for _, tc := range cases {
		c := newCell(t, 1)
		c.addMachines(uniform(4, 4000, 16*gib, 0)...)
		job, _ := c.addJob("mr", mrJob(2, 1000, tc.params))
		v := c.view()
		d := NewMapReduce(MaxParallelism).Decide(v, request(t, v, job), env(1))
		if got := len(claims(d)); got != tc.want {
			t.Errorf("params %v: %d workers, want %d", tc.params, got, tc.want)
		}
	}
}

// A full cell gives only what fits, and never a created task left
// unclaimed. The workers it gets share the job's work.
func TestMapReduceOnAFullCell(t *testing.T) {
	forSeeds(t, 10, func(t *testing.T, seed uint64) {
		// The cell's free total says 3 workers fit; each machine holds one.
		c := newCell(t, seed)
		c.addMachines(uniform(2, 1500, 8*gib, 0)...)
		job, _ := c.addJob("mr", mrJob(1, 1200, nil))
		v := c.view()
		d := NewMapReduce(MaxParallelism).Decide(v, request(t, v, job), env(seed))
		created := checkCreateClaimPairs(t, d, job)
		if len(created) != 2 || d.Unplaceable != 0 {
			t.Fatalf("fragmented cell: %d workers, %d unplaceable; want 2, 0\n%s", len(created), d.Unplaceable, opsString(d.Ops))
		}
		for _, w := range created {
			// 1 worker x 1.2 s of work over the 2 workers it really got.
			if got := w.GetSpec().GetDurationMillis(); got != 600 {
				t.Fatalf("worker runs %d ms; the job's 1200 ms of work over 2 workers is 600 (work is lost otherwise)", got)
			}
		}
		checkClaimsFit(t, v, d)
		if res := c.commitDecision(v, d); res.Committed != 4 {
			t.Fatalf("committed %d of 4", res.Committed)
		}

		// Fewer than requested fit: those that fit are created, each with
		// the template's duration, and the job stays unplaceable.
		c = newCell(t, seed)
		c.addMachines(uniform(2, 1500, 8*gib, 0)...)
		job, _ = c.addJob("mr", mrJob(4, 1200, nil))
		v = c.view()
		d = NewMapReduce(RelativeSize).Decide(v, request(t, v, job), env(seed))
		created = checkCreateClaimPairs(t, d, job)
		if len(created) != 2 || d.Unplaceable == 0 {
			t.Fatalf("room for 2 of 4 requested: %d workers, %d unplaceable; want 2, >0", len(created), d.Unplaceable)
		}
		for _, w := range created {
			if got := w.GetSpec().GetDurationMillis(); got != 1200 {
				t.Fatalf("worker runs %d ms, want the template's 1200 (fewer workers than requested run no shorter)", got)
			}
		}

		// No room at all: nothing created.
		c = newCell(t, seed)
		c.addMachines(uniform(3, 999, 8*gib, 0)...)
		job, _ = c.addJob("mr", mrJob(2, 1200, nil))
		v = c.view()
		for _, p := range []MapReducePolicy{MaxParallelism, GlobalCap, RelativeSize} {
			d = NewMapReduce(p).Decide(v, request(t, v, job), env(seed))
			if len(d.Ops) != 0 || d.Unplaceable == 0 {
				t.Fatalf("%s on a full cell: %d ops, %d unplaceable\n%s", p, len(d.Ops), d.Unplaceable, opsString(d.Ops))
			}
		}
	})
}

// Workers left pending by an earlier attempt are claimed at their version;
// with the job's placed workers they count toward the total.
func TestMapReduceClaimsPendingWorkersFirst(t *testing.T) {
	c := newCell(t, 4)
	ms := c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	spec := mrJob(3, 1000, &omegav1.MapReduceParams{MaxWorkers: 3})
	spec.tasks = 3
	job, tasks := c.addJob("mr", spec)
	ver := c.task(tasks[0]).Version
	c.commit(txn.Claim(tasks[0], ms[0], txn.Resources{CPU: 1000, Memory: gib}, ver))
	v := c.view()
	d := NewMapReduce(MaxParallelism).Decide(v, request(t, v, job, tasks[0]), env(4))
	if len(d.Ops) != 2 || d.Unplaceable != 0 {
		t.Fatalf("%d ops, %d unplaceable; want the 2 pending workers claimed and nothing created\n%s", len(d.Ops), d.Unplaceable, opsString(d.Ops))
	}
	for _, op := range d.Ops {
		if op.Kind != txn.OpClaim || op.ExpectVersion != ver || (op.Task != tasks[1] && op.Task != tasks[2]) {
			t.Fatalf("op %s: want a claim of a pending worker at version %d", opString(op), ver)
		}
	}
}

func TestMapReduceDeterministicForASeed(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(30, 4000, 16*gib, 0)...)
	job, _ := c.addJob("mr", mrJob(4, 5000, nil))
	v := c.view()
	req := request(t, v, job)
	for seed := uint64(1); seed <= 3; seed++ {
		a := NewMapReduce(RelativeSize).Decide(v, req, env(seed))
		b := NewMapReduce(RelativeSize).Decide(v, req, env(seed))
		if opsString(a.Ops) != opsString(b.Ops) || !reflect.DeepEqual(claims(a), claims(b)) {
			t.Fatalf("seed %d: decisions differ", seed)
		}
		if len(claims(a)) != 16 {
			t.Fatalf("seed %d: %d workers, want 16", seed, len(claims(a)))
		}
	}
}

// TestMapReduceCountsFinishedWorkers: workers placed earlier that have
// since finished did their share; a later decision does not make them again.
func TestMapReduceCountsFinishedWorkers(t *testing.T) {
	forSeeds(t, 3, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(4, 4000, 16*gib, 2)...)
		job, _ := c.addJob("mr", mrJob(2, 60_000, nil))
		s := NewMapReduce(RelativeSize) // up to 4 x 2 = 8 workers
		req := request(t, c.view(), job)
		fresh := s.Decide(c.view(), req, env(seed))
		req.PlacedTotal = 5 // five workers placed and finished already
		later := s.Decide(c.view(), req, env(seed))
		count := func(d Decision) (n int) {
			for _, op := range d.Ops {
				if op.Kind == txn.OpCreate {
					n++
				}
			}
			return n
		}
		if count(fresh) != 8 || count(later) != 3 {
			t.Fatalf("seed %d: created %d workers fresh (want 8) and %d after 5 finished (want 3)", seed, count(fresh), count(later))
		}
	})
}
