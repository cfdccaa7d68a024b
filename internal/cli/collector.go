package cli

import (
	"os"
	"runtime/debug"

	"github.com/omega-cell/omega/internal/hostinfo"
)

// Batch work's collector settings. A simulation is a batch computation that
// has the machine for its run and keeps a live heap of a few hundred MiB
// that it rewrites many times over (a simulated day allocates about 5 GiB
// at 10,000 machines). At Go's default (GOGC 100) the collector marks that
// heap every time the program allocates as much again: on two cores it
// took 16% of a run's wall time more than at 400, measured interleaved
// (docs/BENCHMARKS.md "The collector for batch work"). At 400 the heap may
// grow to five times the live one, bounded by a soft limit of half the
// memory the process may use (the machine's, or its container's cgroup
// limit when lower), beyond which the collector runs as often as it must.
// This is what a deployment of a JVM simulator does with -Xmx, and what
// Go's own guide advises for a throughput job with memory to spare.
//
// Each of GOGC and GOMEMLIMIT in the environment wins over its own
// setting here: GOGC=100 gives Go's default percentage back (the soft limit
// stays, unless GOMEMLIMIT is set too), GOMEMLIMIT another bound.
const (
	batchGOGC     = 400
	batchMemShare = 2 // the soft limit: 1/batchMemShare of the memory the process may use
)

// useBatchCollector applies the batch settings not overridden by the
// environment and returns what undoes them (the commands run in-process in
// tests, one after another).
func useBatchCollector() (restore func()) {
	var undo []func()
	if _, set := os.LookupEnv("GOGC"); !set {
		prev := debug.SetGCPercent(batchGOGC)
		undo = append(undo, func() { debug.SetGCPercent(prev) })
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		if mem := hostinfo.MemLimit(); mem > 0 {
			prev := debug.SetMemoryLimit(int64(mem / batchMemShare))
			undo = append(undo, func() { debug.SetMemoryLimit(prev) })
		}
	}
	return func() {
		for _, f := range undo {
			f()
		}
	}
}
