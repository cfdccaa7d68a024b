package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/storebench"
	"github.com/omega-cell/omega/store"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench NAME",
		Short: "Run a named experiment (store: the commit path against raw pebble)",
	}
	cmd.AddCommand(newBenchStoreCmd())
	return cmd
}

func newBenchStoreCmd() *cobra.Command {
	cfg := storebench.DefaultConfig()
	var (
		asJSON     bool
		conflict   string
		commit     string
		out        string
		durability string
	)
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Commit-path benchmark: durable claims per second, against raw pebble writing the same bytes",
		Long: `Holds a cell of --machines machines in steady state: --committers concurrent
clients each commit transactions that finish --claims older tasks and create and
claim --claims new ones (durability sync, through the client library), while the
store expires finished tasks. Then, in the same run, raw pebble writes the
store's own encoded write sets (releases and expiries included) as synced
batches with the same pebble options and no checking. Progress goes to stderr;
the table (or, with --json, one JSON object) to stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Conflict, err = parseConflict(conflict); err != nil {
				return err
			}
			if cfg.Commit, err = parseCommit(commit); err != nil {
				return err
			}
			if cfg.Durability, err = store.ParseDurability(durability); err != nil {
				return fmt.Errorf("--durability: %w", err)
			}
			cfg.Log = slog.Default()
			rep, err := storebench.Run(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench store: %w", err)
			}
			if out != "" {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				b, _ := json.MarshalIndent(rep, "", "  ")
				if err := os.WriteFile(out+"/store.json", append(b, '\n'), 0o644); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(rep)
			}
			printStoreReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Machines, "machines", cfg.Machines, "machines in the cell")
	f.IntVar(&cfg.Committers, "committers", cfg.Committers, "concurrent committing clients")
	f.IntVar(&cfg.Claims, "claims", cfg.Claims, "claims per transaction")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of each measured phase")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warmup before measuring (records the baseline's write sets)")
	f.IntVar(&cfg.Fill, "fill", cfg.Fill, "placed tasks the cell holds in steady state")
	f.Float64Var(&cfg.Utilization, "utilization", cfg.Utilization, "share of the cell the placed tasks hold")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed (machine choice, uuids)")
	f.BoolVar(&cfg.Baseline, "baseline", cfg.Baseline, "also run the raw-pebble baseline")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the pebble data (default: a temporary directory, removed)")
	f.StringVar(&conflict, "conflict", "fine", "conflict detection: fine or coarse")
	f.StringVar(&commit, "commit", "incremental", "commit mode: incremental or all-or-nothing")
	f.IntVar(&cfg.MemTableMB, "memtable-mb", 0, "pebble memtable size in MiB for the store and the baseline (0: the store's default, 64)")
	f.StringVar(&durability, "durability", "sync", "store durability: sync, or none (in memory: isolates the store's CPU cost)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	f.StringVar(&out, "out", "", "also write store.json into this directory")
	return cmd
}

func parseConflict(s string) (omegav1.ConflictMode, error) {
	switch s {
	case "fine":
		return omegav1.ConflictMode_CONFLICT_MODE_FINE, nil
	case "coarse":
		return omegav1.ConflictMode_CONFLICT_MODE_COARSE, nil
	}
	return 0, fmt.Errorf("--conflict %q: want fine or coarse", s)
}

func parseCommit(s string) (omegav1.CommitMode, error) {
	switch s {
	case "incremental":
		return omegav1.CommitMode_COMMIT_MODE_INCREMENTAL, nil
	case "all-or-nothing":
		return omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, nil
	}
	return 0, fmt.Errorf("--commit %q: want incremental or all-or-nothing", s)
}

func printStoreReport(w io.Writer, r *storebench.Report) {
	fmt.Fprintf(w, "omega bench store: %d machines, %d committers, %d claims/txn, %d placed tasks, %s+%s, durability %s, %.0fs per phase\n\n",
		r.Machines, r.Committers, r.Claims, r.Fill, r.Conflict, r.Commit, r.Durability, r.DurationSec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tclaims/s\ttxns/s\tcommit p50 ms\tcommit p99 ms\t")
	fmt.Fprintf(tw, "omega store\t%.0f\t%.0f\t%.2f\t%.2f\t\n", r.ClaimsPerSec, r.TxnsPerSec, r.CommitP50Ms, r.CommitP99Ms)
	if r.PebbleClaimsPerSec > 0 {
		fmt.Fprintf(tw, "raw pebble\t%.0f\t%.0f\t%.2f\t%.2f\t\n", r.PebbleClaimsPerSec, r.PebbleTxnsPerSec, r.PebbleCommitP50Ms, r.PebbleCommitP99Ms)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if r.PebbleClaimsPerSec > 0 {
		fmt.Fprintf(w, "ratio to pebble     %.2f\n", r.RatioToPebble)
	}
	fmt.Fprintf(w, "conflict fraction   %.4f (%d claims conflicted)\n", r.ConflictFraction, r.ClaimsConflicted)
	fmt.Fprintf(w, "bytes per claim     %.0f\n", r.BytesPerClaim)
	fmt.Fprintf(w, "view                %.3f µs (%d live tasks)\n", r.ViewUs, r.LiveTasks)
	fmt.Fprintf(w, "memory              rss %.0f MiB, peak %.0f MiB, heap in use %.0f MiB\n", r.RSSMb, r.PeakRSSMb, r.HeapInUseMb)
}
