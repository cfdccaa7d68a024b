package agents

import (
	"bytes"
	"slices"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Restart backoff, as Kubernetes' kubelet does it: the first restart after
// the task's restart delay, each next one after twice the last, at most
// MaxBackoff; a run that lasted ResetBackoffAfter starts the doubling over.
const (
	MaxBackoff        = 5 * time.Minute
	ResetBackoffAfter = 10 * time.Minute
)

// Verdict is what a Supervisor decides when a task's process ends.
type Verdict struct {
	// Final: the task ends in the cell with State (SUCCEEDED or FAILED).
	// Otherwise the process is restarted at RestartAt.
	Final     bool
	State     omegav1.TaskState
	RestartAt int64
}

// ActionKind is what a Supervisor asks of the live side.
type ActionKind uint8

const (
	// ActRestart: run the task's process again (Supervisor.Restarted says
	// it ran).
	ActRestart ActionKind = iota + 1
	// ActProbe: probe the task's health (Supervisor.Probed takes the
	// answer).
	ActProbe
)

// Action is one thing due.
type Action struct {
	Kind ActionKind
	Task uuid.UUID
	// Probe names a probe (ActProbe): its answer goes back with it, so an
	// answer to a probe of an earlier run is told apart.
	Probe uint64
}

type supervised struct {
	policy    omegav1.RestartPolicy
	check     *omegav1.HealthCheck
	delay     int64  // first restart's delay, ns
	backoff   int64  // the next restart's delay, ns
	runStart  int64  // when the current process started
	restartAt int64  // > 0: waiting to restart
	nextProbe int64  // > 0: a probe is due then
	probing   bool   // a probe is out
	probe     uint64 // the probe out (its number)
	failures  int32  // probe failures in a row
	unhealthy bool   // stopped for failing its checks: its end is a failure
	run       omegav1.TaskRun
	dirty     bool // run changed since the last report
}

// Supervisor decides, for the tasks an agent runs, what follows when a
// process ends (the task's restart policy, with backoff) and when its health
// is probed (period, threshold), and keeps the report on running each task
// (omegav1.TaskRun: restarts, last exit, health, address). It is decision
// code: it reads no clock and starts no goroutine — times come in with the
// calls, and the live side (an executor, the probes) does what it asks.
type Supervisor struct {
	tasks  map[uuid.UUID]*supervised
	probes uint64 // probes handed out
}

// NewSupervisor makes an empty supervisor.
func NewSupervisor() *Supervisor { return &Supervisor{tasks: map[uuid.UUID]*supervised{}} }

// Begin supervises a placement whose process started at now with the given
// address. A task the cell already has a run report for (an agent that
// restarted and adopted it) keeps its restart count. Begin of a task
// already supervised keeps what is known (a re-list tells placements
// again).
func (s *Supervisor) Begin(t *txn.Task, address string, now int64) {
	if _, ok := s.tasks[t.UID]; ok {
		return
	}
	sv := &supervised{
		policy:   t.RestartPolicy(),
		check:    t.HealthCheck(),
		delay:    t.RestartDelayMillis() * int64(time.Millisecond),
		runStart: now,
	}
	sv.backoff = sv.delay
	if r := t.Run(); r != nil {
		// Adopted by an agent that restarted: the same process, so the
		// count, the last exit and the health last seen stand until the
		// next probe.
		sv.run.Restarts, sv.run.LastExit, sv.run.Health = r.GetRestarts(), r.GetLastExit(), r.GetHealth()
	}
	sv.run.Address = address
	sv.dirty = !proto.Equal(&sv.run, t.Run())
	s.startProbes(sv, now)
	s.tasks[t.UID] = sv
}

func (s *Supervisor) startProbes(sv *supervised, now int64) {
	sv.failures, sv.probing, sv.unhealthy = 0, false, false
	sv.nextProbe = 0
	if sv.check != nil {
		sv.nextProbe = now + sv.check.GetInitialDelayMillis()*int64(time.Millisecond)
		if sv.nextProbe <= 0 {
			sv.nextProbe = 1
		}
	}
}

// End forgets a task (its placement ended).
func (s *Supervisor) End(uid uuid.UUID) { delete(s.tasks, uid) }

// Supervised reports whether uid is supervised.
func (s *Supervisor) Supervised(uid uuid.UUID) bool { _, ok := s.tasks[uid]; return ok }

// Exited decides what follows the end of a task's process at `at`. ok is
// false for a task not supervised, or one already waiting to restart (an
// exit told twice).
func (s *Supervisor) Exited(uid uuid.UUID, st *omegav1.ExitStatus, at int64) (v Verdict, ok bool) {
	sv, ok := s.tasks[uid]
	if !ok || sv.restartAt > 0 {
		return Verdict{}, false
	}
	failed := sv.unhealthy || st.GetCode() != 0 || st.GetSignal() != "" || st.GetError() != ""
	sv.run.LastExit = st
	sv.run.Health = omegav1.HealthState_HEALTH_STATE_UNSPECIFIED
	sv.nextProbe, sv.probing = 0, false
	sv.dirty = true
	restart := sv.policy == omegav1.RestartPolicy_RESTART_POLICY_ALWAYS ||
		(sv.policy == omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE && failed)
	if !restart {
		state := omegav1.TaskState_TASK_STATE_SUCCEEDED
		if failed {
			state = omegav1.TaskState_TASK_STATE_FAILED
		}
		return Verdict{Final: true, State: state}, true
	}
	if at-sv.runStart >= int64(ResetBackoffAfter) {
		sv.backoff = sv.delay
	}
	sv.restartAt = at + sv.backoff
	if sv.restartAt <= 0 {
		sv.restartAt = 1
	}
	sv.backoff = min(2*sv.backoff, int64(MaxBackoff))
	return Verdict{RestartAt: sv.restartAt}, true
}

// Restarted says the task's process ran again at now.
func (s *Supervisor) Restarted(uid uuid.UUID, now int64) {
	sv, ok := s.tasks[uid]
	if !ok {
		return
	}
	sv.restartAt, sv.runStart = 0, now
	sv.run.Restarts++
	sv.dirty = true
	s.startProbes(sv, now)
}

// Probed takes the answer at `at` of probe (Action.Probe). kill is true
// when the task just became unhealthy: its process is to be stopped (with
// its grace period), and its end counts as a failure. The answer to a
// probe that is not the one out (an earlier run's) is dropped.
func (s *Supervisor) Probed(uid uuid.UUID, probe uint64, healthy bool, at int64) (kill bool) {
	sv, ok := s.tasks[uid]
	if !ok || !sv.probing || sv.probe != probe {
		return false
	}
	sv.probing = false
	if sv.unhealthy || sv.restartAt > 0 || sv.check == nil {
		return false
	}
	sv.nextProbe = at + periodOf(sv.check)
	if healthy {
		sv.failures = 0
		if sv.run.Health != omegav1.HealthState_HEALTH_STATE_HEALTHY {
			sv.run.Health, sv.dirty = omegav1.HealthState_HEALTH_STATE_HEALTHY, true
		}
		return false
	}
	sv.failures++
	threshold := sv.check.GetFailureThreshold()
	if threshold <= 0 {
		threshold = txn.DefaultFailureThreshold
	}
	if sv.failures < threshold {
		return false
	}
	sv.unhealthy, sv.nextProbe = true, 0
	sv.run.Health, sv.dirty = omegav1.HealthState_HEALTH_STATE_UNHEALTHY, true
	return true
}

func periodOf(hc *omegav1.HealthCheck) int64 {
	if p := hc.GetPeriodMillis(); p > 0 {
		return p * int64(time.Millisecond)
	}
	return txn.DefaultProbePeriodMillis * int64(time.Millisecond)
}

// ProbeTimeout is how long a probe of hc may take.
func ProbeTimeout(hc *omegav1.HealthCheck) time.Duration {
	if t := hc.GetTimeoutMillis(); t > 0 {
		return time.Duration(t) * time.Millisecond
	}
	return txn.DefaultProbeTimeoutMillis * time.Millisecond
}

// Due appends what is due at now — restarts, then probes, each in uid order
// — and marks the probes out.
func (s *Supervisor) Due(now int64, into []Action) []Action {
	start := len(into)
	for u, sv := range s.tasks {
		switch {
		case sv.restartAt > 0 && sv.restartAt <= now:
			into = append(into, Action{Kind: ActRestart, Task: u})
		case sv.nextProbe > 0 && sv.nextProbe <= now && !sv.probing:
			s.probes++
			sv.probe = s.probes
			into = append(into, Action{Kind: ActProbe, Task: u, Probe: sv.probe})
			sv.probing = true
		}
	}
	due := into[start:]
	sortActions(due)
	return into
}

func sortActions(a []Action) {
	slices.SortFunc(a, func(x, y Action) int {
		if x.Kind != y.Kind {
			return int(x.Kind) - int(y.Kind)
		}
		return bytes.Compare(x.Task[:], y.Task[:])
	})
}

// Next is the earliest time something is due; ok is false when nothing is.
func (s *Supervisor) Next() (at int64, ok bool) {
	for _, sv := range s.tasks {
		t := sv.restartAt
		if t == 0 && !sv.probing { // a probe out waits for its answer
			t = sv.nextProbe
		}
		if t > 0 && (!ok || t < at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// Dirty appends the tasks whose run report changed since it was last
// reported, in uid order.
func (s *Supervisor) Dirty(into []uuid.UUID) []uuid.UUID {
	start := len(into)
	for u, sv := range s.tasks {
		if sv.dirty {
			into = append(into, u)
		}
	}
	sortUIDs(into[start:])
	return into
}

// Report returns the run report of uid as it stands (a new message: the
// caller may keep it) and marks it reported; Unreported marks it again
// after a report that did not commit.
func (s *Supervisor) Report(uid uuid.UUID) *omegav1.TaskRun {
	sv, ok := s.tasks[uid]
	if !ok {
		return nil
	}
	sv.dirty = false
	return proto.CloneOf(&sv.run)
}

// Unreported marks uid's run as not reported yet.
func (s *Supervisor) Unreported(uid uuid.UUID) {
	if sv, ok := s.tasks[uid]; ok {
		sv.dirty = true
	}
}

// Address is the address the task was given.
func (s *Supervisor) Address(uid uuid.UUID) string {
	if sv, ok := s.tasks[uid]; ok {
		return sv.run.Address
	}
	return ""
}

// Check is the task's health check (nil: none).
func (s *Supervisor) Check(uid uuid.UUID) *omegav1.HealthCheck {
	if sv, ok := s.tasks[uid]; ok {
		return sv.check
	}
	return nil
}

// Tasks appends the supervised tasks, in uid order.
func (s *Supervisor) Tasks(into []uuid.UUID) []uuid.UUID {
	start := len(into)
	for u := range s.tasks {
		into = append(into, u)
	}
	sortUIDs(into[start:])
	return into
}

func sortUIDs(d []uuid.UUID) {
	slices.SortFunc(d, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
}

// Len is how many tasks are supervised.
func (s *Supervisor) Len() int { return len(s.tasks) }
