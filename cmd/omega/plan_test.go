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

// TestBenchPlanParallel: `omega bench NAME --plan --plan-format parallel`
// is a GNU parallel job file. Run with `parallel -j 2 --joblog LOG` (each
// line a job run through the shell), its runs, then --collect, give the
// results.csv of the sweep run directly, byte for byte, and the joblog an
// exit 0 per run. The plan's directory needs quoting (a space and a
// quote). Without GNU parallel on PATH that variant skips, saying why, and
// the "sh" variant runs the same job file a line at a time under /bin/sh
// -c (what GNU parallel does with each line), so the path from the plan to
// the collected results is exercised wherever the tests run.
func TestBenchPlanParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The cheapest quick sweep: batch-load's three cells, smaller still.
	args := []string{"bench", "batch-load", "--quick", "--days", "0.02", "--machines", "200"}
	direct := filepath.Join(t.TempDir(), "direct")
	if _, stderr, err := run(t, "", append(args, "--out", direct)...); err != nil {
		t.Fatalf("direct run: %v\n%s", err, stderr)
	}
	want, err := os.ReadFile(filepath.Join(direct, "results.csv"))
	if err != nil || bytes.Count(want, []byte("\n")) != 4 {
		t.Fatalf("the direct run's results.csv: %v, want a header and 3 rows:\n%s", err, want)
	}
	for _, runner := range []struct {
		name string
		run  func(t *testing.T, plan, dir string)
	}{
		{"sh", func(t *testing.T, plan, _ string) {
			for _, line := range strings.Split(strings.TrimSuffix(plan, "\n"), "\n") {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				out, err := exec.CommandContext(ctx, "/bin/sh", "-c", line).CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("%s: %v\n%s", line, err, out)
				}
			}
		}},
		{"gnu-parallel", func(t *testing.T, plan, dir string) {
			parallel, err := exec.LookPath("parallel")
			if err != nil {
				t.Skip("GNU parallel is not on PATH (.ci/run installs Debian's parallel)")
			}
			if v, _ := exec.Command(parallel, "--version").Output(); !bytes.Contains(v, []byte("GNU parallel")) {
				t.Skipf("%s is not GNU parallel (moreutils' parallel takes other arguments)", parallel)
			}
			joblog := filepath.Join(dir, "joblog")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, parallel, "-j", "2", "--joblog", joblog)
			cmd.Stdin = strings.NewReader(plan)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("parallel -j 2 < plan: %v\n%s", err, out)
			}
			// The joblog: a header, then a row per run, its exit value in
			// the seventh column.
			b, err := os.ReadFile(joblog)
			rows := strings.Split(strings.TrimSpace(string(b)), "\n")
			if err != nil || len(rows) != 4 {
				t.Fatalf("the joblog: %v, %d lines, want a header and 3 runs:\n%s", err, len(rows), b)
			}
			for _, r := range rows[1:] {
				if f := strings.Split(r, "\t"); len(f) < 9 || f[6] != "0" {
					t.Errorf("a joblog row without exit value 0: %q", r)
				}
			}
		}},
	} {
		t.Run(runner.name, func(t *testing.T) {
			dir := t.TempDir()
			planned := filepath.Join(dir, "planned dir's")
			plan, stderr, err := run(t, "", append(args, "--plan", "--plan-format", "parallel", "--plan-binary", bin, "--out", planned)...)
			if err != nil {
				t.Fatalf("--plan: %v\n%s", err, stderr)
			}
			if n := strings.Count(plan, "\n"); n != 3 || !strings.Contains(plan, `'--out=`+planned[:len(planned)-2]+`'\''s/runs/`) {
				t.Fatalf("the plan: %d lines, want 3, each writing under %s, quoted:\n%s", n, planned, plan)
			}
			runner.run(t, plan, dir)
			collected := filepath.Join(dir, "collected")
			if _, stderr, err := run(t, "", append(args, "--collect", planned, "--out", collected)...); err != nil {
				t.Fatalf("--collect: %v\n%s", err, stderr)
			}
			got, err := os.ReadFile(filepath.Join(collected, "results.csv"))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("results.csv collected from the plan's runs differs from the direct run's (%v):\n%s\nwant\n%s", err, got, want)
			}
		})
	}
}
