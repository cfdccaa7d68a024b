package main_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// BenchmarkFailover measures the figure: from SIGKILL of the agent
// running a service task to that task's replacement RUNNING on another
// machine, with memberlist's LAN defaults. Each iteration kills the agent
// that runs it and restarts it on its directory and address afterwards.
// It reports the median and the maximum. Run it as
//
//	go test ./cmd/omega -run '^$' -bench Failover -benchtime 10x
func BenchmarkFailover(b *testing.B) {
	srv := startServerAt(b, b.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
	c, _ := newRemoteClient(b, srv.grpc, "bench")
	type agent struct {
		args []string
		p    *proc
	}
	agents := map[string]*agent{}
	for _, name := range []string{"a1", "a2"} {
		dir := b.TempDir()
		args := []string{"agent", "--server", srv.grpc, "--join", srv.gossip, "--name", name, "--data", dir, "--gossip", freePort(b), "--cpu", "2", "--memory", "2Gi"}
		agents[name] = &agent{args: args, p: startProc(b, args...)}
	}
	sched := startProc(b, "scheduler", "--kind", "service", "--name", "service-0", "--server", srv.grpc)
	defer func() {
		if os.Getenv("OMEGA_FAILOVER_LOGS") != "" {
			b.Logf("server:\n%s\nscheduler:\n%s", srv.log(), sched.log())
		}
	}()
	waitFor(b, c, 60*time.Second, "two machines UP", func(v client.View) bool { return v.NumMachines() == 2 })
	f := filepath.Join(b.TempDir(), "web.yaml")
	os.WriteFile(f, []byte("meta: {name: web}\nspec:\n  kind: service\n  template:\n    resources: {cpu: 100m, memory: 16Mi}\n    command: {path: /bin/sleep, args: ['3600']}\n"), 0o644)
	if _, errs, err := run(b, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
		b.Fatalf("submit: %v %s", err, errs)
	}
	running := func(v client.View) (*txn.Task, string) {
		tk := runningTask(v)
		if tk == nil {
			return nil, ""
		}
		m, _ := v.Machine(tk.Machine)
		if m == nil || m.State != omegav1.MachineState_MACHINE_STATE_UP {
			return nil, ""
		}
		return tk, m.Name()
	}
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		var victim string
		var before *txn.Task
		waitFor(b, c, 60*time.Second, "the service task RUNNING", func(v client.View) bool {
			before, victim = running(v)
			return before != nil
		})
		start := time.Now()
		b.Logf("%s: kill %s", start.Format("15:04:05.000"), victim)
		agents[victim].p.cmd.Process.Kill()
		waitFor(b, c, 120*time.Second, "the replacement RUNNING elsewhere", func(v client.View) bool {
			tk, on := running(v)
			return tk != nil && tk.UID != before.UID && on != victim
		})
		took = append(took, time.Since(start))
		b.StopTimer()
		a := agents[victim]
		a.p = startProc(b, a.args...)
		waitFor(b, c, 60*time.Second, "the killed agent's machine UP again", func(v client.View) bool {
			n := 0
			v.RangeMachines(func(m *txn.Machine) bool {
				if m.State == omegav1.MachineState_MACHINE_STATE_UP {
					n++
				}
				return true
			})
			return n == 2
		})
		b.StartTimer()
	}
	b.StopTimer()
	b.Logf("kill to replacement RUNNING, in order: %v", took)
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
	b.ReportMetric(took[0].Seconds(), "min-s")
}

// BenchmarkThousandTrue measures the figure: a 1,000-task batch
// job of `true` commands over 3 agents, from `omega submit` to every task
// SUCCEEDED. Run it as
//
//	go test ./cmd/omega -run '^$' -bench ThousandTrue -benchtime 1x
func BenchmarkThousandTrue(b *testing.B) {
	for range b.N {
		b.StopTimer()
		srv := startServerAt(b, b.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
		c, _ := newRemoteClient(b, srv.grpc, "bench")
		for _, name := range []string{"a1", "a2", "a3"} {
			startProc(b, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", name, "--data", b.TempDir(), "--cpu", "40", "--memory", "64Gi")
		}
		startProc(b, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc)
		waitFor(b, c, 60*time.Second, "three machines UP", func(v client.View) bool { return v.NumMachines() == 3 })
		f := filepath.Join(b.TempDir(), "true.yaml")
		os.WriteFile(f, []byte("meta: {name: thousand}\nspec:\n  replicas: 1000\n  template:\n    resources: {cpu: 100m, memory: 1Mi}\n    command: {path: /bin/true}\n"), 0o644)
		b.StartTimer()
		start := time.Now()
		if _, errs, err := run(b, "", "submit", "-f", f, "--server", srv.grpc); err != nil {
			b.Fatalf("submit: %v %s", err, errs)
		}
		var placedAt time.Duration
		waitFor(b, c, 10*time.Minute, "1,000 tasks SUCCEEDED", func(v client.View) bool {
			done, placed := 0, 0
			v.RangeTasks(func(tk *txn.Task) bool {
				if tk.State == omegav1.TaskState_TASK_STATE_SUCCEEDED {
					done++
				}
				if tk.Machine != [16]byte{} {
					placed++
				}
				return true
			})
			if placed == 1000 && placedAt == 0 {
				placedAt = time.Since(start)
			}
			return done == 1000
		})
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(took.Seconds(), "submit-to-done-s")
		b.ReportMetric(placedAt.Seconds(), "submit-to-placed-s")
	}
}
