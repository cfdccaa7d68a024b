package txn

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// What the live cell's agents need beside a task's resources: how it runs
// (restart policy, health check, grace period, working directory) and what
// its agent reports about running it (TaskRun). Evaluate checks both; the
// simulated fleet uses neither.

// Lifecycle defaults, as an agent applies them to a spec that leaves them
// out.
const (
	DefaultGraceMillis        = 10_000
	DefaultRestartDelayMillis = 1_000
	DefaultProbePeriodMillis  = 10_000
	DefaultProbeTimeoutMillis = 1_000
	DefaultFailureThreshold   = 3
)

// ValidateLifecycle checks the lifecycle fields of a task template or spec:
// what names the object in errors.
func ValidateLifecycle(what string, policy omegav1.RestartPolicy, hc *omegav1.HealthCheck, graceMillis, restartDelayMillis int64, cmd *omegav1.Command) error {
	if _, ok := omegav1.RestartPolicy_name[int32(policy)]; !ok {
		return fmt.Errorf("%w: %s restart_policy %d is not a RestartPolicy", ErrInvalid, what, policy)
	}
	if graceMillis < 0 || restartDelayMillis < 0 {
		return fmt.Errorf("%w: %s grace_period_millis and restart_delay_millis may not be negative", ErrInvalid, what)
	}
	if wd := cmd.GetWorkingDir(); wd != "" {
		if path.IsAbs(wd) || strings.HasPrefix(path.Clean(wd), "..") {
			return fmt.Errorf("%w: %s command.working_dir %s: want a path inside the task's directory (relative, no ..)", ErrInvalid, what, Quote(wd))
		}
	}
	if hc == nil {
		return nil
	}
	switch p := hc.GetProbe().(type) {
	case *omegav1.HealthCheck_Exec:
		if p.Exec.GetPath() == "" {
			return fmt.Errorf("%w: %s health_check.exec.path is empty", ErrInvalid, what)
		}
	case *omegav1.HealthCheck_Http:
		if port := p.Http.GetPort(); port < 1 || port > 65535 {
			return fmt.Errorf("%w: %s health_check.http.port %d: want 1 to 65535", ErrInvalid, what, port)
		}
	default:
		return fmt.Errorf("%w: %s health_check has no probe (exec or http)", ErrInvalid, what)
	}
	if hc.GetPeriodMillis() < 0 || hc.GetTimeoutMillis() < 0 || hc.GetInitialDelayMillis() < 0 || hc.GetFailureThreshold() < 0 {
		return fmt.Errorf("%w: %s health_check: periods, delays and thresholds may not be negative", ErrInvalid, what)
	}
	return nil
}

// hasLifecycle reports whether any lifecycle field is set (most tasks, and
// every simulated one, leave them all out: nothing to check).
func hasLifecycle(policy omegav1.RestartPolicy, hc *omegav1.HealthCheck, graceMillis, restartDelayMillis int64, cmd *omegav1.Command) bool {
	return policy != 0 || hc != nil || graceMillis != 0 || restartDelayMillis != 0 || cmd.GetWorkingDir() != ""
}

// validateRun checks an agent's report on running a task.
func validateRun(r *omegav1.TaskRun) error {
	if r == nil {
		return nil
	}
	if r.GetRestarts() < 0 {
		return fmt.Errorf("restarts %d is negative", r.GetRestarts())
	}
	if _, ok := omegav1.HealthState_name[int32(r.GetHealth())]; !ok {
		return fmt.Errorf("health %d is not a HealthState", r.GetHealth())
	}
	if a := r.GetAddress(); a != "" {
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("address %s is not an IP address", Quote(a))
		}
	}
	if e := r.GetLastExit(); e != nil && (len(e.GetSignal()) > 64 || len(e.GetError()) > 1024) {
		return fmt.Errorf("last_exit: signal or error too long (64 and 1024 bytes at most)")
	}
	return nil
}

// WithRun returns a SetStatus carrying an agent's report on running the
// task, which replaces the task's status.run.
func (op Op) WithRun(r *omegav1.TaskRun) Op {
	op.Run = r
	return op
}

// Run is the agent's report on running the task on its current placement
// (nil: none yet).
func (t *Task) Run() *omegav1.TaskRun {
	if t.rare == nil {
		return nil
	}
	return t.rare.report
}

// RestartPolicy is the task's restart policy.
func (t *Task) RestartPolicy() omegav1.RestartPolicy { return t.Spec.GetRestartPolicy() }

// HealthCheck is the task's health check (nil: none).
func (t *Task) HealthCheck() *omegav1.HealthCheck { return t.Spec.GetHealthCheck() }

// GracePeriodMillis is the spec's grace period as written (0: the agent's
// default).
func (t *Task) GracePeriodMillis() int64 { return t.Spec.GetGracePeriodMillis() }

// GraceMillis is how long the task has between SIGTERM and SIGKILL.
func (t *Task) GraceMillis() int64 {
	if g := t.Spec.GetGracePeriodMillis(); g > 0 {
		return g
	}
	return DefaultGraceMillis
}

// RestartDelayMillis is the first restart's delay.
func (t *Task) RestartDelayMillis() int64 {
	if d := t.Spec.GetRestartDelayMillis(); d > 0 {
		return d
	}
	return DefaultRestartDelayMillis
}
