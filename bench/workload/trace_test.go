package workload

import (
	"errors"
	"github.com/omega-cell/omega/bench/trace/google2011"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The genuine Google 2011 excerpt lives outside the repository, beside it
// in ../shared/traces (from the project root); it is never copied in.
var (
	traceDir       = filepath.Join("..", "..", "..", "shared", "traces", "google-clusterdata-2011-2")
	taskEventsPath = filepath.Join(traceDir, "task_events", "part-00000-of-00500.csv.gz")
	jobEventsPath  = filepath.Join(traceDir, "job_events", "part-00000-of-00500.csv.gz")
)

// The excerpt is parsed once per test binary and shared (read-only).
var trace struct {
	once  sync.Once
	tasks []google2011.TaskEvent
	jobs  []google2011.JobEvent
	err   error
}

// loadTrace returns the parsed excerpt, or skips the test when the excerpt
// is absent.
func loadTrace(t testing.TB) ([]google2011.TaskEvent, []google2011.JobEvent) {
	t.Helper()
	for _, p := range []string{taskEventsPath, jobEventsPath} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			t.Skipf("Google 2011 trace excerpt not found at %s (it is kept outside the repository in ../shared/traces); skipping", p)
		}
	}
	trace.once.Do(func() {
		trace.tasks, trace.err = google2011.ReadAllTaskEvents(taskEventsPath)
		if trace.err != nil {
			return
		}
		trace.jobs, trace.err = google2011.ReadAllJobEvents(jobEventsPath)
	})
	if trace.err != nil {
		t.Fatalf("reading the trace excerpt: %v", trace.err)
	}
	return trace.tasks, trace.jobs
}

// fitTrace fits the excerpt (once per call; a few hundred milliseconds).
func fitTrace(t testing.TB) Fitted {
	t.Helper()
	tasks, jobs := loadTrace(t)
	f := NewFitter()
	for _, e := range tasks {
		f.AddTaskEvent(e)
	}
	for _, e := range jobs {
		f.AddJobEvent(e)
	}
	return f.Fit()
}

var fitted struct {
	once sync.Once
	fit  Fitted
}

// traceFit returns the excerpt's fit, computed once per test binary.
func traceFit(t testing.TB) Fitted {
	t.Helper()
	loadTrace(t) // skips when absent
	fitted.once.Do(func() { fitted.fit = fitTrace(t) })
	return fitted.fit
}
