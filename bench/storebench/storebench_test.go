package storebench

import (
	"context"
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

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"machines", func(c *Config) { c.Machines = 0 }},
		{"committers", func(c *Config) { c.Committers = 0 }},
		{"claims", func(c *Config) { c.Claims = 0 }},
		{"fill", func(c *Config) { c.Fill = 10 }},
		{"utilization", func(c *Config) { c.Utilization = 1.5 }},
		{"duration", func(c *Config) { c.Duration = -time.Second }},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: invalid config accepted", tc.name)
		}
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}
