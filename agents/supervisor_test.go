package agents_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

const sec = int64(time.Second)

func supTask(uid uuid.UUID, policy omegav1.RestartPolicy, hc *omegav1.HealthCheck) *txn.Task {
	return &txn.Task{UID: uid, Spec: &omegav1.TaskSpec{RestartPolicy: policy, HealthCheck: hc, RestartDelayMillis: 1000}}
}

var (
	exit0 = &omegav1.ExitStatus{}
	exit3 = &omegav1.ExitStatus{Code: 3}
)

func TestSupervisorNever(t *testing.T) {
	s := agents.NewSupervisor()
	a, b := uuid.New(), uuid.New()
	s.Begin(supTask(a, omegav1.RestartPolicy_RESTART_POLICY_NEVER, nil), "127.1.1.1", 0)
	s.Begin(supTask(b, omegav1.RestartPolicy_RESTART_POLICY_UNSPECIFIED, nil), "127.1.1.2", 0)
	if v, ok := s.Exited(a, exit0, 5*sec); !ok || !v.Final || v.State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("never, exit 0: %+v %v", v, ok)
	}
	if v, ok := s.Exited(b, &omegav1.ExitStatus{Code: -1, Signal: "killed"}, 5*sec); !ok || !v.Final || v.State != omegav1.TaskState_TASK_STATE_FAILED {
		t.Fatalf("unspecified (never), killed: %+v %v", v, ok)
	}
	if r := s.Report(b); r.GetLastExit().GetSignal() != "killed" || r.GetAddress() != "127.1.1.2" {
		t.Fatalf("report %v", r)
	}
}

// A task that keeps failing is restarted after 1, 2, 4, ... seconds, at
// most MaxBackoff; a run that lasted ResetBackoffAfter starts over.
func TestSupervisorBackoff(t *testing.T) {
	s := agents.NewSupervisor()
	u := uuid.New()
	s.Begin(supTask(u, omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE, nil), "", 0)
	now := int64(0)
	want := []int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, w := range want {
		v, ok := s.Exited(u, exit3, now)
		if !ok || v.Final || v.RestartAt != now+w*sec {
			t.Fatalf("failure %d: %+v, want a restart after %d s", i, v, w)
		}
		if _, again := s.Exited(u, exit3, now); again {
			t.Fatal("an exit told twice was taken twice")
		}
		if due := s.Due(v.RestartAt-1, nil); len(due) != 0 {
			t.Fatalf("due early: %v", due)
		}
		if at, ok := s.Next(); !ok || at != v.RestartAt {
			t.Fatalf("next %d %v, want %d", at, ok, v.RestartAt)
		}
		due := s.Due(v.RestartAt, nil)
		if len(due) != 1 || due[0] != (agents.Action{Kind: agents.ActRestart, Task: u}) {
			t.Fatalf("due %v", due)
		}
		now = v.RestartAt
		s.Restarted(u, now)
		if r := s.Report(u); r.GetRestarts() != int32(i+1) || r.GetLastExit().GetCode() != 3 {
			t.Fatalf("report after restart %d: %v", i+1, r)
		}
	}
	// A long, healthy run resets the backoff.
	now += int64(agents.ResetBackoffAfter)
	if v, _ := s.Exited(u, exit3, now); v.RestartAt != now+sec {
		t.Fatalf("after a long run: restart at +%d ns", v.RestartAt-now)
	}
	// On failure, a clean exit ends the task.
	now += sec
	s.Restarted(u, now)
	if v, ok := s.Exited(u, exit0, now+sec); !ok || !v.Final || v.State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("on-failure, exit 0: %+v", v)
	}
}

func TestSupervisorAlwaysRestartsSuccess(t *testing.T) {
	s := agents.NewSupervisor()
	u := uuid.New()
	s.Begin(supTask(u, omegav1.RestartPolicy_RESTART_POLICY_ALWAYS, nil), "", 0)
	if v, _ := s.Exited(u, exit0, 0); v.Final {
		t.Fatal("always: a clean exit ended the task")
	}
}

// Health: failure_threshold failures in a row make the task unhealthy (kill
// once), a success in between resets the count, the kill's end is a
// failure, and the restart probes again after the initial delay.
func TestSupervisorHealth(t *testing.T) {
	s := agents.NewSupervisor()
	u := uuid.New()
	hc := &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{Path: "/bin/true"}},
		PeriodMillis: 2000, FailureThreshold: 2, InitialDelayMillis: 5000}
	s.Begin(supTask(u, omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE, hc), "", 0)
	probe := func(now int64, healthy bool) bool {
		t.Helper()
		due := s.Due(now, nil)
		if len(due) != 1 || due[0].Kind != agents.ActProbe {
			t.Fatalf("at %d s: due %v, want a probe", now/sec, due)
		}
		if again := s.Due(now, nil); len(again) != 0 {
			t.Fatalf("a probe out was due again: %v", again)
		}
		return s.Probed(u, due[0].Probe, healthy, now)
	}
	if due := s.Due(4*sec, nil); len(due) != 0 {
		t.Fatalf("probed before the initial delay: %v", due)
	}
	if probe(5*sec, true) || s.Report(u).GetHealth() != omegav1.HealthState_HEALTH_STATE_HEALTHY {
		t.Fatal("healthy probe")
	}
	if probe(7*sec, false) { // 1 failure
		t.Fatal("killed below the threshold")
	}
	if probe(9*sec, true) { // reset
		t.Fatal("killed on success")
	}
	if probe(11*sec, false) {
		t.Fatal("killed at 1 failure")
	}
	if !probe(13*sec, false) {
		t.Fatal("not killed at the threshold")
	}
	if r := s.Report(u); r.GetHealth() != omegav1.HealthState_HEALTH_STATE_UNHEALTHY {
		t.Fatalf("report %v", r)
	}
	if due := s.Due(100*sec, nil); len(due) != 0 {
		t.Fatalf("probed while being killed: %v", due)
	}
	// Killed by the agent: exit 0 on SIGTERM still counts as a failure.
	v, ok := s.Exited(u, exit0, 14*sec)
	if !ok || v.Final {
		t.Fatalf("unhealthy on-failure task not restarted: %+v", v)
	}
	s.Restarted(u, v.RestartAt)
	if due := s.Due(v.RestartAt+4*sec, nil); len(due) != 0 {
		t.Fatalf("probed before the restart's initial delay: %v", due)
	}
	if probe(v.RestartAt+5*sec, true) {
		t.Fatal("healthy after restart")
	}
	// An answer to an earlier probe (of the run before) is not this one's:
	// dropped, the probe still out, its own answer taken.
	due := s.Due(v.RestartAt+7*sec, nil)
	if len(due) != 1 {
		t.Fatalf("due %v", due)
	}
	for range 3 {
		if s.Probed(u, due[0].Probe-1, false, v.RestartAt+7*sec) {
			t.Fatal("a stale answer killed the task")
		}
	}
	if again := s.Due(v.RestartAt+7*sec, nil); len(again) != 0 {
		t.Fatalf("a stale answer ended the probe out: %v", again)
	}
	if s.Probed(u, due[0].Probe, true, v.RestartAt+7*sec) {
		t.Fatal("its own healthy answer killed it")
	}
	if r := s.Report(u); r.GetHealth() != omegav1.HealthState_HEALTH_STATE_HEALTHY {
		t.Fatalf("a stale failure changed the health: %v", r.GetHealth())
	}
}

// A task adopted after an agent restart keeps its restart count.
func TestSupervisorAdoptKeepsRestarts(t *testing.T) {
	s := agents.NewSupervisor()
	u := uuid.New()
	tk := supTask(u, omegav1.RestartPolicy_RESTART_POLICY_ALWAYS, nil)
	tk.SetRun(&omegav1.TaskRun{Restarts: 4, Address: "127.9.9.9", Health: omegav1.HealthState_HEALTH_STATE_HEALTHY})
	s.Begin(tk, "127.9.9.9", 0)
	if d := s.Dirty(nil); len(d) != 0 {
		t.Fatalf("an adopted task with the cell's report is dirty: %v", d)
	}
	if h := s.Report(u).GetHealth(); h != omegav1.HealthState_HEALTH_STATE_HEALTHY {
		t.Fatalf("an adopted task's health %v: the last seen should stand until the next probe", h)
	}
	v, _ := s.Exited(u, exit0, sec)
	s.Restarted(u, v.RestartAt)
	if r := s.Report(u); r.GetRestarts() != 5 {
		t.Fatalf("restarts %d, want 5", r.GetRestarts())
	}
}

// The pool never hands out an address twice while it is held, stays in its
// range, and hands out every address before it fails.
func TestAddressPoolProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bits := rapid.IntRange(26, 32).Draw(rt, "bits")
		p, err := agents.NewAddressPool(netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 5, 6, 0}), bits))
		if err != nil {
			rt.Fatal(err)
		}
		size := 1 << (32 - bits)
		if size > 2 {
			size -= 2
		}
		held := map[netip.Addr]bool{}
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			if len(held) > 0 && rapid.Bool().Draw(rt, "release") {
				for a := range held {
					p.Release(a)
					delete(held, a)
					break
				}
				continue
			}
			a, ok := p.Take()
			if ok != (len(held) < size) {
				rt.Fatalf("take: ok=%v with %d of %d held", ok, len(held), size)
			}
			if !ok {
				continue
			}
			if held[a] || !p.Prefix().Contains(a) || (size > 2 && (a.As4()[3] == 0 || a == netip.AddrFrom4([4]byte{127, 5, 6, 255}))) {
				rt.Fatalf("took %v (held: %v)", a, held[a])
			}
			held[a] = true
			if p.Reserve(a) {
				rt.Fatalf("reserved a held address %v", a)
			}
		}
		if p.Held() != len(held) {
			rt.Fatalf("held %d, want %d", p.Held(), len(held))
		}
	})
}

func TestDefaultTaskPrefix(t *testing.T) {
	for range 100 {
		u := uuid.New()
		p := agents.DefaultTaskPrefix(u)
		if p.Bits() != 24 || !netip.MustParsePrefix("127.0.0.0/8").Contains(p.Addr()) || p.Addr().As4()[1] == 0 || p.Addr().As4()[1] == 255 {
			t.Fatalf("%s: %v", u, p)
		}
		if agents.DefaultTaskPrefix(u) != p {
			t.Fatal("not a function of the uid")
		}
	}
}
