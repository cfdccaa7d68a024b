// Package storebench is the commit-path benchmark of the cell-state store
// (`omega bench store`): a cell of many machines held in steady state by
// concurrent committers, each transaction finishing older tasks and
// creating and claiming new ones through the shared client library, with
// durable commits; and, in the same run, the raw-pebble baseline: the
// store's own encoded write sets, releases and expiries included, written as
// synced pebble batches with the same pebble options and no checking.
package storebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/hostinfo"
	"github.com/omega-cell/omega/store"
)

// Config is one benchmark run. Start from DefaultConfig.
type Config struct {
	// Machines in the cell. Default 10,000.
	Machines int
	// Committers: concurrent clients, each its own goroutine. Default 4.
	Committers int
	// Claims per transaction. Default 100.
	Claims int
	// Duration of each measured phase (store, then baseline). Default 10s.
	Duration time.Duration
	// Warmup runs the store workload before measuring, recording the write
	// sets the baseline replays. Default 2s.
	Warmup time.Duration
	// Fill is how many placed tasks the cell holds in steady state. Default
	// 100,000 (10 per machine).
	Fill int
	// Utilization is the share of the cell's CPU and memory the Fill tasks
	// hold on average. Default 0.5.
	Utilization float64
	// Conflict and Commit modes. Defaults: fine, incremental.
	Conflict omegav1.ConflictMode
	Commit   omegav1.CommitMode
	// Dir holds the pebble directories; default a temporary directory,
	// removed afterwards.
	Dir string
	// Durability of the store (the baseline always syncs). Default sync.
	Durability store.Durability
	// Policy is the store's: nil, the raw one (store.Raw); store.Mediated
	// measures what validating every operation costs the commit path.
	Policy store.Policy
	// MemTableMB overrides the store's pebble memtable size (and so the
	// baseline's); 0 keeps the store's default.
	MemTableMB int
	// Seed for machine choice and uuids.
	Seed uint64
	// Baseline runs the raw-pebble baseline after the store phase. Default true.
	Baseline bool
	// Transport is how the committers reach the store: TransportInProc
	// (the default: in-process, sharing the store's snapshots),
	// TransportCopy (in-process, each client keeping its own copy from the
	// watch, as a remote one must), or TransportGRPC (the store in a server
	// process of its own, `ServerBinary server`, each committer on its own
	// connection over loopback).
	Transport string
	// ServerBinary is the omega binary that serves the store with
	// TransportGRPC; ServerCPUProfile, if set, is where that server writes
	// its CPU profile.
	ServerBinary, ServerCPUProfile string
	// Log receives progress (stderr in the CLI).
	Log *slog.Logger
}

// The transports Config.Transport names.
const (
	TransportInProc = "inproc"
	TransportCopy   = "copy"
	TransportGRPC   = "grpc"
	// TransportReplicated: the store replicated on three `omega server
	// --peers` processes on loopback (replica), each committer on its own
	// connection to the leader.
	TransportReplicated = "replicated"
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Machines:    10_000,
		Committers:  4,
		Claims:      100,
		Duration:    10 * time.Second,
		Warmup:      2 * time.Second,
		Fill:        100_000,
		Utilization: 0.5,
		Seed:        1,
		Baseline:    true,
		Transport:   TransportInProc,
	}
}

// ErrConfig is wrapped by every error of Config.Validate.
var ErrConfig = errors.New("invalid store benchmark config")

// The bounds Config.Validate checks (the CLI's flags have the same).
const (
	MaxMachines       = 1_000_000
	MaxCommitters     = 1024    // goroutines, each with its own client
	MaxClaims         = 100_000 // claims in one transaction
	MaxFillPerMachine = 1000    // more, and each task's request rounds to almost nothing
	MaxMemTableMB     = 4095    // pebble's memtable must be under 4 GiB
	// MinPhase and MaxPhase bound Duration: under a millisecond measures
	// the clock, not the store. Warmup must be positive too (it records
	// the write sets the baseline replays) and at most MaxPhase.
	MinPhase, MaxPhase = time.Millisecond, 24 * time.Hour
)

// Validate reports the first invalid field, by its Go name
// (storebench.Config.Utilization) and value: counts whole and within the
// bounds above, durations positive, Utilization a finite share.
func (c *Config) Validate() error {
	bad := func(field string, v any, format string, args ...any) error {
		return fmt.Errorf("%w: storebench.Config.%s = %v: want %s", ErrConfig, field, v, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Machines < 1 || c.Machines > MaxMachines:
		return bad("Machines", c.Machines, "a whole number of machines from 1 to %d", MaxMachines)
	case c.Committers < 1 || c.Committers > MaxCommitters:
		return bad("Committers", c.Committers, "a whole number of committing clients from 1 to %d", MaxCommitters)
	case c.Claims < 1 || c.Claims > MaxClaims:
		return bad("Claims", c.Claims, "a whole number of claims per transaction from 1 to %d", MaxClaims)
	case c.Duration < MinPhase || c.Duration > MaxPhase:
		return bad("Duration", c.Duration, "the length of each measured phase, from %v to %v", MinPhase, MaxPhase)
	case c.Warmup <= 0 || c.Warmup > MaxPhase:
		return bad("Warmup", c.Warmup, "a duration greater than 0 (the warmup records the write sets the baseline replays) and at most %v", MaxPhase)
	case c.Fill < c.Committers*c.Claims || c.Fill > MaxFillPerMachine*c.Machines:
		return bad("Fill", c.Fill, "placed tasks in steady state, from Committers×Claims (%d) to %d per machine (%d)", c.Committers*c.Claims, MaxFillPerMachine, MaxFillPerMachine*c.Machines)
	case !(c.Utilization > 0 && c.Utilization < 1): // also NaN
		return bad("Utilization", c.Utilization, "the share of the cell the placed tasks hold: a number greater than 0 and less than 1")
	case c.MemTableMB < 0 || c.MemTableMB > MaxMemTableMB:
		return bad("MemTableMB", c.MemTableMB, "a memtable size in MiB from 0 (the store's default) to %d", MaxMemTableMB)
	}
	if _, ok := omegav1.ConflictMode_name[int32(c.Conflict)]; !ok {
		return bad("Conflict", c.Conflict, "CONFLICT_MODE_FINE or CONFLICT_MODE_COARSE")
	}
	if _, ok := omegav1.CommitMode_name[int32(c.Commit)]; !ok {
		return bad("Commit", c.Commit, "COMMIT_MODE_INCREMENTAL or COMMIT_MODE_ALL_OR_NOTHING")
	}
	if c.Durability != store.DurabilitySync && c.Durability != store.DurabilityNone {
		return bad("Durability", c.Durability, "store.DurabilitySync or store.DurabilityNone")
	}
	switch c.Transport {
	case TransportInProc, TransportCopy:
	case TransportGRPC, TransportReplicated:
		if c.ServerBinary == "" {
			return bad("ServerBinary", `""`, "the omega binary to run the server with, for the gRPC transport")
		}
		if c.Durability != store.DurabilitySync {
			return bad("Durability", c.Durability, "store.DurabilitySync with the gRPC transport (a server always syncs)")
		}
	default:
		return bad("Transport", strconv.Quote(c.Transport), "%q, %q, %q or %q", TransportInProc, TransportCopy, TransportGRPC, TransportReplicated)
	}
	return nil
}

// Report is the outcome; its JSON form is what `omega bench store --json`
// prints.
type Report struct {
	Machines    int     `json:"machines"`
	Committers  int     `json:"committers"`
	Claims      int     `json:"claims_per_txn"`
	Fill        int     `json:"fill_tasks"`
	DurationSec float64 `json:"duration_sec"`
	Conflict    string  `json:"conflict"`
	Commit      string  `json:"commit"`
	Durability  string  `json:"durability"`
	Transport   string  `json:"transport"`
	Policy      string  `json:"policy"`

	ClaimsPerSec     float64 `json:"claims_per_sec"`
	TxnsPerSec       float64 `json:"txns_per_sec"`
	CommitP50Ms      float64 `json:"commit_p50_ms"`
	CommitP99Ms      float64 `json:"commit_p99_ms"`
	ConflictFraction float64 `json:"conflict_fraction"`
	ClaimsConflicted int64   `json:"claims_conflicted"`
	// ClaimsRejected are claims the store's policy refused: none from the
	// benchmark's correct committers, so a figure with any measured
	// refusals, not the policy's cost.
	ClaimsRejected int64   `json:"claims_rejected"`
	BytesPerClaim  float64 `json:"bytes_per_claim"`

	PebbleClaimsPerSec float64 `json:"pebble_claims_per_sec"`
	PebbleTxnsPerSec   float64 `json:"pebble_txns_per_sec"`
	PebbleCommitP50Ms  float64 `json:"pebble_commit_p50_ms"`
	PebbleCommitP99Ms  float64 `json:"pebble_commit_p99_ms"`
	RatioToPebble      float64 `json:"ratio_to_pebble"`

	ViewUs      float64 `json:"view_us"`
	LiveTasks   int     `json:"live_tasks"`
	RSSMb       float64 `json:"rss_mb"`
	PeakRSSMb   float64 `json:"peak_rss_mb"`
	HeapInUseMb float64 `json:"heap_inuse_mb"`
	GoMaxProcs  int     `json:"gomaxprocs"`
}

// machine shape: 4 cores, 16 GiB, as the paper's lightweight cell.
const (
	machineCPU = 4000
	machineMem = 16 << 30
)

// Run runs the benchmark.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "omega-bench-store-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	rep := &Report{
		Machines: cfg.Machines, Committers: cfg.Committers, Claims: cfg.Claims, Fill: cfg.Fill,
		DurationSec: cfg.Duration.Seconds(), Conflict: cfg.Conflict.String(), Commit: cfg.Commit.String(),
		Durability: cfg.Durability.String(), Transport: cfg.Transport, Policy: policyName(cfg.Policy), GoMaxProcs: runtime.GOMAXPROCS(0),
	}

	opts := store.DefaultOptions(dir + "/store")
	// Finished tasks leave the live state a second after they finish, so the
	// cell neither fills nor grows; their deletions are commits too.
	opts.Retention = time.Second
	opts.Durability = cfg.Durability
	if cfg.Policy != nil {
		opts.Policy = cfg.Policy
	}
	if cfg.MemTableMB > 0 {
		opts.MemTableSize = uint64(cfg.MemTableMB) << 20
	}
	opts.Logger = log
	var st *store.Store // nil with the gRPC transport: the server's process holds it
	var srv *serverProc
	dial := func() (client.Transport, error) { return inproc.New(st), nil }
	switch cfg.Transport {
	case TransportGRPC:
		var err error
		if srv, err = startServer(ctx, cfg.ServerBinary, opts.Dir, cfg.ServerCPUProfile, log); err != nil {
			return nil, err
		}
		defer srv.stop()
		dial = func() (client.Transport, error) { return remote.Dial(srv.addr) }
	case TransportReplicated:
		cell, err := startReplicated(ctx, cfg.ServerBinary, opts.Dir, log)
		if err != nil {
			return nil, err
		}
		defer cell.stop()
		dial = func() (client.Transport, error) { return remote.Dial(cell.leader) }
	default:
		var err error
		if st, err = store.Open(opts); err != nil {
			return nil, err
		}
		defer st.Close()
		if cfg.Transport == TransportCopy {
			dial = func() (client.Transport, error) { return inproc.New(st, inproc.WithoutSharing()), nil }
		}
	}

	w := newWorkload(cfg, st, dial)
	log.Info("registering machines", "machines", cfg.Machines)
	if err := w.register(ctx); err != nil {
		return nil, err
	}
	log.Info("filling the cell", "tasks", cfg.Fill, "utilization", cfg.Utilization)
	if err := w.fill(ctx); err != nil {
		return nil, err
	}

	// Warm up, recording the write sets the baseline will replay.
	rec := &recorder{max: 4000, countOnly: !cfg.Baseline}
	wtr, err := dial()
	if err != nil {
		return nil, err
	}
	defer closeTransport(wtr)
	from, err := wtr.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	watch, err := wtr.Watch(ctx, from.Revision())
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	log.Info("warming up", "duration", cfg.Warmup)
	recCtx, stopRec := context.WithCancel(ctx)
	recDone := make(chan error, 1)
	go func() { recDone <- rec.run(recCtx, watch) }()
	if _, err := w.phase(ctx, cfg.Warmup); err != nil {
		stopRec()
		return nil, err
	}
	stopRec()
	if err := <-recDone; err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	watch.Close() // recorded: a watch nobody reads would cost the committers' process its decoding
	if rec.n == 0 {
		return nil, errors.New("warmup recorded no write sets: lengthen --warmup")
	}

	log.Info("measuring the store", "duration", cfg.Duration, "committers", cfg.Committers, "claims_per_txn", cfg.Claims)
	res, err := w.phase(ctx, cfg.Duration)
	if err != nil {
		return nil, err
	}
	secs := res.elapsed.Seconds()
	rep.ClaimsPerSec = perSec(float64(res.claims), secs)
	rep.TxnsPerSec = perSec(float64(res.counters.Attempts), secs)
	rep.CommitP50Ms, rep.CommitP99Ms = percentileMs(res.latencies, 0.50), percentileMs(res.latencies, 0.99)
	rep.ConflictFraction = res.counters.ConflictFraction()
	rep.ClaimsConflicted = res.counters.ClaimsConflicted
	rep.ClaimsRejected = res.counters.ClaimsRejected
	if rec.claims > 0 {
		rep.BytesPerClaim = float64(rec.bytes) / float64(rec.claims)
	}

	// View cost at this size (the store holds Fill placed tasks).
	rep.ViewUs = w.viewCost(ctx)
	rep.LiveTasks = w.comms[0].c.View().NumTasks()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapInUseMb = float64(ms.HeapInuse) / (1 << 20)
	rep.RSSMb, rep.PeakRSSMb = hostinfo.RSS() // with the gRPC transport, the committers' process alone
	w.close()
	if st != nil {
		if err := st.Close(); err != nil {
			return nil, err
		}
	} else if err := srv.stop(); err != nil {
		return nil, err
	}

	if cfg.Baseline {
		log.Info("measuring raw pebble", "duration", cfg.Duration, "committers", cfg.Committers, "recorded_write_sets", len(rec.sets))
		base, err := runBaseline(ctx, dir+"/pebble", &opts, rec, cfg.Committers, cfg.Duration)
		if err != nil {
			return nil, err
		}
		bsecs := base.elapsed.Seconds()
		rep.PebbleClaimsPerSec = perSec(float64(base.claims), bsecs)
		rep.PebbleTxnsPerSec = perSec(float64(len(base.latencies)), bsecs)
		rep.PebbleCommitP50Ms, rep.PebbleCommitP99Ms = percentileMs(base.latencies, 0.50), percentileMs(base.latencies, 0.99)
		if rep.PebbleClaimsPerSec > 0 {
			rep.RatioToPebble = rep.ClaimsPerSec / rep.PebbleClaimsPerSec
		}
	}
	return rep, nil
}

// perSec is n per second over secs, or 0 over no time (never an infinite
// or NaN rate).
func perSec(n, secs float64) float64 {
	if !(secs > 0) {
		return 0
	}
	return n / secs
}

func percentileMs(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q * float64(len(s)-1))
	return float64(s[i].Microseconds()) / 1000
}

func policyName(p store.Policy) string {
	if p == nil {
		return store.Raw().Name()
	}
	return p.Name()
}
