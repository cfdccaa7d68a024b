package cli

import (
	"os"
	"runtime/debug"

	"github.com/omega-cell/omega/internal/hostinfo"
)

// Batch work's collector settings. A simulation is a batch computation that
// has the machine for its run and keeps a live heap of a few hundred MiB
// that it rewrites many times over. At Go's default (GOGC 100) the
// collector marks that heap every time the program allocates as much
// again. With the tasks in persistent tries, 400 took 16% less wall time
// than 100, measured interleaved (docs/BENCHMARKS.md "The collector for
// batch work"). With the tasks in txn's multi-version table the program
// allocates a third less, and a superseded task version lives until the
// collector has freed the states that could read it, so a rarer
// collection also keeps more of them alive: 400 then doubled the peak
// heap for no gain, and 150 was as fast as 200 and 250 and faster than
// 100 ("The tasks in a multi-version table"). The heap may grow to 2.5
// times the live one, bounded by a soft limit of half the memory the
// process may use (the machine's, or its container's cgroup limit when
// lower), beyond which the collector runs as often as it must.
// This is what a deployment of a JVM simulator does with -Xmx, and what
// Go's own guide advises for a throughput job with memory to spare.
//
// Each of GOGC and GOMEMLIMIT in the environment wins over its own
// setting here: GOGC=100 gives Go's default percentage back (the soft limit
// stays, unless GOMEMLIMIT is set too), GOMEMLIMIT another bound.
const (
	batchGOGC     = 150
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
