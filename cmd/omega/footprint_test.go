package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// fillCell commits machines of 1 core and 4 GiB, each with perMachine
// tasks claimed on it (labelled app=filler), in transactions of about
// 2,000 operations.
func fillCell(b testing.TB, c *client.Client, ids *testkit.IDs, machines, perMachine int) {
	b.Helper()
	var ops []txn.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		tx := c.NewTxn(c.View())
		tx.Ops = ops
		if res, err := c.Commit(context.Background(), tx); err != nil || res.Conflicted() {
			b.Fatalf("fill the cell: %+v %v", res.Outcomes[:min(3, len(res.Outcomes))], err)
		}
		ops = nil
	}
	for i := range machines {
		m := ids.Next()
		ops = append(ops, txn.CreateMachine(testkit.Machine(m, fmt.Sprintf("m%05d", i), testkit.Res(1000, 4<<30))))
		for k := range perMachine {
			tk := ids.Next()
			p := testkit.Task(tk, uuid.Nil, fmt.Sprintf("t%05d-%d", i, k), testkit.Res(100, 256<<20))
			p.Meta.Labels = map[string]string{"app": "filler", "tier": strconv.Itoa(k)}
			ops = append(ops, txn.CreateTask(p), txn.Claim(tk, m, testkit.Res(100, 256<<20), 0))
		}
		if len(ops) >= 2000 {
			flush()
		}
	}
	flush()
}

// BenchmarkAgentFootprint measures the figure: an agent running 100
// idle tasks (sleep processes) in a cell of 10,000 machines and 100,000
// tasks — its RSS, and its CPU over a 30 s window once they all run. The
// other machines' tasks are claimed by the benchmark (RUNNING, no agent:
// the server's grace period is an hour). It reports the agent's RSS and
// CPU, and beside them the RSS of the 100 task supervisors (omega
// task-shim, one process per task). Run it as
//
//	go test ./cmd/omega -run '^$' -bench AgentFootprint -benchtime 1x
func BenchmarkAgentFootprint(b *testing.B) {
	for range b.N {
		b.StopTimer()
		srv := startServerAt(b, b.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h")
		c, _ := newRemoteClient(b, srv.grpc, "bench")
		ctx := context.Background()
		ids := testkit.NewIDs(9, 1)
		fillCell(b, c, ids, 10_000, 10)
		var ops []txn.Op
		flush := func() {
			tx := c.NewTxn(c.View())
			tx.Ops = ops
			if res, err := c.Commit(ctx, tx); err != nil || res.Conflicted() {
				b.Fatalf("commit: %+v %v", res.Outcomes[:min(3, len(res.Outcomes))], err)
			}
			ops = nil
		}
		adir := b.TempDir()
		ag := startProc(b, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", adir, "--cpu", "64", "--memory", "64Gi")
		var me *txn.Machine
		waitFor(b, c, 60*time.Second, "the agent's machine", func(v client.View) bool {
			v.RangeMachines(func(m *txn.Machine) bool {
				if m.Name() == "a1" {
					me = m
				}
				return me == nil
			})
			return me != nil
		})
		for k := range 100 {
			tk := ids.Next()
			p := testkit.Task(tk, uuid.Nil, fmt.Sprintf("idle-%d", k), testkit.Res(100, 16<<20))
			p.Spec.Command = &omegav1.Command{Path: "/bin/sleep", Args: []string{"3600"}}
			ops = append(ops, txn.CreateTask(p), txn.Claim(tk, me.UID, testkit.Res(100, 16<<20), 0))
		}
		flush()
		waitFor(b, c, 120*time.Second, "100 idle tasks RUNNING on the agent", func(v client.View) bool {
			n := 0
			v.RangeTasks(func(tk *txn.Task) bool {
				if tk.Machine == me.UID && tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
					n++
				}
				return true
			})
			return n == 100
		})
		pid := ag.cmd.Process.Pid
		b.StartTimer()
		cpu0, t0 := cpuTicks(b, pid), time.Now()
		select {
		case <-time.After(30 * time.Second): // the window the figure is over
		case err := <-ag.exited:
			b.Fatalf("the agent exited: %v\n%s", err, ag.log())
		}
		cpu1, t1 := cpuTicks(b, pid), time.Now()
		b.StopTimer()
		rss := rssKiB(b, pid)
		shims, shimsPSS := 0, 0
		pids, _ := filepath.Glob(filepath.Join(adir, "tasks", "*", "shim.pid"))
		for _, f := range pids {
			bs, _ := os.ReadFile(f)
			if p, err := strconv.Atoi(strings.TrimSpace(string(bs))); err == nil {
				shims += rssKiB(b, p)
				shimsPSS += pssKiB(p)
			}
		}
		const hz = 100 // USER_HZ on Linux
		cpuPct := 100 * float64(cpu1-cpu0) / hz / t1.Sub(t0).Seconds()
		b.ReportMetric(float64(rss)/1024, "agent-RSS-MiB")
		b.ReportMetric(cpuPct, "agent-CPU-%")
		b.ReportMetric(float64(shims)/1024, "shims-RSS-MiB")
		b.ReportMetric(float64(shimsPSS)/1024, "shims-PSS-MiB")
		b.ReportMetric(float64(pssKiB(pid))/1024, "agent-PSS-MiB")
		b.ReportMetric(float64(len(pids)), "shims")
	}
}

// cpuTicks is a process's user and system time, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(bs[strings.LastIndexByte(string(bs), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// rssKiB is a process's resident set (VmRSS), in KiB.
func rssKiB(b *testing.B, pid int) int {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(bs), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// pssKiB is a process's proportional set size (its share of the pages it
// shares with others, the omega binary's text among them), in KiB.
func pssKiB(pid int) int {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(bs), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
