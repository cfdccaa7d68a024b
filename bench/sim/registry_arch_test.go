package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/schedulers"
)

// The paper's four architectures are registered, in its order, each with a
// line of doc; WithArchitecture names the one it arranged, and every
// registered one runs a small cell with every job accounted for.
func TestArchitecturesRegistered(t *testing.T) {
	want := []string{"single-path", "multi-path", "shared", "two-level"}
	if got := ArchitectureNames(); !slices.Equal(got[:min(len(got), 4)], want) {
		t.Fatalf("architectures %v, want the paper's %v first", got, want)
	}
	for _, a := range Architectures() {
		if a.Doc == "" || strings.ContainsAny(a.Doc, ";()") || strings.HasSuffix(a.Doc, ".") {
			t.Errorf("%s: doc %q: want one clause, no semicolon, parenthesis or final stop (omega sim --help lists them after a colon, separated by semicolons)", a.Name, a.Doc)
		}
		cfg, err := archConfig(100 * time.Millisecond).WithArchitecture(a.Name)
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if cfg.Architecture != a.Name {
			t.Errorf("%s: Config.Architecture %q", a.Name, cfg.Architecture)
		}
		sum, _ := runConfig(t, cfg)
		if sum.JobsSubmitted == 0 || sum.JobsScheduled+sum.JobsAbandoned+sum.JobsPending != sum.JobsSubmitted {
			t.Errorf("%s: %+v", a.Name, sum)
		}
	}
	if a, err := LookupArchitecture(""); err != nil || a.Name != DefaultArchitecture {
		t.Errorf("the default architecture: %v %v", a.Name, err)
	}
}

// A baseline of one's own is one registration: here, one that drives each
// runner with an actor of its own, which, woken with work, waits for the
// next hour to begin. Its runs
// book busyness through Drive.Busy and place jobs; a name taken twice
// panics.
func TestArchitectureOfOnesOwn(t *testing.T) {
	hourly := Architecture{
		Name: "test-hourly",
		Doc:  "each scheduler, woken with work, waits for the next hour to begin",
		Drive: func(d Drive) (*Driving, error) {
			var out Driving
			for i, r := range d.Runners {
				out.Actors = append(out.Actors, &hourlyActor{i: i, r: r, busy: d.Busy})
				out.Wakes = append(out.Wakes, i)
			}
			return &out, nil
		},
	}
	RegisterArchitecture(hourly)
	t.Cleanup(func() { delete(architectures, hourly.Name) })
	if got := ArchitectureNames(); got[len(got)-1] != "test-hourly" {
		t.Errorf("architectures %v: want one of one's own after the paper's", got)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a name registered twice did not panic")
			}
		}()
		RegisterArchitecture(hourly)
	}()
	cfg := archConfig(100 * time.Millisecond)
	cfg.Workload.Days = 0.1
	cfg, err := cfg.WithArchitecture("test-hourly")
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := runConfig(t, cfg)
	if sum.JobsScheduled == 0 || sum.Schedulers[0].BusynessMedian == 0 {
		t.Fatalf("hourly: %+v", sum)
	}
}

// hourlyActor, woken, begins its runner's attempts on the next hour, and
// goes on while it has work ready.
type hourlyActor struct {
	i    int
	r    *schedulers.Runner
	busy func(int, time.Time, time.Duration)
	a    *schedulers.Attempt
	at   time.Time
}

func (h *hourlyActor) Start(context.Context, time.Time) (vtime.Next, error) { return vtime.Next{}, nil }

func (h *hourlyActor) Wake(_ context.Context, now time.Time) (vtime.Next, error) {
	if h.a != nil {
		return vtime.Next{At: h.at, Phase: vtime.PhaseCommit}, nil
	}
	return vtime.Next{At: now.Truncate(time.Hour).Add(time.Hour), Phase: vtime.PhaseCommit}, nil
}

func (h *hourlyActor) Step(ctx context.Context, now time.Time) (vtime.Next, error) {
	if h.a != nil {
		if now.Before(h.at) {
			return vtime.Next{At: h.at, Phase: vtime.PhaseCommit}, nil
		}
		if _, err := h.r.Finish(ctx, h.a, now); err != nil {
			return vtime.Next{}, err
		}
		h.a = nil
	}
	a, ok, err := h.r.Begin(ctx, now)
	if err != nil || !ok {
		return vtime.Next{}, err
	}
	h.a, h.at = a, now.Add(a.DecisionTime)
	h.busy(h.i, now, a.DecisionTime)
	return vtime.Next{At: h.at, Phase: vtime.PhaseCommit}, nil
}
