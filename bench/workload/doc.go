// Package workload makes the bench's workloads: a reader of the Google 2011
// cluster trace (clusterdata-2011-2), the sampling distributions the
// synthetic cells draw from, the fit of those distributions to the genuine
// trace excerpt in ../shared/traces, and the generator of the paper's
// lightweight setup (machines, a pre-fill of long-running service jobs and a
// time-ordered stream of batch, service and MapReduce job arrivals).
//
// Everything here is deterministic: distributions are sampled from an
// injected *math/rand/v2.Rand, the generator seeds its own streams from
// Config.Seed, and object ids come from an injected entropy source. Nothing
// reads a clock. The package depends on the API schema only, not on the
// store, the schedulers or the simulation engine.
//
// The fitted figures live in fitted.go as Go literals; they are never
// re-derived at run time. TestFittedLiteralsMatchTrace re-derives them from
// the trace excerpt and fails if the literals drift (run it with -update to
// rewrite fitted.go). docs/WORKLOADS.md explains every figure.
package workload
