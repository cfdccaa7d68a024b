// Package agents holds omega's node agents: the components that run a
// cell's tasks on its machines and report what becomes of them through the
// client library (DESIGN.md "Agents").
//
// The agent core is in parts that a live agent and the simulation share:
//   - Tracker follows which tasks are placed on the agent's machines, from
//     a view and the watch after it (re-listing when the watch falls
//     behind), and tells its owner through TrackerEvents;
//   - Executor runs the placements and says when they end (SimExecutor:
//     after the task's duration in virtual time; the live agent's process
//     executor is agents/process, behind agents/live's wider seam);
//   - Supervisor decides what follows a process's exit (restarts by policy,
//     with backoff) and when a health probe is due;
//   - Membership says which machines died and came back (SimMembership: a
//     Poisson process of failures and their repairs; in the live cell the
//     server follows the gossip membership, package membership, and writes
//     a dead agent's machine DOWN itself);
//   - Reporter batches status reports into one incremental transaction and
//     hands back each report's outcome beside what it stood for;
//   - MachineDown writes a dead machine's transaction (DOWN, its tasks
//     LOST) for whichever component learns of the death.
//
// SimFleet is the simulated fleet assembled from them: every machine of a
// cell behind one client, driven by a virtual-time engine. The live agent
// (one machine, real processes) is agents/live, over the same Tracker,
// Supervisor and Reporter. The package's
// code reads no clock, starts no goroutine and never sleeps: time is
// passed in, randomness is injected, and the same history gives the same
// transactions (the lint in internal/lint holds it to that).
package agents
