package hostinfo

import (
	"os"
	"testing"
)

// On Linux the machine's memory is read, and the limit is at most it (a
// cgroup's "max" or a limit above the machine's is no bound).
func TestMemLimitIsAtMostTheMachine(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo here")
	}
	total, limit := MemTotal(), MemLimit()
	if total == 0 {
		t.Fatal("MemTotal read nothing from /proc/meminfo")
	}
	if limit == 0 || limit > total {
		t.Fatalf("MemLimit %d, MemTotal %d: want 0 < limit <= total", limit, total)
	}
}
