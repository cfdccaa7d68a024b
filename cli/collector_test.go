package cli

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/omega-cell/omega/internal/hostinfo"
)

// gcPercent reads the collector's percentage without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // restores the variable after the test
	os.Unsetenv(key)
}

func TestBatchCollectorAppliesAndRestores(t *testing.T) {
	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	before, beforeLimit := gcPercent(), debug.SetMemoryLimit(-1)
	restore := useBatchCollector()
	if got := gcPercent(); got != batchGOGC {
		restore()
		t.Fatalf("GOGC during batch work = %d, want %d", got, batchGOGC)
	}
	limit := debug.SetMemoryLimit(-1)
	restore()
	if limit == beforeLimit && hostinfo.MemLimit() > 0 {
		t.Errorf("memory limit unchanged (%d) during batch work", limit)
	}
	if got := gcPercent(); got != before {
		t.Errorf("GOGC after restore = %d, want %d", got, before)
	}
	if got := debug.SetMemoryLimit(-1); got != beforeLimit {
		t.Errorf("memory limit after restore = %d, want %d", got, beforeLimit)
	}
}

func TestBatchCollectorLeavesTheEnvironmentsSettings(t *testing.T) {
	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "1GiB")
	before, beforeLimit := gcPercent(), debug.SetMemoryLimit(-1)
	restore := useBatchCollector()
	defer restore()
	if got := gcPercent(); got != before {
		t.Errorf("GOGC = %d with GOGC set in the environment, want %d kept", got, before)
	}
	if got := debug.SetMemoryLimit(-1); got != beforeLimit {
		t.Errorf("memory limit = %d with GOMEMLIMIT set, want %d kept", got, beforeLimit)
	}
}
