package schedulers

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// The monolithic scheduler decides each job as the policy of its kind
// would: a service job exactly as the service scheduler, a batch job
// exactly as the batch scheduler, on the same view with the same seed.
func TestMonolithicDecidesByKind(t *testing.T) {
	forSeeds(t, 3, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		c.addMachines(uniform(20, 4000, 16*gib, 0)...)
		b, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 5, cpu: 1000, mem: gib})
		s, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 4, cpu: 1000, mem: gib})
		v := c.view()
		m := NewMonolithic()
		for _, x := range []struct {
			job  uuid.UUID
			pure Scheduler
		}{{b, NewBatch()}, {s, NewService()}} {
			req := request(t, v, x.job)
			got, want := m.Decide(v, req, env(seed)), x.pure.Decide(v, req, env(seed))
			if len(got.Ops) == 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("job %s: the monolithic decision %+v, its kind's %+v", x.job, got, want)
			}
		}
		if m.Kind() != "monolithic" {
			t.Fatalf("kind %q", m.Kind())
		}
	})
}

// A runner with decision times by job kind (a multi-path monolithic
// scheduler) charges each attempt its job's kind's time; without an entry
// for the kind, TJob and TTask.
func TestRunnerDecisionTimeByKind(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(8, 4000, 16*gib, 0)...)
	b, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "monolithic", tasks: 3, cpu: 100, mem: gib})
	s, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "monolithic", tasks: 2, cpu: 100, mem: gib})
	cfg := testConfig()
	cfg.TJob, cfg.TTask = 7*time.Second, time.Second
	cfg.ByKind = map[omegav1.JobKind]DecisionTime{batchKind: {TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond}}
	r := c.runner(NewMonolithic(), "monolithic-0", 1, cfg, nil)
	r.Submit(b, t0)
	r.Submit(s, t0)
	now := t0
	want := map[uuid.UUID]time.Duration{b: 100*time.Millisecond + 3*5*time.Millisecond, s: 7*time.Second + 2*time.Second}
	for range 2 {
		a := begin(t, r, now)
		if a.DecisionTime != want[a.Job] {
			t.Fatalf("job %s: decision time %v, want %v", a.Job, a.DecisionTime, want[a.Job])
		}
		_, now = finish(t, r, a, now)
		delete(want, a.Job)
	}
	bad := testConfig()
	bad.ByKind = map[omegav1.JobKind]DecisionTime{serviceKind: {TJob: -time.Second}}
	if err := bad.Validate(); err == nil {
		t.Fatal("a negative ByKind decision time validated")
	}
}
