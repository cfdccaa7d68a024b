package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/omega-cell/omega/bench/experiment"
)

// benchTable is an experiment's results.csv, by column.
type benchTable struct {
	head []string
	rows []map[string]string
}

func readBenchTable(t *testing.T, path string) benchTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("%s: %v (%d records)", path, err, len(recs))
	}
	tb := benchTable{head: recs[0]}
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		tb.rows = append(tb.rows, m)
	}
	return tb
}

// num is a row's figure (0 when empty).
func (tb benchTable) num(t *testing.T, row map[string]string, col string) float64 {
	t.Helper()
	if row[col] == "" {
		return 0
	}
	v, err := strconv.ParseFloat(row[col], 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", col, row[col], err)
	}
	return v
}

// series is col over the rows where the other columns have the values
// given (name, value pairs), in results.csv order.
func (tb benchTable) series(t *testing.T, col string, where ...string) []float64 {
	t.Helper()
	var out []float64
	for _, r := range tb.rows {
		ok := true
		for k := 0; k+1 < len(where); k += 2 {
			if r[where[k]] != where[k+1] {
				ok = false
			}
		}
		if ok {
			out = append(out, tb.num(t, r, col))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no rows with %v", where)
	}
	return out
}

func nonDecreasing(xs []float64) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] < xs[i-1] {
			return false
		}
	}
	return true
}

var updateExpected = flag.Bool("update-expected", false, "TestBenchAllQuick: rewrite the quick bands of bench/experiment/expected to what the run measured")

// TestBenchAllQuick runs every experiment at --quick, as `omega bench all
// --quick` does, and checks each output's shape: the files, results.csv's
// columns (every flag of the grid and the metrics the analysis reads, a
// row per run) and the trends the engine guarantees; and holds every
// finding to its expected quick band (bench/experiment/expected: the
// verdict and key metrics of the quick run when the band was written;
// -update-expected rewrites the bands to this run's).
func TestBenchAllQuick(t *testing.T) {
	out := t.TempDir()
	if msg, err := run(t, "bench", "all", "--quick", "--store-cost=false", "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	index, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The index says, finding by finding, whether each is in its expected
	// band (the quick run's own bands: every finding with one is).
	if !strings.Contains(string(index), "| verdict | in its expected band |") || strings.Contains(string(index), "| **no** |") || !strings.Contains(string(index), "| yes |") {
		t.Errorf("the index report's in-band column:\n%s", index)
	}
	var reps []experiment.Report
	defer func() { checkExpected(t, reps) }()
	for _, e := range experiment.Synthetic() {
		dir := filepath.Join(out, e.Name)
		if !strings.Contains(string(index), "]("+e.Name+"/report.md)") {
			t.Errorf("the index report does not link %s", e.Name)
		}
		rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil || !strings.Contains(string(rep), "## Findings") || !strings.Contains(string(rep), "--arrivals empirical") {
			t.Errorf("%s/report.md: %v, findings and arrivals said: %v", e.Name, err, strings.Contains(string(rep), "## Findings"))
		}
		if !strings.Contains(string(rep), "| reference | expected | measured | verdict | in band |") || !strings.Contains(string(rep), "## Expected results") {
			t.Errorf("%s/report.md: no reference, expected and in-band columns, or no expected results", e.Name)
		}
		var sum experiment.Report
		if b, err := os.ReadFile(filepath.Join(dir, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil || len(sum.Findings) == 0 || !sum.Quick {
			t.Errorf("%s/summary.json: %v, %d findings", e.Name, err, len(sum.Findings))
		}
		reps = append(reps, sum)
		pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
		if len(pngs) == 0 {
			t.Errorf("%s: no figures", e.Name)
		}
		for _, p := range pngs {
			if b, _ := os.ReadFile(p); !bytes.HasPrefix(b, []byte("\x89PNG")) {
				t.Errorf("%s is not a PNG", p)
			}
		}
		tb := readBenchTable(t, filepath.Join(dir, "results.csv"))
		if len(tb.rows) != sum.Runs {
			t.Errorf("%s: %d rows, %d runs", e.Name, len(tb.rows), sum.Runs)
		}
		for _, col := range []string{"experiment", "cell", "seed", "machines", "days", "arrivals", "jobs_submitted", "violations", "batch_wait_mean_s"} {
			if !strings.Contains(","+strings.Join(tb.head, ",")+",", ","+col+",") {
				t.Errorf("%s: results.csv has no column %s: %v", e.Name, col, tb.head)
			}
		}
		if h, err := os.ReadFile(filepath.Join(dir, "host.csv")); err != nil || !strings.HasPrefix(string(h), "cell,seed,wall_seconds") {
			t.Errorf("%s/host.csv: %v", e.Name, err)
		}
		switch e.Name {
		case "arch":
			if b := tb.series(t, "sched_monolithic_busyness_median", "architecture", "single-path"); !nonDecreasing(b) || b[len(b)-1] < 0.8 {
				t.Errorf("arch: single-path busyness by t_job(service) %v: want non-decreasing, saturated at 100 s", b)
			}
			sp := tb.series(t, "batch_wait_mean_s", "architecture", "single-path")
			mp := tb.series(t, "batch_wait_mean_s", "architecture", "multi-path")
			if mp[len(mp)-1] >= sp[len(sp)-1] {
				t.Errorf("arch: batch wait at t_job(service) 100 s: multi-path %v, single-path %v", mp, sp)
			}
		case "batch-load":
			if s := tb.series(t, "batch_jobs_submitted"); !nonDecreasing(s) || s[len(s)-1] < 5*s[0] {
				t.Errorf("batch-load: batch jobs by load %v", s)
			}
			if b := tb.series(t, "sched_batch_busyness_median"); !nonDecreasing(b) {
				t.Errorf("batch-load: busyness by load %v", b)
			}
		case "n-batch":
			for _, r := range tb.rows {
				want := strings.TrimPrefix(strings.Split(r["schedulers"], ",")[0], "batch=")
				if r["sched_batch_instances"] != want {
					t.Errorf("n-batch: %s ran %s batch schedulers", r["cell"], r["sched_batch_instances"])
				}
			}
		case "service-times":
			for _, tj := range []string{"batch=0.1s,service=0.1s", "batch=0.1s,service=10s"} {
				if b := tb.series(t, "sched_service_busyness_median", "t-job", tj); !nonDecreasing(b) {
					t.Errorf("service-times: busyness by t_task at %s: %v", tj, b)
				}
			}
		case "mapreduce":
			none := tb.series(t, "mapreduce_speedup_p80", "mapreduce-policy", "none")
			rel := tb.series(t, "mapreduce_speedup_p80", "mapreduce-policy", "relative-size")
			mp := tb.series(t, "mapreduce_speedup_p80", "mapreduce-policy", "max-parallelism")
			if none[0] != 1 || rel[0] > 4 || rel[0] < 1 || mp[0] < rel[0] {
				t.Errorf("mapreduce: speedup p80 none %v, relative-size %v (at most 4), max-parallelism %v", none, rel, mp)
			}
		case "raw-vs-mediated":
			// The engine guarantees the mediated store commits none of
			// what the faulty schedulers try, and a correct cell none at
			// all; the raw store commits every fault's (in this cell, with
			// these seeds, each has its chances).
			for _, r := range tb.rows {
				v := tb.num(t, r, "history_violations")
				faulty := strings.Contains(r["schedulers"], "faulty") || r["faulty-agent"] == "true"
				switch {
				case r["policy"] == "mediated" && v != 0, !faulty && v != 0:
					t.Errorf("raw-vs-mediated %s: %v violations committed", r["cell"], v)
				case r["policy"] == "raw" && faulty && v == 0:
					t.Errorf("raw-vs-mediated %s: the raw store committed nothing of the fault", r["cell"])
				case r["policy"] == "mediated" && faulty && tb.num(t, r, "rejected") == 0:
					t.Errorf("raw-vs-mediated %s: nothing rejected", r["cell"])
				}
			}
		}
	}
}

// checkExpected holds the quick run's findings to their expected bands,
// or, with -update-expected, rewrites the bands to them.
func checkExpected(t *testing.T, reps []experiment.Report) {
	t.Helper()
	if *updateExpected {
		if err := experiment.UpdateQuickBands(filepath.Join("..", experiment.ExpectedDir), reps); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the quick bands in %s: review the diff", experiment.ExpectedDir)
		return
	}
	bad := 0
	for _, rep := range reps {
		checks, err := experiment.CheckExpected(rep)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			if !c.OK() {
				bad++
				t.Errorf("%s", c.Problem())
			}
		}
	}
	if bad > 0 {
		t.Logf("%d findings out of their expected quick band. If the move is meant (a change of the engine, the workload or an analysis), rewrite the bands to this run's and review the diff:\n\tgo test ./cli -run TestBenchAllQuick -update-expected\nand say in the commit why the quick run moved; a full-size band (full:) is edited by hand, after a full run", bad)
	}
}

// A small 2011-format trace of three jobs (two batch, one service) on four
// machines; the trace placed each 1–2 s after its submission.
func benchTrace(t *testing.T) string {
	dir := t.TempDir()
	writeTable(t, dir, "machine_events", "0,1,0,P,0.5,0.25", "0,2,0,P,0.5,0.25", "0,3,0,P,0.5,0.25", "0,4,0,P,0.5,0.25")
	writeTable(t, dir, "task_events",
		"10000000,,7,0,,0,u,0,2,0.1,0.05,0,0",
		"10000000,,7,1,,0,u,0,2,0.1,0.05,0,0",
		"12000000,,7,0,1,1,u,0,2,0.1,0.05,0,0",
		"12000000,,7,1,2,1,u,0,2,0.1,0.05,0,0",
		"20000000,,8,0,,0,u,0,9,0.2,0.05,0,0",
		"21000000,,8,0,3,1,u,0,9,0.2,0.05,0,0",
		"30000000,,9,0,,0,u,0,0,0.1,0.05,0,0",
		"31000000,,9,0,4,1,u,0,0,0.1,0.05,0,0",
		"72000000,,7,0,1,4,u,0,2,0.1,0.05,0,0",
		"72000000,,7,1,2,4,u,0,2,0.1,0.05,0,0",
		"80000000,,8,0,3,4,u,0,9,0.2,0.05,0,0",
		"90000000,,9,0,4,4,u,0,0,0.1,0.05,0,0")
	return dir
}

// TestBenchReplay runs `omega bench replay --quick` on a small trace: it
// needs the trace; each run is the `omega replay` its plan prints (the
// same jobs.csv, byte for byte); results.csv has the trace's waits beside
// each architecture's; the report and figures are written; and `omega
// bench all` leaves the experiment out.
func TestBenchReplay(t *testing.T) {
	tr := benchTrace(t)
	out := t.TempDir()
	if _, err := run(t, "bench", "replay", "--quick", "--out", out); err == nil || !strings.Contains(err.Error(), "--format") || !strings.Contains(err.Error(), "--trace") {
		t.Errorf("without a trace: %v, want an error naming --format and --trace", err)
	}
	if _, err := run(t, "bench", "replay", "--quick", "--format", "google2011", "--trace", tr, "--evictions", "maybe", "--out", out); err == nil || !strings.Contains(err.Error(), "--evictions") {
		t.Errorf("a bad replay flag: %v, want an error naming it before anything runs", err)
	}
	if msg, err := run(t, "bench", "replay", "--quick", "--format", "google2011", "--trace", tr, "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	tb := readBenchTable(t, filepath.Join(out, "results.csv"))
	if len(tb.rows) != 8 {
		t.Fatalf("%d rows, want 8 (4 architectures x 2 decision times)", len(tb.rows))
	}
	for _, r := range tb.rows {
		// The trace placed every job whole, 1 to 2 s after submission.
		if r["trace_wait_p50_s"] == "" || tb.num(t, r, "trace_wait_p90_s") < 1 || tb.num(t, r, "trace_wait_p90_s") > 2 || r["replay_jobs_compared"] != "3" {
			t.Errorf("%s: trace waits p50 %s p90 %s over %s jobs", r["cell"], r["trace_wait_p50_s"], r["trace_wait_p90_s"], r["replay_jobs_compared"])
		}
		if r["trace"] != tr || r["format"] != "google2011" || r["jobs_submitted"] != "3" {
			t.Errorf("%s: trace %s format %s, %s jobs", r["cell"], r["trace"], r["format"], r["jobs_submitted"])
		}
		monolithic := r["sched_monolithic_instances"] == "1"
		if single := strings.HasSuffix(r["architecture"], "-path"); monolithic != single {
			t.Errorf("%s: a monolithic scheduler %v under %s", r["cell"], monolithic, r["architecture"])
		}
	}
	rep, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(rep), "omega replay ") || !strings.Contains(string(rep), "The production cluster") {
		t.Errorf("report.md: %v\n%s", err, rep)
	}
	for _, f := range []string{"replay-trace-waits.png", "replay-utilization.png", "replay-wait.png"} {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: %v", f, err)
		}
	}
	// A run is its own omega replay command line.
	runDir := filepath.Join(out, "runs", "architecture=shared_t_job_service=10", "seed-1")
	cmdLine, err := os.ReadFile(filepath.Join(runDir, "command.txt"))
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	args := append([]string{"replay"}, strings.Fields(string(cmdLine))...)
	if _, err := run(t, append(args, "--out", again)...); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(runDir, "jobs.csv"))
	b, _ := os.ReadFile(filepath.Join(again, "jobs.csv"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the sweep's run and omega replay with its arguments differ:\n%s\n%s", a, b)
	}
	plan, err := run(t, "bench", "all", "--quick", "--plan", "--out", t.TempDir())
	if err != nil || strings.Contains(plan, "replay") || !strings.Contains(plan, "omega sim") {
		t.Errorf("omega bench all --plan: %v; it must name no replay run", err)
	}
}
