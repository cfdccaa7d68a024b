// Package live is the node agent's runtime: the loop a machine's agent
// process runs, apart from the command line that configures it (as etcd
// keeps its raft core apart from the server that drives it, and Nomad its
// client apart from its CLI).
//
// Its core (Core) is decision code: Step(ctx, now, answers) does one pass
// of the agent — take in the cell's watch, start and stop processes, take
// the health probes' answers, restart by policy, report to the cell — and
// returns the probes to run; it reads no clock and starts no goroutine.
// The processes are behind Executor, which the process executor
// (agents/process) implements for real and MemExecutor in memory, in
// virtual time, for tests. Register is the machine's registration. Run is
// the live code around them: the agent's directory, the client, the
// gossip member (package membership), the log endpoint, the wall clock, the
// ticker and the probes' goroutines.
package live
