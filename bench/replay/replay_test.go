package replay

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/bench/trace/google2011"
)

var excerptDir = filepath.Join("..", "..", "..", "shared", "traces", "google-clusterdata-2011-2")

func needExcerpt(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(excerptDir, "task_events")); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("Google 2011 trace excerpt not found at %s (kept outside the repository in ../shared/traces); skipping", excerptDir)
	}
}

// replayed builds the replay of cfg (its store in a temporary directory)
// and runs it; the replay is closed when the test ends.
func replayed(t *testing.T, cfg Config) *Replay {
	t.Helper()
	cfg.Sim.Dir = t.TempDir()
	r, err := Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func runExcerpt(t *testing.T, mod func(*Config)) *Replay {
	t.Helper()
	needExcerpt(t)
	cfg := DefaultConfig()
	cfg.Format, cfg.Trace = "google2011", excerptDir
	// Time 0 (the cell as the trace opens: 277,321 rows) and the first five
	// minutes after its next time, 600 s (../shared/traces/README.md).
	cfg.To = 15 * time.Minute
	if mod != nil {
		mod(&cfg)
	}
	r := replayed(t, cfg)
	return r
}

// The trace's opening: the cell it describes at time 0, with its running
// tasks placed where the trace had them. Some of those placements do not
// fit the recorded capacities (the trace's own over-commitment): they are
// refused for fit, counted with their rows, and far fewer are refused with
// twice the capacity.
func TestReplayExcerptOpening(t *testing.T) {
	open := func(overcommit float64) Stats {
		r := runExcerpt(t, func(c *Config) { c.To = time.Second; c.Overcommit = overcommit })
		if ts := r.TraceStats(); ts.SkippedTotal() != 0 {
			t.Errorf("genuine rows skipped: %v", ts.Skipped)
		}
		return r.Stats()
	}
	fit := func(st Stats) int64 {
		return st.RefusedBy["insufficient_resources: short of memory"] + st.RefusedBy["insufficient_resources: short of cpu"]
	}
	st1, st2 := open(1), open(2)
	t.Logf("overcommit 1: %+v", st1.RefusedBy)
	t.Logf("overcommit 2: %+v", st2.RefusedBy)
	// ../shared/traces/README.md: 12,477 machines are added at time 0.
	if st1.MachinesAdded != 12477 {
		t.Errorf("machines added %d, want the 12,477 the table adds at time 0", st1.MachinesAdded)
	}
	if st1.TasksPrefilled+st1.PlacementsRefused < 130000 || st1.TasksPrefilled < 100000 {
		t.Errorf("prefilled %d, refused %d: want the ~130k tasks the trace had running at time 0, most of them placed", st1.TasksPrefilled, st1.PlacementsRefused)
	}
	if fit(st1) == 0 || len(st1.RefusedExamples) == 0 {
		t.Errorf("no placement refused for fit (%v); the trace over-commits its recorded capacities at time 0", st1.RefusedBy)
	}
	if fit(st2)*10 > fit(st1) || st2.TasksPrefilled <= st1.TasksPrefilled {
		t.Errorf("twice the capacity: %d refused for fit (%d prefilled), against %d (%d) as recorded; want far fewer", fit(st2), st2.TasksPrefilled, fit(st1), st1.TasksPrefilled)
	}
	if st1.TracePlacements != 0 || st1.JobsSubmitted == 0 {
		t.Errorf("trace placements after time 0 applied %d (want 0: only fidelity mode applies them), jobs %d", st1.TracePlacements, st1.JobsSubmitted)
	}
}

// Fifteen minutes: the opening, then the five minutes of submissions after
// the trace's first gap (its next time is 600 s), scheduled by omega's
// schedulers; capacities doubled, so the cell has room.
func TestReplayExcerptWindow(t *testing.T) {
	r := runExcerpt(t, func(c *Config) { c.Overcommit = 2 })
	st, ts := r.Stats(), r.TraceStats()
	sum := r.Sim.Summarize(1, 0)
	t.Logf("sim %.0f s, jobs %d scheduled %d pending %d, tasks placed %d, utilisation %.3f", sum.SimSeconds, sum.JobsSubmitted, sum.JobsScheduled, sum.JobsPending, sum.TasksPlaced, sum.UtilizationMean)
	if ts.SkippedTotal() != 0 {
		t.Errorf("genuine rows skipped: %v", ts.Skipped)
	}
	if st.TracePlacements != 0 {
		t.Errorf("%d of the trace's placements after time 0 applied; only fidelity mode applies them", st.TracePlacements)
	}
	// The trace submits a job's tasks one row at a time, microseconds
	// apart: they are one job of the cell, so no job waits at the end of
	// the window for lack of room.
	if st.SubmissionsCoalesced == 0 || sum.JobsPending > sum.JobsSubmitted/50 {
		t.Errorf("%d submissions joined their job, %d of %d jobs pending at the end", st.SubmissionsCoalesced, sum.JobsPending, sum.JobsSubmitted)
	}
	if sum.TasksPlaced < 1000 || sum.JobsScheduled < sum.JobsSubmitted/2 {
		t.Errorf("the schedulers placed %d tasks, scheduled %d of %d jobs; want most of the window's submissions placed", sum.TasksPlaced, sum.JobsScheduled, sum.JobsSubmitted)
	}
	// The run ends at the window's last task event (at 900 s or just
	// before it).
	if sum.SimSeconds > 900 || sum.SimSeconds < 890 {
		t.Errorf("ran %.1f simulated seconds, want the window's last task event (≤900 s)", sum.SimSeconds)
	}
	// The trace's own allocation at the opening is about half the cell
	// (at twice the recorded capacities); ours starts from the same
	// placements.
	c := r.Summarize().Replay.Comparison
	if c.TraceCPUMean < 0.3 || c.TraceCPUMean > 0.8 || c.OursCPUMean < c.TraceCPUMean*0.8 {
		t.Errorf("mean CPU utilisation ours %.3f, the trace's %.3f; want the trace's about half the cell and ours not far below", c.OursCPUMean, c.TraceCPUMean)
	}
	if st.EventsApplied > ts.Events {
		t.Errorf("applied %d events of %d read", st.EventsApplied, ts.Events)
	}
}

// Jobs leave the cell (deleted a retention window after they finish) and
// the replay keeps nothing of them: their rows go to jobs.csv as they
// leave, the rest at the end, each job once; the summary counts them all.
func TestReplayRetiresJobs(t *testing.T) {
	dir := t.TempDir()
	sy := google2011.Synthetic{Machines: 40, Events: 6000, Seed: 3, MeanTasks: 4, MeanRun: 300, ShardLines: 2500}
	if err := sy.Write(dir); err != nil {
		t.Fatal(err)
	}
	var jobs bytes.Buffer
	cfg := DefaultConfig()
	cfg.Format, cfg.Trace, cfg.JobsCSV = "google2011", dir, &jobs
	r := replayed(t, cfg)
	live := 0
	for _, run := range r.Sim.Runners() {
		live += len(run.Records())
	}
	if err := r.FinishJobsCSV(); err != nil {
		t.Fatal(err)
	}
	sum := r.Summarize()
	rows := strings.Split(strings.TrimSpace(jobs.String()), "\n")[1:]
	seen := map[string]bool{}
	for _, row := range rows {
		name := row[:strings.IndexByte(row, ',')]
		if seen[name] {
			t.Fatalf("job %s twice in jobs.csv", name)
		}
		seen[name] = true
	}
	t.Logf("%d jobs, %d left the cell during the run, %d still held at the end", sum.Replay.Stats.JobsSubmitted, len(rows)-live, live)
	if int64(len(rows)) != sum.Replay.Stats.JobsSubmitted || sum.JobsSubmitted != len(rows) {
		t.Errorf("jobs.csv has %d jobs, the summary %d, the replay submitted %d", len(rows), sum.JobsSubmitted, sum.Replay.Stats.JobsSubmitted)
	}
	if live*2 > len(rows) {
		t.Errorf("%d of %d jobs still held at the end; want most retired as they left the cell", live, len(rows))
	}
	if len(r.actor.jobs) != live {
		t.Errorf("the replay holds %d jobs' trace facts, the runners %d records; want only the live ones", len(r.actor.jobs), live)
	}
	if sum.Replay.Comparison.Jobs < len(rows)*9/10 {
		t.Errorf("compared %d jobs of %d", sum.Replay.Comparison.Jobs, len(rows))
	}
}

// --machines N keeps N of the machines at the opening and the jobs in the
// same share.
func TestReplayMachinesSubset(t *testing.T) {
	full := runExcerpt(t, func(c *Config) { c.To = time.Second; c.Overcommit = 2 }).Stats()
	sub := runExcerpt(t, func(c *Config) { c.To = time.Second; c.Overcommit = 2; c.Machines = 1000 }).Stats()
	if sub.MachinesAdded != 1000 {
		t.Errorf("--machines 1000 added %d machines", sub.MachinesAdded)
	}
	share := float64(sub.JobsSubmitted) / float64(full.JobsSubmitted)
	if want := 1000.0 / float64(full.MachinesAdded); share < want*0.8 || share > want*1.2 {
		t.Errorf("kept %d of %d jobs (%.3f), want about the machines' share %.3f", sub.JobsSubmitted, full.JobsSubmitted, share, want)
	}
	cfg := DefaultConfig()
	cfg.Format, cfg.Trace, cfg.Machines, cfg.Sample = "google2011", excerptDir, 10, 0.5
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--machines") {
		t.Errorf("--machines with --sample: %v, want an error naming them", err)
	}
}
