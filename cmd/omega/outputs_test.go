package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutHoldingResultsRefused: a second simulation into a directory that
// holds the first's results is refused, naming the file and --force, and
// leaves them as they were; with --force it writes over them; with --seeds
// a seed directory's results count too.
func TestOutHoldingResultsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, extra := range [][]string{nil, {"--seeds", "2"}} {
		out := t.TempDir()
		args := append([]string{"sim", "--machines", "100", "--days", "0.02", "--out", out}, extra...)
		if _, errs, err := run(t, "", args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errs)
		}
		_, errs, err := run(t, "", args...)
		if err == nil || !strings.Contains(errs, "holds the results of an earlier run") || !strings.Contains(errs, "--force") {
			t.Fatalf("%v again: %v\n%s", args, err, errs)
		}
		if _, errs, err := run(t, "", append(args, "--force")...); err != nil {
			t.Fatalf("%v --force: %v\n%s", args, err, errs)
		}
	}
}

// TestReplayRefusesBadTraces: a --trace that is missing, or whose table
// file is not gzip though named so, or empty, fails the replay (exit
// non-zero) naming the flag or the file, and writes no results.
func TestReplayRefusesBadTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	shard := func(name string, body []byte) string {
		d := filepath.Join(dir, name)
		os.MkdirAll(filepath.Join(d, "task_events"), 0o755)
		os.WriteFile(filepath.Join(d, "task_events", "part-00000-of-00500.csv.gz"), body, 0o644)
		return d
	}
	for _, tc := range []struct{ trace, want string }{
		{filepath.Join(dir, "missing"), `--trace "` + filepath.Join(dir, "missing") + `": no such file or directory`},
		{shard("plain", []byte("0,,1,2,3,4,,5,6,7,8,9,10\n")), "part-00000-of-00500.csv.gz: not gzip, though its name says so"},
		{shard("empty", nil), "part-00000-of-00500.csv.gz: the file is empty (0 bytes)"},
	} {
		out := filepath.Join(dir, "out")
		_, errs, err := run(t, "", "replay", "--format", "google2011", "--trace", tc.trace, "--out", out)
		if err == nil || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: %v, want %q:\n%s", tc.trace, err, tc.want, errs)
		}
		if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
			t.Errorf("%s: results written", tc.trace)
		}
	}
}
