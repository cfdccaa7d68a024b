package experiment

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/bench/replay"
	"github.com/omega-cell/omega/bench/sim"
)

// Row is one run's figures.
type Row struct {
	Run     Run
	Summary sim.Summary
	// Metrics are the run's figures by results.csv column.
	Metrics map[string]float64
	// Speedups are the MapReduce jobs' speedups (workers placed over
	// workers requested), in jobs.csv order; Utilization the CPU
	// utilisation samples (simulated seconds, share).
	Speedups    []float64
	Utilization [][2]float64
	// Replay is a replay's own section of its summary.json (nil for a
	// simulation), and TraceUtilization the trace's CPU allocation over
	// the same machines beside Utilization.
	Replay           *replay.Section
	TraceUtilization [][2]float64
}

// Results are a sweep's rows, in the sweep's run order.
type Results struct {
	Sweep *Sweep
	Rows  []Row
	// StoreCost is raw-vs-mediated's measurement of the policies on the
	// commit path, when the sweep's directory has one.
	StoreCost *StoreCost
}

// Findings are what the experiment's analysis finds in the results.
func (res *Results) Findings() []Finding { return res.Sweep.Experiment.analyze(res).Findings }

// Load reads every run's outputs from out. A run whose outputs are missing
// or unreadable is an error naming its directory (all of them, for
// --collect: which commands of the plan did not finish).
func Load(s *Sweep, out string) (*Results, error) {
	res := &Results{Sweep: s}
	var missing []string
	for _, r := range s.Runs {
		row, err := loadRow(r, filepath.Join(out, r.Dir))
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		res.Rows = append(res.Rows, row)
	}
	if len(missing) > 0 {
		const show = 10
		more := ""
		if len(missing) > show {
			more = fmt.Sprintf("\n  ... and %d more", len(missing)-show)
			missing = missing[:show]
		}
		return nil, fmt.Errorf("%d of %d runs have no results:\n  %s%s", len(s.Runs)-len(res.Rows), len(s.Runs), strings.Join(missing, "\n  "), more)
	}
	return res, nil
}

func loadRow(r Run, dir string) (Row, error) {
	row := Row{Run: r}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return row, fmt.Errorf("%s: %w", dir, unwrapPath(err))
	}
	if err := json.Unmarshal(b, &row.Summary); err != nil {
		return row, fmt.Errorf("%s/summary.json: %w", dir, err)
	}
	if row.Summary.Seed != r.Seed {
		return row, fmt.Errorf("%s/summary.json: seed %d, the plan's run is seed %d", dir, row.Summary.Seed, r.Seed)
	}
	util := filepath.Join(dir, "utilization.csv")
	if r.Cell.replay {
		var x struct {
			Replay *replay.Section `json:"replay"`
		}
		if err := json.Unmarshal(b, &x); err != nil || x.Replay == nil {
			return row, fmt.Errorf("%s/summary.json: no replay section (written by omega sim, not omega replay?)", dir)
		}
		row.Replay = x.Replay
		if row.TraceUtilization, err = readSeries(util, "trace_cpu"); err != nil {
			return row, err
		}
	} else if row.Speedups, err = readSpeedups(filepath.Join(dir, "jobs.csv")); err != nil {
		return row, err
	}
	if row.Utilization, err = readSeries(util, "cpu"); err != nil {
		return row, err
	}
	row.Metrics = metrics(row)
	return row, nil
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", filepath.Base(pe.Path), pe.Err)
	}
	return err
}

// wantCols are the columns the experiments read from a run's files.
var wantCols = map[string][]string{
	"jobs.csv":        {"kind", "placed_s", "tasks_placed", "requested"},
	"utilization.csv": {"sim_seconds", "cpu"},
}

// readCSV reads a CSV file with a header, handing each record to f with
// the header's column indices.
func readCSV(path string, f func(col map[string]int, rec []string) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Dir(path), unwrapPath(err))
	}
	defer fh.Close()
	cr := csv.NewReader(fh)
	head, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%s: header: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, want := range wantCols[filepath.Base(path)] {
		if _, ok := col[want]; !ok {
			return fmt.Errorf("%s: no %s column (written by an omega sim from before issue 10?)", path, want)
		}
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f(col, rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

func readSpeedups(path string) ([]float64, error) {
	var out []float64
	err := readCSV(path, func(col map[string]int, rec []string) error {
		if rec[col["kind"]] != "mapreduce" || rec[col["placed_s"]] == "" {
			return nil
		}
		placed, err1 := strconv.Atoi(rec[col["tasks_placed"]])
		req, err2 := strconv.Atoi(rec[col["requested"]])
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if req > 0 {
			out = append(out, float64(placed)/float64(req))
		}
		return nil
	})
	return out, err
}

// readSeries reads utilization.csv's column against its sim_seconds.
func readSeries(path, column string) ([][2]float64, error) {
	var out [][2]float64
	err := readCSV(path, func(col map[string]int, rec []string) error {
		c, ok := col[column]
		if !ok {
			return fmt.Errorf("no %s column", column)
		}
		t, err1 := strconv.ParseFloat(rec[col["sim_seconds"]], 64)
		u, err2 := strconv.ParseFloat(rec[c], 64)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		out = append(out, [2]float64{t, u})
		return nil
	})
	return out, err
}

// jobKinds and their figures in results.csv, as KIND_FIGURE.
var jobKinds = []string{"batch", "service", "mapreduce"}

// metrics are a run's figures by column name: the summary's totals, each
// kind of job's, and each kind of scheduler's (over its instances: the
// busyness medians' mean and largest, the conflicts of them all).
func metrics(r Row) map[string]float64 {
	s := r.Summary
	m := map[string]float64{
		"events": float64(s.Events), "jobs_submitted": float64(s.JobsSubmitted), "jobs_scheduled": float64(s.JobsScheduled),
		"jobs_abandoned": float64(s.JobsAbandoned), "jobs_pending": float64(s.JobsPending), "jobs_finished": float64(s.JobsFinished),
		"tasks_placed": float64(s.TasksPlaced), "utilization_mean": s.UtilizationMean,
	}
	total := 0
	for _, k := range audit.Kinds {
		m["violations_"+k] = float64(s.Violations[k])
		total += s.Violations[k]
	}
	m["violations"] = float64(total)
	if h := s.ViolationsHistory; h != nil {
		total := 0
		for _, k := range audit.Kinds {
			m["history_violations_"+k] = float64(h.Counts[k])
			total += h.Counts[k]
			if at, ok := h.FirstSeconds[k]; ok {
				m["history_first_s_"+k] = at
			}
		}
		m["history_violations"] = float64(total)
		first := math.Inf(1)
		for _, at := range h.FirstSeconds {
			first = min(first, at)
		}
		if !math.IsInf(first, 1) {
			m["history_first_s"] = first
		}
	}
	rejected := 0.0
	for _, x := range s.Schedulers {
		for reason, n := range x.Rejected {
			m["rejected_"+reason] += float64(n)
			rejected += float64(n)
		}
	}
	m["rejected"] = rejected
	if fa := s.FaultyAgent; fa != nil {
		m["faulty_agent_reports"], m["faulty_agent_committed"], m["faulty_agent_rejected"] = float64(fa.Reports), float64(fa.Committed), float64(fa.Rejected)
		m["rejected"] += float64(fa.Rejected)
	}
	for _, k := range s.JobKinds {
		f := func(name string, v float64) { m[k.Kind+"_"+name] = v }
		f("jobs_submitted", float64(k.JobsSubmitted))
		f("jobs_scheduled", float64(k.JobsScheduled))
		f("jobs_abandoned", float64(k.JobsAbandoned))
		f("jobs_abandoned_no_placement", float64(k.JobsAbandonedNoPlacement))
		f("jobs_pending", float64(k.JobsPending))
		f("wait_mean_s", k.WaitMeanS)
		f("wait_p90_s", k.WaitP90S)
		f("placed_wait_mean_s", k.PlacedWaitMeanS)
		f("placed_wait_p90_s", k.PlacedWaitP90S)
	}
	type agg struct {
		n                     int
		busy, busyMax, mad    float64
		placing               float64
		txns, conflicts, aban float64
	}
	kinds := map[string]*agg{}
	for _, x := range s.Schedulers {
		a := kinds[x.Kind]
		if a == nil {
			a = &agg{}
			kinds[x.Kind] = a
		}
		a.n++
		a.busy += x.BusynessMedian
		a.placing += x.BusynessPlacingMedian
		a.busyMax = max(a.busyMax, x.BusynessMedian)
		a.mad += x.BusynessMAD
		a.txns += float64(x.Transactions)
		a.conflicts += float64(x.Conflicts)
		a.aban += float64(x.JobsAbandoned)
	}
	for k, a := range kinds {
		f := func(name string, v float64) { m["sched_"+k+"_"+name] = v }
		f("instances", float64(a.n))
		f("busyness_median", a.busy/float64(a.n))
		f("busyness_max", a.busyMax)
		f("busyness_mad", a.mad/float64(a.n))
		f("busyness_placing_median", a.placing/float64(a.n))
		f("transactions", a.txns)
		f("conflicts", a.conflicts)
		cf := 0.0
		if ok := a.txns - a.conflicts; ok > 0 {
			cf = a.conflicts / ok // the client's definition: per conflict-free attempt
		}
		f("conflict_fraction", cf)
		f("jobs_abandoned", a.aban)
	}
	if x := r.Replay; x != nil {
		c := x.Comparison
		m["replay_jobs_compared"], m["replay_unplaced"] = float64(c.Jobs), float64(c.OursUnplaced)
		if c.Jobs > c.OursUnplaced { // quantiles of the jobs placed
			m["replay_wait_p50_s"], m["replay_wait_p90_s"] = c.OursP50S, c.OursP90S
		}
		if c.Jobs > 0 {
			m["trace_wait_p50_s"], m["trace_wait_p90_s"] = c.TraceP50S, c.TraceP90S
		}
		m["replay_cpu_utilization_mean"], m["trace_cpu_utilization_mean"] = c.OursCPUMean, c.TraceCPUMean
		m["replay_memory_utilization_mean"], m["trace_memory_utilization_mean"] = c.OursMemoryMean, c.TraceMemoryMean
		m["replay_tasks_prefilled"], m["replay_placements_refused"] = float64(x.Stats.TasksPrefilled), float64(x.Stats.PlacementsRefused)
		var skipped int64
		for _, n := range x.Reader.Skipped {
			skipped += n
		}
		m["replay_events"], m["replay_rows_skipped"] = float64(x.Reader.Events), float64(skipped)
	}
	if len(r.Speedups) > 0 {
		benefit := 0
		for _, x := range r.Speedups {
			if x > 1 {
				benefit++
			}
		}
		m["mapreduce_benefit_share"] = float64(benefit) / float64(len(r.Speedups))
		m["mapreduce_speedup_p50"] = quantile(r.Speedups, 0.5)
		m["mapreduce_speedup_p80"] = quantile(r.Speedups, 0.8)
	}
	return m
}

// Columns returns results.csv's columns: the run's, every flag a cell
// sets (in the order the cells first set them), then every metric any
// run has, in a fixed order (totals, kinds of job, kinds of scheduler).
func (res *Results) Columns() (flags, metricCols []string) {
	for _, c := range res.Sweep.Cells {
		for _, f := range c.Flags {
			if !slices.Contains(flags, f.Name) {
				flags = append(flags, f.Name)
			}
		}
	}
	have := map[string]bool{}
	for _, r := range res.Rows {
		for k := range r.Metrics {
			have[k] = true
		}
	}
	order := []string{"jobs_submitted", "jobs_scheduled", "jobs_abandoned", "jobs_pending", "jobs_finished", "tasks_placed", "utilization_mean", "events", "violations"}
	for _, k := range audit.Kinds {
		order = append(order, "violations_"+k)
	}
	order = append(order, "history_violations", "history_first_s")
	for _, k := range audit.Kinds {
		order = append(order, "history_violations_"+k, "history_first_s_"+k)
	}
	order = append(order, "rejected", "faulty_agent_reports", "faulty_agent_committed", "faulty_agent_rejected")
	for _, r := range []string{"invalid_object", "illegal_transition", "not_owner", "quota", "resources_mismatch"} {
		order = append(order, "rejected_"+r)
	}
	for _, k := range jobKinds {
		for _, f := range []string{"jobs_submitted", "jobs_scheduled", "jobs_abandoned", "jobs_pending", "wait_mean_s", "wait_p90_s", "placed_wait_mean_s", "placed_wait_p90_s"} {
			order = append(order, k+"_"+f)
		}
	}
	order = append(order, "mapreduce_benefit_share", "mapreduce_speedup_p50", "mapreduce_speedup_p80",
		"replay_jobs_compared", "replay_wait_p50_s", "replay_wait_p90_s", "trace_wait_p50_s", "trace_wait_p90_s", "replay_unplaced",
		"replay_cpu_utilization_mean", "trace_cpu_utilization_mean", "replay_memory_utilization_mean", "trace_memory_utilization_mean",
		"replay_tasks_prefilled", "replay_placements_refused", "replay_events", "replay_rows_skipped")
	for _, k := range order {
		if have[k] {
			metricCols = append(metricCols, k)
			delete(have, k)
		}
	}
	// The schedulers' kinds, sorted (the rest are all "sched_").
	rest := make([]string, 0, len(have))
	for k := range have {
		rest = append(rest, k)
	}
	slices.Sort(rest)
	return flags, append(metricCols, rest...)
}

// WriteCSV writes results.csv: one row per run, every parameter and every
// metric. A metric a run does not have (a kind of scheduler it does not
// run) is empty.
func (res *Results) WriteCSV(w io.Writer) error {
	flags, cols := res.Columns()
	cw := csv.NewWriter(w)
	head := append([]string{"experiment", "cell", "seed"}, flags...)
	cw.Write(append(head, cols...))
	for _, r := range res.Rows {
		rec := []string{res.Sweep.Experiment.Name, r.Run.Cell.ID, strconv.FormatUint(r.Run.Seed, 10)}
		for _, f := range flags {
			rec = append(rec, r.Run.Cell.Flag(f))
		}
		for _, c := range cols {
			v, ok := r.Metrics[c]
			switch {
			case !ok:
				rec = append(rec, "")
			case math.IsNaN(v) || math.IsInf(v, 0):
				return fmt.Errorf("results.csv: %s seed %d: %s is %v", r.Run.Cell.ID, r.Run.Seed, c, v)
			default:
				rec = append(rec, strconv.FormatFloat(v, 'g', 10, 64))
			}
		}
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// WriteHostCSV writes host.csv: how the machine fared on each run (wall
// time, peak RSS), which varies between runs of the same simulation and so
// stays out of results.csv.
func (res *Results) WriteHostCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"cell", "seed", "wall_seconds", "wall_seconds_per_sim_day", "events_per_sec", "peak_rss_mb"})
	g := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, r := range res.Rows {
		h := r.Summary.Host
		cw.Write([]string{r.Run.Cell.ID, strconv.FormatUint(r.Run.Seed, 10), g(h.WallSeconds), g(h.WallSecondsPerSimDay), g(h.EventsPerSec), g(h.PeakRSSMb)})
	}
	cw.Flush()
	return cw.Error()
}

// Spread is one figure of a cell over its seeds.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Stat returns a metric's spread over the seeds of the cell; ok is false
// when no run of the cell has it.
func (res *Results) Stat(cellID, metric string) (Spread, bool) {
	var xs []float64
	for _, r := range res.Rows {
		if r.Run.Cell.ID != cellID {
			continue
		}
		if v, ok := r.Metrics[metric]; ok {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return Spread{}, false
	}
	return Spread{Median: quantile(xs, 0.5), Min: slices.Min(xs), Max: slices.Max(xs), N: len(xs)}, true
}

// Median is a metric's median over the cell's seeds (0 when absent).
func (res *Results) Median(cellID, metric string) float64 {
	s, _ := res.Stat(cellID, metric)
	return s.Median
}

// Cell returns the cell whose axes have the given values (name, value
// pairs), or nil.
func (res *Results) Cell(axes ...string) *Cell {
	for i := range res.Sweep.Cells {
		c := &res.Sweep.Cells[i]
		match := true
		for k := 0; k+1 < len(axes); k += 2 {
			if c.Axis(axes[k]) != axes[k+1] {
				match = false
			}
		}
		if match {
			return c
		}
	}
	return nil
}

var quantile = sim.Quantile
