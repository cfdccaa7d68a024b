package experiment

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Every experiment lays out a grid whose cells have distinct ids, their
// axes in the experiment's order, and the paper's full-size cell; --quick
// makes it smaller.
func TestGrids(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "arch,batch-load,n-batch,service-times,conflict-modes,mapreduce,raw-vs-mediated,replay,all" {
		t.Fatalf("names %s", got)
	}
	for _, e := range All() {
		if e.NeedsTrace() {
			if slices.Contains(Synthetic(), e) {
				t.Errorf("%s needs a trace, yet omega bench all runs it", e.Name)
			}
			continue // TestReplayGrid
		}
		full, err := e.Cells(Size{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		quick, _ := e.Cells(Size{Quick: true}, nil)
		if len(quick) > len(full) || len(quick) == 0 {
			t.Errorf("%s: %d quick cells, %d full", e.Name, len(quick), len(full))
		}
		for _, c := range full {
			if len(c.Axes) != len(e.Axes) {
				t.Errorf("%s %s: axes %v, want %v", e.Name, c.ID, c.Axes, e.Axes)
			}
			for i, a := range c.Axes {
				if a.Name != e.Axes[i] {
					t.Errorf("%s %s: axis %d is %s, want %s", e.Name, c.ID, i, a.Name, e.Axes[i])
				}
			}
			days := "7"
			if c.Axis("architecture") == "two-level" {
				days = "1" // as the paper's two-level runs
			}
			if c.Flag("machines") != "10000" || c.Flag("days") != days || c.Flag("arrivals") != "empirical" {
				t.Errorf("%s %s: flags %v", e.Name, c.ID, c.Flags)
			}
			if strings.ContainsAny(c.ID, "/ ") {
				t.Errorf("%s: cell id %q is not a directory name", e.Name, c.ID)
			}
		}
	}
}

// Overrides apply to every cell, replacing the experiment's value in
// place; a flag the grid sets is refused, naming it.
func TestOverrides(t *testing.T) {
	e, err := Lookup("arch")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := e.Cells(Size{}, []Param{{"machines", "500"}, {"load", "2"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		if c.Flags[0] != (Param{"machines", "500"}) || c.Flag("load") != "2" {
			t.Fatalf("%s: %v", c.ID, c.Flags)
		}
	}
	if _, err := e.Cells(Size{}, []Param{{"t-job", "batch=1s"}}); err == nil || !strings.Contains(err.Error(), "--t-job") {
		t.Errorf("overriding the swept t-job: %v", err)
	}
	if _, err := Lookup("fig99"); err == nil || !strings.Contains(err.Error(), "arch") {
		t.Errorf("an unknown experiment: %v", err)
	}
}

// The plan is one command per run with its seed and directory, quoted for
// a shell where a value needs it.
func TestPlan(t *testing.T) {
	e, _ := Lookup("mapreduce")
	s, err := NewSweep(e, Size{Quick: true}, []Param{{"load", "1 2"}}, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.Plan(&b, "omega", "/out dir"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 10 { // 4 policies and one more map-tasks value, 2 seeds each
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	want := "omega sim --machines=1000 --days=0.25 --arrivals=empirical --placement=random-first-fit --mapreduce-share=0.2 '--load=1 2' --schedulers=batch=1,mapreduce=1,service=1 --mapreduce-policy=none --map-tasks-per-worker=16 --seed=7 '--out=/out dir/runs/mapreduce_policy=none_map_tasks_per_worker=16/seed-7'"
	if lines[0] != want {
		t.Errorf("first line\n %s\nwant\n %s", lines[0], want)
	}
	if !strings.Contains(lines[1], "--seed=8") {
		t.Errorf("second line %s: want seed 8", lines[1])
	}
}

// Execute runs what is not done, resumes what is, and stops the others
// when a run fails; a run whose arguments changed runs again.
func TestExecuteResumes(t *testing.T) {
	e, _ := Lookup("batch-load")
	s, _ := NewSweep(e, Size{Quick: true}, nil, 1, 2)
	out := t.TempDir()
	var ran atomic.Int32
	fake := func(ctx context.Context, args []string, dir string, tick func()) error {
		ran.Add(1)
		tick()
		return os.WriteFile(filepath.Join(dir, "utilization.csv"), []byte("sim_seconds,cpu,memory\n"), 0o644)
	}
	hours := 0
	progress := func(total int) func() { hours = total; return func() {} }
	if err := s.Execute(context.Background(), out, 2, fake, progress); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 6 || hours != 6*6 {
		t.Fatalf("ran %d runs over %d hours, want 6 over 36", ran.Load(), hours)
	}
	ran.Store(0)
	if err := s.Execute(context.Background(), out, 2, fake, progress); err != nil || ran.Load() != 0 {
		t.Fatalf("resumed: ran %d, err %v", ran.Load(), err)
	}
	// Another seed range shares no run; other flags share none either.
	s2, _ := NewSweep(e, Size{Quick: true}, []Param{{"load", "2"}}, 1, 1)
	if err := s2.Execute(context.Background(), out, 1, fake, progress); err != nil || ran.Load() != 3 {
		t.Fatalf("with other flags: ran %d, err %v", ran.Load(), err)
	}
	if s.Runs[0].Done(out) {
		t.Error("a run rerun with other flags still counts as done with the old ones")
	}
	boom := errors.New("boom")
	failing := func(ctx context.Context, args []string, dir string, tick func()) error { return boom }
	if err := s.Execute(context.Background(), out, 2, failing, progress); !errors.Is(err, boom) || !strings.Contains(err.Error(), "batch_load=1 seed 1") {
		t.Errorf("a failing run: %v", err)
	}
}

// The replay experiment sweeps the architectures and t_job(service) over
// one trace window: its cells take the user's trace, window and cut, run
// `omega replay`, and --quick cuts the window and the machines unless the
// user says otherwise.
func TestReplayGrid(t *testing.T) {
	e, err := Lookup("replay")
	if err != nil || !e.NeedsTrace() || e.Cmd() != "replay" {
		t.Fatalf("replay: %v, needs a trace %v", err, e != nil && e.NeedsTrace())
	}
	user := []Param{{"format", "google2011"}, {"trace", "/t"}, {"to", "2h"}}
	full, err := e.Cells(Size{}, user)
	if err != nil {
		t.Fatal(err)
	}
	quick, _ := e.Cells(Size{Quick: true}, user[:2])
	if len(full) != 16 || len(quick) != 8 {
		t.Errorf("%d full cells, %d quick; want 16 and 8", len(full), len(quick))
	}
	for _, c := range full {
		if c.Flag("format") != "google2011" || c.Flag("trace") != "/t" || c.Flag("to") != "2h" || c.Flag("machines") != "" || c.Flag("days") != "" {
			t.Errorf("%s: flags %v", c.ID, c.Flags)
		}
		if want := "batch=0.1s,service=" + c.Axis("t_job_service") + "s"; c.Flag("architecture") != c.Axis("architecture") || c.Flag("t-job") != want {
			t.Errorf("%s: flags %v", c.ID, c.Flags)
		}
	}
	for _, c := range quick {
		if c.Flag("machines") != "1000" || c.Flag("to") != "30m" {
			t.Errorf("quick %s: flags %v", c.ID, c.Flags)
		}
	}
	s, _ := NewSweep(e, Size{}, user, 1, 1)
	if h := s.Runs[0].hours(); h != 2 {
		t.Errorf("a 2h window: %d hours", h)
	}
	s, _ = NewSweep(e, Size{}, user[:2], 1, 1)
	if h := s.Runs[0].hours(); h != -1 {
		t.Errorf("a window to the trace's end: %d hours, want -1 (unknown)", h)
	}
	var b strings.Builder
	s.Plan(&b, "omega", "/o")
	if !strings.HasPrefix(b.String(), "omega replay --schedulers=batch=1,service=1 --format=google2011 --trace=/t --architecture=single-path --t-job=batch=0.1s,service=0.1s --seed=1 --out=/o/runs/") {
		t.Errorf("plan:\n%s", b.String())
	}
	if _, err := e.Cells(Size{}, []Param{{"architecture", "shared"}}); err == nil {
		t.Error("overriding the swept architecture")
	}
}
