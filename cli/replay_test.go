package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var excerpt2011 = filepath.Join("..", "..", "shared", "traces", "google-clusterdata-2011-2")

// writeTable writes one gzipped shard of a 2011 table under dir.
func writeTable(t *testing.T, dir, table string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, table), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(strings.Join(lines, "\n") + "\n"))
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, table, "part-00000-of-00001.csv.gz"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A small trace in the 2011 format: two machines, a job of two tasks
// submitted at 10 s that runs 60 s, and one corrupt row (a task index that
// is not a number) on line 3 of task_events.
func smallTrace(t *testing.T) string {
	dir := t.TempDir()
	writeTable(t, dir, "machine_events",
		"0,1,0,P,0.5,0.25",
		"0,2,0,P,0.5,0.25")
	writeTable(t, dir, "task_events",
		"10000000,,7,0,,0,u,0,2,0.1,0.05,0,0",
		"10000000,,7,1,,0,u,0,2,0.1,0.05,0,0",
		"10000000,,7,x,,0,u,0,2,0.1,0.05,0,0",
		"12000000,,7,0,1,1,u,0,2,0.1,0.05,0,0",
		"12000000,,7,1,2,1,u,0,2,0.1,0.05,0,0",
		"72000000,,7,0,1,4,u,0,2,0.1,0.05,0,0",
		"72000000,,7,1,2,4,u,0,2,0.1,0.05,0,0")
	return dir
}

// TestReplayBadInput: bad flags are errors naming the flag; a corrupt row
// is an error naming its file and line with --strict.
func TestReplayBadInput(t *testing.T) {
	tr := smallTrace(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--json", "--trace", tr}, "--format"},
		{[]string{"replay", "--json", "--format", "google2011"}, "--trace"},
		{[]string{"replay", "--json", "--format", "google2012", "--trace", tr}, "--format"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", tr, "--sample", "0"}, "--sample"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", tr, "--overcommit", "0.5"}, "--overcommit"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", tr, "--from", "2h", "--to", "1h"}, "--from"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", tr, "--machine-memory", "lots"}, "--machine-memory"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", tr, "--evictions", "maybe"}, "--evictions"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", tr, "--conflict", "medium"}, "--conflict"},
		{[]string{"replay", "--format", "google2011", "--trace", tr}, "--out"},
		{[]string{"replay", "--json", "--format", "google2011", "--trace", filepath.Join(tr, "absent")}, "absent"},
		{[]string{"replay", "--json", "--strict", "--format", "google2011", "--trace", tr}, "part-00000-of-00001.csv.gz:3"},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}

// TestReplaySmallTrace: without --strict the corrupt row is counted by
// cause and skipped, the rest replayed: two machines, one job of two
// tasks, placed by the batch scheduler, running their trace runtime; the
// run ends at the last task event.
func TestReplaySmallTrace(t *testing.T) {
	out := t.TempDir()
	if _, err := run(t, "replay", "--format", "google2011", "--trace", smallTrace(t), "--out", out); err != nil {
		t.Fatal(err)
	}
	var s struct {
		SimSeconds    float64 `json:"sim_seconds"`
		Machines      int     `json:"machines"`
		JobsScheduled int     `json:"jobs_scheduled"`
		TasksPlaced   int     `json:"tasks_placed"`
		Replay        struct {
			Reader struct {
				Skipped map[string]int64 `json:"skipped"`
			} `json:"reader"`
			Stats struct {
				JobsSubmitted  int64 `json:"jobs_submitted"`
				TasksSubmitted int64 `json:"tasks_submitted"`
			} `json:"stats"`
			Comparison struct {
				Jobs      int     `json:"jobs"`
				TraceP50S float64 `json:"trace_wait_p50_s"`
			} `json:"comparison"`
		} `json:"replay"`
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	var skipped int64
	for _, n := range s.Replay.Reader.Skipped {
		skipped += n
	}
	if skipped != 1 {
		t.Errorf("skipped %v, want the one corrupt row", s.Replay.Reader.Skipped)
	}
	// The run starts at trace time 0 and ends at the last task event, 72 s.
	if s.SimSeconds != 72 || s.Machines != 2 || s.Replay.Stats.JobsSubmitted != 1 || s.Replay.Stats.TasksSubmitted != 2 {
		t.Errorf("summary %+v; want 72 s, 2 machines, 1 job of 2 tasks", s)
	}
	if s.JobsScheduled != 1 || s.TasksPlaced != 2 {
		t.Errorf("scheduled %d jobs, placed %d tasks; want the job and both tasks", s.JobsScheduled, s.TasksPlaced)
	}
	// The trace placed the job whole 2 s after its submission.
	if s.Replay.Comparison.Jobs != 1 || s.Replay.Comparison.TraceP50S != 2 {
		t.Errorf("comparison %+v; want the one job, its trace wait 2 s", s.Replay.Comparison)
	}
	// Two machines of 16 cores and 32 GiB (0.5 and 0.25 of 32 cores and
	// 128 GiB); the tasks ask for 3.2 cores and 6.4 GiB each: both placed,
	// a fifth of the cell, at the minute's sample, ours and the trace's.
	util, _ := os.ReadFile(filepath.Join(out, "utilization.csv"))
	if !strings.Contains(string(util), "\n60,0.200000,0.200000,0.200000,0.200000\n") {
		t.Errorf("utilization.csv:\n%s\nwant a fifth of the cell allocated at 60 s, by both", util)
	}
	if png, err := os.ReadFile(filepath.Join(out, "utilization.png")); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("utilization.png: %v, not a PNG", err)
	}
	jobs, _ := os.ReadFile(filepath.Join(out, "jobs.csv"))
	lines := strings.Split(strings.TrimSpace(string(jobs)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "7.1,7,batch-0,batch,2,10.000,") || !strings.Contains(lines[1], ",2.000,2.000,") {
		t.Errorf("jobs.csv:\n%s\nwant the job, submitted at 10 s, placed by the trace 2 s later (its first task and both)", jobs)
	}
}

// TestReplayExcerptDeterministic: two replays of a window of the genuine
// excerpt write the same bytes (summary.json outside its host object).
func TestReplayExcerptDeterministic(t *testing.T) {
	if _, err := os.Stat(filepath.Join(excerpt2011, "task_events")); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("Google 2011 trace excerpt not found at %s; skipping", excerpt2011)
	}
	var outs [2]string
	for i := range outs {
		outs[i] = t.TempDir()
		if _, err := run(t, "replay", "--format", "google2011", "--trace", excerpt2011, "--to", "11m", "--overcommit", "2", "--out", outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"summary.json", "jobs.csv", "schedulers.csv", "utilization.csv", "utilization.png"} {
		a, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(outs[1], name))
		if name == "summary.json" {
			a, b = withoutHost(t, a), withoutHost(t, b)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two replays of one window", name)
		}
		if len(a) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
}

// TestReplaySaturationWarnsOnStderr: a replay whose cell saturates says so
// on stderr, with what replay's own flags can do about it (it has no
// --load), and keeps the warning in summary.json.
func TestReplaySaturationWarnsOnStderr(t *testing.T) {
	if _, err := os.Stat(filepath.Join(excerpt2011, "task_events")); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("Google 2011 trace excerpt not found at %s; skipping", excerpt2011)
	}
	out := t.TempDir()
	cmd := newRootCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"replay", "--format", "google2011", "--trace", excerpt2011, "--machines", "100", "--to", "1h", "--out", out})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "warning: the cell is saturated: mean CPU utilisation"
	if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "raise --overcommit") || strings.Contains(stderr.String(), "--load") {
		t.Fatalf("stderr %q, want %q naming --overcommit and not --load", stderr.String(), want)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil || !strings.Contains(string(b), "raise --overcommit") {
		t.Fatalf("summary.json: %v, no warning naming --overcommit", err)
	}
}
