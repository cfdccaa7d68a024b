package schedulers

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
)

// TestServiceSpreadsOverMachinesWithoutDomains: in a live cell no agent
// declares a failure domain, and a service's replicas must still land on
// distinct machines (issue 30: they all landed on one, the best fit, as
// every machine shared the domain ""). The model: each machine that
// declares no domain is a domain of its own, so a job of k replicas on
// machines with room for all of them puts them on k machines (k at most
// the domains there are), and with k twice the machines, two on each.
// Machines are of different sizes, so best fit alone would pack the job
// onto the smallest that holds it. Some cells mix in machines of one
// declared domain, which count as one.
func TestServiceSpreadsOverMachinesWithoutDomains(t *testing.T) {
	forSeeds(t, 20, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 30))
		n := 2 + r.IntN(12) // machines without a domain; the sample (16) covers the cell
		shared := r.IntN(3) // machines in domain "rack-a"
		var specs []machineSpec
		for i := range n + shared {
			s := machineSpec{cpu: int64(4000 + 500*r.IntN(8)), mem: 64 * gib}
			if i >= n {
				s.domain = "rack-a"
			}
			specs = append(specs, s)
		}
		c := newCell(t, seed)
		c.addMachines(specs...)
		domains := n + min(shared, 1)
		for _, k := range []int{1 + r.IntN(domains), 2 * domains} {
			job, _ := c.addJob(fmt.Sprintf("s%d", k), jobSpec{kind: serviceKind, scheduler: "service", tasks: k, cpu: 100, mem: gib})
			v := c.view()
			d := NewService().Decide(v, request(t, v, job), env(seed))
			checkClaimsFit(t, v, d)
			if len(claims(d)) != k || d.Unplaceable != 0 {
				t.Fatalf("k=%d: %d claims, %d unplaceable", k, len(claims(d)), d.Unplaceable)
			}
			per := map[Domain]int{}
			for _, op := range claims(d) {
				m, _ := v.Machine(op.Machine)
				per[SpreadDomain(m)]++
			}
			want := 1
			if k > domains {
				want = k / domains
			}
			if len(per) != min(k, domains) {
				t.Fatalf("k=%d over %d domains (%d machines without one): the job holds %d domains: %v", k, domains, n, len(per), per)
			}
			for dom, got := range per {
				if got != want {
					t.Fatalf("k=%d: domain %v holds %d of the job's tasks, want %d: %v", k, dom, got, want, per)
				}
			}
		}
	})
}

// A machine that declares no failure domain is one of its own: the index
// counts it apart, the Placer counts the job's tasks on it apart, and a
// declared name never meets a machine's domain.
func TestMachinesWithoutADomainAreDomainsOfTheirOwn(t *testing.T) {
	c := newCell(t, 1)
	ms := c.addMachines(append(uniform(3, 1000, gib, 0), machineSpec{cpu: 1000, mem: gib, domain: "d"}, machineSpec{cpu: 1000, mem: gib, domain: "d"})...)
	var x MachineIndex
	x.Refresh(c.view())
	if x.Domains() != 4 {
		t.Fatalf("3 machines without a domain and 2 in one: %d domains, want 4", x.Domains())
	}
	v := c.view()
	m0, _ := v.Machine(ms[0])
	m1, _ := v.Machine(ms[1])
	d0, _ := v.Machine(ms[3])
	d1, _ := v.Machine(ms[4])
	p := NewPlacer(v, nil)
	p.Take(m0, m0.Capacity.Sub(m0.Capacity)) // a claim of nothing still notes the machine
	if p.OnDomain(m0) != 1 || p.OnDomain(m1) != 0 || p.DomainsUsed() != 1 {
		t.Fatalf("one task on m0: OnDomain(m0) %d, OnDomain(m1) %d, used %d; want 1, 0, 1", p.OnDomain(m0), p.OnDomain(m1), p.DomainsUsed())
	}
	p.Take(d0, d0.Capacity.Sub(d0.Capacity))
	if p.OnDomain(d1) != 1 || p.DomainsUsed() != 2 {
		t.Fatalf("one task in d: OnDomain(d1) %d, used %d; want 1, 2", p.OnDomain(d1), p.DomainsUsed())
	}
	if SpreadDomain(m0) == SpreadDomain(m1) || SpreadDomain(d0) != SpreadDomain(d1) || SpreadDomain(m0).Machine == uuid.Nil {
		t.Fatal("SpreadDomain: machines without a domain must differ, machines of one domain agree")
	}
}
