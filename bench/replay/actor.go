package replay

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/bench/trace"
	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/bench/workload"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// key is a task of the trace: its job and its index.
type key struct{ job, task int64 }

// cellTask is a task of the trace that is a task of the cell now.
type cellTask struct {
	uid       uuid.UUID
	job       uuid.UUID
	run       int32
	placed    bool // the trace has placed this run
	evicted   bool // with evictions ignored: the run goes on through the trace's eviction
	traceSubm int64
	cpu, mem  int64 // its request in the cell's units (for the trace's utilisation)
}

// machine is a machine of the trace, in the cell (uid) or not yet (its
// capacity unknown).
type machine struct {
	uid  uuid.UUID
	up   bool
	cap  txn.Resources
	have bool // capacity known
}

// jobInfo is what the trace says of one job of the cell (one trace job's
// submissions at one time), for jobs.csv's comparison.
type jobInfo struct {
	traceJob    int64
	group       int64
	submitted   int64 // trace time, µs
	tracePlaced int64 // the trace's first placement of one of its tasks, µs; -1: none
	traceAll    int64 // when the trace had placed every one of its tasks, µs; -1: not in the window
	tasks       int32 // its tasks
	placedN     int32 // of them, placed by the trace
}

// actor reads the trace and applies it to the cell at its times: machines
// come, go and change; jobs are submitted (a trace job's tasks submitted at
// one time are one job of the cell); tasks the trace had running when the
// window opened are placed where it had them (and, in fidelity mode, every
// placement of the trace); the trace's ends reach the fleet's executor
// through the book. It reads the trace ahead of the simulated time by the
// lookahead, so that a run's runtime is known when the cell places it.
type actor struct {
	cfg   *Config
	clock *vtime.Clock
	c     *client.Client
	pre   *prefetcher // the trace, read ahead in a goroutine of its own
	run   *sim.Sim
	book  *book
	seed  uint64

	// Read side (ahead of the simulated time).
	buf        []trace.Event
	eof        bool
	readTo     int64 // trace time read up to (µs)
	eventsRead int64
	horizon    int64 // the last task event's trace time (µs)

	// Apply side (at the simulated time).
	live     map[key]*cellTask
	runs     map[key]int32
	machines map[int64]*machine
	jobs     map[uuid.UUID]*jobInfo
	groups   int64
	// machineCut, with --machines, is the largest draw of a machine kept.
	machineCut float64

	// The trace's own allocation (the requests of the runs it had placed,
	// of the tasks in the cell) and the cell's capacity (its machines up),
	// sampled every minute of simulated time for the comparison.
	traceCPU, traceMem int64
	capCPU, capMem     int64
	nextSample         time.Time
	samples            []sim.Sample

	st Stats
}

// sampleEvery is how often the trace's utilisation is sampled: the
// engine's default period, so the two series line up.
const sampleEvery = time.Minute

// sampleTo records the trace's utilisation for every sample time before
// now (the values that held since the previous step), or, with at, up to
// and including now (after the step applied now's events, as the engine
// samples its own).
func (a *actor) sampleTo(now time.Time, at bool) {
	if a.nextSample.IsZero() {
		a.nextSample = sim.Epoch
	}
	for a.nextSample.Before(now) || at && a.nextSample.Equal(now) {
		a.samples = append(a.samples, sim.Sample{At: a.nextSample.Sub(sim.Epoch), CPU: ratio(a.traceCPU, a.capCPU), Memory: ratio(a.traceMem, a.capMem)})
		a.nextSample = a.nextSample.Add(sampleEvery)
	}
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Stats count what the replay did with the trace, for summary.json.
type Stats struct {
	JobsSubmitted      int64            `json:"jobs_submitted"`
	TasksSubmitted     int64            `json:"tasks_submitted"`
	TasksPrefilled     int64            `json:"tasks_prefilled"`
	TracePlacements    int64            `json:"trace_placements_applied"`
	PlacementsRefused  int64            `json:"trace_placements_refused"`
	RefusedExamples    []string         `json:"trace_placements_refused_examples,omitempty"`
	RefusedBy          map[string]int64 `json:"trace_placements_refused_by,omitempty"`
	TasksUnknownReq    int64            `json:"tasks_request_unknown"`
	TasksNotSampled    int64            `json:"tasks_not_sampled"`
	TasksKilledPending int64            `json:"tasks_ended_pending_by_trace"`
	EvictionsIgnored   int64            `json:"evictions_ignored"`
	MachinesAdded      int64            `json:"machines_added"`
	MachinesRemoved    int64            `json:"machines_removed"`
	MachinesUpdated    int64            `json:"machines_updated"`
	MachinesNoCapacity int64            `json:"machines_capacity_unknown"`
	EndsLate           int64            `json:"ends_late"`
	EndsLateSeconds    float64          `json:"ends_late_seconds"`
	EventsApplied      int64            `json:"events_applied"`
	// SubmissionsCoalesced: task submissions that joined their trace job's
	// job submitted up to Config.Coalesce before them.
	SubmissionsCoalesced int64 `json:"submissions_coalesced"`
	// EndsCoalesced: ends of a task's run applied with its job's
	// submission, up to the coalescing window early, because the trace
	// submits the task again within the window (a failed or evicted task
	// resubmitted with the rest of its job).
	EndsCoalesced int64 `json:"ends_coalesced"`
}

const maxRefusedExamples = 20

func (a *actor) simTime(t int64) time.Time {
	return sim.Epoch.Add(time.Duration(max(t-a.cfg.From.Microseconds(), 0)) * time.Microsecond)
}

// fill reads the trace up to trace time limit (µs), learning the runtimes
// of the runs that end by then.
func (a *actor) fill(limit int64) error {
	for !a.eof && a.readTo <= limit {
		it, err := a.pre.next()
		if errors.Is(err, io.EOF) {
			a.eof = true
			break
		}
		if err != nil {
			return err
		}
		e := it.e
		a.readTo = e.Time
		a.eventsRead++
		if it.learn {
			a.book.learn(it.k, it.r, a.clock.Now().UnixNano())
		}
		if it.task {
			a.horizon = max(a.horizon, e.Time)
		}
		a.buf = append(a.buf, e)
	}
	return nil
}

// workloadAfterTrace is Google's time of the rows after the trace's
// window: 2^63-1.
const workloadAfterTrace = 1<<63 - 1

// Start reads the window's opening (the machines and tasks there when it
// opens) and asks to act at once.
func (a *actor) Start(ctx context.Context, now time.Time) (vtime.Next, error) {
	if err := a.fill(a.cfg.From.Microseconds() + a.cfg.Lookahead.Microseconds()); err != nil {
		return vtime.Next{}, err
	}
	if err := a.cutMachines(); err != nil {
		return vtime.Next{}, err
	}
	return a.next(), nil
}

func (a *actor) next() vtime.Next {
	if len(a.buf) == 0 {
		return vtime.Next{}
	}
	return vtime.Next{At: a.simTime(a.buf[0].Time), Phase: vtime.PhaseArrive}
}

// maxOps bounds one transaction of the replay (the store refuses more than
// 100,000 operations): the opening of a window places a whole cell.
const maxOps = 20000

// Step applies the events due by now: the machines' changes, then the
// jobs submitted, the trace's ends of runs it never placed, and the
// trace's placements (at the window's opening, or every one in fidelity
// mode), each in as few transactions as the size bound allows.
func (a *actor) Step(ctx context.Context, now time.Time) (vtime.Next, error) {
	if err := a.c.Sync(ctx); err != nil {
		return vtime.Next{}, err
	}
	a.sampleTo(now, false)
	v := a.c.View()
	var machineOps, endOps []txn.Op
	var claims []claimed
	var groups []*group
	byJob := map[int64]*group{}
	n := 0
	for n < len(a.buf) && !a.simTime(a.buf[n].Time).After(now) {
		e := &a.buf[n]
		n++
		if e.Kind == 0 {
			continue // applied already: a submission that joined an earlier one's job, or the end before it
		}
		a.st.EventsApplied++
		switch e.Kind {
		case trace.MachineAdd, trace.MachineUpdate, trace.MachineRemove:
			machineOps = a.machineEvent(v, e, machineOps)
		case trace.TaskSubmit:
			a.submit(e, byJob, &groups)
		case trace.TaskSchedule:
			ct, ok := a.live[key{e.Job, e.Task}]
			if !ok || ct.evicted || ct.placed {
				continue
			}
			ct.placed = true
			a.traceCPU, a.traceMem = a.traceCPU+ct.cpu, a.traceMem+ct.mem
			if info := a.jobs[ct.job]; info != nil {
				if info.tracePlaced < 0 {
					info.tracePlaced = e.Time
				}
				if info.placedN++; info.placedN == info.tasks {
					info.traceAll = e.Time
				}
			}
			if e.Time <= a.cfg.From.Microseconds() || a.cfg.Fidelity {
				claims = append(claims, claimed{ct: ct, machine: e.Machine, pos: e.Pos, ev: *e})
			}
		case trace.TaskEnd:
			endOps = a.end(v, e, endOps)
		}
	}
	endOps = a.coalesce(v, now, n, byJob, endOps)
	clear(a.buf[:n])
	a.buf = a.buf[n:]
	if err := a.commit(ctx, now, machineOps); err != nil {
		return vtime.Next{}, err
	}
	var jobOps []txn.Op
	for i, g := range groups {
		jobOps = append(jobOps, g.ops...)
		if len(jobOps) >= maxOps || i == len(groups)-1 {
			if err := a.commit(ctx, now, jobOps); err != nil {
				return vtime.Next{}, err
			}
			jobOps = jobOps[:0]
		}
	}
	if err := a.commit(ctx, now, endOps); err != nil {
		return vtime.Next{}, err
	}
	if err := a.place(ctx, now, claims); err != nil {
		return vtime.Next{}, err
	}
	a.sampleTo(now, true)
	// Read on, and end the run at the horizon when the trace is done.
	lim := now.Sub(sim.Epoch).Microseconds() + a.cfg.From.Microseconds() + a.cfg.Lookahead.Microseconds()
	if err := a.fill(lim); err != nil {
		return vtime.Next{}, err
	}
	if a.eof && len(a.buf) == 0 && a.run != nil {
		a.run.EndAt(a.simTime(a.horizon))
	}
	return a.next(), nil
}

// commit commits ops in transactions of at most maxOps, in order.
func (a *actor) commit(ctx context.Context, now time.Time, ops []txn.Op) error {
	for len(ops) > 0 {
		k := min(len(ops), maxOps)
		if err := a.c.Sync(ctx); err != nil {
			return err
		}
		tx := a.c.NewTxn(a.c.View())
		tx.Ops = ops[:k]
		if _, err := a.c.Commit(ctx, tx); err != nil {
			return fmt.Errorf("replay at %s: %w", now.Sub(sim.Epoch), err)
		}
		ops = ops[k:]
	}
	return nil
}

// place applies the trace's placements through the store; a refused one
// is counted with its row.
func (a *actor) place(ctx context.Context, now time.Time, claims []claimed) error {
	for len(claims) > 0 {
		k := min(len(claims), maxOps)
		if err := a.c.Sync(ctx); err != nil {
			return err
		}
		v := a.c.View()
		tx := a.c.NewTxn(v)
		var applied []claimed
		for _, cl := range claims[:k] {
			m, ok := a.machines[cl.machine]
			if !ok || !m.up || m.uid == uuid.Nil {
				a.refuse(cl, "machine not in the cell", "the trace's machine is not in the cell (removed, not sampled or never added)")
				continue
			}
			t, ok := v.Task(cl.ct.uid)
			if !ok || t.Placed() || t.Terminal() {
				continue
			}
			tx.Ops = append(tx.Ops, txn.Claim(cl.ct.uid, m.uid, t.Request(), t.Version))
			applied = append(applied, cl)
		}
		claims = claims[k:]
		if len(tx.Ops) == 0 {
			continue
		}
		res, err := a.c.Commit(ctx, tx)
		if err != nil {
			return fmt.Errorf("replay at %s: the trace's placements: %w", now.Sub(sim.Epoch), err)
		}
		for i, o := range res.Outcomes {
			cl := applied[i]
			switch {
			case !o.Committed():
				a.refuse(cl, refusal(o), o.Detail)
			case cl.ev.Time <= a.cfg.From.Microseconds():
				a.st.TasksPrefilled++
			default:
				a.st.TracePlacements++
			}
		}
	}
	return nil
}

// claimed is a placement of the trace to apply.
type claimed struct {
	ct      *cellTask
	machine int64
	pos     trace.Pos
	ev      trace.Event
}

func (a *actor) refuse(cl claimed, reason, detail string) {
	a.st.PlacementsRefused++
	if a.st.RefusedBy == nil {
		a.st.RefusedBy = map[string]int64{}
	}
	a.st.RefusedBy[reason]++
	if len(a.st.RefusedExamples) < maxRefusedExamples {
		a.st.RefusedExamples = append(a.st.RefusedExamples, fmt.Sprintf("%s: job %d task %d on machine %d: %s", cl.pos, cl.ev.Job, cl.ev.Task, cl.machine, detail))
	}
}

// refusal is the cause a refused placement is counted under: the outcome's
// code, and for a machine that cannot hold the claim the resource it is
// short of (the detail's last word, as txn words it).
func refusal(o txn.Outcome) string {
	code := strings.ToLower(strings.TrimPrefix(o.Code.String(), "OUTCOME_CODE_"))
	if o.Reason != 0 {
		code += " " + strings.ToLower(strings.TrimPrefix(o.Reason.String(), "REJECT_REASON_"))
	}
	if i := strings.LastIndex(o.Detail, "cannot hold the claim: "); i >= 0 {
		return code + ": short of " + o.Detail[i+len("cannot hold the claim: "):]
	}
	return code
}

// group is one job of the cell being built from a trace job's submissions
// at one time.
type group struct {
	job   *omegav1.Job
	tasks *txn.JobTasks // what its tasks share: labels, owner references
	ops   []txn.Op
	kind  workload.Kind
}

func (a *actor) sampled(id int64, salt byte) bool {
	if salt == 'm' && a.machineCut > 0 {
		return a.draw(id, salt) <= a.machineCut
	}
	if a.cfg.fraction >= 1 {
		return true
	}
	return a.draw(id, salt) < a.cfg.fraction
}

// draw is id's seeded uniform draw in [0, 1) for the sampling (salt
// separates machines from jobs).
func (a *actor) draw(id int64, salt byte) float64 {
	h := fnv.New64a()
	var b [17]byte
	for i := range 8 {
		b[i], b[8+i] = byte(a.seed>>(8*i)), byte(uint64(id)>>(8*i))
	}
	b[16] = salt
	h.Write(b[:])
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// cutMachines, for --machines N, keeps the N machines of the window's
// opening with the smallest draws, and later machines by the same cut; the
// jobs are kept in the same share, N over the machines at the opening.
func (a *actor) cutMachines() error {
	n := a.cfg.Machines
	if n <= 0 {
		return nil
	}
	seen := map[int64]bool{}
	var draws []float64
	for i := range a.buf {
		e := &a.buf[i]
		if e.Time > a.cfg.From.Microseconds() {
			break
		}
		if e.Kind == trace.MachineAdd && !seen[e.Machine] {
			seen[e.Machine] = true
			draws = append(draws, a.draw(e.Machine, 'm'))
		}
	}
	if len(draws) == 0 {
		return fmt.Errorf("--machines %d: the trace has no machine when the window opens (at %v) to choose from", n, a.cfg.From)
	}
	if n >= len(draws) {
		return nil // every machine
	}
	slices.Sort(draws)
	a.machineCut = draws[n-1]
	a.cfg.fraction = float64(n) / float64(len(draws))
	return nil
}

func (a *actor) submit(e *trace.Event, byJob map[int64]*group, groups *[]*group) {
	k := key{e.Job, e.Task}
	if ct, ok := a.live[k]; ok && ct.evicted {
		a.st.EvictionsIgnored++
		return
	}
	a.runs[k]++
	run := a.runs[k]
	if !a.sampled(e.Job, 'j') {
		a.st.TasksNotSampled++
		return
	}
	if !e.Resources.CPU.Known || !e.Resources.Memory.Known {
		a.st.TasksUnknownReq++
		return
	}
	g := byJob[e.Job]
	if g == nil {
		a.groups++
		kind := workload.KindBatch
		if a.cfg.service(e) {
			kind = workload.KindService
		}
		name := fmt.Sprintf("%d.%d", e.Job, a.groups)
		uid := a.c.NewUID()
		g = &group{kind: kind, job: &omegav1.Job{
			Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: name},
			Spec: &omegav1.JobSpec{Kind: kind.Proto(), Scheduler: a.scheduler(kind, uid.String()), Priority: e.Priority,
				Template:        &omegav1.TaskTemplate{Resources: a.cfg.request(e.Resources)},
				SubmitUnixNanos: a.simTime(e.Time).UnixNano()},
			Status: &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_PENDING},
		}}
		g.tasks = txn.NewJobTasks(uid, name, g.job.Spec)
		g.ops = append(g.ops, txn.CreateJob(g.job))
		byJob[e.Job] = g
		*groups = append(*groups, g)
		a.jobs[uid] = &jobInfo{traceJob: e.Job, group: a.groups, submitted: e.Time, tracePlaced: -1, traceAll: -1}
		a.st.JobsSubmitted++
	}
	jobUID := uuid.MustParse(g.job.Meta.Uid)
	uid := a.c.NewUID()
	name := g.job.Meta.Name + "-" + strconv.FormatInt(e.Task, 10)
	// A trace task's request and priority are its own, not its job's (the
	// template has the first task's).
	t := g.tasks.TaskWith(uid, name, txn.Override{Resources: a.cfg.request(e.Resources), Priority: e.Priority})
	g.ops = append(g.ops, txn.CreateTask(t))
	if info := a.jobs[jobUID]; info != nil {
		info.tasks++
	}
	g.job.Spec.Replicas++
	g.job.Status.Pending++
	req := t.Spec.Resources
	a.live[k] = &cellTask{uid: uid, job: jobUID, run: run, traceSubm: e.Time, cpu: req.GetCpuMillis(), mem: req.GetMemoryBytes()}
	a.book.submit(uid, runKey{e.Job, e.Task, run})
	a.st.TasksSubmitted++
}

// coalesce joins to the jobs this step submits the submissions of the
// same trace jobs that follow within the coalescing window (the trace
// submits a job's tasks one by one, often microseconds apart): they become
// tasks of that job, submitted with it, and their rows are marked applied
// (Kind 0). A task still in the cell joins only if the trace ends its
// earlier run within the window before submitting it again (a failed or
// evicted task resubmitted with the rest of its job): that end is applied
// now, with it. Otherwise it is left to its own time. It returns endOps
// with the ends it applied.
func (a *actor) coalesce(v client.View, now time.Time, from int, byJob map[int64]*group, endOps []txn.Op) []txn.Op {
	if len(byJob) == 0 || a.cfg.Coalesce <= 0 {
		return endOps
	}
	end := now.Add(a.cfg.Coalesce)
	var ends map[key]int // the window's ends of live runs of the jobs submitted, by task
	for i := from; i < len(a.buf) && a.simTime(a.buf[i].Time).Before(end); i++ {
		e := &a.buf[i]
		if (e.Kind != trace.TaskSubmit && e.Kind != trace.TaskEnd) || byJob[e.Job] == nil {
			continue
		}
		k := key{e.Job, e.Task}
		_, live := a.live[k]
		if e.Kind == trace.TaskEnd {
			if live {
				if ends == nil {
					ends = map[key]int{}
				}
				ends[k] = i
			}
			continue
		}
		if live {
			j, ok := ends[k]
			if !ok {
				continue
			}
			delete(ends, k)
			endOps = a.end(v, &a.buf[j], endOps)
			a.buf[j].Kind = 0
			a.st.EventsApplied++
			a.st.EndsCoalesced++
			if _, live := a.live[k]; live {
				continue // an eviction ignored: the run goes on
			}
		}
		a.st.EventsApplied++
		a.st.SubmissionsCoalesced++
		a.submit(e, byJob, nil)
		e.Kind = 0
	}
	return endOps
}

// scheduler is the scheduler a job of kind goes to: its kind's, or where
// the simulation routes it (a monolithic architecture routes every kind
// to its one scheduler; --route), or in fidelity mode none that runs (the
// trace places it).
func (a *actor) scheduler(kind workload.Kind, uid string) string {
	if a.cfg.Fidelity {
		return "trace"
	}
	return sim.RouteJob(a.cfg.Sim.Route, a.cfg.Sim.RouteShare, kind.String(), uid)
}

// end applies the trace's end of a task at its time: a run the trace ended
// before placing it ends in the cell too (KILLED, whatever the cell did
// with it); a run the trace placed ends through the executor, its runtime
// after the cell placed it.
func (a *actor) end(v client.View, e *trace.Event, ops []txn.Op) []txn.Op {
	k := key{e.Job, e.Task}
	ct, ok := a.live[k]
	if !ok {
		return ops
	}
	if e.End == trace.EndEvict && a.cfg.Evictions == "ignore" && ct.placed {
		ct.evicted = true
		return ops
	}
	delete(a.live, k)
	if e.End != trace.EndEvict {
		delete(a.runs, k)
	}
	if ct.placed {
		a.traceCPU, a.traceMem = a.traceCPU-ct.cpu, a.traceMem-ct.mem
		return ops
	}
	a.book.forget(ct.uid)
	t, ok := v.Task(ct.uid)
	if !ok || t.Terminal() {
		return ops
	}
	a.st.TasksKilledPending++
	return append(ops, txn.SetStatus(ct.uid, omegav1.TaskState_TASK_STATE_KILLED, 0, "ended by the trace before it was placed there"))
}

func (a *actor) machineEvent(v client.View, e *trace.Event, ops []txn.Op) []txn.Op {
	m := a.machines[e.Machine]
	switch e.Kind {
	case trace.MachineRemove:
		if m == nil || !m.up {
			return ops
		}
		m.up = false
		if m.uid == uuid.Nil {
			return ops
		}
		a.capCPU, a.capMem = a.capCPU-m.cap.CPU, a.capMem-m.cap.Memory
		a.st.MachinesRemoved++
		down, ok := agents.MachineDownFromView(v.State, m.uid, "removed in the trace")
		if ok {
			for i := range down {
				if i > 0 {
					down[i].ExpectVersion = 0 // a task this transaction changes too
				}
			}
			ops = append(ops, down...)
		}
		return ops
	}
	// The cell's capacity follows the machine: out before the event, in
	// again after it if it is up in the cell.
	if m != nil && m.up && m.uid != uuid.Nil {
		a.capCPU, a.capMem = a.capCPU-m.cap.CPU, a.capMem-m.cap.Memory
	}
	defer func() {
		if m != nil && m.up && m.uid != uuid.Nil {
			a.capCPU, a.capMem = a.capCPU+m.cap.CPU, a.capMem+m.cap.Memory
		}
	}()
	if m == nil {
		if !a.sampled(e.Machine, 'm') {
			return ops
		}
		m = &machine{}
		a.machines[e.Machine] = m
	}
	if e.Resources.CPU.Known && e.Resources.Memory.Known {
		m.cap, m.have = txn.ResourcesFromProto(a.cfg.capacity(e.Resources)), true
	}
	if !m.have {
		a.st.MachinesNoCapacity++
		m.up = e.Kind == trace.MachineAdd || m.up
		return ops
	}
	wasUp := m.up
	m.up = true
	if m.uid == uuid.Nil {
		m.uid = a.c.NewUID()
		a.st.MachinesAdded++
		return append(ops, txn.CreateMachine(&omegav1.Machine{
			Meta:   &omegav1.ObjectMeta{Uid: m.uid.String(), Name: "m" + strconv.FormatInt(e.Machine, 10)},
			Spec:   &omegav1.MachineSpec{Capacity: m.cap.Proto()},
			Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP},
		}))
	}
	cur, ok := v.Machine(m.uid)
	if !ok {
		return ops
	}
	if wasUp && cur.Capacity.Equal(m.cap) {
		return ops
	}
	pm := cur.Proto()
	pm.Spec.Capacity = m.cap.Proto()
	pm.Status.State = omegav1.MachineState_MACHINE_STATE_UP
	a.st.MachinesUpdated++
	return append(ops, txn.PutMachine(pm, 0))
}
