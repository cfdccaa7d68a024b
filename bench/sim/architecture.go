package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
)

// Architecture is one way to organise a cell's scheduling, as the Omega
// paper compares them (section 4), all on the same workload, store and
// fleet. Each is one file of this package that registers itself
// (RegisterArchitecture): shared state, single-path, multi-path,
// two-level. Config.Architecture names the one a run uses.
type Architecture struct {
	// Name is what Config.Architecture and omega sim --architecture say.
	Name string
	// Doc says in a sentence what it is (omega sim --help).
	Doc string
	// Rank orders the architectures (Architectures, and the grids of the
	// experiments that compare them): the paper's four by the paper's
	// order, from 10 to 40; a baseline of one's own after them, by name,
	// unless it says otherwise.
	Rank int
	// Days, if above 0, caps how many days the experiments simulate of it
	// (the paper's two-level runs simulate one).
	Days float64
	// Arrange, if set, returns c with its schedulers as this architecture
	// runs them (the monolithic ones make one scheduler of the batch and
	// service schedulers), refusing, with a reason, a config it cannot
	// run. Nil: the schedulers run as they are.
	Arrange func(c Config) (Config, error)
	// Validate, if set, checks the config's fields that are this
	// architecture's own (Config.Validate calls it; ConfigFieldError makes
	// its errors).
	Validate func(c *Config) error
	// Drive, if set, makes the actors that drive the runners. Nil: each
	// runner on a loop of its own, an attempt at a time, each landing
	// after its decision time.
	Drive func(d Drive) (*Driving, error)
}

// Drive is what an architecture's Drive gets from BuildCell.
type Drive struct {
	Config  Config
	Runners []*schedulers.Runner
	// NewClient makes a client of the cell, with a random stream of its
	// own (after every other client's, so theirs stay as they are in the
	// other architectures).
	NewClient func(name string) (*client.Client, error)
	// Busy books runner i's decision time [start, start+d) (the summary's
	// busyness), at the decision; Placing books it again once the decision
	// placed a task (the busyness Google's simulator reports).
	Busy, Placing func(i int, start time.Time, d time.Duration)
}

// Driving is the actors that drive the runners, as an architecture made
// them.
type Driving struct {
	// Actors are added to the engine after the arrivals, in this order.
	Actors []vtime.Actor
	// Wakes[i] is the index in Actors of the actor that runner i's work
	// wakes (a vtime.Waker) when the intake hands it some.
	Wakes []int
	// Observers see the cell's history before the run's own observers (an
	// allocator keeping each framework's share).
	Observers []Observer
}

var architectures = map[string]Architecture{}

// RegisterArchitecture adds an architecture; a file of this package calls
// it from a package-level var. An empty or taken name panics: it is a
// mistake in the code, found by any test.
func RegisterArchitecture(a Architecture) bool {
	if a.Name == "" {
		panic("sim: an architecture needs a name")
	}
	if _, ok := architectures[a.Name]; ok {
		panic(fmt.Sprintf("sim: architecture %q registered twice", a.Name))
	}
	if a.Rank == 0 {
		a.Rank = 1000
	}
	architectures[a.Name] = a
	return true
}

// Architectures returns the registered architectures by rank, then name.
func Architectures() []Architecture {
	out := make([]Architecture, 0, len(architectures))
	for _, a := range architectures {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Architecture) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), strings.Compare(a.Name, b.Name))
	})
	return out
}

// ArchitectureNames returns the registered architectures' names, in the
// order of Architectures.
func ArchitectureNames() []string {
	var out []string
	for _, a := range Architectures() {
		out = append(out, a.Name)
	}
	return out
}

// DefaultArchitecture is the architecture of a Config that names none.
const DefaultArchitecture = "shared"

// LookupArchitecture returns the architecture of that name ("" is
// DefaultArchitecture).
func LookupArchitecture(name string) (Architecture, error) {
	if name == "" {
		name = DefaultArchitecture
	}
	a, ok := architectures[name]
	if !ok {
		return Architecture{}, fmt.Errorf("architecture %q: want %s", name, orList(ArchitectureNames()))
	}
	return a, nil
}

// orList is "a, b or c".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// WithArchitecture returns c with its schedulers organised as the named
// architecture says (its Arrange), and Config.Architecture naming it.
func (c Config) WithArchitecture(name string) (Config, error) {
	a, err := LookupArchitecture(name)
	if err != nil {
		return c, fmt.Errorf("sim: %w", err)
	}
	out := c
	if a.Arrange != nil {
		if out, err = a.Arrange(c); err != nil {
			return c, err
		}
	}
	out.Architecture = a.Name
	return out, nil
}
