package agents

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// FleetConfig configures a SimFleet. Start from DefaultFleetConfig; zero
// Tick and RepairTime mean their defaults.
type FleetConfig struct {
	// Tick is the reporting period: everything that fell due since the last
	// tick goes to the store in one status transaction, as a real agent
	// batches its reports. The engine calls SimFleet.Tick at this period (or
	// at NextTick when it skips idle ticks). Default 1s (DESIGN.md "The
	// bench"): fine enough that a task's end is seen within a second, coarse
	// enough that a cell finishing thousands of tasks a second still writes
	// one transaction a second.
	Tick time.Duration
	// FailuresPerDay is how many machines fail per day in the whole cell, as
	// a Poisson process in virtual time; each failure picks a machine
	// uniformly among those UP (and not already held DOWN by the fleet). A
	// failed machine goes DOWN and its tasks become LOST in one transaction.
	// Default 0 (no failures): the
	// paper's experiments measure scheduling in a healthy cell; the bench's
	// --machine-failures-per-day sets it.
	FailuresPerDay float64
	// RepairTime is how long a failed machine stays DOWN before the fleet
	// brings it back UP (at the first tick at or after its failure tick plus
	// RepairTime). Default 1h: a reboot or a disk swap, short against a
	// simulated day so capacity lost to failures stays small.
	RepairTime time.Duration
	// Rand draws the failure times and picks the machines that fail.
	// Required (seeded by the caller) when FailuresPerDay > 0; unused
	// otherwise.
	Rand *rand.Rand
	// NewExecutor, if set, makes the fleet's executor for the placements
	// the tracker follows instead of a SimExecutor (omega replay's, which
	// ends each task when the trace says its run ended).
	NewExecutor func(*Tracker) Executor
	// Start is the virtual time the failure process starts from. Default
	// (zero): the time of the first Tick.
	Start time.Time
}

// DefaultFleetConfig returns the defaults: 1s ticks, no failures, 1h
// repairs. Set Rand before turning failures on.
func DefaultFleetConfig() FleetConfig {
	return FleetConfig{Tick: time.Second, RepairTime: time.Hour}
}

// withDefaults fills the zero fields that have defaults.
func (c FleetConfig) withDefaults() FleetConfig {
	d := DefaultFleetConfig()
	if c.Tick == 0 {
		c.Tick = d.Tick
	}
	if c.RepairTime == 0 {
		c.RepairTime = d.RepairTime
	}
	return c
}

// Validate reports the first invalid field. Zero Tick and RepairTime are
// valid: they mean the defaults.
func (c FleetConfig) Validate() error {
	switch {
	case c.Tick < 0:
		return fmt.Errorf("fleet config: Tick %v is negative", c.Tick)
	case math.IsNaN(c.FailuresPerDay) || math.IsInf(c.FailuresPerDay, 0) || c.FailuresPerDay < 0:
		return fmt.Errorf("fleet config: FailuresPerDay %v must be a finite number ≥ 0", c.FailuresPerDay)
	case c.RepairTime < 0:
		return fmt.Errorf("fleet config: RepairTime %v is negative", c.RepairTime)
	case c.FailuresPerDay > 0 && c.Rand == nil:
		return errors.New("fleet config: Rand is required when FailuresPerDay > 0 (inject a seeded source)")
	}
	return nil
}
