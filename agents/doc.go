// Package agents holds omega's node agents: the components that run a
// cell's tasks on its machines and report what becomes of them through the
// client library (DESIGN.md "Agents").
//
// SimFleet is the simulated fleet: every machine of a cell behind one
// client, driven by a virtual-time engine. It learns about placements the
// way an agent does — by watching the cell — finishes tasks after their
// duration, fails machines at a configured rate and repairs them, and
// reports all of it in one status transaction per tick. Its decision code
// reads no clock, starts no goroutine and never sleeps: time is passed in,
// randomness is injected, and the same history gives the same transactions.
package agents
