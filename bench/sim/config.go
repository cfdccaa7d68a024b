package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
)

// SchedulerSpec is one kind of scheduler in a simulation.
type SchedulerSpec struct {
	Kind  string // a registered kind (schedulers.Kinds)
	Count int
	// TJob and TTask: decision time = TJob + TTask × tasks considered.
	TJob, TTask time.Duration
	// Params go to the kind's factory (schedulers.Params).
	Params schedulers.Params
	// ByKind, if set, gives jobs of the kinds it names their own decision
	// times (the multi-path architecture's monolithic scheduler).
	ByKind map[omegav1.JobKind]schedulers.DecisionTime
}

// Config is one simulation. Start from DefaultConfig.
type Config struct {
	Workload   workload.Config
	Schedulers []SchedulerSpec
	// Conflict and Commit are every scheduler's modes (a gang job commits
	// all-or-nothing whatever Commit says).
	Conflict omegav1.ConflictMode
	Commit   omegav1.CommitMode
	// Policy is the store's (nil: store.Raw, Omega's); store.Mediated
	// validates every operation, as Kubernetes' API server does.
	Policy store.Policy
	// Route sends the workload's jobs of one kind ("batch", "service",
	// "mapreduce") to schedulers of another (registered) kind: how a custom
	// scheduler takes over a class of jobs. Unrouted kinds go to schedulers
	// of their own kind.
	Route map[string]string
	// RouteShare, for a kind Route names, sends only that share of its jobs
	// (by the job's uid, so the same jobs for the same seed) to the routed
	// scheduler; the rest go to the kind's own. A kind absent routes all.
	// A faulty scheduler takes part of the batch load beside a correct one
	// this way.
	RouteShare map[string]float64
	// Placement is how the built-in schedulers (batch, service, mapreduce,
	// monolithic) pick machines: shorthand for Params{"placement": ...} on
	// each of their specs that does not set it. "" or
	// schedulers.PlacementBestFit is each kind's own policy;
	// schedulers.PlacementRandomFirstFit the paper's simulator's, which
	// the experiments that reproduce its figures use.
	Placement schedulers.Placement
	// MapReducePolicy is the mapreduce schedulers' policy: shorthand for
	// Params{"policy": ...} on each mapreduce spec that does not set it.
	MapReducePolicy schedulers.MapReducePolicy
	// Runner bounds every scheduler's attempts (TJob/TTask come from the
	// SchedulerSpec).
	Runner schedulers.RunnerConfig
	// FleetTick: the period of the fleet's status transactions, from
	// MinFleetTick to MaxFleetTick. Default 1s (zero is an error, not the
	// default).
	FleetTick time.Duration
	// FailuresPerDay: machine failures per simulated day, from 0 to
	// FailuresPerMachineDay per machine. Default 0.
	FailuresPerDay float64
	// Durability of the store: none (default) keeps it in memory; sync
	// writes it to pebble in Dir (omega demo).
	Durability store.Durability
	Dir        string
	// CPUTime measures each decision's time as the scheduler's CPU time
	// instead of the t_job + t_task model. Results then vary between runs.
	CPUTime bool
	// CheckInvariants checks the store after every commit (tests).
	CheckInvariants bool
	// Progress, if set, is called about once per ProgressEvery of
	// simulated time (default an hour).
	Progress      func(time.Duration)
	ProgressEvery time.Duration
	// SaturationAdvice is what a saturated cell's warning tells the user to
	// do, in the words of the command that ran it (default: the
	// simulation's, "lower --load or add machines"; a replay has its own
	// flags).
	SaturationAdvice string
	// AuditHistory audits every revision the run commits (audit.Stream),
	// into summary.json's violations_history: what the final state's audit
	// cannot show, and when each kind of violation was first detectable.
	AuditHistory bool
	// History, if set, receives the run's history (omega sim --history):
	// the starting state, then every write set.
	History Observer
	// FaultyAgent adds fault (d) of the "don't expose raw state"
	// experiment: the first machine's agent reports, every
	// FaultyAgentPeriod, a task that never ran and another machine's
	// running task as SUCCEEDED (summary.json's faulty_agent).
	FaultyAgent bool
	// Architecture names how the schedulers are organised (a registered
	// Architecture; "" is DefaultArchitecture, shared state). Set it with
	// WithArchitecture, which arranges Schedulers for it.
	Architecture string
	// AllocatorTime and OfferInterval are the two-level architecture's:
	// the time the allocator takes to make an offer, and how often it
	// makes one while a framework wants resources (the paper's 1 ms and
	// 1 s, the defaults).
	AllocatorTime, OfferInterval time.Duration
	// Offers, OfferMin and OfferRetry are the two-level architecture's
	// too: how a framework takes its offers (OffersConcurrent, the paper's
	// simulator's, or OffersSerial), the allocator's floor (OfferMinGoogle,
	// the paper's simulator's, or OfferMinSmall), and when a job an offer
	// did not place whole is tried again (OfferRetryDecision, the paper's
	// simulator's, or OfferRetryAnswer); "" is the first.
	Offers, OfferMin, OfferRetry string
	// OfferShares is what counts toward a two-level framework's DRF share
	// (OfferSharesFrameworks, the paper's simulator's, or
	// OfferSharesWithPrefill); "" is the first.
	OfferShares string
}

// DefaultConfig is the default run: the paper's lightweight cell,
// one batch and one service scheduler at the paper's decision times.
func DefaultConfig() Config {
	r := schedulers.DefaultRunnerConfig()
	return Config{
		Workload: workload.Default(),
		Schedulers: []SchedulerSpec{
			{Kind: "batch", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond},
			{Kind: "service", Count: 1, TJob: 100 * time.Millisecond, TTask: 5 * time.Millisecond},
		},
		MapReducePolicy: schedulers.MaxParallelism,
		Durability:      store.DurabilityNone,
		Runner:          r,
		FleetTick:       time.Second,
		AllocatorTime:   time.Millisecond,
		OfferInterval:   time.Second,
		Offers:          OffersConcurrent,
		OfferMin:        OfferMinGoogle,
		OfferRetry:      OfferRetryDecision,
		OfferShares:     OfferSharesFrameworks,
	}
}

// ErrConfig is wrapped by every error of Config.Validate. Those about
// Config.Workload are also *workload.FieldError (and so wrap
// workload.ErrConfig), named from sim.Config: sim.Config.Workload.Days.
var ErrConfig = errors.New("invalid sim config")

// The bounds Config.Validate checks (the CLI's flags have the same).
const (
	// MaxSchedulersPerKind: instances of one kind (the paper runs up to 32
	// batch schedulers).
	MaxSchedulersPerKind = 100
	// MaxTJob and MaxTTask bound the modelled decision times (the paper
	// sweeps t_job to 100 s and t_task to 1 s).
	MaxTJob  = time.Hour
	MaxTTask = time.Minute
	// MaxAttempts bounds Runner.MaxAttempts and MaxAttemptsNoPlacement
	// (the paper's are 1,000 and 100); MaxRetryDelay bounds RetryDelay.
	MaxAttempts   = 1_000_000
	MaxRetryDelay = 24 * time.Hour
	// MinFleetTick and MaxFleetTick bound the fleet's reporting period:
	// below a millisecond the ticks, not the schedulers, are the
	// simulation; above an hour tasks finish an hour late.
	MinFleetTick, MaxFleetTick = time.Millisecond, time.Hour
	// MaxAllocatorTime and MaxOfferInterval bound the two-level
	// allocator's times (the paper's are 1 ms and 1 s).
	MaxAllocatorTime, MaxOfferInterval = time.Minute, time.Hour
	// FailuresPerMachineDay bounds FailuresPerDay per machine: a failed
	// machine is repaired after an hour, so more would keep the whole cell
	// down.
	FailuresPerMachineDay = 24
)

// WorkloadKinds returns the kinds of jobs the workload may submit (Route's
// keys).
func WorkloadKinds() []string { return []string{"batch", "service", "mapreduce"} }

// NeededKinds returns the kinds of jobs a workload with that MapReduce
// share submits: each needs a scheduler of its kind, or a route.
func NeededKinds(mapReduceShare float64) []string {
	if mapReduceShare > 0 {
		return WorkloadKinds()
	}
	return []string{"batch", "service"}
}

// configError is an error of Config.Validate: it wraps ErrConfig and, for
// the workload's, the *workload.FieldError.
type configError struct {
	msg string
	err error // a *workload.FieldError, or nil
}

func (e *configError) Error() string { return e.msg }

func (e *configError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrConfig}
	}
	return []error{ErrConfig, e.err}
}

// Validate reports the first invalid field, by its Go name from sim.Config
// (sim.Config.Schedulers[1].Count, sim.Config.Workload.Days) and its
// value: floats finite, counts whole and positive, durations positive
// where a zero would mean nothing, every value within the bounds above,
// every kind registered, and a scheduler for every kind of job the
// workload submits.
func (c *Config) Validate() error {
	bad := ConfigFieldError
	if err := c.Workload.Validate(); err != nil {
		var fe *workload.FieldError
		if errors.As(err, &fe) {
			in := *fe
			in.In = "sim.Config.Workload"
			return &configError{msg: in.Error(), err: &in}
		}
		return &configError{msg: fmt.Sprintf("%v: sim.Config.Workload: %v", ErrConfig, err), err: err}
	}
	if c.Placement != "" {
		if _, err := schedulers.ParsePlacement(string(c.Placement)); err != nil {
			return bad("Placement", strconv.Quote(string(c.Placement)), "%s", strings.Join(schedulers.Placements(), " or "))
		}
	}
	if len(c.Schedulers) == 0 {
		return bad("Schedulers", "[]", "at least one scheduler")
	}
	kinds := map[string]bool{}
	for i, s := range c.Schedulers {
		f := fmt.Sprintf("Schedulers[%d]", i)
		switch {
		case !slices.Contains(SchedulerKinds(), s.Kind):
			return bad(f+".Kind", strconv.Quote(s.Kind), "a registered scheduler kind (%s)", strings.Join(SchedulerKinds(), ", "))
		case kinds[s.Kind]:
			return bad(f+".Kind", strconv.Quote(s.Kind), "each kind listed once (count its instances in Count)")
		case s.Count < 1 || s.Count > MaxSchedulersPerKind:
			return bad(f+".Count", s.Count, "a whole number of %s schedulers from 1 to %d (leave a kind out to run none)", s.Kind, MaxSchedulersPerKind)
		case s.TJob < 0 || s.TJob > MaxTJob:
			return bad(f+".TJob", s.TJob, "a per-job decision time from 0 to %v", MaxTJob)
		case s.TTask < 0 || s.TTask > MaxTTask:
			return bad(f+".TTask", s.TTask, "a per-task decision time from 0 to %v", MaxTTask)
		}
		// The parameters, as Build will make the scheduler of them.
		if _, err := NewScheduler(s.Kind, c.params(s)); err != nil {
			return bad(f+".Params", fmt.Sprint(s.Params), "parameters the %s scheduler takes (%v)", s.Kind, err)
		}
		kinds[s.Kind] = true
	}
	for _, from := range slices.Sorted(maps.Keys(c.Route)) {
		to := c.Route[from]
		f := fmt.Sprintf("Route[%q]", from)
		switch {
		case !slices.Contains(WorkloadKinds(), from):
			return bad(f, strconv.Quote(to), "a key that is a kind of job the workload submits (%s)", strings.Join(WorkloadKinds(), ", "))
		case !kinds[to]:
			return bad(f, strconv.Quote(to), "the kind of a scheduler in Schedulers")
		}
	}
	for _, from := range slices.Sorted(maps.Keys(c.RouteShare)) {
		sh := c.RouteShare[from]
		f := fmt.Sprintf("RouteShare[%q]", from)
		switch _, routed := c.Route[from]; {
		case !routed:
			return bad(f, sh, "a share of a kind that Route routes")
		case !(sh > 0 && sh <= 1):
			return bad(f, sh, "a share greater than 0 and at most 1")
		case sh < 1 && !kinds[from]:
			return bad(f, sh, "a share below 1 of a kind whose own scheduler runs in Schedulers (the rest of its jobs go to it)")
		}
	}
	// Every kind of job the workload makes needs a scheduler.
	for _, k := range NeededKinds(c.Workload.MapReduceShare) {
		if _, routed := c.Route[k]; routed || kinds[k] {
			continue
		}
		if k == "mapreduce" {
			return bad("Workload.MapReduceShare", c.Workload.MapReduceShare, "0, or a mapreduce scheduler in Schedulers (or Route[\"mapreduce\"]): the workload submits mapreduce jobs but no mapreduce scheduler runs")
		}
		return bad("Schedulers", kindList(c.Schedulers), "a %s scheduler, or Route[%q]: the workload submits %s jobs", k, k, k)
	}
	if _, ok := omegav1.ConflictMode_name[int32(c.Conflict)]; !ok {
		return bad("Conflict", c.Conflict, "CONFLICT_MODE_FINE or CONFLICT_MODE_COARSE")
	}
	if _, ok := omegav1.CommitMode_name[int32(c.Commit)]; !ok {
		return bad("Commit", c.Commit, "COMMIT_MODE_INCREMENTAL or COMMIT_MODE_ALL_OR_NOTHING")
	}
	if _, err := schedulers.ParseMapReducePolicy(c.MapReducePolicy.String()); err != nil {
		return bad("MapReducePolicy", c.MapReducePolicy, "MaxParallelism, GlobalCap or RelativeSize")
	}
	r := c.Runner
	switch {
	case r.MaxAttempts < 1 || r.MaxAttempts > MaxAttempts:
		return bad("Runner.MaxAttempts", r.MaxAttempts, "a whole number from 1 to %d", MaxAttempts)
	case r.MaxAttemptsNoPlacement < 1 || r.MaxAttemptsNoPlacement > MaxAttempts:
		return bad("Runner.MaxAttemptsNoPlacement", r.MaxAttemptsNoPlacement, "a whole number from 1 to %d", MaxAttempts)
	case r.RetryDelay < 0 || r.RetryDelay > MaxRetryDelay:
		return bad("Runner.RetryDelay", r.RetryDelay, "a duration from 0 to %v", MaxRetryDelay)
	// Runner.TJob and TTask are replaced by each SchedulerSpec's; a value
	// out of range is a mistake all the same.
	case r.TJob < 0 || r.TJob > MaxTJob:
		return bad("Runner.TJob", r.TJob, "a per-job decision time from 0 to %v (each SchedulerSpec's TJob replaces it)", MaxTJob)
	case r.TTask < 0 || r.TTask > MaxTTask:
		return bad("Runner.TTask", r.TTask, "a per-task decision time from 0 to %v (each SchedulerSpec's TTask replaces it)", MaxTTask)
	}
	if err := r.Validate(); err != nil { // what the schedulers check, should they check more
		return &configError{msg: fmt.Sprintf("%v: sim.Config.Runner: %v", ErrConfig, err)}
	}
	if a, err := LookupArchitecture(c.Architecture); err != nil {
		return bad("Architecture", strconv.Quote(c.Architecture), "a registered architecture (%s)", strings.Join(ArchitectureNames(), ", "))
	} else if a.Validate != nil {
		if err := a.Validate(c); err != nil {
			return err
		}
	}
	if c.FleetTick < MinFleetTick || c.FleetTick > MaxFleetTick {
		return bad("FleetTick", c.FleetTick, "the fleet's reporting period, from %v to %v", MinFleetTick, MaxFleetTick)
	}
	if maxFailures := float64(FailuresPerMachineDay * c.Workload.Machines); !(c.FailuresPerDay >= 0 && c.FailuresPerDay <= maxFailures) { // also NaN
		return bad("FailuresPerDay", c.FailuresPerDay, "a finite number of machine failures per simulated day from 0 to %v (%d per machine)", maxFailures, FailuresPerMachineDay)
	}
	switch c.Durability {
	case store.DurabilityNone:
	case store.DurabilitySync:
		if c.Dir == "" {
			return bad("Dir", strconv.Quote(c.Dir), "a directory for the store, required with Durability sync")
		}
	default:
		return bad("Durability", c.Durability, "store.DurabilityNone or store.DurabilitySync")
	}
	return nil
}

// ConfigFieldError is an error of Config.Validate about one field, by its
// Go name from sim.Config, and its value: what an Architecture's Validate
// returns.
func ConfigFieldError(field string, v any, format string, args ...any) error {
	return &configError{msg: fmt.Sprintf("%v: sim.Config.%s = %v: want %s", ErrConfig, field, v, fmt.Sprintf(format, args...))}
}

// kindList is the kinds of the schedulers, for a message.
func kindList(ss []SchedulerSpec) string {
	var ks []string
	for _, s := range ss {
		ks = append(ks, s.Kind)
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// params is what spec's factory gets: its own; for mapreduce the config's
// policy unless it names one; for a built-in kind the config's placement
// unless it names one.
func (c *Config) params(spec SchedulerSpec) schedulers.Params {
	p := spec.Params
	with := func(k, v string) {
		if _, ok := p[k]; ok {
			return
		}
		q := schedulers.Params{k: v}
		for k, v := range p {
			q[k] = v
		}
		p = q
	}
	if spec.Kind == "mapreduce" {
		with("policy", c.MapReducePolicy.String())
	}
	if c.Placement != "" && c.Placement != schedulers.PlacementBestFit && slices.Contains(BuiltinKinds(), spec.Kind) {
		with("placement", string(c.Placement))
	}
	return p
}

// BuiltinKinds are the scheduler kinds that take Config.Placement.
func BuiltinKinds() []string { return []string{"batch", "service", "mapreduce", "monolithic"} }
