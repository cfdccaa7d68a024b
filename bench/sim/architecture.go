package sim

import (
	"fmt"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/schedulers"
)

// Architecture is how a cell's scheduling is organised, as the Omega paper
// compares them (section 4), all on the same workload, store and fleet.
type Architecture int

const (
	// SharedState runs Config.Schedulers as they are: each scheduler
	// decides on its own view of the cell and commits optimistically.
	SharedState Architecture = iota
	// SinglePath is one monolithic scheduler (schedulers.Monolithic) that
	// takes every job from one queue at one decision time, the service
	// scheduler's (the paper's Figure 5 sweeps it).
	SinglePath
	// MultiPath is one monolithic scheduler that takes every job from one
	// queue at its kind's decision time (the batch spec's for batch jobs,
	// the service spec's for service jobs): fast paths for batch, still
	// blocked behind a slow service decision at the head of the queue.
	MultiPath
	// TwoLevel runs Config.Schedulers as two-level frameworks under an
	// allocator that offers everything unoffered to one of them at a time
	// in DRF order, locked in the store while it decides (Mesos as the
	// paper modelled it; Config.TwoLevel).
	TwoLevel
)

func (a Architecture) String() string {
	switch a {
	case SharedState:
		return "shared"
	case SinglePath:
		return "single-path"
	case MultiPath:
		return "multi-path"
	case TwoLevel:
		return "two-level"
	}
	return fmt.Sprintf("Architecture(%d)", int(a))
}

// ParseArchitecture reads shared, single-path, multi-path or two-level.
func ParseArchitecture(s string) (Architecture, error) {
	for _, a := range []Architecture{SharedState, SinglePath, MultiPath, TwoLevel} {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("architecture %q: want shared, single-path, multi-path or two-level", s)
}

// WithArchitecture returns c with its schedulers organised as a says: for
// two-level, each of c's schedulers is a framework. For
// the monolithic architectures c must run one batch and one service
// scheduler and no other (their decision times are the monolithic
// scheduler's) and route no kind: the result runs one "monolithic"
// scheduler that the batch and service jobs are routed to.
func (c Config) WithArchitecture(a Architecture) (Config, error) {
	switch a {
	case SharedState:
		return c, nil
	case TwoLevel:
		c.TwoLevel = true // the schedulers, as they are, are the frameworks
		return c, nil
	case SinglePath, MultiPath:
	default:
		return c, fmt.Errorf("sim: %v", a)
	}
	var batch, service *SchedulerSpec
	for i := range c.Schedulers {
		switch s := &c.Schedulers[i]; {
		case s.Kind == "batch" && s.Count == 1 && batch == nil:
			batch = s
		case s.Kind == "service" && s.Count == 1 && service == nil:
			service = s
		default:
			return c, fmt.Errorf("sim: the %s architecture takes one batch and one service scheduler and no other, not %s", a, kindList(c.Schedulers))
		}
	}
	if batch == nil || service == nil {
		return c, fmt.Errorf("sim: the %s architecture takes one batch and one service scheduler, not %s", a, kindList(c.Schedulers))
	}
	if len(c.Route) > 0 {
		return c, fmt.Errorf("sim: the %s architecture routes every job itself; Route must be empty", a)
	}
	mono := SchedulerSpec{Kind: "monolithic", Count: 1, TJob: service.TJob, TTask: service.TTask}
	if a == MultiPath {
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
