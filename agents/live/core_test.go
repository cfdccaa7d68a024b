package live

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

const (
	runningSt   = omegav1.TaskState_TASK_STATE_RUNNING
	succeededSt = omegav1.TaskState_TASK_STATE_SUCCEEDED
	failedSt    = omegav1.TaskState_TASK_STATE_FAILED
	pendingSt   = omegav1.TaskState_TASK_STATE_PENDING
)

// wantLines fails unless what f writes is want, line by line.
func wantLines(t *testing.T, what string, f func(b *strings.Builder), want ...string) {
	t.Helper()
	var b strings.Builder
	f(&b)
	got := strings.TrimSuffix(b.String(), "\n")
	if w := strings.Join(want, "\n"); got != w {
		t.Fatalf("%s:\n%s\nwant\n%s", what, got, w)
	}
}

func wantState(t *testing.T, h *harness, u uuid.UUID, state omegav1.TaskState, msg string) {
	t.Helper()
	tk := h.task(u)
	if tk.State != state || tk.Message() != msg {
		t.Fatalf("%s: %s %q, want %s %q", h.name(u), stateName(tk.State), tk.Message(), stateName(state), msg)
	}
}

// A placement starts a process with an address of its own from the pool,
// and the next step reports it RUNNING with that address.
func TestPlacedTaskStartsAndIsReportedRunning(t *testing.T) {
	h := newHarness(t)
	h.at(time.Second)
	web := h.place("web", taskOpts{})
	h.step()
	wantLines(t, "executor", h.events, "exec run web at 10.1.0.1")
	wantLines(t, "reports", h.reports, `report web RUNNING "started"`)
	wantState(t, h, web, runningSt, "started")
	if r := h.task(web).Run(); r.GetAddress() != "10.1.0.1" || r.GetRestarts() != 0 {
		t.Fatalf("run report %v", r)
	}
	// Nothing changed: a step reports nothing more.
	h.at(2 * time.Second)
	h.step()
	wantLines(t, "reports after a quiet step", h.reports)
	if h.core.Reports().Txns != 1 {
		t.Fatalf("status transactions %+v, want 1", h.core.Reports())
	}
}

// A process that ends ends its task: exit 0 SUCCEEDED, anything else
// FAILED, with how it ended; the placement's end then stops the process
// (already ended) and frees its address.
func TestExitReportsSucceededOrFailed(t *testing.T) {
	h := newHarness(t)
	ok, bad := h.place("ok", taskOpts{}), h.place("bad", taskOpts{})
	h.step()
	h.reports(&strings.Builder{})
	h.at(5 * time.Second)
	h.exit(ok, nil)
	h.exit(bad, &omegav1.ExitStatus{Code: 3})
	h.step()
	wantLines(t, "reports", h.reports,
		`report ok SUCCEEDED "exit status 0"`,
		`report bad FAILED "exit status 3"`)
	wantState(t, h, ok, succeededSt, "exit status 0")
	wantState(t, h, bad, failedSt, "exit status 3")
	if e := h.task(bad).Run().GetLastExit(); e.GetCode() != 3 {
		t.Fatalf("bad's run's last exit %v, want exit status 3", e)
	}
	h.x.Events()
	h.step() // the watch tells the ends: the placements go
	wantLines(t, "executor", h.events, "exec stop ok", "exec stop bad")
	if h.core.Supervised(ok) || h.core.Supervised(bad) || h.core.Tracking(ok) {
		t.Fatal("an ended task is still followed")
	}
	h.place("next", taskOpts{})
	h.step()
	wantLines(t, "executor", h.events, "exec run next at 10.1.0.3") // cyclic: a released address is reused late
}

// ON_FAILURE restarts a failed process after the task's restart delay,
// doubling it at each restart; the run report says so each time, and the
// task stays RUNNING.
func TestOnFailureRestartsWithDoublingBackoff(t *testing.T) {
	h := newHarness(t)
	u := h.place("flaky", onFailure(time.Second))
	h.step()
	h.x.Events()
	h.reports(&strings.Builder{})
	fail := &omegav1.ExitStatus{Code: 1}
	at := 10 * time.Second
	for i, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		h.at(at)
		h.exit(u, fail)
		h.step()
		if i == 0 {
			wantLines(t, "first exit", h.reports, `report flaky RUNNING "exited (exit status 1): restarting"`)
		} else {
			h.reports(&strings.Builder{})
		}
		h.at(at + backoff - time.Millisecond)
		h.step()
		wantLines(t, "before the backoff", h.events)
		h.at(at + backoff)
		h.step()
		wantLines(t, "at the backoff", h.events, "exec restart flaky at 10.1.0.1")
		wantState(t, h, u, runningSt, "restarted "+itoa(i+1)+" times, last exit: exit status 1")
		if r := h.task(u).Run(); r.GetRestarts() != int32(i+1) || r.GetLastExit().GetCode() != 1 {
			t.Fatalf("restart %d: run %v", i+1, r)
		}
		at += backoff + time.Minute // each run short of the backoff's reset
	}
	// A clean exit ends it for good.
	h.at(at)
	h.exit(u, nil)
	h.step()
	wantState(t, h, u, succeededSt, "exit status 0")
}

func itoa(n int) string { return strconv.Itoa(n) }

// A probe that fails threshold times in a row kills the process, and its
// end is a failure whatever its exit status: NEVER ends the task FAILED,
// ON_FAILURE restarts it.
func TestUnhealthyTaskIsKilledAndItsEndIsAFailure(t *testing.T) {
	for _, tc := range []struct {
		policy omegav1.RestartPolicy
		want   string
	}{
		{omegav1.RestartPolicy_RESTART_POLICY_NEVER, `report sick FAILED "exit status 0"`},
		{omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE, `report sick RUNNING "exited (exit status 0): restarting"`},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			h := newHarness(t)
			u := h.place("sick", taskOpts{policy: tc.policy, check: execCheck(time.Second, 2)})
			if ps := h.step(); len(ps) != 1 || ps[0].Task != u || ps[0].Check.GetFailureThreshold() != 2 {
				t.Fatalf("first step's probes %+v, want one of sick", ps)
			}
			h.reports(&strings.Builder{})
			h.x.Events()
			// Healthy, then two failures.
			h.at(100 * time.Millisecond)
			h.answer(u, true)
			if ps := h.step(); len(ps) != 0 {
				t.Fatalf("a probe before the period: %+v", ps)
			}
			wantLines(t, "healthy", h.reports, `report sick RUNNING "running"`)
			for i, at := range []time.Duration{1100 * time.Millisecond, 2100 * time.Millisecond} {
				h.at(at)
				if ps := h.step(); len(ps) != 1 {
					t.Fatalf("probe %d at %v: %+v", i+2, at, ps)
				}
				h.answer(u, false)
			}
			h.step()
			wantLines(t, "unhealthy", h.events, "exec kill sick")
			wantLines(t, "unhealthy", h.reports, `report sick RUNNING "unhealthy: stopping"`)
			if p, _ := h.x.Proc(u); !p.Running || !p.Killed {
				t.Fatalf("process %+v, want running and killed", p)
			}
			// It ends cleanly in its grace period: still a failure.
			h.at(3 * time.Second)
			h.exit(u, nil)
			h.step()
			wantLines(t, "its end", h.reports, tc.want)
		})
	}
}

// A report that conflicts (the task moved on between the agent's poll and
// its commit) is not lost: it goes again, at the task's new version, after
// the next poll.
func TestConflictingReportIsSentAgainAfterThePoll(t *testing.T) {
	h := newHarness(t)
	u := h.place("job", taskOpts{})
	h.step()
	h.reports(&strings.Builder{})
	h.at(time.Second)
	h.exit(u, nil)
	h.raceNext(u)
	h.step()
	wantLines(t, "the raced report", h.reports, `report job SUCCEEDED "exit status 0": TASK_CHANGED`)
	wantState(t, h, u, runningSt, "test: raced")
	h.at(2 * time.Second)
	h.step()
	wantLines(t, "again", h.reports, `report job SUCCEEDED "exit status 0"`)
	wantState(t, h, u, succeededSt, "exit status 0")
	if c := h.core.Reports(); c.Txns != 3 || c.Conflicts != 1 {
		t.Fatalf("counters %+v, want 3 transactions, 1 conflict", c)
	}
}

// A report whose commit fails (the cell unreachable) is kept, and sent
// once the cell answers again (a RUNNING report taken back goes as the
// run's report: "running", no longer "started").
func TestFailedCommitIsSentAgain(t *testing.T) {
	h := newHarness(t)
	u := h.place("job", taskOpts{})
	h.setDown(true)
	h.step()
	h.at(time.Second)
	h.step()
	h.setDown(false)
	h.at(2 * time.Second)
	h.step()
	wantLines(t, "reports", h.reports,
		`report job RUNNING "started": failed (test: the cell is unreachable: store unavailable)`,
		`report job RUNNING "running": failed (test: the cell is unreachable: store unavailable)`,
		`report job RUNNING "running"`)
	wantState(t, h, u, runningSt, "running")
}

// A task that leaves the machine (evicted) has its process stopped, and
// nothing about it is reported — not even an exit seen in the same step.
func TestTaskThatLeftIsStoppedAndNotReported(t *testing.T) {
	h := newHarness(t)
	u, stay := h.place("gone", taskOpts{}), h.place("stay", taskOpts{})
	h.step()
	h.x.Events()
	h.reports(&strings.Builder{})
	h.at(time.Second)
	h.evict(u)
	h.step()
	wantLines(t, "executor", h.events, "exec stop gone (running: signalled)")
	wantLines(t, "reports", h.reports)
	wantState(t, h, u, pendingSt, "test: evicted")
	// Its exit, seen as the cell ends the placement: dropped.
	h.at(2 * time.Second)
	h.exit(stay, nil)
	h.evict(stay)
	h.step()
	wantLines(t, "reports", h.reports)
	wantState(t, h, stay, pendingSt, "test: evicted")
	if h.x.Running() != 0 || len(h.x.Tasks()) != 0 {
		t.Fatalf("processes left: %v", h.x.Tasks())
	}
}

// A task whose restart finds nothing to run ends FAILED, reported once,
// and is not asked to restart again.
func TestTaskThatCannotRestartFailsOnce(t *testing.T) {
	h := newHarness(t)
	u := h.place("lost", taskOpts{policy: omegav1.RestartPolicy_RESTART_POLICY_ALWAYS, delay: time.Second})
	h.step()
	h.reports(&strings.Builder{})
	h.x.Events()
	h.at(time.Second)
	h.exit(u, nil)
	h.x.RefuseRestart(u)
	h.step()
	h.at(2 * time.Second)
	h.step()
	wantLines(t, "executor", h.events, "exec refuse lost")
	wantLines(t, "reports", h.reports,
		`report lost RUNNING "exited (exit status 0): restarting"`,
		`report lost FAILED "could not be restarted"`)
	wantState(t, h, u, failedSt, MessageNotRestarted)
	for _, at := range []time.Duration{3 * time.Second, 10 * time.Second} {
		h.at(at)
		h.step()
	}
	wantLines(t, "executor after", h.events, "exec stop lost")
	wantLines(t, "reports after", h.reports)
}

// A process that could not start (the process executor reports it as an
// exit with the reason: no such command, say) fails its task under NEVER,
// with the reason as its message, and is started again under ON_FAILURE.
func TestProcessThatCouldNotStart(t *testing.T) {
	h := newHarness(t)
	once, again := h.place("once", taskOpts{}), h.place("again", onFailure(time.Second))
	h.step()
	h.x.Events()
	h.reports(&strings.Builder{})
	h.at(time.Second)
	cannot := &omegav1.ExitStatus{Code: -1, Error: "could not start: exec: \"/nonexistent\": no such file"}
	h.exit(once, cannot)
	h.exit(again, cannot)
	h.step()
	wantState(t, h, once, failedSt, `could not start: exec: "/nonexistent": no such file`)
	if e := h.task(once).Run().GetLastExit(); e.GetError() != cannot.Error {
		t.Fatalf("once's last exit %v, want the reason", e)
	}
	wantState(t, h, again, runningSt, `exited (could not start: exec: "/nonexistent": no such file): restarting`)
	h.at(2 * time.Second)
	h.step()
	wantLines(t, "at the restart delay", h.events, "exec stop once", "exec restart again at 10.1.0.2")
}
