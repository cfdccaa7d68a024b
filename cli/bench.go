package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/storebench"
	"github.com/omega-cell/omega/internal/finite"
	"github.com/omega-cell/omega/store"
)

// Bounds of `omega bench store`'s flags (see also validate.go).
const (
	maxCommitters      = storebench.MaxCommitters
	maxClaims          = storebench.MaxClaims
	maxFillPerMachine  = storebench.MaxFillPerMachine
	maxMemTableMB      = storebench.MaxMemTableMB
	minPhase, maxPhase = storebench.MinPhase, storebench.MaxPhase
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench NAME",
		Short: "Run a named experiment: the Omega paper's (arch, batch-load, n-batch, service-times, conflict-modes, mapreduce), raw-vs-mediated, all, or store (the commit path against raw pebble)",
	}
	cmd.AddCommand(newBenchStoreCmd())
	cmd.AddCommand(newBenchExperimentCmds()...)
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
		policy     string
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
		// PreRunE checks every flag before anything (a profile, --dir,
		// --out) is created.
		PreRunE: func(*cobra.Command, []string) error {
			var p problems
			p.count("--machines", cfg.Machines, 1, maxMachines, "machines in the cell")
			committers := p.count("--committers", cfg.Committers, 1, maxCommitters, "concurrent committing clients")
			claims := p.count("--claims", cfg.Claims, 1, maxClaims, "claims per transaction")
			p.duration("--duration", cfg.Duration.String(), cfg.Duration, minPhase, maxPhase, "the length of each measured phase")
			p.duration("--warmup", cfg.Warmup.String(), cfg.Warmup, minPhase, maxPhase, "the warmup (it records the write sets the baseline replays)")
			if committers && claims {
				p.count("--fill", cfg.Fill, cfg.Committers*cfg.Claims, maxFillPerMachine*max(cfg.Machines, 1),
					fmt.Sprintf("placed tasks in steady state (at least --committers x --claims, at most %d per machine)", maxFillPerMachine))
			}
			if u := cfg.Utilization; !(u > 0 && u < 1) {
				p.add("--utilization", fmtFloat(u), "want the share of the cell the placed tasks hold: a number greater than 0 and less than 1")
			}
			p.count("--memtable-mb", cfg.MemTableMB, 0, maxMemTableMB, "the memtable size in MiB (0: the store's default; pebble's must be under 4 GiB)")
			var err error
			if cfg.Conflict, err = parseConflict(conflict); err != nil {
				p.add("--conflict", strconv.Quote(conflict), "%v", err)
			}
			if cfg.Commit, err = parseCommit(commit); err != nil {
				p.add("--commit", strconv.Quote(commit), "%v", err)
			}
			if cfg.Durability, err = store.ParseDurability(durability); err != nil {
				p.add("--durability", strconv.Quote(durability), "want sync or none")
			}
			if cfg.Policy, err = store.ParsePolicy(policy); err != nil {
				p.add("--policy", strconv.Quote(policy), "want raw or mediated")
			}
			p.dir("--dir", cfg.Dir)
			p.dir("--out", out)
			switch cfg.Transport {
			case storebench.TransportInProc, storebench.TransportCopy:
			case storebench.TransportGRPC, storebench.TransportReplicated:
				if cfg.Durability != store.DurabilitySync {
					p.add("--transport", strconv.Quote(cfg.Transport), "a server always syncs: use --durability sync")
				}
				if cfg.Policy != nil && cfg.Policy.Name() != "raw" {
					p.add("--policy", strconv.Quote(policy), "the server runs the raw policy: measure the mediated one in process (--transport inproc)")
				}
				bin, err := os.Executable()
				if err != nil {
					p.add("--transport", strconv.Quote(cfg.Transport), "cannot find this binary to run the server with: %v", err)
				}
				cfg.ServerBinary = bin
			default:
				p.add("--transport", strconv.Quote(cfg.Transport), "want inproc, copy, grpc or replicated")
			}
			if len(p) > 0 {
				return p.err()
			}
			// The benchmark's own check, which the above should leave
			// nothing to.
			return cfg.Validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Log = slog.Default()
			rep, err := storebench.Run(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("bench store: %w", err)
			}
			b, err := finite.JSON(rep)
			if err != nil {
				return fmt.Errorf("bench store: %w", err)
			}
			if out != "" {
				if err := writeFiles(out, []outFile{{"store.json", bytesFile(b)}}); err != nil {
					return err
				}
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			printStoreReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Machines, "machines", cfg.Machines, fmt.Sprintf("machines in the cell, 1 to %d", maxMachines))
	f.IntVar(&cfg.Committers, "committers", cfg.Committers, fmt.Sprintf("concurrent committing clients, 1 to %d", maxCommitters))
	f.IntVar(&cfg.Claims, "claims", cfg.Claims, fmt.Sprintf("claims per transaction, 1 to %d", maxClaims))
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, fmt.Sprintf("length of each measured phase, %s to %s", fmtDuration(minPhase), fmtDuration(maxPhase)))
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, fmt.Sprintf("warmup before measuring (records the baseline's write sets), %s to %s", fmtDuration(minPhase), fmtDuration(maxPhase)))
	f.IntVar(&cfg.Fill, "fill", cfg.Fill, fmt.Sprintf("placed tasks the cell holds in steady state, from --committers x --claims to %d per machine", maxFillPerMachine))
	f.Float64Var(&cfg.Utilization, "utilization", cfg.Utilization, "share of the cell the placed tasks hold, greater than 0 and less than 1")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed (machine choice, uuids)")
	f.BoolVar(&cfg.Baseline, "baseline", cfg.Baseline, "also run the raw-pebble baseline")
	f.StringVar(&cfg.Dir, "dir", "", "directory for the pebble data (default: a temporary directory, removed)")
	f.StringVar(&conflict, "conflict", "fine", "conflict detection: fine or coarse")
	f.StringVar(&commit, "commit", "incremental", "commit mode: incremental or all-or-nothing")
	f.IntVar(&cfg.MemTableMB, "memtable-mb", 0, fmt.Sprintf("pebble memtable size in MiB for the store and the baseline, 0 to %d (0: the store's default, 64)", maxMemTableMB))
	f.StringVar(&durability, "durability", "sync", "store durability: sync, or none (in memory: isolates the store's CPU cost)")
	f.StringVar(&policy, "policy", "raw", "the store's policy: raw (Omega's: the state as the clients write it) or mediated (the store validates every operation, as Kubernetes' API server)")
	f.StringVar(&cfg.ServerCPUProfile, "server-cpuprofile", "", "with --transport grpc: the server process writes its CPU profile (pprof) here")
	f.StringVar(&cfg.Transport, "transport", storebench.TransportInProc, "how the committers reach the store: inproc (sharing its snapshots), copy (in-process, each client keeping its own copy from the watch, as a remote one must), grpc (the store in an `omega server` process of its own, over loopback), or replicated (three `omega server --peers` on loopback, the committers to the leader)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	f.StringVar(&out, "out", "", "also write store.json into this directory (created only once there is a report)")
	return cmd
}

func parseConflict(s string) (omegav1.ConflictMode, error) {
	switch s {
	case "fine":
		return omegav1.ConflictMode_CONFLICT_MODE_FINE, nil
	case "coarse":
		return omegav1.ConflictMode_CONFLICT_MODE_COARSE, nil
	}
	return 0, errors.New("want fine or coarse")
}

func parseCommit(s string) (omegav1.CommitMode, error) {
	switch s {
	case "incremental":
		return omegav1.CommitMode_COMMIT_MODE_INCREMENTAL, nil
	case "all-or-nothing":
		return omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, nil
	}
	return 0, errors.New("want incremental or all-or-nothing")
}

func printStoreReport(w io.Writer, r *storebench.Report) {
	fmt.Fprintf(w, "omega bench store: %d machines, %d committers, %d claims/txn, %d placed tasks, %s+%s, durability %s, transport %s, %.0fs per phase\n\n",
		r.Machines, r.Committers, r.Claims, r.Fill, r.Conflict, r.Commit, r.Durability, r.Transport, r.DurationSec)
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
