package schedulers

import (
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
)

// saturated is a cell the size of the Google 2011 trace's (12,480
// machines), every machine left with 1 core and 8 GiB, and two jobs whose
// tasks (2 cores each) fit none of them: the saturated replay's common
// decision. views are two states of it that differ only in a job no
// decision reads (their machines are the same), and views[2] is views[1]
// with ten machines' allocations changed (each still too full), as a
// runner's next view is after a few commits.
type saturated struct {
	c             *testCell
	views         [3]client.View
	service, batc uuid.UUID
}

func newSaturated(b *testing.B) *saturated {
	c := newCell(b, 1)
	ms := c.addMachines(uniform(12480, 32000, 128*gib, 100)...)
	c.fill(31000, 120*gib, ms...)
	s := &saturated{c: c}
	s.service, _ = c.addJob("svc", jobSpec{kind: serviceKind, scheduler: "service", tasks: 20, cpu: 2000, mem: gib})
	s.batc, _ = c.addJob("bat", jobSpec{kind: batchKind, scheduler: "batch", tasks: 500, cpu: 2000, mem: gib})
	s.views[0] = c.view()
	c.addJob("other", jobSpec{kind: batchKind, scheduler: "other", tasks: 1, cpu: 1, mem: 1})
	s.views[1] = c.view()
	c.fill(1, 1, ms[:10]...)
	s.views[2] = c.view()
	return s
}

// evict writes a buffer larger than the processor's caches, so the next
// decision finds the cell's objects in memory only, as a replay's decisions
// do (its state is hundreds of MB).
var evictBuf = make([]byte, 64<<20)

func evict() {
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

// BenchmarkSaturated decides a job that fits nowhere in the saturated cell:
// on the same view again (the runner's next attempt when nothing committed
// meanwhile), on a new view each time with the same machines, or on views
// ten machines apart (the index follows them), the cell's objects out of
// the caches (cold); by each kind's best fit (Sample, bounded) and by
// randomized first fit (which examines every machine).
func BenchmarkSaturated(b *testing.B) {
	s := newSaturated(b)
	for _, sc := range []struct {
		name  string
		sched Scheduler
		job   uuid.UUID
	}{
		{"service", NewService(), s.service},
		{"batch", NewBatch(), s.batc},
		{"service-random-first-fit", func() Scheduler { x := NewService(); x.Placement = PlacementRandomFirstFit; return x }(), s.service},
		{"batch-random-first-fit", func() Scheduler { x := NewBatch(); x.Placement = PlacementRandomFirstFit; return x }(), s.batc},
	} {
		reqs := [3]Request{request(b, s.views[0], sc.job), request(b, s.views[1], sc.job), request(b, s.views[2], sc.job)}
		for _, mode := range []string{"same-view", "new-view-cold", "ten-machines-changed-cold"} {
			b.Run(sc.name+"/"+mode, func(b *testing.B) {
				e := env(1)
				for i := 0; i < b.N; i++ {
					k := 0
					if mode != "same-view" {
						switch k = i % 2; mode {
						case "ten-machines-changed-cold":
							k++ // views 1 and 2 in turn
						}
						b.StopTimer()
						evict()
						b.StartTimer()
					}
					d := sc.sched.Decide(s.views[k], reqs[k], e)
					if len(d.Ops) != 0 || d.Unplaceable != len(reqs[k].Pending) {
						b.Fatalf("placed %d, unplaceable %d of %d", len(d.Ops), d.Unplaceable, len(reqs[k].Pending))
					}
				}
			})
		}
	}
}
