package process

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Cgroups confines each task to its request with cgroup v2 — cpu.max from
// its cpu, memory.max from its memory — where the cpu and memory
// controllers are delegated to the agent's cgroup (systemd's Delegate=yes,
// or a container given its own cgroup namespace). The agent moves itself
// into a leaf of its cgroup ("agent"), as cgroup v2 keeps processes out of
// a cgroup whose controllers it hands down, and each task's supervisor
// goes into tasks/UID beside it, with the task's processes under it.
type Cgroups struct {
	tasks string // the directory of the tasks' cgroups
}

// DetectCgroups finds the agent's cgroup v2 and sets it up for tasks; nil
// and the reason when it cannot (cgroup v1, controllers not delegated, no
// permission), which the agent says once at start.
func DetectCgroups() (*Cgroups, string) {
	mount, err := cgroup2Mount()
	if err != nil {
		return nil, err.Error()
	}
	self, err := ownCgroup()
	if err != nil {
		return nil, err.Error()
	}
	dir := filepath.Join(mount, self)
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Sprintf("cgroup v2 at %s: %v", dir, err)
	}
	have := strings.Fields(string(ctrl))
	for _, want := range []string{"cpu", "memory"} {
		if !contains(have, want) {
			return nil, fmt.Sprintf("cgroup v2 at %s: the %s controller is not delegated (it has: %s)", dir, want, strings.Join(have, " "))
		}
	}
	// A leaf for the agent itself, then the controllers for the children.
	leaf := filepath.Join(dir, "agent")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return nil, fmt.Sprintf("cgroup v2 at %s: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Sprintf("cgroup v2: move the agent into %s: %v", leaf, err)
	}
	tasks := filepath.Join(dir, "tasks")
	for _, d := range []string{dir, tasks} {
		if d == tasks {
			if err := os.MkdirAll(tasks, 0o755); err != nil {
				return nil, fmt.Sprintf("cgroup v2: %v", err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644); err != nil {
			return nil, fmt.Sprintf("cgroup v2: enable cpu and memory below %s: %v", d, err)
		}
	}
	return &Cgroups{tasks: tasks}, ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if fs := strings.Fields(post); len(fs) > 0 && fs[0] == "cgroup2" {
			if f := strings.Fields(pre); len(f) >= 5 {
				return f[4], nil
			}
		}
	}
	return "", errors.New("no cgroup v2 mounted (cgroup v1 only)")
}

func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 membership in /proc/self/cgroup")
}

// Prepare makes a task's cgroup with its limits — cpu.max of cpuMillis
// (0: no limit), memory.max of memBytes (0: no limit) — and opens it: the
// task's supervisor is started straight into it (clone3's
// CLONE_INTO_CGROUP, SysProcAttr.UseCgroupFD), so nothing of the task
// ever runs outside. The caller closes the file once the process started.
func (c *Cgroups) Prepare(uid uuid.UUID, cpuMillis, memBytes int64) (*os.File, error) {
	dir := filepath.Join(c.tasks, uid.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	const period = 100_000 // µs
	cpu := "max " + strconv.Itoa(period)
	if cpuMillis > 0 {
		cpu = strconv.FormatInt(max(cpuMillis*period/1000, 1000), 10) + " " + strconv.Itoa(period)
	}
	mem := "max"
	if memBytes > 0 {
		mem = strconv.FormatInt(memBytes, 10)
	}
	for _, w := range [][2]string{{"cpu.max", cpu}, {"memory.max", mem}} {
		if err := os.WriteFile(filepath.Join(dir, w[0]), []byte(w[1]), 0o644); err != nil {
			return nil, fmt.Errorf("cgroup %s: %s: %w", dir, w[0], err)
		}
	}
	return os.Open(dir)
}

// Remove deletes a task's cgroup (once its processes are gone).
func (c *Cgroups) Remove(uid uuid.UUID) { os.Remove(filepath.Join(c.tasks, uid.String())) }
