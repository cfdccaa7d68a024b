package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/omega-cell/omega/schedulers"
)

// The simulation's scheduler kinds, layered over the production registry:
// every kind schedulers.New makes (the real schedulers, and those a custom
// binary registered with schedulers.Register) and, of the simulation's own,
// the deliberately faulty schedulers of the "don't expose raw state"
// experiment (schedulers/faults.go). `omega sim`, the bench's experiments
// and `omega replay` run them; `omega scheduler`, which asks the production
// registry, does not offer them to an operator.
var faultyKinds = map[string]func() schedulers.Scheduler{
	"faulty-units":    func() schedulers.Scheduler { return schedulers.NewUnitBug() },
	"faulty-outdated": func() schedulers.Scheduler { return schedulers.NewOutdated() },
	"faulty-thief":    func() schedulers.Scheduler { return schedulers.NewThief() },
}

// NewScheduler makes a scheduler of kind for a simulation, with its
// parameters (nil: none): a faulty kind of the simulation's own, else
// schedulers.New's. An unknown kind's error lists SchedulerKinds.
func NewScheduler(kind string, p schedulers.Params) (schedulers.Scheduler, error) {
	if f, ok := faultyKinds[kind]; ok {
		if err := p.Only(kind); err != nil {
			return nil, fmt.Errorf("scheduler %s: %w", kind, err)
		}
		return f(), nil
	}
	if !slices.Contains(schedulers.Kinds(), kind) {
		return nil, fmt.Errorf("unknown scheduler kind %q (registered: %v)", kind, SchedulerKinds())
	}
	return schedulers.New(kind, p)
}

// SchedulerKinds lists the kinds a simulation runs, sorted: the
// production registry's (schedulers.Kinds) and the faulty ones.
func SchedulerKinds() []string {
	return slices.Compact(slices.Sorted(slices.Values(slices.Concat(schedulers.Kinds(), slices.Collect(maps.Keys(faultyKinds))))))
}
