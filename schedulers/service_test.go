package schedulers

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// domainsOf counts a decision's claims per failure domain.
func domainsOf(t testing.TB, v client.View, d Decision) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, op := range claims(d) {
		m, ok := v.Machine(op.Machine)
		if !ok {
			t.Fatalf("claim on unknown machine %s", op.Machine)
		}
		out[m.Spec.GetFailureDomain()]++
	}
	return out
}

func TestServiceSpreadsOneTaskPerFailureDomain(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8} {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("domains=%d/seed=%d", n, seed), func(t *testing.T) {
				logSeed(t, seed)
				c := newCell(t, seed)
				// Several machines per domain, of different sizes, so best
				// fit alone would pack the job into one domain.
				var specs []machineSpec
				for d := range n {
					for k := range 3 {
						specs = append(specs, machineSpec{cpu: int64(2000 + 1000*k + 100*d), mem: 16 * gib, domain: fmt.Sprintf("d%d", d)})
					}
				}
				c.addMachines(specs...)
				job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: n, cpu: 500, mem: gib})
				v := c.view()
				d := NewService().Decide(v, request(t, v, job), env(seed))
				checkClaimsFit(t, v, d)
				if len(claims(d)) != n || d.Unplaceable != 0 {
					t.Fatalf("%d claims, %d unplaceable; want %d, 0", len(claims(d)), d.Unplaceable, n)
				}
				per := domainsOf(t, v, d)
				if len(per) != n {
					t.Fatalf("tasks per domain %v: want one in each of %d domains", per, n)
				}
				for dom, k := range per {
					if k != 1 {
						t.Fatalf("domain %s holds %d tasks of the job: %v", dom, k, per)
					}
				}
				if res := c.commitDecision(v, d); res.Committed != n {
					t.Fatalf("committed %d of %d", res.Committed, n)
				}
				c.checkInvariants()
			})
		}
	}
}

// Twice as many tasks as domains: two per domain. And tasks already placed
// (Request.Placed) count: the next ones go to the domains without one.
func TestServiceSpreadCountsPlacedTasks(t *testing.T) {
	forSeeds(t, 5, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(12, 8000, 32*gib, 4)...) // 3 machines in each of d0..d3
		job, tasks := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 8, cpu: 500, mem: gib})
		v := c.view()
		d := NewService().Decide(v, request(t, v, job), env(seed))
		for dom, k := range domainsOf(t, v, d) {
			if k != 2 {
				t.Fatalf("seed %d: domain %s holds %d of 8 tasks over 4 domains: %v", seed, dom, k, domainsOf(t, v, d))
			}
		}

		// Place two tasks by hand in d0 and d1, then ask for two more.
		c2 := newCell(t, seed)
		ms := c2.addMachines(uniform(12, 8000, 32*gib, 4)...)
		job, tasks = c2.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 4, cpu: 500, mem: gib})
		ver := c2.task(tasks[0]).Version
		c2.commit(txn.Claim(tasks[0], ms[0], txn.Resources{CPU: 500, Memory: gib}, ver), txn.Claim(tasks[1], ms[1], txn.Resources{CPU: 500, Memory: gib}, ver))
		v = c2.view()
		d = NewService().Decide(v, request(t, v, job, tasks[0], tasks[1]), env(seed))
		per := domainsOf(t, v, d)
		if len(claims(d)) != 2 || per["d2"] != 1 || per["d3"] != 1 {
			t.Fatalf("seed %d: with tasks placed in d0 and d1, the next two went to %v; want d2 and d3", seed, per)
		}
	})
}

func TestServiceHonoursAttributeConstraints(t *testing.T) {
	eq := func(attr, val string) *omegav1.Constraint {
		return &omegav1.Constraint{Attribute: attr, Operator: omegav1.Constraint_OPERATOR_EQUAL, Value: val}
	}
	ne := func(attr, val string) *omegav1.Constraint {
		return &omegav1.Constraint{Attribute: attr, Operator: omegav1.Constraint_OPERATOR_NOT_EQUAL, Value: val}
	}
	// Machines: arch arm / x86 / none, ssd on some.
	attrs := []map[string]string{
		{"arch": "arm"}, {"arch": "arm", "ssd": "true"}, {"arch": "x86"}, {"arch": "x86", "ssd": "true"}, nil, {"ssd": "false"},
	}
	cases := []struct {
		name  string
		cons  []*omegav1.Constraint
		tasks int
		ok    func(a map[string]string) bool
		fits  int // distinct machines allowed (DIFFERENT_MACHINES) or tasks placed
	}{
		{"equal", []*omegav1.Constraint{eq("arch", "arm")}, 6, func(a map[string]string) bool { return a["arch"] == "arm" }, 6},
		{"not-equal", []*omegav1.Constraint{ne("arch", "arm")}, 6, func(a map[string]string) bool { return a["arch"] != "arm" }, 6},
		{"not-equal-absent-attribute", []*omegav1.Constraint{ne("ssd", "true")}, 6, func(a map[string]string) bool { _, has := a["ssd"]; return !has || a["ssd"] != "true" }, 6},
		{"equal-and-not-equal", []*omegav1.Constraint{eq("ssd", "true"), ne("arch", "arm")}, 3, func(a map[string]string) bool { return a["ssd"] == "true" && a["arch"] != "arm" }, 3},
		{"equal-nothing-matches", []*omegav1.Constraint{eq("arch", "riscv")}, 2, func(map[string]string) bool { return false }, 0},
		{"equal-and-different-machines", []*omegav1.Constraint{eq("arch", "x86"), {Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}, 4, func(a map[string]string) bool { return a["arch"] == "x86" }, 2},
	}
	for _, tc := range cases {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				logSeed(t, seed)
				c := newCell(t, seed)
				var specs []machineSpec
				for i, a := range attrs {
					specs = append(specs, machineSpec{cpu: 16000, mem: 64 * gib, domain: fmt.Sprintf("d%d", i%2), attrs: a})
				}
				c.addMachines(specs...)
				job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: tc.tasks, cpu: 500, mem: gib, constraints: tc.cons})
				v := c.view()
				d := NewService().Decide(v, request(t, v, job), env(seed))
				checkClaimsFit(t, v, d)
				if got := len(claims(d)); got != tc.fits || d.Unplaceable != tc.tasks-tc.fits {
					t.Fatalf("%d claims, %d unplaceable; want %d, %d", got, d.Unplaceable, tc.fits, tc.tasks-tc.fits)
				}
				for _, op := range claims(d) {
					m, _ := v.Machine(op.Machine)
					if !tc.ok(m.Spec.GetAttributes()) {
						t.Fatalf("task placed on a machine with attributes %v, against %v", m.Spec.GetAttributes(), tc.cons)
					}
				}
			})
		}
	}
}

func TestServiceDifferentMachinesCountsPlacedTasks(t *testing.T) {
	diff := []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}
	forSeeds(t, 10, func(t *testing.T, seed uint64) {
		for _, sched := range []Scheduler{NewService(), NewBatch()} {
			c := newCell(t, seed)
			ms := c.addMachines(uniform(6, 64000, 256*gib, 2)...)
			job, tasks := c.addJob("s", jobSpec{kind: serviceKind, scheduler: sched.Kind(), tasks: 8, cpu: 100, mem: gib, constraints: diff})
			ver := c.task(tasks[0]).Version
			res := txn.Resources{CPU: 100, Memory: gib}
			c.commit(txn.Claim(tasks[0], ms[0], res, ver), txn.Claim(tasks[1], ms[1], res, ver))

			v := c.view()
			d := sched.Decide(v, request(t, v, job, tasks[0], tasks[1]), env(seed))
			if len(claims(d)) != 4 || d.Unplaceable != 2 {
				t.Fatalf("%s seed %d: %d claims, %d unplaceable; want 4 (the 4 machines without a task of the job), 2", sched.Kind(), seed, len(claims(d)), d.Unplaceable)
			}
			for m, n := range perMachine(d) {
				if n != 1 || m == ms[0] || m == ms[1] {
					t.Fatalf("%s seed %d: %d claims on machine %s (placed tasks are on %s and %s)", sched.Kind(), seed, n, m, ms[0], ms[1])
				}
			}
			if r := c.commitDecision(v, d); r.Committed != 4 {
				t.Fatalf("%s seed %d: committed %d", sched.Kind(), seed, r.Committed)
			}
			onMachine := map[uuid.UUID]int{}
			for _, u := range tasks {
				if tk := c.task(u); tk.Placed() {
					onMachine[tk.Machine]++
				}
			}
			for m, n := range onMachine {
				if n > 1 {
					t.Fatalf("%s seed %d: %d tasks of a DIFFERENT_MACHINES job on %s", sched.Kind(), seed, n, m)
				}
			}
		}
	})
}

// Best fit: of two feasible machines the service scheduler takes the one
// the task leaves fuller — by what other jobs already use, and by size.
func TestServicePrefersTheMachineLeftFuller(t *testing.T) {
	forSeeds(t, 10, func(t *testing.T, seed uint64) {
		// Same size; one is half used by another job.
		c := newCell(t, seed)
		ms := c.addMachines(uniform(2, 4000, 16*gib, 1)...)
		c.fill(2000, 8*gib, ms[1])
		job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 1000, mem: gib})
		v := c.view()
		d := NewService().Decide(v, request(t, v, job), env(seed))
		if cl := claims(d); len(cl) != 1 || cl[0].Machine != ms[1] {
			t.Fatalf("seed %d: claims %s; want the half-used machine %s", seed, opsString(d.Ops), ms[1])
		}

		// Different sizes: the smaller one is left fuller.
		c = newCell(t, seed)
		ms = c.addMachines(machineSpec{cpu: 8000, mem: 32 * gib, domain: "d0"}, machineSpec{cpu: 2000, mem: 8 * gib, domain: "d0"})
		job, _ = c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 1000, mem: gib})
		v = c.view()
		d = NewService().Decide(v, request(t, v, job), env(seed))
		if cl := claims(d); len(cl) != 1 || cl[0].Machine != ms[1] {
			t.Fatalf("seed %d: claims %s; want the small machine %s", seed, opsString(d.Ops), ms[1])
		}

		// Fuller but infeasible loses: the half-used machine cannot take a
		// task of 2500.
		c = newCell(t, seed)
		ms = c.addMachines(uniform(2, 4000, 16*gib, 1)...)
		c.fill(2000, 8*gib, ms[1])
		job, _ = c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 2500, mem: gib})
		v = c.view()
		d = NewService().Decide(v, request(t, v, job), env(seed))
		if cl := claims(d); len(cl) != 1 || cl[0].Machine != ms[0] {
			t.Fatalf("seed %d: claims %s; want the only feasible machine %s", seed, opsString(d.Ops), ms[0])
		}
	})
}

func TestBestFitScore(t *testing.T) {
	c := newCell(t, 1)
	ms := c.addMachines(machineSpec{cpu: 4000, mem: 8 * gib})
	c.fill(1000, 2*gib, ms[0])
	v := c.view()
	m, _ := v.Machine(ms[0])
	p := NewPlacer(v, nil)
	req := txn.Resources{CPU: 1000, Memory: 2 * gib}
	// Free after: cpu 2000/4000, mem 4/8 GiB: 0.5.
	if got := p.BestFitScore(m, req); got != 0.5 {
		t.Fatalf("score %v, want 0.5", got)
	}
	p.Take(m, req) // the decision's own claim counts
	if got := p.BestFitScore(m, req); got != 0.25 {
		t.Fatalf("score after a claim %v, want 0.25", got)
	}
	if got := p.BestFitScore(m, txn.Resources{CPU: 2000, Memory: 4 * gib}); got != 0 {
		t.Fatalf("filling the machine scores %v, want 0", got)
	}
}

func TestServiceDeterministicForASeed(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(40, 4000, 16*gib, 5)...)
	job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 12, cpu: 700, mem: gib})
	v := c.view()
	req := request(t, v, job)
	for seed := uint64(1); seed <= 5; seed++ {
		a := NewService().Decide(v, req, env(seed))
		b := NewService().Decide(v, req, env(seed))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: decisions differ:\n%s\n---\n%s", seed, opsString(a.Ops), opsString(b.Ops))
		}
		if len(claims(a)) != 12 {
			t.Fatalf("seed %d: %d claims", seed, len(claims(a)))
		}
	}
}

func TestServiceGangIsPlacedWholeOrNotAtAll(t *testing.T) {
	c := newCell(t, 5)
	c.addMachines(uniform(3, 2000, 8*gib, 3)...)
	job, _ := c.addJob("g", jobSpec{kind: serviceKind, scheduler: "service", tasks: 7, cpu: 1000, mem: gib, gang: true})
	v := c.view()
	d := NewService().Decide(v, request(t, v, job), env(5))
	if !d.AllOrNothing || d.Unplaceable != 1 || len(d.Ops) != 0 {
		t.Fatalf("gang of 7 on room for 6: all-or-nothing %t, unplaceable %d, %d ops; want true, 1, 0", d.AllOrNothing, d.Unplaceable, len(d.Ops))
	}
}

// On a cell larger than the service scheduler's sample of candidates, the
// job still gets one task per domain: the last empty domains are not missed
// because a sample of 16 machines happened not to include them.
func TestServiceSpreadsOnACellLargerThanItsSample(t *testing.T) {
	const domains = 20
	forSeeds(t, 10, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(domains*10, 4000, 16*gib, domains)...)
		job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: domains, cpu: 500, mem: gib})
		v := c.view()
		d := NewService().Decide(v, request(t, v, job), env(seed))
		per := domainsOf(t, v, d)
		if len(per) != domains {
			t.Fatalf("seed %d: %d tasks over %d domains of %d: %v", seed, domains, len(per), domains, per)
		}
	})
}
