package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/omega-cell/omega/bench/storebench"
	"github.com/omega-cell/omega/store"
)

// StoreCostFile is where raw-vs-mediated keeps what mediation costs on the
// commit path.
const StoreCostFile = "store-cost.json"

// StoreCost is store-cost.json: `omega bench store` at its defaults under
// each policy, rounds interleaved in one run. Wall-clock figures, kept
// apart from the simulations' byte-identical results.
type StoreCost struct {
	Rounds      int                  `json:"rounds"`
	DurationSec float64              `json:"duration_sec"`
	Raw         []*storebench.Report `json:"raw"`
	Mediated    []*storebench.Report `json:"mediated"`
	// Medians over the rounds.
	RawClaimsPerSec float64 `json:"raw_claims_per_sec"`
	MedClaimsPerSec float64 `json:"mediated_claims_per_sec"`
	// Cost is 1 - mediated/raw claims/s: the share of throughput
	// mediation costs.
	Cost     float64 `json:"cost"`
	RawP50Ms float64 `json:"raw_commit_p50_ms"`
	RawP99Ms float64 `json:"raw_commit_p99_ms"`
	MedP50Ms float64 `json:"mediated_commit_p50_ms"`
	MedP99Ms float64 `json:"mediated_commit_p99_ms"`
}

// MeasureStoreCost runs `omega bench store` (its defaults, without the
// pebble baseline) under raw and mediated, alternating, 3 rounds (1 short
// one with quick).
func MeasureStoreCost(ctx context.Context, progress io.Writer, quick bool) (*StoreCost, error) {
	cost := &StoreCost{Rounds: 3}
	base := storebench.DefaultConfig()
	base.Baseline = false
	if quick {
		cost.Rounds, base.Duration, base.Warmup = 1, 2*time.Second, time.Second
	}
	cost.DurationSec = base.Duration.Seconds()
	for k := range cost.Rounds {
		for _, pol := range []store.Policy{store.Raw(), store.Mediated()} {
			fmt.Fprintf(progress, "raw-vs-mediated: omega bench store --policy %s, round %d of %d\n", pol.Name(), k+1, cost.Rounds)
			cfg := base
			cfg.Policy = pol
			rep, err := storebench.Run(ctx, cfg)
			if err != nil {
				return nil, err
			}
			if rep.ClaimsRejected > 0 {
				return nil, fmt.Errorf("the %s policy rejected %d of the benchmark's claims: the figure would measure refusals, not the policy's cost", pol.Name(), rep.ClaimsRejected)
			}
			if pol.Name() == "raw" {
				cost.Raw = append(cost.Raw, rep)
			} else {
				cost.Mediated = append(cost.Mediated, rep)
			}
		}
	}
	med := func(rs []*storebench.Report, f func(*storebench.Report) float64) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	cost.RawClaimsPerSec = med(cost.Raw, func(r *storebench.Report) float64 { return r.ClaimsPerSec })
	cost.MedClaimsPerSec = med(cost.Mediated, func(r *storebench.Report) float64 { return r.ClaimsPerSec })
	cost.RawP50Ms = med(cost.Raw, func(r *storebench.Report) float64 { return r.CommitP50Ms })
	cost.RawP99Ms = med(cost.Raw, func(r *storebench.Report) float64 { return r.CommitP99Ms })
	cost.MedP50Ms = med(cost.Mediated, func(r *storebench.Report) float64 { return r.CommitP50Ms })
	cost.MedP99Ms = med(cost.Mediated, func(r *storebench.Report) float64 { return r.CommitP99Ms })
	if cost.RawClaimsPerSec > 0 {
		cost.Cost = 1 - cost.MedClaimsPerSec/cost.RawClaimsPerSec
	}
	fmt.Fprintf(progress, "raw-vs-mediated: claims/s raw %.0f, mediated %.0f (cost %.1f%%); commit p99 raw %.1f ms, mediated %.1f ms\n",
		cost.RawClaimsPerSec, cost.MedClaimsPerSec, 100*cost.Cost, cost.RawP99Ms, cost.MedP99Ms)
	return cost, nil
}

// loadStoreCost reads out's store-cost.json, if there is one.
func loadStoreCost(out string) (*StoreCost, error) {
	b, err := os.ReadFile(filepath.Join(out, StoreCostFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c StoreCost
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(out, StoreCostFile), err)
	}
	return &c, nil
}
