package main_test

import (
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
