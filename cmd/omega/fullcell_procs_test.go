package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/internal/testkit"
)

// The full-cell test's look at the host's processes (/proc): which run for
// which task, and what is left behind.

// fcShim returns the pid in a task's shim.pid.
func fcShim(t *testing.T, agentDir string, u uuid.UUID) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agentDir, "tasks", u.String(), "shim.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func fcSorted(pids ...int) []int {
	slices.Sort(pids)
	return pids
}

// fcProc is a process as /proc shows it.
type fcProc struct {
	pid, session int
	state, comm  string
	task         string // its OMEGA_TASK_UID, if any
}

// fcProcs lists the processes of the host (those whose /proc entries this
// process may read).
func fcProcs() []fcProc {
	ents, _ := os.ReadDir("/proc")
	var out []fcProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...
		s := string(stat)
		lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if lp < 0 || rp < lp {
			continue
		}
		f := strings.Fields(s[rp+1:])
		if len(f) < 4 {
			continue
		}
		p := fcProc{pid: pid, comm: s[lp+1 : rp], state: f[0]}
		p.session, _ = strconv.Atoi(f[3])
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "OMEGA_TASK_UID="); ok {
				p.task = v
			}
		}
		out = append(out, p)
	}
	return out
}

// fcTaskProcs returns the live processes (zombies aside) of the task uid,
// sorted.
func fcTaskProcs(uid string) []int {
	var out []int
	for _, p := range fcProcs() {
		if p.task == uid && p.state != "Z" {
			out = append(out, p.pid)
		}
	}
	slices.Sort(out)
	return out
}

// fcWaitNoProcs waits, at most within, until no process of the task is
// left.
func fcWaitNoProcs(t *testing.T, within time.Duration, what string, u uuid.UUID) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pids := fcTaskProcs(u.String())
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			if err := testkit.WaitGone(pid, time.Until(deadline)); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
}

// fcLeftovers describes the live processes of any task of the agents'
// directories: by their OMEGA_TASK_UID, or in the session of a
// supervisor the directories name.
func fcLeftovers(agentDirs []string) []string {
	uids, sessions := map[string]bool{}, map[int]bool{}
	for _, d := range agentDirs {
		ents, _ := os.ReadDir(filepath.Join(d, "tasks"))
		for _, e := range ents {
			uids[e.Name()] = true
			if b, err := os.ReadFile(filepath.Join(d, "tasks", e.Name(), "shim.pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
					sessions[pid] = true
				}
			}
		}
	}
	var out []string
	for _, p := range fcProcs() {
		if p.state != "Z" && ((p.task != "" && uids[p.task]) || sessions[p.session]) {
			out = append(out, fmt.Sprintf("pid %d (%s, session %d, task %s)", p.pid, p.comm, p.session, p.task))
		}
	}
	return out
}

// fcKillAll kills what fcLeftovers described.
func fcKillAll(left []string) {
	for _, l := range left {
		var pid int
		if _, err := fmt.Sscanf(l, "pid %d", &pid); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
