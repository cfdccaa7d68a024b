package main_test

import (
	"strings"
	"testing"
)

// TestNoProgressWhenRedirected: with stderr not a terminal (a pipe here, a
// log file or a CI job's output elsewhere), a simulation and a sweep draw
// no progress bar: no carriage return in what they write. With --seeds the
// medians over the seeds follow the seeds' own tables.
func TestNoProgressWhenRedirected(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, args := range [][]string{
		{"sim", "--machines", "100", "--days", "0.05", "--out", t.TempDir()},
		{"sim", "--machines", "100", "--days", "0.05", "--seeds", "2", "--out", t.TempDir()},
	} {
		out, errs, err := run(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errs)
		}
		// With --seeds, the medians' table after the seeds' own.
		if seeds := strings.Contains(strings.Join(args, " "), "--seeds 2"); seeds != strings.Contains(out, "medians over 2 seeds (1, 2), [min, max]:\njobs scheduled ") {
			t.Fatalf("%v: the medians' table printed %v, want %v:\n%s", args, !seeds, seeds, out)
		}
		if strings.Contains(errs, "\r") {
			t.Fatalf("%v wrote a progress bar into a redirected stderr: %q", args, errs)
		}
	}
}
