package sim

import (
	"fmt"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/schedulers"
)

// monolithic arranges c for one of the paper's monolithic architectures:
// c must run one batch and one service scheduler and no other (their
// decision times are the monolithic scheduler's) and route no kind; the
// result runs one "monolithic" scheduler (schedulers.Monolithic) that the
// batch and service jobs are routed to, at the service scheduler's
// decision time, or, byKind, each job at its kind's.
func monolithic(c Config, name string, byKind bool) (Config, error) {
	var batch, service *SchedulerSpec
	for i := range c.Schedulers {
		switch s := &c.Schedulers[i]; {
		case s.Kind == "batch" && s.Count == 1 && batch == nil:
			batch = s
		case s.Kind == "service" && s.Count == 1 && service == nil:
			service = s
		default:
			return c, fmt.Errorf("sim: the %s architecture takes one batch and one service scheduler and no other, not %s", name, kindList(c.Schedulers))
		}
	}
	if batch == nil || service == nil {
		return c, fmt.Errorf("sim: the %s architecture takes one batch and one service scheduler, not %s", name, kindList(c.Schedulers))
	}
	if len(c.Route) > 0 {
		return c, fmt.Errorf("sim: the %s architecture routes every job itself; Route must be empty", name)
	}
	mono := SchedulerSpec{Kind: "monolithic", Count: 1, TJob: service.TJob, TTask: service.TTask}
	if byKind {
		mono.ByKind = map[omegav1.JobKind]schedulers.DecisionTime{
			omegav1.JobKind_JOB_KIND_BATCH:   {TJob: batch.TJob, TTask: batch.TTask},
			omegav1.JobKind_JOB_KIND_SERVICE: {TJob: service.TJob, TTask: service.TTask},
		}
	}
	out := c
	out.Schedulers = []SchedulerSpec{mono}
	out.Route = map[string]string{"batch": "monolithic", "service": "monolithic"}
	return out, nil
}
