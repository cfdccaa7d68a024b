package cli

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/internal/finite"
)

// refused runs the command line with --out and --cpuprofile in a fresh
// directory and checks that it fails with an error containing every want,
// and that it wrote nothing: no --out directory, no profile.
func refused(t *testing.T, args []string, want ...string) {
	t.Helper()
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	full := append(slices.Clone(args), "--cpuprofile", filepath.Join(parent, "cpu.prof"))
	if args[0] != "demo" { // demo writes no results
		full = append(full, "--out", out)
	}
	_, err := run(t, full...)
	if err == nil {
		t.Errorf("%q: no error, want one naming %q", args, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q: err %q, want one naming %q", args, err, w)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%q: refused, yet wrote %v", args, names)
	}
}

// TestSimRefusesBadFlags: every bad flag value is refused before anything
// runs, by an error naming the flag, and nothing is written.
func TestSimRefusesBadFlags(t *testing.T) {
	maxSeed := strconv.FormatUint(math.MaxUint64, 10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--days", "0"}, "--days 0"},
		{[]string{"--days", "-1"}, "--days -1"},
		{[]string{"--days", "NaN"}, "--days NaN"},
		{[]string{"--days", "Inf"}, "--days +Inf"},
		{[]string{"--days", "1e-300"}, "--days 1e-300"},
		{[]string{"--days", "0.0009"}, "--days 0.0009"},
		{[]string{"--days", "3651"}, "--days 3651"},
		{[]string{"--schedulers", "batch=1x,service=1"}, "--schedulers batch=1x"},
		{[]string{"--schedulers", "batch=1.5,service=1"}, "--schedulers batch=1.5"},
		{[]string{"--schedulers", "batch=1e2,service=1"}, "--schedulers batch=1e2"},
		{[]string{"--schedulers", "batch=0,service=1"}, "--schedulers batch=0"},
		{[]string{"--schedulers", "batch=-1,service=1"}, "--schedulers batch=-1"},
		{[]string{"--schedulers", "batch=101,service=1"}, "--schedulers batch=101"},
		{[]string{"--schedulers", "batch=1,batch=2,service=1"}, "batch is named twice"},
		{[]string{"--schedulers", "batch=1,=1"}, "--schedulers"},
		{[]string{"--schedulers", ""}, "--schedulers"},
		{[]string{"--schedulers", "batch=1,service=1,magic=1"}, "--schedulers magic=1"},
		{[]string{"--schedulers", "service=1"}, "batch jobs"},
		{[]string{"--arrivals", "bursty"}, "--arrivals \"bursty\""},
		{[]string{"--architecture", "three-level"}, "--architecture \"three-level\""},
		{[]string{"--architecture", "two-level", "--offer-interval", "0s"}, "--offer-interval \"0s\""},
		{[]string{"--architecture", "two-level", "--allocator-time", "-1ms"}, "--allocator-time \"-1ms\""},
		{[]string{"--architecture", "two-level", "--offer-interval", "soon"}, "--offer-interval \"soon\""},
		{[]string{"--placement", "worst-fit"}, "--placement \"worst-fit\": want best-fit or random-first-fit"},
		{[]string{"--architecture", "two-level", "--offer-shares", "all"}, "--offer-shares \"all\": want frameworks or with-prefill"},
		{[]string{"--architecture", "two-level", "--offer-retry", "never"}, "--offer-retry \"never\": want decision or answer"},
		{[]string{"--architecture", "two-level", "--offers", "parallel"}, "--offers \"parallel\": want concurrent or serial"},
		{[]string{"--architecture", "two-level", "--offer-min", "tiny"}, "--offer-min \"tiny\": want google or small"},
		{[]string{"--gpu-machines", "1.5"}, "--gpu-machines 1.5"},
		{[]string{"--map-tasks-per-worker", "0"}, "--map-tasks-per-worker 0: want map tasks per requested worker: a whole number from 1 to 1000"},
		{[]string{"--map-tasks-per-worker", "1001"}, "--map-tasks-per-worker 1001"},
		{[]string{"--gpus-per-machine", "0", "--gpu-machines", "0.1"}, "--gpus-per-machine 0"},
		{[]string{"--gpu-jobs", "0.1"}, "--gpu-jobs 0.1"},
		{[]string{"--policy", "strict"}, "--policy \"strict\""},
		{[]string{"--architecture", "single-path", "--schedulers", "batch=2,service=1"}, "--architecture single-path"},
		{[]string{"--mapreduce-share", "NaN", "--schedulers", "batch=1,service=1,mapreduce=1"}, "--mapreduce-share NaN"},
		{[]string{"--mapreduce-share", "-0.1", "--schedulers", "batch=1,service=1,mapreduce=1"}, "--mapreduce-share -0.1"},
		{[]string{"--mapreduce-share", "1.5", "--schedulers", "batch=1,service=1,mapreduce=1"}, "--mapreduce-share 1.5"},
		{[]string{"--mapreduce-share", "Inf", "--schedulers", "batch=1,service=1,mapreduce=1"}, "--mapreduce-share +Inf"},
		{[]string{"--mapreduce-share", "-1"}, "--mapreduce-share -1"},
		{[]string{"--mapreduce-share", "0.3"}, "--mapreduce-share 0.3"},
		{[]string{"--load", "NaN"}, "--load NaN"},
		{[]string{"--load", "Inf"}, "--load +Inf"},
		{[]string{"--load", "-Inf"}, "--load -Inf"},
		{[]string{"--load", "-1"}, "--load -1"},
		{[]string{"--load", "0"}, "--load 0"},
		{[]string{"--load", "1e-300"}, "--load 1e-300"},
		{[]string{"--load", "0.009"}, "--load 0.009"},
		{[]string{"--load", "101"}, "--load 101"},
		{[]string{"--machines", "0"}, "--machines 0"},
		{[]string{"--machines", "-5"}, "--machines -5"},
		{[]string{"--machines", "1000001"}, "--machines 1000001"},
		{[]string{"--machine-failures-per-day", "NaN"}, "--machine-failures-per-day NaN"},
		{[]string{"--machine-failures-per-day", "-1"}, "--machine-failures-per-day -1"},
		{[]string{"--machines", "100", "--machine-failures-per-day", "2401"}, "--machine-failures-per-day 2401"},
		{[]string{"--seeds", "0"}, "--seeds 0"},
		{[]string{"--seeds", "1001"}, "--seeds 1001"},
		{[]string{"--seed", maxSeed, "--seeds", "2"}, "--seed " + maxSeed},
		{[]string{"--fleet-tick", "0s"}, "--fleet-tick"},
		{[]string{"--fleet-tick", "-1s"}, "--fleet-tick"},
		{[]string{"--fleet-tick", "2h"}, "--fleet-tick"},
		{[]string{"--fleet-tick", "fast"}, "--fleet-tick"},
		{[]string{"--t-job", "batch=-1s"}, "--t-job batch=-1s"},
		{[]string{"--t-job", "batch=2h"}, "--t-job batch=2h"},
		{[]string{"--t-job", "servce=1s"}, "--t-job servce=1s"},
		{[]string{"--t-job", "mapreduce=1s"}, "--t-job mapreduce=1s"},
		{[]string{"--t-task", "batch=2m"}, "--t-task batch=2m"},
		{[]string{"--route", "batch=magic"}, "--route batch=magic"},
		{[]string{"--route", "magic=batch"}, "--route magic=batch"},
		{[]string{"--route", "batch"}, "--route"},
		{[]string{"--conflict", "medium"}, "--conflict"},
		{[]string{"--commit", "some"}, "--commit"},
		{[]string{"--mapreduce-policy", "greedy"}, "--mapreduce-policy"},
		{[]string{"--decision-time", "wall"}, "--decision-time"},
	} {
		refused(t, append([]string{"sim"}, tc.args...), tc.want)
	}
}

// TestSimRefusesEveryProblemAtOnce: several bad flags, one error naming
// each.
func TestSimRefusesEveryProblemAtOnce(t *testing.T) {
	refused(t, []string{"sim", "--days", "0", "--load", "NaN", "--schedulers", "batch=1x,service=1", "--seeds", "0"},
		"--days 0", "--load NaN", "--schedulers batch=1x", "--seeds 0")
}

// TestSimRefusesBadConfig: the same mistakes through --config are refused,
// naming the file and the field, and nothing is written.
func TestSimRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		yaml, want string
	}{
		{"days: 0", "days 0"},
		{"days: -1", "days -1"},
		{"days: .nan", "days .nan"},
		{"days: .inf", "days .inf"},
		{"days: lots", "days"},
		{"schedulers: {batch: 1x, service: 1}", "schedulers batch=1x"},
		{"schedulers: {batch: 1.5, service: 1}", "schedulers batch=1.5"},
		{"schedulers: {batch: 0, service: 1}", "schedulers batch=0"},
		{"schedulers:\n  batch: .nan\n  service: 1", "schedulers.batch .nan"},
		{"schedulers: {service: 1}", "batch jobs"},
		{"schedulers: {batch: 1, service: 1, mapreduce: 1}\nmapreduce_share: .nan", "mapreduce_share .nan"},
		{"schedulers: {batch: 1, service: 1, mapreduce: 1}\nmapreduce_share: -0.1", "mapreduce_share -0.1"},
		{"schedulers: {batch: 1, service: 1, mapreduce: 1}\nmapreduce_share: 1.5", "mapreduce_share 1.5"},
		{"mapreduce_share: 0.3", "mapreduce_share 0.3"},
		{"load: .nan", "load .nan"},
		{"load: NaN", "load \"NaN\""},
		{"load: .inf", "load .inf"},
		{"load: -.Inf", "load -.Inf"},
		{"load: -1", "load -1"},
		{"load: 0", "load 0"},
		{"load: 1e-300", "load 1e-300"},
		{"load: 1e400", "load"},
		{"load: '1'", "load"},
		{"machines: 1.5", "machines 1.5"},
		{"machines: 0", "machines 0"},
		{"machines: 1e30", "machines"},
		{"seeds: 0", "seeds 0"},
		{"seeds: 2.5", "seeds 2.5"},
		{"seed: -1", "seed -1"},
		{"fleet_tick: 0s", "fleet_tick"},
		{"t_job: {service: 2h}", "t_job service=2h"},
		{"t_job: {servce: 2s}", "t_job servce=2s"},
		{"route: {batch: magic}", "route batch=magic"},
		{"machine_failures_per_day: -.inf", "machine_failures_per_day -.inf"},
		{"conflict: medium", "conflict"},
		{"days: [1]", "days"},
		{"machinez: 3", "machinez"},
		{"out: /tmp/x", "unknown field \"out\""},
	} {
		path := filepath.Join(dir, "c"+strconv.Itoa(i)+".yaml")
		if err := os.WriteFile(path, []byte(tc.yaml+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, []string{"sim", "--config", path}, "--config "+path, tc.want)
	}
}

// TestSimRefusesOutFile: --out naming a file is refused before the run.
func TestSimRefusesOutFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	_, err := run(t, "sim", "--out", f)
	if err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("err %v, want one naming --out", err)
	}
}

// TestSimRefusalLeavesOutAlone: a refused run leaves an existing --out
// directory as it was.
func TestSimRefusalLeavesOutAlone(t *testing.T) {
	out := t.TempDir()
	if _, err := run(t, "sim", "--days", "0", "--out", out); err == nil {
		t.Fatal("--days 0 accepted")
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("--out holds %d entries after a refused run", len(ents))
	}
}

// simSettings checks a command line as `omega sim` does, without running.
func simSettings(t *testing.T, args ...string) (sim.Config, int, error) {
	t.Helper()
	var s simCmd
	cmd := s.command()
	if err := cmd.ParseFlags(args); err != nil {
		return sim.Config{}, 0, err
	}
	err := cmd.PreRunE(cmd, nil)
	return s.cfg, s.seeds, err
}

// TestSimAcceptsBounds: the bounds themselves, and settings that mean
// what they say.
func TestSimAcceptsBounds(t *testing.T) {
	maxSeed := strconv.FormatUint(math.MaxUint64, 10)
	for _, args := range [][]string{
		{"--days", "0.001"}, {"--days", "3650"}, {"--load", "0.01"}, {"--load", "100"},
		{"--machines", "1"}, {"--machines", "1000000"}, {"--seeds", "1000"}, {"--seed", maxSeed}, {"--seed", "0"},
		{"--machines", "100", "--machine-failures-per-day", "2400"}, {"--fleet-tick", "1ms"}, {"--fleet-tick", "1h"},
		{"--t-job", "batch=0s,service=1h"}, {"--t-task", "batch=0s,service=1m"},
		{"--schedulers", "batch=100,service=1"},
		{"--schedulers", "batch=1,service=1,mapreduce=1", "--mapreduce-share", "1"},
		{"--schedulers", "service=1", "--route", "batch=service"},
	} {
		if _, _, err := simSettings(t, append(args, "--json")...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}

	cfg, seeds, err := simSettings(t, "--json", "--load", "2", "--seeds", "3", "--schedulers", " batch = 2 , service=1, mapreduce=1")
	if err != nil {
		t.Fatal(err)
	}
	def := workload.Default()
	if cfg.Workload.Load != 2 || cfg.Workload.BatchInterarrival != def.BatchInterarrival || cfg.Workload.ServiceInterarrival != def.ServiceInterarrival {
		t.Errorf("--load 2: load %v, interarrivals %v, %v", cfg.Workload.Load, cfg.Workload.BatchInterarrival, cfg.Workload.ServiceInterarrival)
	}
	if seeds != 3 || len(cfg.Schedulers) != 3 || cfg.Schedulers[0].Kind != "batch" || cfg.Schedulers[0].Count != 2 {
		t.Errorf("seeds %d, schedulers %+v", seeds, cfg.Schedulers)
	}
	if cfg.Workload.MapReduceShare != def.MapReduceShare {
		t.Errorf("mapreduce share %v with a mapreduce scheduler, want the default %v", cfg.Workload.MapReduceShare, def.MapReduceShare)
	}
	for _, tc := range []struct {
		args []string
		want float64
	}{
		{[]string{"--schedulers", "batch=1,service=1"}, 0},
		{[]string{"--schedulers", "batch=1,service=1,mapreduce=1", "--mapreduce-share", "0"}, 0},
		{[]string{"--schedulers", "batch=1,service=1,mapreduce=1", "--mapreduce-share", "0.5"}, 0.5},
	} {
		cfg, _, err := simSettings(t, append(tc.args, "--json")...)
		if err != nil || cfg.Workload.MapReduceShare != tc.want {
			t.Errorf("%q: share %v, err %v; want %v", tc.args, cfg.Workload.MapReduceShare, err, tc.want)
		}
	}
}

// TestSimConfigAndFlags: the config file's settings apply, a flag given
// explicitly wins over the file, and a bad field the flag overrides is not
// an error.
func TestSimConfigAndFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.yaml")
	os.WriteFile(path, []byte("days: 0\nload: 2\nmachines: 100\nschedulers: {batch: 2, service: 1}\nt_job: {service: 2s}\nfleet_tick: 10s\nseed: 7\nroute: {}\n"), 0o644)
	cfg, _, err := simSettings(t, "--json", "--config", path, "--days", "0.5", "--seed", "9")
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Workload
	if w.Days != 0.5 || w.Seed != 9 || w.Machines != 100 || w.Load != 2 || cfg.FleetTick != 10*time.Second {
		t.Errorf("workload %+v, fleet tick %v", w, cfg.FleetTick)
	}
	if len(cfg.Schedulers) != 2 || cfg.Schedulers[0].Count != 2 || cfg.Schedulers[1].TJob != 2*time.Second {
		t.Errorf("schedulers %+v", cfg.Schedulers)
	}
}

// TestBenchStoreRefusesBadFlags: bad values are refused before anything
// is created, naming the flag.
func TestBenchStoreRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--utilization", "NaN"}, "--utilization NaN"},
		{[]string{"--utilization", "0"}, "--utilization 0"},
		{[]string{"--utilization", "1"}, "--utilization 1"},
		{[]string{"--utilization", "Inf"}, "--utilization +Inf"},
		{[]string{"--duration", "0s"}, "--duration 0s"},
		{[]string{"--warmup", "-1s"}, "--warmup -1s"},
		{[]string{"--warmup", "0s"}, "--warmup 0s"},
		{[]string{"--machines", "0"}, "--machines 0"},
		{[]string{"--committers", "0"}, "--committers 0"},
		{[]string{"--claims", "0"}, "--claims 0"},
		{[]string{"--fill", "10"}, "--fill 10"},
		{[]string{"--machines", "10", "--fill", "10001"}, "--fill 10001"},
		{[]string{"--memtable-mb", "-1"}, "--memtable-mb -1"},
		{[]string{"--memtable-mb", "4096"}, "--memtable-mb 4096"},
		{[]string{"--durability", "maybe"}, "--durability"},
		{[]string{"--conflict", "medium"}, "--conflict"},
	} {
		refused(t, append([]string{"bench", "store"}, tc.args...), tc.want)
	}
}

// TestDemoRefusesBadFlags: likewise for omega demo.
func TestDemoRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--days", "0"}, "--days 0"},
		{[]string{"--days", "NaN"}, "--days NaN"},
		{[]string{"--load", "1e-300"}, "--load 1e-300"},
		{[]string{"--load", "Inf"}, "--load +Inf"},
		{[]string{"--machines", "0"}, "--machines 0"},
		{[]string{"--t-job-service", "-1s"}, "--t-job-service -1s"},
		{[]string{"--t-job-service", "2h"}, "--t-job-service 2h0m0s"},
		{[]string{"--conflict", "medium"}, "--conflict"},
	} {
		refused(t, append([]string{"demo"}, tc.args...), tc.want)
	}
}

// TestResultsNeverNonFinite: a summary with a figure that is not finite is
// an error naming it, and nothing is written; a file that fails to write
// leaves none of the files behind.
func TestResultsNeverNonFinite(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sum := sim.Summary{Schedulers: []sim.SchedulerSummary{{Name: "batch-0"}}, Host: sim.Host{WallSecondsPerSimDay: math.Inf(1)}}
	err := writeResults(out, nil, sum)
	if err == nil || !strings.Contains(err.Error(), "host.wall_seconds_per_sim_day") {
		t.Errorf("err %v, want one naming host.wall_seconds_per_sim_day", err)
	}
	sum.Host.WallSecondsPerSimDay, sum.Schedulers[0].WaitMeanS = 1, math.NaN()
	if _, err := finite.JSON(sum); err == nil || !strings.Contains(err.Error(), "schedulers[0].wait_mean_s") {
		t.Errorf("err %v, want one naming schedulers[0].wait_mean_s", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--out created: %v", err)
	}
	err = writeFiles(out, []outFile{
		{"a.json", bytesFile([]byte("{}\n"))},
		{"b.csv", func(io.Writer) error { return errors.New("disk full") }},
	})
	if err == nil || !strings.Contains(err.Error(), "b.csv") {
		t.Errorf("err %v, want one naming b.csv", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("a failed write left %d files", len(ents))
	}
	if ratio(1, 0) != 0 || ratio(1, 2) != 0.5 {
		t.Error("ratio")
	}
}
