package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/internal/finite"
	"github.com/omega-cell/omega/schedulers"
)

// Summary is summary.json (DESIGN.md, "summary.json": a contract). Every
// field outside Host is identical for the same seed and inputs.
type Summary struct {
	Seed       uint64  `json:"seed"`
	SimSeconds float64 `json:"sim_seconds"`
	Events     int64   `json:"events"` // the steps the engine took from its queue
	Machines   int     `json:"machines"`
	// Placement is how the built-in schedulers picked machines
	// (Config.Placement: best-fit or random-first-fit).
	Placement     string `json:"placement"`
	JobsSubmitted int    `json:"jobs_submitted"`
	JobsScheduled int    `json:"jobs_scheduled"`
	JobsAbandoned int    `json:"jobs_abandoned"`
	JobsPending   int    `json:"jobs_pending"`
	// JobsFinished counts the jobs the job controller wrote SUCCEEDED or
	// FAILED: all their tasks ended.
	JobsFinished    int64              `json:"jobs_finished"`
	TasksPlaced     int                `json:"tasks_placed"`
	UtilizationMean float64            `json:"utilization_mean"`
	Schedulers      []SchedulerSummary `json:"schedulers"`
	// JobKinds are the jobs' figures by the kind of job (batch, service,
	// mapreduce), whoever scheduled them: a monolithic scheduler's batch
	// and service jobs apart, several instances of a kind together.
	JobKinds []JobKindSummary `json:"job_kinds"`
	// Violations counts, by kind, the invariant violations the cell's final
	// state holds (package audit): what the store's policy let persist.
	Violations map[string]int `json:"violations"`
	// ViolationsHistory, with Config.AuditHistory, is the audit of every
	// revision the run committed (audit.Stream): the violations that
	// began, by kind, when each kind was first detectable, and examples —
	// what the final state may no longer show.
	ViolationsHistory *audit.HistoryReport `json:"violations_history,omitempty"`
	// FaultyAgent, with Config.FaultyAgent, is what its lies came to.
	FaultyAgent *FaultyAgentSummary `json:"faulty_agent,omitempty"`
	// Warnings say, in words, where the run saturated (the cell full, a
	// scheduler busy nearly all the time, jobs left pending), so a
	// figure from a saturated run is not read as one from a healthy one.
	Warnings []string `json:"warnings,omitempty"`
	Host     Host     `json:"host"`
}

// Saturation thresholds: past them a run measures queueing, not
// scheduling.
const (
	SaturatedUtilization = 0.9 // mean CPU utilisation of the cell
	SaturatedBusyness    = 0.8 // a scheduler's median daily busyness
	SaturatedPending     = 0.1 // share of submitted jobs still pending at the end
)

// saturation returns the warnings for s; advice is what to do about a
// saturated cell ("": the simulation's).
func saturation(s Summary, advice string) []string {
	if advice == "" {
		advice = "lower --load or add machines"
	}
	var w []string
	if s.UtilizationMean >= SaturatedUtilization {
		w = append(w, fmt.Sprintf("the cell is saturated: mean CPU utilisation %.0f%% (from %.0f%% on, tasks wait for machines, not for schedulers); %s",
			100*s.UtilizationMean, 100*SaturatedUtilization, advice))
	}
	for _, ss := range s.Schedulers {
		if ss.BusynessMedian >= SaturatedBusyness {
			w = append(w, fmt.Sprintf("scheduler %s is saturated: busy %.0f%% of its median day (from %.0f%% on, its jobs queue behind each other)",
				ss.Name, 100*ss.BusynessMedian, 100*SaturatedBusyness))
		}
	}
	if s.JobsSubmitted > 0 && float64(s.JobsPending) >= SaturatedPending*float64(s.JobsSubmitted) {
		w = append(w, fmt.Sprintf("%d of %d submitted jobs (%.0f%%) were still pending at the end", s.JobsPending, s.JobsSubmitted, 100*float64(s.JobsPending)/float64(s.JobsSubmitted)))
	}
	return w
}

// SchedulerSummary is one scheduler instance's figures.
type SchedulerSummary struct {
	Name             string  `json:"name"`
	Kind             string  `json:"kind"`
	JobsScheduled    int     `json:"jobs_scheduled"`
	JobsAbandoned    int     `json:"jobs_abandoned"`
	Transactions     int64   `json:"transactions"`
	Conflicts        int64   `json:"conflicts"`
	ConflictFraction float64 `json:"conflict_fraction"`
	ClaimsConflicted int64   `json:"claims_conflicted"`
	// BusynessMedian and BusynessMAD: the median of the daily shares of
	// time spent deciding, every decision counted, and their median
	// absolute deviation (the paper's figures). A two-level framework that
	// decides offers concurrently can pass 1: it decides several at once.
	BusynessMedian float64 `json:"busyness_median"`
	BusynessMAD    float64 `json:"busyness_mad"`
	// BusynessPlacingMedian and BusynessPlacingMAD count only the
	// decisions that placed a task, as Google's simulator does (its Mesos
	// framework books no time for a job that placed nothing).
	BusynessPlacingMedian float64 `json:"busyness_placing_median"`
	BusynessPlacingMAD    float64 `json:"busyness_placing_mad"`
	WaitMeanS             float64 `json:"wait_mean_s"`
	WaitP50S              float64 `json:"wait_p50_s"`
	WaitP90S              float64 `json:"wait_p90_s"`
	WaitP99S              float64 `json:"wait_p99_s"`
	PlacedWaitMeanS       float64 `json:"placed_wait_mean_s"`
	PlacedWaitP90S        float64 `json:"placed_wait_p90_s"`
	TasksPlaced           int     `json:"tasks_placed"`
	// SpeedupMean and SpeedupP90: for a mapreduce scheduler, workers placed
	// over workers requested, per scheduled job (runtime shrinks by as much).
	SpeedupMean float64 `json:"speedup_mean,omitempty"`
	SpeedupP90  float64 `json:"speedup_p90,omitempty"`
	// Rejected counts the scheduler's operations the store's policy
	// refused, by reason ("not_owner", "resources_mismatch", ...).
	Rejected map[string]int64 `json:"rejected,omitempty"`
}

// ReasonName is a reject reason as summary.json names it.
func ReasonName(r omegav1.RejectReason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "REJECT_REASON_"))
}

// JobKindSummary is one kind of job's figures, over every scheduler.
type JobKindSummary struct {
	Kind          string `json:"kind"`
	JobsSubmitted int    `json:"jobs_submitted"`
	JobsScheduled int    `json:"jobs_scheduled"`
	JobsAbandoned int    `json:"jobs_abandoned"`
	// JobsAbandonedNoPlacement are those of JobsAbandoned given up at the
	// bound of attempts without a placement (the paper's 100); the rest
	// at the bound of attempts in all (1,000).
	JobsAbandonedNoPlacement int     `json:"jobs_abandoned_no_placement"`
	JobsPending              int     `json:"jobs_pending"`
	WaitMeanS                float64 `json:"wait_mean_s"`
	WaitP50S                 float64 `json:"wait_p50_s"`
	WaitP90S                 float64 `json:"wait_p90_s"`
	PlacedWaitMeanS          float64 `json:"placed_wait_mean_s"`
	PlacedWaitP90S           float64 `json:"placed_wait_p90_s"`
}

// kindName is a job kind as the workload names it.
func kindName(k omegav1.JobKind) string {
	switch k {
	case omegav1.JobKind_JOB_KIND_BATCH:
		return "batch"
	case omegav1.JobKind_JOB_KIND_SERVICE:
		return "service"
	case omegav1.JobKind_JOB_KIND_MAPREDUCE:
		return "mapreduce"
	}
	return "unknown"
}

// Host is how the machine running the simulation fared; it varies between
// runs.
type Host struct {
	WallSeconds          float64 `json:"wall_seconds"`
	EventsPerSec         float64 `json:"events_per_sec"`
	WallSecondsPerSimDay float64 `json:"wall_seconds_per_sim_day"`
	PeakRSSMb            float64 `json:"peak_rss_mb"`
}

// Summarize computes the summary of a finished run.
func (e *Sim) Summarize(seed uint64, machines int) Summary {
	s := Summary{Seed: seed, SimSeconds: e.eng.Duration().Seconds(), Events: e.eng.Events(), Machines: machines, Placement: string(schedulers.PlacementBestFit)}
	if e.cfg.Placement != "" {
		s.Placement = string(e.cfg.Placement)
	}
	s.Violations = audit.Check(e.o.Store.Snapshot()).Counts
	if e.o.Audit != nil {
		r := e.o.Audit.Report()
		s.ViolationsHistory = &r
	}
	if e.o.liar != nil {
		fa := e.o.liar.s
		s.FaultyAgent = &fa
	}
	if e.o.Jobs != nil {
		s.JobsFinished = e.o.Jobs.Counters().Finished
	}
	type kindFigures struct {
		JobKindSummary
		waits, placedWaits []float64
	}
	byKind := map[omegav1.JobKind]*kindFigures{}
	for i, r := range e.o.Runners {
		ss := SchedulerSummary{Name: r.Name(), Kind: r.Scheduler().Kind()}
		// The jobs retired as they left the cell (Options.Retire), then
		// those the runner still holds.
		t := e.retired[i].clone()
		for _, j := range r.Records() {
			t.add(j, ss.Kind == "mapreduce")
		}
		for _, kind := range t.kinds {
			kt := t.byKind[kind]
			k := byKind[kind]
			if k == nil {
				k = &kindFigures{JobKindSummary: JobKindSummary{Kind: kindName(kind)}}
				byKind[kind] = k
			}
			k.JobsSubmitted += kt.submitted
			k.JobsAbandoned += kt.abandoned
			k.JobsAbandonedNoPlacement += kt.abandonedNoPlacement
			k.JobsScheduled += kt.scheduled
			k.JobsPending += kt.pending
			k.placedWaits = append(k.placedWaits, kt.placedWaits...)
			k.waits = append(k.waits, kt.waits...)
		}
		s.JobsSubmitted += t.submitted
		s.JobsPending += t.pending
		ss.TasksPlaced += t.tasksPlaced
		ss.JobsAbandoned, ss.JobsScheduled = t.abandoned, t.scheduled
		waits, placedWaits, speedups := t.waits, t.placedWaits, t.speedups
		// Scheduling attempts only: the verdicts written on abandoned jobs
		// are the runner's too, but not attempts to place anything.
		c, v := r.Client().Counters(), r.VerdictCounters()
		c.Attempts, c.Conflicted, c.Partial = c.Attempts-v.Attempts, c.Conflicted-v.Conflicted, c.Partial-v.Partial
		ss.Transactions, ss.Conflicts, ss.ClaimsConflicted = c.Attempts, c.Conflicted, c.ClaimsConflicted
		ss.ConflictFraction = c.ConflictFraction()
		ss.BusynessMedian, ss.BusynessMAD = busyness(e.busy.days(i, e.eng.Duration()), e.eng.Duration())
		ss.BusynessPlacingMedian, ss.BusynessPlacingMAD = busyness(e.placing.days(i, e.eng.Duration()), e.eng.Duration())
		ss.WaitMeanS, ss.WaitP50S, ss.WaitP90S, ss.WaitP99S = mean(waits), quantile(waits, 0.5), quantile(waits, 0.9), quantile(waits, 0.99)
		ss.PlacedWaitMeanS, ss.PlacedWaitP90S = mean(placedWaits), quantile(placedWaits, 0.9)
		ss.SpeedupMean, ss.SpeedupP90 = mean(speedups), quantile(speedups, 0.9)
		for reason, n := range r.Rejected() {
			if ss.Rejected == nil {
				ss.Rejected = map[string]int64{}
			}
			ss.Rejected[ReasonName(reason)] += n
		}
		s.JobsScheduled += ss.JobsScheduled
		s.JobsAbandoned += ss.JobsAbandoned
		s.TasksPlaced += ss.TasksPlaced
		s.Schedulers = append(s.Schedulers, ss)
	}
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		k := byKind[kind]
		k.WaitMeanS, k.WaitP50S, k.WaitP90S = mean(k.waits), quantile(k.waits, 0.5), quantile(k.waits, 0.9)
		k.PlacedWaitMeanS, k.PlacedWaitP90S = mean(k.placedWaits), quantile(k.placedWaits, 0.9)
		s.JobKinds = append(s.JobKinds, k.JobKindSummary)
	}
	var u []float64
	for _, x := range e.samples {
		u = append(u, x.CPU)
	}
	s.UtilizationMean = mean(u)
	s.Warnings = saturation(s, e.cfg.SaturationAdvice)
	return s
}

// tally is what the summary takes from the jobs of one runner: counts, by
// kind and in all, and the waits (and a MapReduce scheduler's speedups)
// whose means and quantiles it reports. Records are added in order, so the
// lists, and the sums over them, come out the same for the same records.
type tally struct {
	submitted, scheduled, abandoned, pending, tasksPlaced int
	waits, placedWaits, speedups                          []float64
	byKind                                                map[omegav1.JobKind]*kindTally
	kinds                                                 []omegav1.JobKind // in order of first appearance
}

type kindTally struct {
	submitted, scheduled, abandoned, pending int
	abandonedNoPlacement                     int
	waits, placedWaits                       []float64
}

func (t *tally) add(j schedulers.JobRecord, mapreduce bool) {
	if t.byKind == nil {
		t.byKind = map[omegav1.JobKind]*kindTally{}
	}
	k := t.byKind[j.Kind]
	if k == nil {
		k = &kindTally{}
		t.byKind[j.Kind] = k
		t.kinds = append(t.kinds, j.Kind)
	}
	t.submitted++
	k.submitted++
	t.tasksPlaced += j.TasksPlaced
	switch {
	case j.Abandoned:
		t.abandoned++
		k.abandoned++
		if j.AbandonedNoPlacement {
			k.abandonedNoPlacement++
		}
	case !j.Placed.IsZero():
		w := j.Placed.Sub(j.Submitted).Seconds()
		t.scheduled++
		k.scheduled++
		t.placedWaits = append(t.placedWaits, w)
		k.placedWaits = append(k.placedWaits, w)
	default:
		t.pending++
		k.pending++
	}
	if !j.FirstAttempt.IsZero() {
		w := j.FirstAttempt.Sub(j.Submitted).Seconds()
		t.waits = append(t.waits, w)
		k.waits = append(k.waits, w)
	}
	if mapreduce && !j.Placed.IsZero() && j.Requested > 0 {
		t.speedups = append(t.speedups, float64(j.TasksPlaced)/float64(j.Requested))
	}
}

// clone is a copy to add to without changing t.
func (t tally) clone() tally {
	c := t
	c.waits, c.placedWaits, c.speedups = slices.Clone(t.waits), slices.Clone(t.placedWaits), slices.Clone(t.speedups)
	c.kinds = slices.Clone(t.kinds)
	c.byKind = map[omegav1.JobKind]*kindTally{}
	for kind, k := range t.byKind {
		kc := *k
		kc.waits, kc.placedWaits = slices.Clone(k.waits), slices.Clone(k.placedWaits)
		c.byKind[kind] = &kc
	}
	return c
}

// busyness is the median of the daily busy fractions and their median
// absolute deviation (the paper's figures). A partial last day counts by
// its own length.
func busyness(daily []time.Duration, total time.Duration) (median, mad float64) {
	const day = 24 * time.Hour
	days := int((total + day - 1) / day)
	if days == 0 {
		return 0, 0
	}
	fr := make([]float64, days)
	for k := range days {
		length := min(day, total-time.Duration(k)*day)
		if k < len(daily) && length > 0 {
			fr[k] = float64(daily[k]) / float64(length)
		}
	}
	median = quantile(fr, 0.5)
	dev := make([]float64, len(fr))
	for k, f := range fr {
		dev[k] = math.Abs(f - median)
	}
	return median, quantile(dev, 0.5)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Quantile is the q-quantile of xs by linear interpolation between order
// statistics (0 for none); xs is not changed.
func Quantile(xs []float64, q float64) float64 { return quantile(xs, q) }

// quantile is the q-quantile by linear interpolation between order
// statistics.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	f := pos - float64(lo)
	return s[lo] + f*(s[hi]-s[lo])
}

// WriteJSON writes the summary, indented, with a final newline. A figure
// that is NaN or infinite (which JSON cannot hold) is an error naming it,
// and nothing is written.
func (s Summary) WriteJSON(w io.Writer) error {
	b, err := finite.JSON(s)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// WriteJobsCSV writes jobs.csv: one row per job, ordered by submission.
func (e *Sim) WriteJobsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"job", "scheduler", "submitted_s", "first_attempt_s", "placed_s", "attempts", "conflicted_attempts", "tasks_placed", "abandoned", "kind", "requested"})
	secs := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatFloat(t.Sub(Epoch).Seconds(), 'f', 3, 64)
	}
	type row struct {
		rec  schedulers.JobRecord
		name string
	}
	var rows []row
	for _, r := range e.o.Runners {
		for _, j := range r.Records() {
			rows = append(rows, row{j, r.Name()})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return a.rec.Submitted.Compare(b.rec.Submitted) })
	for _, x := range rows {
		j := x.rec
		cw.Write([]string{j.UID.String(), x.name, secs(j.Submitted), secs(j.FirstAttempt), secs(j.Placed),
			strconv.Itoa(j.Attempts), strconv.Itoa(j.Conflicted), strconv.Itoa(j.TasksPlaced), strconv.FormatBool(j.Abandoned), kindName(j.Kind), strconv.Itoa(j.Requested)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteSchedulersCSV writes schedulers.csv: one row per scheduler. A figure
// that is NaN or infinite is an error naming it, and nothing is written.
func (s Summary) WriteSchedulersCSV(w io.Writer) error {
	if err := checkFinite("schedulers", s.Schedulers); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.Write([]string{"name", "kind", "jobs_scheduled", "jobs_abandoned", "transactions", "conflicts", "conflict_fraction", "claims_conflicted", "busyness_median", "busyness_mad", "wait_mean_s", "wait_p90_s", "placed_wait_mean_s", "tasks_placed"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	for _, x := range s.Schedulers {
		cw.Write([]string{x.Name, x.Kind, strconv.Itoa(x.JobsScheduled), strconv.Itoa(x.JobsAbandoned),
			strconv.FormatInt(x.Transactions, 10), strconv.FormatInt(x.Conflicts, 10), f(x.ConflictFraction),
			strconv.FormatInt(x.ClaimsConflicted, 10), f(x.BusynessMedian), f(x.BusynessMAD), f(x.WaitMeanS), f(x.WaitP90S),
			f(x.PlacedWaitMeanS), strconv.Itoa(x.TasksPlaced)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteUtilizationCSV writes utilization.csv: the samples over time. A
// sample that is NaN or infinite is an error, and nothing is written.
func (e *Sim) WriteUtilizationCSV(w io.Writer) error {
	if err := checkFinite("samples", e.samples); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.Write([]string{"sim_seconds", "cpu", "memory"})
	for _, x := range e.samples {
		cw.Write([]string{fmt.Sprintf("%.0f", x.At.Seconds()), strconv.FormatFloat(x.CPU, 'f', 6, 64), strconv.FormatFloat(x.Memory, 'f', 6, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// checkFinite is finite.Check with the package's prefix.
func checkFinite(root string, v any) error {
	if err := finite.Check(root, v); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// Spread is one figure over several seeds.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	MAD    float64 `json:"mad"`
}

func spread(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	m := quantile(xs, 0.5)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return Spread{Median: m, Min: slices.Min(xs), Max: slices.Max(xs), MAD: quantile(dev, 0.5)}
}

// AggregateSummary is --seeds N's result: each figure's median and spread.
type AggregateSummary struct {
	Seeds         []uint64                     `json:"seeds"`
	JobsScheduled Spread                       `json:"jobs_scheduled"`
	JobsAbandoned Spread                       `json:"jobs_abandoned"`
	Utilization   Spread                       `json:"utilization_mean"`
	Schedulers    map[string]map[string]Spread `json:"schedulers"`
}

// Aggregate summarizes runs of one configuration over several seeds.
func Aggregate(sums []Summary) AggregateSummary {
	a := AggregateSummary{Schedulers: map[string]map[string]Spread{}}
	var sched, aband, util []float64
	per := map[string]map[string][]float64{}
	for _, s := range sums {
		a.Seeds = append(a.Seeds, s.Seed)
		sched = append(sched, float64(s.JobsScheduled))
		aband = append(aband, float64(s.JobsAbandoned))
		util = append(util, s.UtilizationMean)
		for _, x := range s.Schedulers {
			m := per[x.Name]
			if m == nil {
				m = map[string][]float64{}
				per[x.Name] = m
			}
			for k, v := range map[string]float64{
				"conflict_fraction": x.ConflictFraction, "conflicts": float64(x.Conflicts), "transactions": float64(x.Transactions),
				"claims_conflicted": float64(x.ClaimsConflicted), "busyness_median": x.BusynessMedian, "busyness_placing_median": x.BusynessPlacingMedian,
				"wait_mean_s": x.WaitMeanS, "wait_p90_s": x.WaitP90S, "placed_wait_mean_s": x.PlacedWaitMeanS,
				"jobs_scheduled": float64(x.JobsScheduled), "jobs_abandoned": float64(x.JobsAbandoned),
			} {
				m[k] = append(m[k], v)
			}
		}
	}
	a.JobsScheduled, a.JobsAbandoned, a.Utilization = spread(sched), spread(aband), spread(util)
	for name, m := range per {
		a.Schedulers[name] = map[string]Spread{}
		for k, xs := range m {
			a.Schedulers[name][k] = spread(xs)
		}
	}
	return a
}

// KindName is a job kind's name in the reports (batch, service, mapreduce).
func KindName(k omegav1.JobKind) string { return kindName(k) }
