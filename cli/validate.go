package cli

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/workload"
)

// The bounds every command checks its settings against before it creates
// anything; the flags' help texts quote them. Where the library checks the
// same setting, the bound is the library's, so the two cannot drift apart.
const (
	maxMachines                = workload.MaxMachines
	minDays, maxDays           = workload.MinDays, workload.MaxDays
	minLoad, maxLoad           = workload.MinLoad, workload.MaxLoad
	maxPerKind                 = sim.MaxSchedulersPerKind
	maxTJob, maxTTask          = sim.MaxTJob, sim.MaxTTask
	failuresPerMachineDay      = sim.FailuresPerMachineDay
	minFleetTick, maxFleetTick = sim.MinFleetTick, sim.MaxFleetTick
	// maxSeeds: runs of one configuration (one output directory each).
	maxSeeds = 1000
)

// workloadKinds are the kinds of jobs the workload submits (--route's
// keys).
var workloadKinds = sim.WorkloadKinds()

// problems collects every invalid setting of a command, each naming its
// flag (or config field).
type problems []error

func (p *problems) add(name, value, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s %s: %s", name, value, fmt.Sprintf(format, args...)))
}

func (p problems) err() error { return errors.Join(p...) }

// float checks that v is finite and within [lo, hi]; what describes the
// setting for the message.
func (p *problems) float(name string, v, lo, hi float64, what string) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		p.add(name, fmtFloat(v), "want %s: a finite number from %s to %s", what, fmtFloat(lo), fmtFloat(hi))
		return false
	}
	return true
}

// count checks that a whole number is within [lo, hi].
func (p *problems) count(name string, v, lo, hi int, what string) bool {
	if v < lo || v > hi {
		p.add(name, strconv.Itoa(v), "want %s: a whole number from %d to %d", what, lo, hi)
		return false
	}
	return true
}

// duration checks that d is within [lo, hi].
func (p *problems) duration(name, value string, d, lo, hi time.Duration, what string) bool {
	if d < lo || d > hi {
		p.add(name, value, "want %s: a duration from %s to %s", what, fmtDuration(lo), fmtDuration(hi))
		return false
	}
	return true
}

// days checks a number of simulated days.
func (p *problems) days(name string, v float64) bool {
	return p.float(name, v, minDays, maxDays, "simulated days")
}

// dir checks that an output directory is either absent (it is created
// once there are results) or a directory. It creates nothing.
func (p *problems) dir(name, path string) {
	if path == "" {
		return
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		p.add(name, strconv.Quote(path), "%v", err)
	case !st.IsDir():
		p.add(name, strconv.Quote(path), "exists and is not a directory")
	}
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// fmtDuration is d without trailing zero units: 1h, not 1h0m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// entry is one kind=value of a per-kind flag (--schedulers, --t-job, ...).
type entry struct{ kind, value string }

// parseEntries splits "kind=value[,kind=value]" (spaces around either
// allowed). Every kind must be named once.
func parseEntries(name, s, want string) ([]entry, error) {
	var out []entry
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%s %q: want %s", name, s, want)
		}
		if seen[k] {
			return nil, fmt.Errorf("%s %q: %s is named twice", name, s, k)
		}
		seen[k] = true
		out = append(out, entry{k, v})
	}
	return out, nil
}

// parseSchedulers parses --schedulers: every count a whole number from 1
// to maxPerKind, every kind registered.
func parseSchedulers(p *problems, name, s string) map[string]int {
	es, err := parseEntries(name, s, "kind=count[,kind=count], e.g. batch=1,service=1")
	if err != nil {
		*p = append(*p, err)
		return nil
	}
	if len(es) == 0 {
		p.add(name, strconv.Quote(s), "want at least one scheduler, e.g. batch=1,service=1")
		return nil
	}
	counts := map[string]int{}
	ok := true
	for _, e := range es {
		if _, err := sim.NewScheduler(e.kind, nil); err != nil {
			p.add(name, e.kind+"="+e.value, "%v", err)
			ok = false
			continue
		}
		// Atoi takes only an optionally signed decimal integer: no "1.5",
		// "1x" or "1e2".
		n, err := strconv.Atoi(e.value)
		if err != nil || n < 1 || n > maxPerKind {
			p.add(name, e.kind+"="+e.value, "the number of %s schedulers must be a whole number from 1 to %d (leave a kind out to run none)", e.kind, maxPerKind)
			ok = false
			continue
		}
		counts[e.kind] = n
	}
	if !ok {
		return nil
	}
	return counts
}

// parseDurations parses a per-kind duration flag (--t-job, --t-task):
// every duration from 0 to max, every kind a registered one.
func parseDurations(p *problems, name, s string, max time.Duration, what string) map[string]time.Duration {
	es, err := parseEntries(name, s, "kind=duration[,kind=duration], e.g. batch=0.1s,service=10s")
	if err != nil {
		*p = append(*p, err)
		return nil
	}
	out := map[string]time.Duration{}
	for _, e := range es {
		if !slices.Contains(sim.SchedulerKinds(), e.kind) {
			p.add(name, e.kind+"="+e.value, "no scheduler kind %q (registered: %v)", e.kind, sim.SchedulerKinds())
			continue
		}
		d, err := time.ParseDuration(e.value)
		if err != nil {
			p.add(name, e.kind+"="+e.value, "want %s: a duration like 0.1s or 5ms, from 0 to %s", what, fmtDuration(max))
			continue
		}
		if p.duration(name, e.kind+"="+e.value, d, 0, max, what) {
			out[e.kind] = d
		}
	}
	return out
}

// refuseResults refuses an --out that holds the results of an earlier run
// (its summary.json or aggregate.json, or a seed directory's), unless
// force: a run would write over them without a word. Sweeps (omega bench)
// resume in their directory by design and do not ask.
func refuseResults(out string, force bool) error {
	if out == "" || force {
		return nil
	}
	found := []string{filepath.Join(out, "summary.json"), filepath.Join(out, "aggregate.json")}
	seeds, _ := filepath.Glob(filepath.Join(out, "seed-*", "summary.json"))
	for _, p := range append(found, seeds...) {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("--out %s holds the results of an earlier run (%s): give --force to write over them, or another directory", strconv.Quote(out), p)
		}
	}
	return nil
}
