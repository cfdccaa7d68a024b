package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchPlanCollect: `omega bench NAME --plan` prints one omega sim
// command per run; running each (real processes of the binary, through
// the shell, as a batch system would) and then --collect gives the same
// results.csv as the sweep run directly, byte for byte, and the same
// report. A second direct run into the same directory resumes: it runs
// nothing and writes the same results.
func TestBenchPlanCollect(t *testing.T) {
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	direct, planned, collected := filepath.Join(root, "direct"), filepath.Join(root, "planned"), filepath.Join(root, "collected")
	args := []string{"bench", "n-batch", "--quick", "--seeds", "2", "--days", "0.05"}
	if _, stderr, err := run(t, "", append(args, "--out", direct)...); err != nil {
		t.Fatalf("direct run: %v\n%s", err, stderr)
	}
	plan, stderr, err := run(t, "", append(args, "--plan", "--plan-binary", bin, "--out", planned)...)
	if err != nil {
		t.Fatalf("--plan: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(plan), "\n")
	if len(lines) != 8 { // 4 cells x 2 seeds
		t.Fatalf("--plan printed %d lines, want 8:\n%s", len(lines), plan)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, bin+" sim ") || !strings.Contains(l, "--out="+filepath.Join(planned, "runs")) {
			t.Fatalf("plan line %q: want %s sim ... --out=%s/runs/...", l, bin, planned)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, "sh", "-c", l).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", l, err, out)
		}
	}
	if _, stderr, err := run(t, "", append(args, "--collect", planned, "--out", collected)...); err != nil {
		t.Fatalf("--collect: %v\n%s", err, stderr)
	}
	for _, f := range []string{"results.csv", "report.md", "summary.json", "n-batch-conflicts.png"} {
		a, _ := os.ReadFile(filepath.Join(direct, f))
		b, err := os.ReadFile(filepath.Join(collected, f))
		if err != nil || len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the collected plan's differs from the direct run's (%d and %d bytes, %v)", f, len(a), len(b), err)
		}
	}
	// Resume: nothing left to run, the same results.
	before, _ := os.ReadFile(filepath.Join(direct, "results.csv"))
	_, stderr, err = run(t, "", append(args, "--out", direct)...)
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, stderr)
	}
	if strings.Contains(stderr, "simulated hours") {
		t.Errorf("the second run simulated again instead of resuming:\n%s", stderr)
	}
	after, _ := os.ReadFile(filepath.Join(direct, "results.csv"))
	if !bytes.Equal(before, after) {
		t.Error("the resumed run's results.csv differs")
	}
	// A run missing from the collected directory is named.
	os.Remove(filepath.Join(planned, "runs", "batch_schedulers=4_batch_load=10", "seed-2", "summary.json"))
	_, stderr, err = run(t, "", append(args, "--collect", planned, "--out", collected)...)
	if err == nil || !strings.Contains(stderr, "batch_schedulers=4_batch_load=10/seed-2") {
		t.Errorf("--collect with a run missing: err %v, stderr %s; want one naming the run", err, stderr)
	}
}
