package main_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// The full-cell test's readings of the cell, the logs and the membership.

// fcJob returns the newest job named name, or nil.
func fcJob(v client.View, name string) *txn.Job {
	var job *txn.Job
	v.RangeJobs(func(j *txn.Job) bool {
		if j.Name() == name && (job == nil || j.CreateRev > job.CreateRev) {
			job = j
		}
		return true
	})
	return job
}

// fcTasks returns the tasks of the newest job named name, by name.
func fcTasks(v client.View, name string) []*txn.Task {
	j := fcJob(v, name)
	if j == nil {
		return nil
	}
	var out []*txn.Task
	v.RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == j.UID {
			out = append(out, tk)
		}
		return true
	})
	sort.Slice(out, func(a, b int) bool { return out[a].Name() < out[b].Name() })
	return out
}

// fcHealthy returns the tasks of job name RUNNING and HEALTHY on machines
// UP.
func fcHealthy(v client.View, name string) []*txn.Task {
	var out []*txn.Task
	for _, tk := range fcTasks(v, name) {
		m, ok := v.Machine(tk.Machine)
		if ok && m.State == omegav1.MachineState_MACHINE_STATE_UP && tk.State == omegav1.TaskState_TASK_STATE_RUNNING &&
			tk.Run().GetHealth() == omegav1.HealthState_HEALTH_STATE_HEALTHY {
			out = append(out, tk)
		}
	}
	return out
}

// fcGet checks that a web task answers at its own address.
func fcGet(t *testing.T, tk *txn.Task) {
	t.Helper()
	a := tk.Run().GetAddress()
	if !strings.HasPrefix(a, "127.") {
		t.Fatalf("%s has address %q", tk.Name(), a)
	}
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + a + ":8080/index.html")
	if err != nil {
		t.Fatalf("GET %s's server: %v", tk.Name(), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "hello from " + tk.Name(); !strings.Contains(string(body), want) {
		t.Fatalf("%s at %s answered %q, want %q", tk.Name(), a, body, want)
	}
}

// fcOnce checks that a task's stdout is exactly one line, want (a prefix
// of it), and returns it: the task ran once.
func fcOnce(t *testing.T, agentDir string, tk *txn.Task, want string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agentDir, "tasks", tk.UID.String(), "stdout"))
	if err != nil {
		t.Fatalf("%s's output: %v", tk.Name(), err)
	}
	out := string(b)
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, want) {
		t.Fatalf("%s's output is %q, want one line %q", tk.Name(), out, want)
	}
	return out
}

// fcRevision reads the revision a log line matching re (one group) names.
func fcRevision(t *testing.T, logText, re string) uint64 {
	t.Helper()
	m := regexp.MustCompile(re).FindAllStringSubmatch(logText, -1)
	if len(m) == 0 {
		t.Fatalf("no line matching %s in:\n%s", re, logText)
	}
	n, err := strconv.ParseUint(m[len(m)-1][1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fcMissing lists what of before the after view lacks: every object at
// its version or a later one, and at the same version the same.
func fcMissing(before, after client.View) []string {
	var out []string
	before.RangeMachines(func(m *txn.Machine) bool {
		n, ok := after.Machine(m.UID)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("machine %s (version %d) is gone", m.Name(), m.Version))
		case n.Version < m.Version:
			out = append(out, fmt.Sprintf("machine %s went back from version %d to %d", m.Name(), m.Version, n.Version))
		case n.Version == m.Version && (n.State != m.State || n.Agent != m.Agent || !proto.Equal(n.Spec, m.Spec) || !proto.Equal(n.Meta, m.Meta)):
			out = append(out, fmt.Sprintf("machine %s at version %d: %v, was %v", m.Name(), m.Version, n.Proto(), m.Proto()))
		}
		return true
	})
	before.RangeJobs(func(j *txn.Job) bool {
		n, ok := after.Job(j.UID)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("job %s (version %d) is gone", j.Name(), j.Version))
		case n.Version < j.Version:
			out = append(out, fmt.Sprintf("job %s went back from version %d to %d", j.Name(), j.Version, n.Version))
		case n.Version == j.Version && !proto.Equal(n.Proto(), j.Proto()):
			out = append(out, fmt.Sprintf("job %s at version %d: %v, was %v", j.Name(), j.Version, n.Proto(), j.Proto()))
		}
		return true
	})
	before.RangeTasks(func(tk *txn.Task) bool {
		n, ok := after.Task(tk.UID)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("task %s (version %d) is gone", tk.Name(), tk.Version))
		case n.Version < tk.Version:
			out = append(out, fmt.Sprintf("task %s went back from version %d to %d", tk.Name(), tk.Version, n.Version))
		case n.Version == tk.Version && !proto.Equal(n.Proto(), tk.Proto()):
			out = append(out, fmt.Sprintf("task %s at version %d: %v, was %v", tk.Name(), tk.Version, n.Proto(), tk.Proto()))
		}
		return true
	})
	return out
}

// fcMembers joins the gossip membership at join as an observer (joining
// no one else, so it tells the server of no member) and waits, until
// since+within at most, for it to list every agent in want alive; then
// leaves. It returns how long after since they were all there, or those
// still missing at the deadline.
func fcMembers(t *testing.T, join string, want []string, since time.Time, within time.Duration) (time.Duration, []string) {
	t.Helper()
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = "fullcell-observer"
	cfg.BindAddr, cfg.BindPort = "127.0.0.1", 0
	cfg.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ml.Leave(time.Second)
		ml.Shutdown()
	}()
	if _, err := ml.Join([]string{join}); err != nil {
		t.Fatalf("join the membership at %s: %v", join, err)
	}
	deadline := time.NewTimer(time.Until(since.Add(within)))
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		alive := map[string]bool{}
		for _, n := range ml.Members() {
			if n.State == memberlist.StateAlive {
				alive[n.Name] = true
			}
		}
		missing := []string{}
		for _, w := range want {
			if !alive[w] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return time.Since(since), nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return time.Since(since), missing
		}
	}
}

// fcWatchInOrder checks `omega watch`'s lines: revisions never go back,
// and some come after the server's restart at revision restartAt.
func fcWatchInOrder(t *testing.T, out string, restartAt uint64) {
	t.Helper()
	var last uint64
	after := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, "\t", 2)
		if len(f) < 2 {
			continue
		}
		rev, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			t.Fatalf("omega watch printed %q", line)
		}
		if rev < last {
			t.Fatalf("omega watch went back from revision %d to %d: %q", last, rev, line)
		}
		last = rev
		if rev > restartAt {
			after++
		}
	}
	if after == 0 {
		t.Fatalf("omega watch printed nothing after revision %d", restartAt)
	}
}

func fcTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
