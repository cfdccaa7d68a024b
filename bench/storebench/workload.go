package storebench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

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
		res.counters.ClaimsRejected += c.ClaimsRejected - b.ClaimsRejected
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
			req, ver = t.Request(), t.Version
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
