package schedulers

import (
	"errors"
	"fmt"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
)

// RunnerConfig configures a Runner. Start from DefaultRunnerConfig.
type RunnerConfig struct {
	// MaxAttempts: a job is abandoned after this many attempts. Default
	// 1,000 (the Omega paper's bound).
	MaxAttempts int
	// MaxAttemptsNoPlacement: a job is abandoned after this many attempts
	// if none of them placed a task. Default 100 (the paper's bound).
	MaxAttemptsNoPlacement int
	// RetryDelay is how long a job that still has tasks no machine could
	// take waits before its next attempt. A job whose claims merely
	// conflicted is retried at once, on a fresh view. Default 1s.
	RetryDelay time.Duration
	// TJob and TTask model the decision time of an attempt:
	// TJob + TTask × tasks considered. Defaults 0.1s and 5ms (the paper's).
	TJob, TTask time.Duration
	// ByKind, if set, gives jobs of the kinds it names their own decision
	// times instead (a multi-path monolithic scheduler's).
	ByKind map[omegav1.JobKind]DecisionTime
	// Measure, if set, replaces the model: an attempt's decision time is
	// what Measure advanced by while the scheduler decided (the simulator
	// passes the thread's CPU time). The Runner itself reads no clock.
	// Results then depend on the machine, so they are not reproducible.
	Measure func() time.Duration
	// Machines, if set, is a MachineIndex the runners of one process share
	// (Env.Machines): only for runners driven one at a time on one line of
	// views, as the simulation's are. nil: each scheduler keeps its own.
	Machines *MachineIndex
	// Reasons: after an attempt that left tasks without a machine, write
	// why on the job (JobStatus.waiting, see Explain), when the reason
	// differs from the one the job has; a job given up on says it in its
	// verdict. A live scheduler sets it. The simulation leaves it off: its
	// commits, and so its outputs, are the paper's model's.
	Reasons bool
}

// DecisionTime is a decision-time model: TJob + TTask × tasks considered.
type DecisionTime struct{ TJob, TTask time.Duration }

// DefaultRunnerConfig returns the paper's defaults.
func DefaultRunnerConfig() RunnerConfig {
	return RunnerConfig{MaxAttempts: 1000, MaxAttemptsNoPlacement: 100, RetryDelay: time.Second, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond}
}

// Validate reports the first invalid field.
func (c RunnerConfig) Validate() error {
	switch {
	case c.MaxAttempts < 1 || c.MaxAttemptsNoPlacement < 1:
		return errors.New("runner config: MaxAttempts and MaxAttemptsNoPlacement must be at least 1")
	case c.RetryDelay < 0 || c.TJob < 0 || c.TTask < 0:
		return errors.New("runner config: RetryDelay, TJob and TTask must not be negative")
	}
	for kind, d := range c.ByKind {
		if d.TJob < 0 || d.TTask < 0 {
			return fmt.Errorf("runner config: the decision time of %s jobs is negative", kind)
		}
	}
	return nil
}

// retryPolicy is the paper's per-job bounds as the client's retry policy:
// MaxAttemptsNoPlacement attempts without a placement, MaxAttempts in all,
// conflicts retried at once (the decision time is the pause), and
// RetryDelay before retrying tasks that found no machine.
func (c RunnerConfig) retryPolicy() client.RetryPolicy {
	return client.RetryPolicy{MaxAttempts: c.MaxAttemptsNoPlacement, MaxTotal: c.MaxAttempts, WaitLeft: c.RetryDelay}
}
