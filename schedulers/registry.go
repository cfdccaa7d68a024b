package schedulers

import (
	"fmt"
	"slices"
	"sync"
)

// Factory makes a fresh scheduler instance (one per Runner).
type Factory func() Scheduler

var (
	regMu    sync.Mutex
	registry = map[string]Factory{
		"batch":     func() Scheduler { return NewBatch() },
		"service":   func() Scheduler { return NewService() },
		"mapreduce": func() Scheduler { return NewMapReduce(MaxParallelism) },
	}
)

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

// New makes a scheduler of a registered kind.
func New(kind string) (Scheduler, error) {
	regMu.Lock()
	f, ok := registry[kind]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown scheduler kind %q (registered: %v)", kind, Kinds())
	}
	return f(), nil
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
