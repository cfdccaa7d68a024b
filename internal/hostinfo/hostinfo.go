// Package hostinfo reads what the reports say about the machine running
// them.
package hostinfo

import (
	"os"
	"strconv"
	"strings"
)

// RSS returns the process's current and peak resident set size in MiB
// (Linux /proc/self/status; zero elsewhere).
func RSS() (cur, peak float64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			cur = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return cur, peak
}

// MemTotal returns the machine's physical memory in bytes (Linux
// /proc/meminfo; zero elsewhere or when it cannot be read).
func MemTotal() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// MemLimit returns the memory the process may use, in bytes: the machine's
// (MemTotal), or its cgroup's limit when that is lower (cgroup v2
// memory.max, or v1 memory.limit_in_bytes), as in a container. Zero when
// neither can be read.
func MemLimit() uint64 {
	limit := MemTotal()
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
		if err == nil && v > 0 && (limit == 0 || v < limit) {
			limit = v
		}
	}
	return limit
}
