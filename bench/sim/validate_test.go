package sim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/store"
)

// TestConfigValidateNamesTheField: every bad value is refused, before
// anything is built, by an error wrapping ErrConfig that names the field
// by its Go name from sim.Config and quotes the value.
func TestConfigValidateNamesTheField(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		want   string // field = value
		mutate func(*Config)
	}{
		{"Workload.Days = 0", func(c *Config) { c.Workload.Days = 0 }},
		{"Workload.Days = NaN", func(c *Config) { c.Workload.Days = nan }},
		{"Workload.Days = +Inf", func(c *Config) { c.Workload.Days = inf }},
		{"Workload.Days = -Inf", func(c *Config) { c.Workload.Days = -inf }},
		{"Workload.Days = -1", func(c *Config) { c.Workload.Days = -1 }},
		{"Workload.Days = 3651", func(c *Config) { c.Workload.Days = 3651 }},
		{"Workload.Machines = 0", func(c *Config) { c.Workload.Machines = 0 }},
		{"Workload.MapReduceShare = NaN", func(c *Config) { c.Workload.MapReduceShare = nan }},
		{"Workload.BatchInterarrival = 0s", func(c *Config) { c.Workload.BatchInterarrival = 0 }},
		{"Workload.ServiceRuntime.Alpha = +Inf", func(c *Config) { c.Workload.ServiceRuntime.Alpha = inf }},
		{"Schedulers = []", func(c *Config) { c.Schedulers = nil }},
		{`Schedulers[0].Kind = "magic"`, func(c *Config) { c.Schedulers[0].Kind = "magic" }},
		{`Schedulers[1].Kind = "batch"`, func(c *Config) { c.Schedulers[1].Kind = "batch" }},
		{"Schedulers[0].Count = 0", func(c *Config) { c.Schedulers[0].Count = 0 }},
		{"Schedulers[1].Count = -1", func(c *Config) { c.Schedulers[1].Count = -1 }},
		{"Schedulers[0].Count = 101", func(c *Config) { c.Schedulers[0].Count = MaxSchedulersPerKind + 1 }},
		{"Schedulers[0].TJob = -1s", func(c *Config) { c.Schedulers[0].TJob = -time.Second }},
		{"Schedulers[0].TJob = 1h0m1s", func(c *Config) { c.Schedulers[0].TJob = MaxTJob + time.Second }},
		{"Schedulers[1].TTask = -1ns", func(c *Config) { c.Schedulers[1].TTask = -1 }},
		{"Schedulers[1].TTask = 1m1s", func(c *Config) { c.Schedulers[1].TTask = MaxTTask + time.Second }},
		{"Schedulers[0].Params = map[speed:11]", func(c *Config) { c.Schedulers[0].Params = schedulers.Params{"speed": "11"} }},
		{"Schedulers = [batch]", func(c *Config) { c.Schedulers = c.Schedulers[:1] }},
		{"Workload.MapReduceShare = 0.2", func(c *Config) { c.Workload.MapReduceShare = 0.2 }},
		{`Route["magic"] = "batch"`, func(c *Config) { c.Route = map[string]string{"magic": "batch"} }},
		{`Route["batch"] = "mapreduce"`, func(c *Config) { c.Route = map[string]string{"batch": "mapreduce"} }},
		{"Conflict = 5", func(c *Config) { c.Conflict = 5 }},
		{"Commit = -1", func(c *Config) { c.Commit = -1 }},
		{"MapReducePolicy = policy(9)", func(c *Config) { c.MapReducePolicy = 9 }},
		{`Placement = "worst-fit"`, func(c *Config) { c.Placement = "worst-fit" }},
		{"Runner.MaxAttempts = 0", func(c *Config) { c.Runner.MaxAttempts = 0 }},
		{"Runner.MaxAttempts = 1000001", func(c *Config) { c.Runner.MaxAttempts = MaxAttempts + 1 }},
		{"Runner.MaxAttemptsNoPlacement = -1", func(c *Config) { c.Runner.MaxAttemptsNoPlacement = -1 }},
		{"Runner.RetryDelay = -1s", func(c *Config) { c.Runner.RetryDelay = -time.Second }},
		{"Runner.RetryDelay = 25h0m0s", func(c *Config) { c.Runner.RetryDelay = 25 * time.Hour }},
		{"Runner.TJob = -1s", func(c *Config) { c.Runner.TJob = -time.Second }},
		{"Runner.TTask = 2m0s", func(c *Config) { c.Runner.TTask = 2 * time.Minute }},
		{"FleetTick = 0s", func(c *Config) { c.FleetTick = 0 }},
		{"FleetTick = -1s", func(c *Config) { c.FleetTick = -time.Second }},
		{"FleetTick = 999µs", func(c *Config) { c.FleetTick = MinFleetTick - time.Microsecond }},
		{"FleetTick = 2h0m0s", func(c *Config) { c.FleetTick = 2 * time.Hour }},
		{"FailuresPerDay = NaN", func(c *Config) { c.FailuresPerDay = nan }},
		{"FailuresPerDay = +Inf", func(c *Config) { c.FailuresPerDay = inf }},
		{"FailuresPerDay = -Inf", func(c *Config) { c.FailuresPerDay = -inf }},
		{"FailuresPerDay = -1", func(c *Config) { c.FailuresPerDay = -1 }},
		{"FailuresPerDay = 4801", func(c *Config) { c.FailuresPerDay = 4801 }}, // 200 machines
		{`Dir = ""`, func(c *Config) { c.Durability = store.DurabilitySync }},
		{"Durability = durability(7)", func(c *Config) { c.Durability = 7 }},
	} {
		cfg := DefaultConfig()
		cfg.Workload.Machines = 200
		cfg.Workload.MapReduceShare = 0
		tc.mutate(&cfg)
		err := cfg.Validate()
		want := "sim.Config." + tc.want + ": want "
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one wrapping ErrConfig containing %q", tc.want, err, want)
		}
		// The workload's own errors (not the share with no mapreduce
		// scheduler, a mismatch between the two).
		if strings.HasPrefix(tc.want, "Workload.") && tc.want != "Workload.MapReduceShare = 0.2" {
			var fe *workload.FieldError
			if !errors.Is(err, workload.ErrConfig) || !errors.As(err, &fe) || !strings.HasPrefix(fe.Name(), "sim.Config.Workload.") {
				t.Errorf("%s: err %v is not a *workload.FieldError named from sim.Config", tc.want, err)
			}
		}
		if s, err := Build(context.Background(), cfg); err == nil {
			s.Close()
			t.Errorf("%s: Build accepted an invalid config", tc.want)
		}
	}
}

// TestConfigValidateAcceptsBounds: the bounds themselves, and the ways of
// giving every kind of job a scheduler.
func TestConfigValidateAcceptsBounds(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"default":        func(*Config) {},
		"fleet tick min": func(c *Config) { c.FleetTick = MinFleetTick },
		"fleet tick max": func(c *Config) { c.FleetTick = MaxFleetTick },
		"failures max":   func(c *Config) { c.FailuresPerDay = FailuresPerMachineDay * float64(c.Workload.Machines) },
		"decision bounds": func(c *Config) {
			c.Schedulers[0].TJob, c.Schedulers[0].TTask, c.Schedulers[1].TJob = MaxTJob, MaxTTask, 0
		},
		"count max": func(c *Config) { c.Schedulers[0].Count = MaxSchedulersPerKind },
		"routed":    func(c *Config) { c.Schedulers, c.Route = c.Schedulers[1:], map[string]string{"batch": "service"} },
		"mapreduce routed": func(c *Config) {
			c.Workload.MapReduceShare, c.Route = 0.5, map[string]string{"mapreduce": "batch"}
		},
		"mapreduce": func(c *Config) {
			c.Workload.MapReduceShare = 1
			c.Schedulers = append(c.Schedulers, SchedulerSpec{Kind: "mapreduce", Count: 1})
		},
		"sync": func(c *Config) { c.Durability, c.Dir = store.DurabilitySync, t.TempDir() },
		"runner": func(c *Config) {
			c.Runner = schedulers.RunnerConfig{MaxAttempts: MaxAttempts, MaxAttemptsNoPlacement: 1, RetryDelay: MaxRetryDelay}
		},
		"policy": func(c *Config) { c.MapReducePolicy = schedulers.RelativeSize },
	} {
		cfg := DefaultConfig()
		cfg.Workload.MapReduceShare = 0
		mutate(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestShortestRunIsFinite: the shortest run the bounds allow, on a tiny
// cell, gives a summary and CSVs that hold only finite numbers.
func TestShortestRunIsFinite(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workload.Machines = 1
	cfg.Workload.MachinesPerFailureDomain = 1
	cfg.Workload.Days = workload.MinDays
	cfg.Workload.MapReduceShare = 0
	sum, jobs := runConfig(t, cfg)
	if err := checkFinite("", sum); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sum.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := sum.WriteSchedulersCSV(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]byte{b.Bytes(), jobs} {
		if bytes.Contains(s, []byte("NaN")) || bytes.Contains(s, []byte("Inf")) {
			t.Fatalf("not finite:\n%s", s)
		}
	}
}

// TestReportNeverNonFinite: the summary's helpers give 0, not NaN, over
// no data and no time; and a figure that is not finite is an error naming
// it, with nothing written.
func TestReportNeverNonFinite(t *testing.T) {
	for name, x := range map[string]float64{
		"mean of none": mean(nil), "quantile of none": quantile(nil, 0.5), "ratio over 0": ratio(1, 0),
		"spread of none": spread(nil).MAD,
	} {
		if x != 0 {
			t.Errorf("%s = %v, want 0", name, x)
		}
	}
	for _, total := range []time.Duration{0, time.Nanosecond, 36 * time.Hour} {
		m, mad := busyness([]time.Duration{time.Hour, time.Hour, time.Hour}, total)
		if math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(mad) || math.IsInf(mad, 0) {
			t.Errorf("busyness over %v: %v, %v", total, m, mad)
		}
	}
	if a := Aggregate(nil); checkFinite("", a) != nil {
		t.Error("aggregate of nothing is not finite")
	}

	sum := Summary{Schedulers: []SchedulerSummary{{Name: "batch-0", WaitMeanS: math.NaN()}}}
	var b bytes.Buffer
	if err := sum.WriteJSON(&b); err == nil || !strings.Contains(err.Error(), "schedulers[0].wait_mean_s = NaN") || b.Len() != 0 {
		t.Errorf("WriteJSON: err %v, wrote %d bytes", err, b.Len())
	}
	if err := sum.WriteSchedulersCSV(&b); err == nil || !strings.Contains(err.Error(), "schedulers[0].wait_mean_s") || b.Len() != 0 {
		t.Errorf("WriteSchedulersCSV: err %v, wrote %d bytes", err, b.Len())
	}
	sum = Summary{Host: Host{WallSecondsPerSimDay: math.Inf(1)}}
	if err := sum.WriteJSON(&b); err == nil || !strings.Contains(err.Error(), "host.wall_seconds_per_sim_day = +Inf") {
		t.Errorf("WriteJSON: err %v", err)
	}
	e := &Sim{samples: []Sample{{CPU: 0.5}, {CPU: math.Inf(-1)}}}
	if err := e.WriteUtilizationCSV(&b); err == nil || !strings.Contains(err.Error(), "samples[1].CPU") || b.Len() != 0 {
		t.Errorf("WriteUtilizationCSV: err %v, wrote %d bytes", err, b.Len())
	}
}

// TestNewRefusesNegativeOptions: a negative duration in Options is an
// error naming it, not a silent default.
func TestNewRefusesNegativeOptions(t *testing.T) {
	ts := newTestSim(t, 1, 2, 1, nil)
	o := ts.e.o
	for name, mutate := range map[string]func(*Options){
		"Duration":    func(o *Options) { o.Duration = -1 },
		"FleetTick":   func(o *Options) { o.FleetTick = -time.Second },
		"ExpireEvery": func(o *Options) { o.ExpireEvery = -time.Second },
		"SampleEvery": func(o *Options) { o.SampleEvery = -time.Second },
	} {
		bad := o
		mutate(&bad)
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "sim.Options."+name) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// RouteShare: a share of a routed kind, in (0, 1]; below 1 the kind's own
// scheduler must run (it takes the rest), at 1 it need not.
func TestRouteShareValidate(t *testing.T) {
	base := DefaultConfig()
	base.Workload.MapReduceShare = 0
	base.Schedulers = append(base.Schedulers, SchedulerSpec{Kind: "faulty-units", Count: 1})
	base.Route = map[string]string{"batch": "faulty-units"}
	for _, tc := range []struct {
		share   float64
		noBatch bool
		ok      bool
	}{{0.2, false, true}, {1, false, true}, {1, true, true}, {0.5, true, false}, {0, false, false}, {1.5, false, false}} {
		cfg := base
		cfg.Schedulers = slices.Clone(base.Schedulers)
		if tc.noBatch {
			cfg.Schedulers = cfg.Schedulers[1:] // service and faulty-units
		}
		cfg.RouteShare = map[string]float64{"batch": tc.share}
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("share %v without batch %v: %v, want ok %v", tc.share, tc.noBatch, err, tc.ok)
		}
	}
}
