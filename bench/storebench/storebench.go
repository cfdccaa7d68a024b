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
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/hostinfo"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
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
	case TransportGRPC:
		if c.ServerBinary == "" {
			return bad("ServerBinary", `""`, "the omega binary to run the server with, for the gRPC transport")
		}
		if c.Durability != store.DurabilitySync {
			return bad("Durability", c.Durability, "store.DurabilitySync with the gRPC transport (a server always syncs)")
		}
	default:
		return bad("Transport", strconv.Quote(c.Transport), "%q, %q or %q", TransportInProc, TransportCopy, TransportGRPC)
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

	ClaimsPerSec     float64 `json:"claims_per_sec"`
	TxnsPerSec       float64 `json:"txns_per_sec"`
	CommitP50Ms      float64 `json:"commit_p50_ms"`
	CommitP99Ms      float64 `json:"commit_p99_ms"`
	ConflictFraction float64 `json:"conflict_fraction"`
	ClaimsConflicted int64   `json:"claims_conflicted"`
	BytesPerClaim    float64 `json:"bytes_per_claim"`

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
		Durability: cfg.Durability.String(), Transport: cfg.Transport, GoMaxProcs: runtime.GOMAXPROCS(0),
	}

	opts := store.DefaultOptions(dir + "/store")
	// Finished tasks leave the live state a second after they finish, so the
	// cell neither fills nor grows; their deletions are commits too.
	opts.Retention = time.Second
	opts.Durability = cfg.Durability
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
	rec := &recorder{max: 4000}
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
	if len(rec.sets) == 0 {
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

// --- the store workload -------------------------------------------------

type workload struct {
	cfg      Config
	st       *store.Store // nil when a server process holds it (and expires)
	dial     func() (client.Transport, error)
	conns    []client.Transport
	machines []uuid.UUID
	specs    []*omegav1.TaskSpec // task shapes, shared by the tasks of that shape
	comms    []*committer
}

// placed is a task a committer placed, at the version its claim gave it
// (the commit's revision): the committer knows it without a lookup.
type placed struct {
	uid     uuid.UUID
	version uint64
}

type committer struct {
	id      int
	c       *client.Client
	rng     *rand.Rand
	job     uuid.UUID
	meta    *omegav1.ObjectMeta // template: labels and owner reference, shared
	placed  []placed            // FIFO of tasks placed by this committer
	pending []uuid.UUID         // created, claim conflicted: claim again
}

func newWorkload(cfg Config, st *store.Store, dial func() (client.Transport, error)) *workload {
	w := &workload{cfg: cfg, st: st, dial: dial}
	// Eight task shapes around the mean that holds Utilization at Fill.
	perMachine := float64(cfg.Fill) / float64(cfg.Machines)
	meanCPU := float64(machineCPU) * cfg.Utilization / perMachine
	meanMem := float64(machineMem) * cfg.Utilization / perMachine
	for i := range 8 {
		f := 0.5 + float64(i)/7 // 0.5 .. 1.5
		w.specs = append(w.specs, &omegav1.TaskSpec{Resources: &omegav1.Resources{
			CpuMillis:   max(1, int64(meanCPU*f)),
			MemoryBytes: max(1, int64(meanMem*(2-f))),
		}})
	}
	return w
}

func (w *workload) newClient(ctx context.Context, name string, seed uint64) (*client.Client, *rand.Rand, error) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, seed))
	tr, err := w.dial()
	if err != nil {
		return nil, nil, err
	}
	w.conns = append(w.conns, tr)
	c, err := client.New(ctx, tr, client.Config{
		Component: name,
		Clock:     client.RealClock{},
		Rand:      rng,
		Conflict:  w.cfg.Conflict,
		Commit:    w.cfg.Commit,
	})
	return c, rng, err
}

func (w *workload) register(ctx context.Context) error {
	c, _, err := w.newClient(ctx, "bench/register", 0)
	if err != nil {
		return err
	}
	for start := 0; start < w.cfg.Machines; start += 5000 {
		tx := c.NewTxn(c.View())
		for i := start; i < min(start+5000, w.cfg.Machines); i++ {
			uid := c.NewUID()
			w.machines = append(w.machines, uid)
			tx.Ops = append(tx.Ops, txn.CreateMachine(&omegav1.Machine{
				Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: "m" + strconv.Itoa(i)},
				Spec: &omegav1.MachineSpec{
					Capacity:      &omegav1.Resources{CpuMillis: machineCPU, MemoryBytes: machineMem},
					FailureDomain: "rack-" + strconv.Itoa(i/40),
				},
			}))
		}
		if _, err := c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("register machines: %w", err)
		}
	}
	slices.SortFunc(w.machines, func(a, b uuid.UUID) int { return strings.Compare(string(a[:]), string(b[:])) })
	for i := range w.cfg.Committers {
		c, rng, err := w.newClient(ctx, "bench-"+strconv.Itoa(i), uint64(i+1))
		if err != nil {
			return err
		}
		cm := &committer{id: i, c: c, rng: rng, job: c.NewUID()}
		cm.meta = &omegav1.ObjectMeta{
			Labels:          map[string]string{"job": "bench-" + strconv.Itoa(i)},
			OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: cm.job.String(), Name: "bench-" + strconv.Itoa(i), Controller: true}},
		}
		tx := c.NewTxn(c.View())
		tx.Ops = append(tx.Ops, txn.CreateJob(&omegav1.Job{
			Meta: &omegav1.ObjectMeta{Uid: cm.job.String(), Name: "bench-" + strconv.Itoa(i)},
			Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "bench"},
		}))
		if _, err := c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("create job: %w", err)
		}
		w.comms = append(w.comms, cm)
	}
	return nil
}

// fill places Fill tasks, spread over the committers, in large transactions.
func (w *workload) fill(ctx context.Context) error {
	per := w.cfg.Fill / w.cfg.Committers
	for _, cm := range w.comms {
		for len(cm.placed) < per {
			n := min(per-len(cm.placed), 5000)
			if err := cm.c.Sync(ctx); err != nil {
				return err
			}
			if _, _, err := w.step(ctx, cm, 0, n); err != nil {
				return err
			}
		}
	}
	return nil
}

type phaseResult struct {
	elapsed   time.Duration
	claims    int64
	counters  client.Counters
	latencies []time.Duration
}

// phase runs every committer for d and sums what they did.
func (w *workload) phase(ctx context.Context, d time.Duration) (*phaseResult, error) {
	type out struct {
		claims int64
		lat    []time.Duration
		err    error
	}
	before := make([]client.Counters, len(w.comms))
	for i, cm := range w.comms {
		before[i] = cm.c.Counters()
	}
	outs := make([]out, len(w.comms))
	start := time.Now()
	deadline := start.Add(d)
	expCtx, stopExp := context.WithCancel(ctx)
	expDone := make(chan error, 1)
	go func() { expDone <- w.expire(expCtx) }()
	var wg sync.WaitGroup
	for i, cm := range w.comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := cm.c.Sync(ctx); err != nil {
					o.err = err
					return
				}
				t0 := time.Now()
				claims, _, err := w.step(ctx, cm, w.cfg.Claims, w.cfg.Claims)
				if err != nil {
					o.err = err
					return
				}
				o.lat = append(o.lat, time.Since(t0))
				o.claims += int64(claims)
			}
		}()
	}
	wg.Wait()
	res := &phaseResult{elapsed: time.Since(start)}
	stopExp()
	if err := <-expDone; err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	for i, o := range outs {
		if o.err != nil {
			return nil, o.err
		}
		res.claims += o.claims
		res.latencies = append(res.latencies, o.lat...)
		c := w.comms[i].c.Counters()
		b := before[i]
		res.counters.Attempts += c.Attempts - b.Attempts
		res.counters.Conflicted += c.Conflicted - b.Conflicted
		res.counters.ClaimsConflicted += c.ClaimsConflicted - b.ClaimsConflicted
	}
	return res, nil
}

// close closes the clients' connections.
func (w *workload) close() {
	for _, tr := range w.conns {
		closeTransport(tr)
	}
	w.conns = nil
}

func closeTransport(tr client.Transport) {
	if c, ok := tr.(interface{ Close() error }); ok {
		c.Close()
	}
}

// expire deletes finished tasks every 100ms, as a server's ticker would (a
// server process does it itself).
func (w *workload) expire(ctx context.Context) error {
	if w.st == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := w.st.Expire(ctx, time.Now()); err != nil {
				return err
			}
		}
	}
}

// step is one transaction of a committer: finish its `finish` oldest
// placed tasks, then claim `claims` tasks (pending ones from earlier
// conflicts first, then new ones created in the same transaction) on
// machines picked at random from its view, first fit.
func (w *workload) step(ctx context.Context, cm *committer, finish, claims int) (committed int, res txn.Result, err error) {
	v := cm.c.View()
	tx := cm.c.NewTxn(v)
	finish = min(finish, len(cm.placed))
	tx.Ops = make([]txn.Op, 0, finish+2*claims)
	for _, p := range cm.placed[:finish] {
		tx.Ops = append(tx.Ops, txn.SetStatus(p.uid, omegav1.TaskState_TASK_STATE_SUCCEEDED, p.version, ""))
	}
	// Local accounting of what this transaction adds, so its own claims
	// don't overfill a machine.
	extra := map[uuid.UUID]txn.Resources{}
	type claimed struct {
		uid uuid.UUID
		op  int
	}
	var mine []claimed
	pick := func(req txn.Resources) (uuid.UUID, bool) {
		for range 16 {
			m, ok := v.Machine(w.machines[cm.rng.IntN(len(w.machines))])
			if !ok || m.State != omegav1.MachineState_MACHINE_STATE_UP {
				continue
			}
			if fit, _ := txn.Fits(m.Capacity, m.Allocated.Add(extra[m.UID]), req); fit {
				extra[m.UID] = extra[m.UID].Add(req)
				return m.UID, true
			}
		}
		return uuid.Nil, false
	}
	retry := cm.pending
	cm.pending = nil
	for i := 0; i < claims; i++ {
		var uid uuid.UUID
		var req txn.Resources
		var ver uint64
		if i < len(retry) {
			uid = retry[i]
			t, ok := v.Task(uid)
			if !ok || t.State != omegav1.TaskState_TASK_STATE_PENDING {
				continue
			}
			req, ver = t.Request, t.Version
		} else {
			uid = cm.c.NewUID()
			spec := w.specs[cm.rng.IntN(len(w.specs))]
			meta := &omegav1.ObjectMeta{Uid: uid.String(), Labels: cm.meta.Labels, OwnerReferences: cm.meta.OwnerReferences}
			tx.Ops = append(tx.Ops, txn.CreateTask(&omegav1.Task{Meta: meta, Spec: spec}))
			req = txn.ResourcesFromProto(spec.Resources)
		}
		m, ok := pick(req)
		if !ok {
			cm.pending = append(cm.pending, uid)
			continue
		}
		mine = append(mine, claimed{uid, len(tx.Ops)})
		tx.Ops = append(tx.Ops, txn.Claim(uid, m, req, ver))
	}
	cm.pending = append(cm.pending, retry[min(len(retry), claims):]...)
	res, err = cm.c.Commit(ctx, tx)
	if err != nil {
		return 0, res, fmt.Errorf("%s: commit: %w", cm.c.Component(), err)
	}
	if res.Revision != 0 {
		cm.placed = cm.placed[finish:]
	}
	for _, c := range mine {
		if res.Revision != 0 && res.Outcomes[c.op].Committed() {
			cm.placed = append(cm.placed, placed{c.uid, res.Revision})
			committed++
		} else if res.Revision != 0 || tx.Commit == omegav1.CommitMode_COMMIT_MODE_INCREMENTAL {
			cm.pending = append(cm.pending, c.uid)
		}
	}
	if res.Revision != 0 {
		if err := cm.c.SyncTo(ctx, res.Revision); err != nil {
			return 0, res, err
		}
	}
	return committed, res, nil
}

// viewCost is the mean cost of bringing a client's view up to date and
// taking it, in microseconds.
func (w *workload) viewCost(ctx context.Context) float64 {
	c := w.comms[0].c
	const n = 10_000
	start := time.Now()
	for range n {
		if err := c.Sync(ctx); err != nil {
			return -1
		}
		v := c.View()
		if v.NumMachines() != w.cfg.Machines {
			return -1
		}
	}
	return float64(time.Since(start).Microseconds()) / n
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
