package google2011

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The genuine Google 2011 excerpt lives outside the repository, beside it
// in ../shared/traces (from the project root); it is never copied in.
var (
	traceDir         = filepath.Join("..", "..", "..", "..", "shared", "traces", "google-clusterdata-2011-2")
	taskEventsPath   = filepath.Join(traceDir, "task_events", "part-00000-of-00500.csv.gz")
	jobEventsPath    = filepath.Join(traceDir, "job_events", "part-00000-of-00500.csv.gz")
	machineEventPath = filepath.Join(traceDir, "machine_events", "part-00000-of-00001.csv.gz")
)

// The excerpt is parsed once per test binary and shared (read-only).
var excerpt struct {
	once  sync.Once
	tasks []TaskEvent
	jobs  []JobEvent
	err   error
}

// needTrace skips the test when the excerpt is absent.
func needTrace(t testing.TB, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			t.Skipf("Google 2011 trace excerpt not found at %s (it is kept outside the repository in ../shared/traces); skipping", p)
		}
	}
}

// loadTrace returns the parsed excerpt, or skips the test when the excerpt
// is absent.
func loadTrace(t testing.TB) ([]TaskEvent, []JobEvent) {
	t.Helper()
	needTrace(t, taskEventsPath, jobEventsPath)
	excerpt.once.Do(func() {
		excerpt.tasks, excerpt.err = ReadAllTaskEvents(taskEventsPath)
		if excerpt.err != nil {
			return
		}
		excerpt.jobs, excerpt.err = ReadAllJobEvents(jobEventsPath)
	})
	if excerpt.err != nil {
		t.Fatalf("reading the trace excerpt: %v", excerpt.err)
	}
	return excerpt.tasks, excerpt.jobs
}
