package schedulers

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// twoLevelCell is a cell with an allocator and one batch framework.
type twoLevelCell struct {
	*testCell
	al *Allocator
	fw *Framework
}

func newTwoLevelCell(t *testing.T, seed uint64, machines []machineSpec) (*twoLevelCell, []uuid.UUID) {
	c := newCell(t, seed)
	ms := c.addMachines(machines...)
	r := c.runner(NewBatch(), "batch-0", seed, DefaultRunnerConfig(), nil)
	al := NewAllocator(c.client("allocator", seed+1, testkit.NewClock(t0), nil), []string{"batch-0"})
	return &twoLevelCell{testCell: c, al: al, fw: NewFramework(r)}, ms
}

// submit adds a batch job and hands it to the framework's runner, as the
// intake would.
func (c *twoLevelCell) submit(name string, tasks int, cpu, mem int64) (uuid.UUID, []uuid.UUID) {
	j, ts := c.addJob(name, jobSpec{kind: batchKind, scheduler: "batch", tasks: tasks, cpu: cpu, mem: mem})
	c.fw.Runner().Submit(j, t0)
	return j, ts
}

// TestFrameworkClaimsInsideItsOffer: a framework decides on its offer's
// private view only — every claim of its answer is on a machine the offer
// covers and within what it locks there, jobs decided one after another
// on one offer never claim the same room twice, and the answer commits
// them all without a conflict. Resources freed after the offer was made
// are not the framework's to claim until another offer brings them.
func TestFrameworkClaimsInsideItsOffer(t *testing.T) {
	forSeeds(t, 8, func(t *testing.T, seed uint64) {
		ctx := context.Background()
		c, ms := newTwoLevelCell(t, seed, uniform(6, 4000, 4000, 0))
		c.fill(3000, 3000, ms[0], ms[1]) // 1000 free on each
		// A job that holds m2 whole, ended after the offer is made.
		_, hold := c.addJob("hold", jobSpec{kind: batchKind, scheduler: "other", tasks: 1, cpu: 4000, mem: 4000})
		c.commit(txn.Claim(hold[0], ms[2], txn.Resources{CPU: 4000, Memory: 4000}, c.task(hold[0]).Version))
		for i := range 4 {
			c.submit("j"+string(rune('a'+i)), 5, 1000, 1000)
		}
		o, err := c.al.Offer(ctx, 0, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := o.Lock(ms[2]); ok {
			t.Fatalf("the offer covers the full machine %s", ms[2])
		}
		c.commit(txn.SetStatus(hold[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "")) // m2 frees: after the offer
		d, err := c.fw.Decide(ctx, o, t0)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Attempts) < 2 || d.Txn.Ops[0].Kind != txn.OpAnswer {
			t.Fatalf("decided %d jobs, answer starting with %v: want several jobs on one offer, the answer first", len(d.Attempts), d.Txn.Ops[0].Kind)
		}
		use := map[uuid.UUID]txn.Resources{}
		for _, op := range d.Txn.Ops[1:] {
			if op.Kind != txn.OpClaim {
				continue
			}
			lock, ok := o.Lock(op.Machine)
			use[op.Machine] = use[op.Machine].Add(op.Resources)
			if !ok || !use[op.Machine].LessEq(lock) {
				t.Fatalf("seed %d: claims of %v on machine %s, which the offer locks %v of (covered %v)", seed, use[op.Machine], op.Machine, lock, ok)
			}
		}
		// 1000 on m0 and m1, 4000 on m3..m5: 14 tasks of 1000 at most.
		var claims int
		for _, u := range use {
			claims += int(u.CPU / 1000)
		}
		if claims != 14 {
			t.Fatalf("seed %d: %d tasks claimed; the offer holds room for 14", seed, claims)
		}
		var landed []Outcome
		if err := c.fw.Answer(ctx, d, t0.Add(d.DecisionTime), func(_ *Attempt, o Outcome) { landed = append(landed, o) }); err != nil {
			t.Fatal(err)
		}
		if len(landed) != len(d.Attempts) {
			t.Fatalf("%d attempts landed of %d", len(landed), len(d.Attempts))
		}
		st := c.state()
		if st.NumOffers() != 0 {
			t.Fatal("the answered offer is outstanding")
		}
		if n := c.fw.Runner().Client().Counters().Conflicted; n != 0 {
			t.Fatalf("seed %d: the answer conflicted %d times", seed, n)
		}
		if m := c.machine(ms[2]); m.Allocated.CPU != 0 {
			t.Fatalf("seed %d: the framework claimed %v on m2, freed after its offer", seed, m.Allocated)
		}
		c.checkInvariants()
	})
}

// TestFrameworkDeclines: an offer that comes when no job is ready is
// answered with no claim, which releases its locks.
func TestFrameworkDeclines(t *testing.T) {
	ctx := context.Background()
	c, ms := newTwoLevelCell(t, 1, uniform(2, 4000, 4000, 0))
	o, err := c.al.Offer(ctx, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.fw.Decide(ctx, o, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != 0 || len(d.Txn.Ops) != 1 || d.DecisionTime != 0 {
		t.Fatalf("a decision with no job ready: %d attempts, %d ops, %v", len(d.Attempts), len(d.Txn.Ops), d.DecisionTime)
	}
	// Locked until the answer: a claim by anyone else conflicts.
	_, ts := c.addJob("other", jobSpec{kind: batchKind, scheduler: "other", tasks: 1, cpu: 100, mem: 100})
	res, err := c.st.Commit(ctx, &txn.Txn{ViewRevision: c.st.Revision(), Component: "other", Ops: []txn.Op{txn.Claim(ts[0], ms[0], txn.Resources{CPU: 100, Memory: 100}, c.task(ts[0]).Version)}})
	if err != nil || res.Outcomes[0].Code != omegav1.OutcomeCode_OUTCOME_CODE_INSUFFICIENT_RESOURCES {
		t.Fatalf("a claim on offered resources before the answer: %+v, %v", res.Outcomes, err)
	}
	if err := c.fw.Answer(ctx, d, t0, nil); err != nil {
		t.Fatal(err)
	}
	res, err = c.st.Commit(ctx, &txn.Txn{ViewRevision: c.st.Revision(), Component: "other", Ops: []txn.Op{txn.Claim(ts[0], ms[0], txn.Resources{CPU: 100, Memory: 100}, c.task(ts[0]).Version)}})
	if err != nil || !res.Outcomes[0].Committed() {
		t.Fatalf("a claim after the decline: %+v, %v", res.Outcomes, err)
	}
}

// TestAllocatorDRF: the next offer goes to the framework with the lowest
// dominant share among those that want resources (ties to the first), as
// the frameworks' placed tasks come and go.
func TestAllocatorDRF(t *testing.T) {
	c := newCell(t, 1)
	ms := c.addMachines(uniform(2, 10000, 10000, 0)...) // 20,000 of each in all
	al := NewAllocator(c.client("allocator", 1, testkit.NewClock(t0), nil), []string{"a", "b", "c"})
	al.Relist(c.state())
	capacity := c.state().Capacity()
	if got := al.Pick([]bool{true, true, true}, capacity); got != 0 {
		t.Fatalf("all at zero: picked %d, want the first", got)
	}
	if got := al.Pick([]bool{false, false, false}, capacity); got != -1 {
		t.Fatalf("none wanting: picked %d", got)
	}
	place := func(fw string, cpu, mem int64) uuid.UUID {
		_, ts := c.addJob(fw, jobSpec{kind: batchKind, scheduler: fw, tasks: 1, cpu: cpu, mem: mem})
		before := c.state()
		res, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: before.Revision(), Component: fw,
			Ops: []txn.Op{txn.Claim(ts[0], ms[0], txn.Resources{CPU: cpu, Memory: mem}, c.task(ts[0]).Version)}})
		if err != nil || res.Committed != 1 {
			t.Fatalf("place for %s: %+v %v", fw, res.Outcomes, err)
		}
		observeSince(c, al, before.Revision())
		return ts[0]
	}
	place("a", 4000, 1000)       // a: cpu 20%
	tb := place("b", 1000, 3000) // b: memory 15%
	if got := al.Pick([]bool{true, true, true}, capacity); got != 2 {
		t.Fatalf("picked %d, want c (nothing placed)", got)
	}
	if got := al.Pick([]bool{true, true, false}, capacity); got != 1 {
		t.Fatalf("picked %d, want b (15%% against a's 20%%)", got)
	}
	if s := al.Share(0, capacity); s != 0.2 {
		t.Fatalf("a's dominant share %v, want 0.2", s)
	}
	before := c.state().Revision()
	c.commit(txn.SetStatus(tb, omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""))
	observeSince(c, al, before)
	if s := al.Share(1, capacity); s != 0 {
		t.Fatalf("b's share after its task ended: %v", s)
	}
	// A re-list counts the same.
	fresh := NewAllocator(c.client("allocator-2", 2, testkit.NewClock(t0), nil), []string{"a", "b", "c"})
	fresh.Relist(c.state())
	for i := range 3 {
		if fresh.Share(i, capacity) != al.Share(i, capacity) {
			t.Fatalf("framework %d: %v from a re-list, %v from the changes", i, fresh.Share(i, capacity), al.Share(i, capacity))
		}
	}
}

// observeSince feeds the allocator the store's revisions after rev.
func observeSince(c *testCell, al *Allocator, rev uint64) {
	c.t.Helper()
	w, err := c.st.Watch(rev)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for rev < c.st.Revision() {
		sets, err := w.Next(ctx, 100)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, ws := range sets {
			al.Observe(ws)
			rev = ws.Revision
		}
	}
}

// TestFrameworkRetryOnDecision: with SetRetryOnDecision a job an offer did
// not place whole is queued again a retry delay after the decision, before
// its answer lands; its next attempt, on a second offer, takes only the
// tasks the first does not claim; the two answers commit without a
// conflict, whichever lands first, and the job counts as placed only when
// the last lands. Without it, the job waits for its answer.
func TestFrameworkRetryOnDecision(t *testing.T) {
	forSeeds(t, 4, func(t *testing.T, seed uint64) {
		ctx := context.Background()
		c, ms := newTwoLevelCell(t, seed, uniform(4, 4000, 4000, 0))
		// 1000 free on each machine: room for 4 tasks of 1000.
		_, fillers := c.addJob("filler", jobSpec{kind: batchKind, scheduler: "other", tasks: 4, cpu: 3000, mem: 3000})
		var ops []txn.Op
		for i, m := range ms {
			ops = append(ops, txn.Claim(fillers[i], m, txn.Resources{CPU: 3000, Memory: 3000}, c.task(fillers[i]).Version))
		}
		c.commit(ops...)
		c.fw.SetRetryOnDecision(true)
		r := c.fw.Runner()
		job, _ := c.submit("big", 6, 1000, 1000)
		o1, err := c.al.Offer(ctx, 0, t0)
		if err != nil {
			t.Fatal(err)
		}
		d1, err := c.fw.Decide(ctx, o1, t0)
		if err != nil || len(d1.Attempts) != 1 || d1.Attempts[0].Decision.Unplaceable != 2 {
			t.Fatalf("first decision: %+v %v; want one attempt leaving 2 tasks", d1, err)
		}
		at, ok := r.NextReady()
		if !ok || !at.Equal(t0.Add(DefaultRunnerConfig().RetryDelay)) {
			t.Fatalf("the job is ready again at %v (queued %v); want a retry delay after the decision", at, ok)
		}
		// Two machines' fillers end; a second offer brings what they free.
		c.commit(txn.SetStatus(fillers[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""), txn.SetStatus(fillers[1], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, ""))
		t1 := at
		o2, err := c.al.Offer(ctx, 0, t1)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := c.fw.Decide(ctx, o2, t1)
		if err != nil || len(d2.Attempts) != 1 {
			t.Fatalf("second decision: %+v %v", d2, err)
		}
		claimed := map[uuid.UUID]bool{}
		for _, d := range []*OfferDecision{d1, d2} {
			for _, op := range d.Txn.Ops {
				if op.Kind == txn.OpClaim {
					if claimed[op.Task] {
						t.Fatalf("seed %d: task %s claimed by both attempts", seed, op.Task)
					}
					claimed[op.Task] = true
				}
			}
		}
		if len(claimed) != 6 {
			t.Fatalf("seed %d: %d tasks claimed in all, want the job's 6", seed, len(claimed))
		}
		// The second answer lands first: the job is not placed until the first does.
		var outs []Outcome
		landed := func(_ *Attempt, o Outcome) { outs = append(outs, o) }
		if err := c.fw.Answer(ctx, d2, t1.Add(time.Second), landed); err != nil {
			t.Fatal(err)
		}
		if rec := record(t, r, job); !rec.Placed.IsZero() || outs[0] != OutcomeRetry {
			t.Fatalf("seed %d: placed at %v (outcome %v) with the first attempt still in flight", seed, rec.Placed, outs[0])
		}
		if err := c.fw.Answer(ctx, d1, t1.Add(2*time.Second), landed); err != nil {
			t.Fatal(err)
		}
		if rec := record(t, r, job); rec.Placed.IsZero() || rec.TasksPlaced != 6 || outs[1] != OutcomePlaced {
			t.Fatalf("seed %d: record %+v, outcomes %v; want the job placed whole when the last answer lands", seed, rec, outs)
		}
		if _, ok := r.NextReady(); ok {
			t.Fatalf("seed %d: the placed job is still queued", seed)
		}
		if n := r.Client().Counters().Conflicted; n != 0 {
			t.Fatalf("seed %d: %d answers conflicted", seed, n)
		}
		c.checkInvariants()
	})
}

// CountAs: the tasks another component placed (the simulation's pre-fill)
// count toward a framework's share only when the allocator is told so.
func TestAllocatorCountAs(t *testing.T) {
	c := newCell(t, 1)
	ms := c.addMachines(uniform(2, 10000, 10000, 0)...)
	_, ts := c.addJob("prefill", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 4000, mem: 4000})
	if res, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.state().Revision(), Component: "submitter",
		Ops: []txn.Op{txn.Claim(ts[0], ms[0], txn.Resources{CPU: 4000, Memory: 4000}, c.task(ts[0]).Version)}}); err != nil || res.Committed != 1 {
		t.Fatalf("place: %+v %v", res, err)
	}
	capacity := c.state().Capacity()
	plain := NewAllocator(c.client("allocator", 1, testkit.NewClock(t0), nil), []string{"batch-0", "service-0"})
	plain.Relist(c.state())
	counted := NewAllocator(c.client("allocator-2", 2, testkit.NewClock(t0), nil), []string{"batch-0", "service-0"})
	counted.CountAs("submitter", 1)
	counted.CountAs("batch-0", 1) // a framework's own tasks stay its own
	counted.Relist(c.state())
	if plain.Share(1, capacity) != 0 || counted.Share(1, capacity) != 0.2 || counted.Share(0, capacity) != 0 {
		t.Fatalf("service share %v plain, %v counting the pre-fill (want 0 and 0.2)", plain.Share(1, capacity), counted.Share(1, capacity))
	}
	if got := counted.Pick([]bool{true, true}, capacity); got != 0 {
		t.Fatalf("counting the pre-fill, DRF picked %d, want batch", got)
	}
}
