package txn_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// An agent's run report rides on SetStatus: it replaces the task's run,
// a report without one keeps it, and a new claim starts without one.
func TestSetStatusRun(t *testing.T) {
	c := std(t)
	c.place(m1, res(1000, 1000), t1)
	first := &omegav1.TaskRun{Address: "127.7.7.2", Health: omegav1.HealthState_HEALTH_STATE_HEALTHY}
	c.commit(c.tx(txn.SetStatus(t1, running, c.ver(t1), "started").WithRun(first)))
	if got := c.task(t1).Run(); !proto.Equal(got, first) {
		t.Fatalf("run %v, want %v", got, first)
	}
	c.commit(c.tx(txn.SetStatus(t1, running, c.ver(t1), "still")))
	if got := c.task(t1).Run(); !proto.Equal(got, first) {
		t.Fatalf("a report without a run dropped it: %v", got)
	}
	second := &omegav1.TaskRun{Address: "127.7.7.2", Restarts: 2, LastExit: &omegav1.ExitStatus{Code: 3}}
	c.commit(c.tx(txn.SetStatus(t1, running, c.ver(t1), "restarted").WithRun(second)))
	if got := c.task(t1).Run(); !proto.Equal(got, second) || c.task(t1).State != running {
		t.Fatalf("run %v, want %v", got, second)
	}
	if got := c.task(t1).StatusProto().GetRun(); !proto.Equal(got, second) {
		t.Fatalf("wire status run %v", got)
	}
	// Evicted and claimed again: the new placement has no run yet.
	c.commit(c.tx(txn.ForceEvict(t1, c.ver(t1), "drain")))
	c.commit(c.tx(txn.Claim(t1, m2, res(1000, 1000), c.ver(t1))))
	if got := c.task(t1).Run(); got != nil {
		t.Fatalf("a new claim kept the old placement's run %v", got)
	}
}

func TestSetStatusRunRejected(t *testing.T) {
	for name, r := range map[string]*omegav1.TaskRun{
		"negative restarts": {Restarts: -1},
		"bad health":        {Health: 9},
		"bad address":       {Address: "not-an-ip"},
		"bad utf-8 error":   {LastExit: &omegav1.ExitStatus{Code: -1, Error: "ok\xff"}},
		"bad utf-8 signal":  {LastExit: &omegav1.ExitStatus{Code: -1, Signal: "\xfe"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := std(t)
			c.place(m1, res(1000, 1000), t1)
			c.mustErr(c.tx(txn.SetStatus(t1, running, c.ver(t1), "").WithRun(r)), txn.ErrInvalid, 0)
		})
	}
}

// The lifecycle fields of a task spec and of a job template are checked at
// creation.
func TestLifecycleValidated(t *testing.T) {
	good := &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Http{Http: &omegav1.HttpProbe{Port: 8080, Path: "/healthz"}}}
	cases := map[string]struct {
		policy omegav1.RestartPolicy
		hc     *omegav1.HealthCheck
		grace  int64
		wd     string
		ok     bool
	}{
		"all set":        {omegav1.RestartPolicy_RESTART_POLICY_ALWAYS, good, 5000, "sub/dir", true},
		"defaults":       {0, nil, 0, "", true},
		"bad policy":     {9, nil, 0, "", false},
		"negative grace": {0, nil, -1, "", false},
		"absolute dir":   {0, nil, 0, "/etc", false},
		"escaping dir":   {0, nil, 0, "a/../../b", false},
		"no probe":       {0, &omegav1.HealthCheck{PeriodMillis: 1000}, 0, "", false},
		"port 0":         {0, &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Http{Http: &omegav1.HttpProbe{}}}, 0, "", false},
		"empty exec":     {0, &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{}}}, 0, "", false},
		"negative period": {0, &omegav1.HealthCheck{Probe: &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{Path: "/bin/true"}},
			PeriodMillis: -5}, 0, "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := txn.ValidateLifecycle("task x", tc.policy, tc.hc, tc.grace, 0, &omegav1.Command{Path: "/bin/true", WorkingDir: tc.wd})
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, txn.ErrInvalid)) {
				t.Fatalf("err %v, want ok=%v", err, tc.ok)
			}
			// The same check guards task creation.
			c := std(t)
			task := taskP(uid(77), res(10, 10), 0)
			task.Spec.RestartPolicy, task.Spec.HealthCheck, task.Spec.GracePeriodMillis = tc.policy, tc.hc, tc.grace
			task.Spec.Command = &omegav1.Command{Path: "/bin/true", WorkingDir: tc.wd}
			tx := c.tx(txn.CreateTask(task))
			if tc.ok {
				c.commit(tx)
			} else {
				c.mustErr(tx, txn.ErrInvalid, 0)
			}
		})
	}
}
