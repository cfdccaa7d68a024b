package schedulers

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Params are a scheduler kind's parameters, by name ("policy" for
// mapreduce), as a configuration gives them; each factory takes the ones
// it knows and refuses the others.
type Params map[string]string

// Only returns an error naming the first parameter not among known.
func (p Params) Only(kind string, known ...string) error {
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !slices.Contains(known, k) {
			return fmt.Errorf("scheduler %s takes no parameter %q (it takes %v)", kind, k, known)
		}
	}
	return nil
}

// Factory makes a fresh scheduler instance (one per Runner) with its
// parameters.
type Factory func(p Params) (Scheduler, error)

var (
	regMu    sync.Mutex
	registry = map[string]Factory{
		"batch": func(p Params) (Scheduler, error) {
			pl, err := builtin(p, "batch")
			b := NewBatch()
			b.Placement = pl
			return b, err
		},
		"service": func(p Params) (Scheduler, error) {
			pl, err := builtin(p, "service")
			s := NewService()
			s.Placement = pl
			return s, err
		},
		"monolithic": func(p Params) (Scheduler, error) {
			pl, err := builtin(p, "monolithic")
			m := NewMonolithic()
			m.SetPlacement(pl)
			return m, err
		},
		"mapreduce": func(p Params) (Scheduler, error) {
			pl, err := builtin(p, "mapreduce", "policy")
			if err != nil {
				return nil, err
			}
			policy := MaxParallelism
			if v, ok := p["policy"]; ok {
				if policy, err = ParseMapReducePolicy(v); err != nil {
					return nil, err
				}
			}
			m := NewMapReduce(policy)
			m.Placement = pl
			return m, nil
		},
	}
)

// builtin checks a built-in kind's parameters (its own, and "placement",
// which every built-in kind takes) and returns its placement.
func builtin(p Params, kind string, known ...string) (Placement, error) {
	if err := p.Only(kind, append(known, "placement")...); err != nil {
		return "", err
	}
	return placementParam(p)
}

// Register makes a scheduler kind available to `omega sim` and to
// simulations built from a Config: the way a custom scheduler plugs in
// (see examples/). It panics if the kind is taken, like http.Handle.
func Register(kind string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[kind]; dup {
		panic(fmt.Sprintf("schedulers: kind %q registered twice", kind))
	}
	registry[kind] = f
}

// New makes a scheduler of a registered kind with its parameters (nil:
// none).
func New(kind string, p Params) (Scheduler, error) {
	regMu.Lock()
	f, ok := registry[kind]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown scheduler kind %q (registered: %v)", kind, Kinds())
	}
	s, err := f(p)
	if err != nil {
		return nil, fmt.Errorf("scheduler %s: %w", kind, err)
	}
	return s, nil
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var out []string
	for k := range registry {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
