package storebench

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the whole benchmark on a small cell and checks that
// every figure the issue names is measured and plausible. It asserts
// behaviour, not speed.
func TestRunSmall(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Machines = 200
	cfg.Fill = 2000
	cfg.Committers = 2
	cfg.Claims = 20
	cfg.Duration = 300 * time.Millisecond
	cfg.Warmup = 200 * time.Millisecond
	cfg.Dir = t.TempDir()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ClaimsPerSec <= 0 || rep.TxnsPerSec <= 0 {
		t.Errorf("no store throughput: %+v", rep)
	}
	if rep.PebbleClaimsPerSec <= 0 || rep.RatioToPebble <= 0 {
		t.Errorf("no baseline: %+v", rep)
	}
	if rep.CommitP99Ms < rep.CommitP50Ms || rep.PebbleCommitP99Ms < rep.PebbleCommitP50Ms {
		t.Errorf("percentiles out of order: %+v", rep)
	}
	if rep.BytesPerClaim <= 0 {
		t.Errorf("bytes per claim not measured: %+v", rep)
	}
	// Steady state: the placed tasks stay at Fill (finished ones are
	// expired within a second, so live tasks stay within a small multiple).
	if rep.LiveTasks < cfg.Fill || rep.LiveTasks > 50*cfg.Fill {
		t.Errorf("live tasks %d, want about %d", rep.LiveTasks, cfg.Fill)
	}
	if rep.ViewUs < 0 || rep.RSSMb <= 0 {
		t.Errorf("view or memory not measured: %+v", rep)
	}
}

// TestConfigValidate: every bad value is refused by an error wrapping
// ErrConfig that names the field by its Go name and quotes the value.
func TestConfigValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		field, value string
		mod          func(*Config)
	}{
		{"Machines", "0", func(c *Config) { c.Machines = 0 }},
		{"Machines", "-1", func(c *Config) { c.Machines = -1 }},
		{"Machines", "1000001", func(c *Config) { c.Machines = MaxMachines + 1 }},
		{"Committers", "0", func(c *Config) { c.Committers = 0 }},
		{"Committers", "-2", func(c *Config) { c.Committers = -2 }},
		{"Committers", "1025", func(c *Config) { c.Committers = MaxCommitters + 1 }},
		{"Claims", "0", func(c *Config) { c.Claims = 0 }},
		{"Claims", "-1", func(c *Config) { c.Claims = -1 }},
		{"Claims", "100001", func(c *Config) { c.Claims = MaxClaims + 1 }},
		{"Duration", "0s", func(c *Config) { c.Duration = 0 }},
		{"Duration", "-1s", func(c *Config) { c.Duration = -time.Second }},
		{"Duration", "999µs", func(c *Config) { c.Duration = 999 * time.Microsecond }},
		{"Duration", "24h0m1s", func(c *Config) { c.Duration = MaxPhase + time.Second }},
		{"Warmup", "0s", func(c *Config) { c.Warmup = 0 }},
		{"Warmup", "-1s", func(c *Config) { c.Warmup = -time.Second }},
		{"Warmup", "25h0m0s", func(c *Config) { c.Warmup = 25 * time.Hour }},
		{"Fill", "10", func(c *Config) { c.Fill = 10 }},
		{"Fill", "-1", func(c *Config) { c.Fill = -1 }},
		{"Fill", "10000001", func(c *Config) { c.Fill = MaxFillPerMachine*c.Machines + 1 }},
		{"Utilization", "NaN", func(c *Config) { c.Utilization = nan }},
		{"Utilization", "+Inf", func(c *Config) { c.Utilization = inf }},
		{"Utilization", "-Inf", func(c *Config) { c.Utilization = -inf }},
		{"Utilization", "0", func(c *Config) { c.Utilization = 0 }},
		{"Utilization", "-0.5", func(c *Config) { c.Utilization = -0.5 }},
		{"Utilization", "1", func(c *Config) { c.Utilization = 1 }},
		{"Utilization", "1.5", func(c *Config) { c.Utilization = 1.5 }},
		{"MemTableMB", "-1", func(c *Config) { c.MemTableMB = -1 }},
		{"MemTableMB", "4096", func(c *Config) { c.MemTableMB = MaxMemTableMB + 1 }},
		{"Conflict", "7", func(c *Config) { c.Conflict = 7 }},
		{"Commit", "-1", func(c *Config) { c.Commit = -1 }},
		{"Durability", "durability(9)", func(c *Config) { c.Durability = 9 }},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		err := cfg.Validate()
		want := "storebench.Config." + tc.field + " = " + tc.value + ":"
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %s: err %v, want one containing %q", tc.field, tc.value, err, want)
		}
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%s = %s: Run accepted an invalid config", tc.field, tc.value)
		}
	}
	for name, mod := range map[string]func(*Config){
		"default": func(*Config) {},
		"lower": func(c *Config) {
			c.Machines, c.Committers, c.Claims, c.Fill, c.Duration, c.Warmup = 1, 1, 1, 1, MinPhase, 1
		},
		"upper": func(c *Config) {
			c.Machines, c.Committers, c.Claims, c.Duration, c.Warmup = MaxMachines, MaxCommitters, MaxClaims, MaxPhase, MaxPhase
		},
		"memtable":        func(c *Config) { c.MemTableMB = MaxMemTableMB },
		"coarse":          func(c *Config) { c.Conflict, c.Commit = 1, 1 },
		"durability none": func(c *Config) { c.Durability = 1 },
	} {
		cfg := DefaultConfig()
		mod(&cfg)
		if name == "upper" {
			cfg.Fill = MaxFillPerMachine * cfg.Machines
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if perSec(5, 0) != 0 || perSec(5, math.NaN()) != 0 || perSec(6, 2) != 3 {
		t.Error("perSec")
	}
}
