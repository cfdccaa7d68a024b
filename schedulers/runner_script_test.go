package schedulers

// The Runner's protocol as scripts (testdata/runner/*.txt, run by
// internal/script; go test -rewrite writes their outputs anew): a real
// in-memory store, runners on a virtual clock driven by Begin and Finish
// at the times the script gives, and other writers' commits between them.
// Objects are named in the output by their names (machines m0, m1, ...;
// a job's tasks JOB-0, JOB-1, ...), times as offsets from t0.
//
// Commands:
//
//	runner [name=batch-0] [sched=batch|service] [seed=1] [max-attempts=N]
//	       [max-no-placement=N] [retry-delay=D] [tjob=D] [ttask=D]
//	       [lagging] [retire]
//	    a Runner (the first is the default of every r=); lagging: its
//	    transport's non-blocking sync sees nothing new (a remote stream
//	    that lags); retire: SetRetire, the records retired are printed
//	machines n=N [cpu=4000] [mem=16] [domains=N]   (mem in GiB)
//	job name=J tasks=N [cpu=1000] [mem=1] [replicas=N] [gang] [sched=batch|service]
//	    [different-machines]
//	    a job and its PENDING tasks, as a submitter commits them
//	submit job=J [t=D] [r=R]       Runner.Submit
//	resubmit job=J [t=D] [r=R]     Runner.Resubmit, prints whether it queued
//	gone job=J [r=R]               Runner.Gone (the job left the cell)
//	begin [t=D] [r=R]              Runner.Begin (t: the next ready time)
//	finish [t=D] [r=R]             Runner.Finish of the attempt in flight
//	                               (t: its begin time + decision time)
//	commit-other fill=(M,...)      another writer fills each machine's free room
//	evict task=T                   another writer evicts T (a drain)
//	delete-job job=J               another writer deletes J and its tasks
//	lose task=T [t=D] [r=R]        another writer sets T LOST (its machine
//	                               failed) unless it is, and Runner.Lost is told
//	queue [r=R]                    what is queued, and when the first is ready
//	records [r=R]                  the runner's JobRecords
//	held job=J [r=R]               what the runner keeps to schedule J
//	counters [r=R]                 the decision time spent, the client's
//	                               counters and the verdicts'
//	state [job=J]                  the jobs' phases and their tasks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/script"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

func TestRunnerScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/runner/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no runner scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			h := &runnerScript{t: t, cell: newCell(t, 1), names: map[uuid.UUID]string{}, byName: map[string]uuid.UUID{}}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("uids from seed 1; runner seeds %v", h.seeds)
				}
			})
			script.Run(t, f, h.do)
		})
	}
}

// runnerScript is the state a runner script carries from command to command.
type runnerScript struct {
	t        *testing.T
	cell     *testCell
	runners  []*scriptRunner
	machines int // machines made so far: the next is m<machines>
	names    map[uuid.UUID]string
	byName   map[string]uuid.UUID
	seeds    []uint64
	retired  []JobRecord // records retired during the current command
}

type scriptRunner struct {
	*Runner
	inFlight *Attempt
	began    time.Time
}

func (h *runnerScript) do(t *testing.T, c *script.Command) string {
	h.t = t
	h.retired = nil
	var out string
	switch c.Name {
	case "runner":
		out = h.newRunner(c)
	case "machines":
		out = h.addMachines(c)
	case "job":
		out = h.addJob(c)
	case "submit":
		r := h.runner(c)
		r.Submit(h.uid(c, "job"), h.at(c, t0))
		out = h.queue(r)
	case "resubmit":
		r := h.runner(c)
		out = fmt.Sprintf("queued %t\n%s", r.Resubmit(h.uid(c, "job"), h.at(c, t0)), h.queue(r))
	case "gone":
		h.runner(c).Gone(h.uid(c, "job"))
	case "begin":
		out = h.begin(c)
	case "finish":
		out = h.finish(c)
	case "commit-other":
		out = h.fill(c)
	case "evict":
		tk := h.cell.task(h.uid(c, "task"))
		res := h.cell.commit(txn.ForceEvict(tk.UID, tk.Version, "drain"))
		out = fmt.Sprintf("revision %d: %s %s", res.Revision, h.name(tk.UID), strings.TrimPrefix(h.cell.task(tk.UID).State.String(), "TASK_STATE_"))
	case "lose":
		out = h.lose(c)
	case "delete-job":
		out = h.deleteJob(c)
	case "queue":
		out = h.queue(h.runner(c))
	case "records":
		out = h.records(h.runner(c).Records())
	case "held":
		out = h.held(c)
	case "counters":
		r := h.runner(c)
		out = fmt.Sprintf("busy %v\nclient %s\nverdicts %s", r.Busy(), nonZero(r.Client().Counters()), nonZero(r.VerdictCounters()))
	case "state":
		out = h.state(c)
	default:
		c.Fatalf(t, "unknown command")
	}
	if len(h.retired) > 0 {
		out = strings.TrimSuffix(out, "\n")
		if out != "" {
			out += "\n"
		}
		out += "retired:\n" + h.records(h.retired)
	}
	return out
}

// dur reads key as a duration, def when absent.
func dur(t testing.TB, c *script.Command, key string, def time.Duration) time.Duration {
	t.Helper()
	s := c.String(t, key, "")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		c.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return d
}

// at reads t= as an offset from t0, def when absent.
func (h *runnerScript) at(c *script.Command, def time.Time) time.Time {
	if !c.Has("t") {
		return def
	}
	return t0.Add(dur(h.t, c, "t", 0))
}

// since formats a time as its offset from t0.
func since(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.Sub(t0).String()
}

func (h *runnerScript) nameAs(u uuid.UUID, name string) {
	h.names[u], h.byName[name] = name, u
}

// uid looks up the object named by key.
func (h *runnerScript) uid(c *script.Command, key string) uuid.UUID {
	h.t.Helper()
	name := c.String(h.t, key, "")
	u, ok := h.byName[name]
	if !ok {
		c.Fatalf(h.t, "%s=%q: no such object", key, name)
	}
	return u
}

// name names an object: by the script's name for it, else by its name in
// the store, else by its uid's first bytes.
func (h *runnerScript) name(u uuid.UUID) string {
	if n, ok := h.names[u]; ok {
		return n
	}
	s := h.cell.state()
	if tk, ok := s.Task(u); ok && tk.Name() != "" {
		return tk.Name()
	}
	if m, ok := s.Machine(u); ok && m.Name() != "" {
		return m.Name()
	}
	if j, ok := s.Job(u); ok && j.Name() != "" {
		return j.Name()
	}
	return u.String()[:8]
}

func (h *runnerScript) runner(c *script.Command) *scriptRunner {
	h.t.Helper()
	if len(h.runners) == 0 {
		c.Fatalf(h.t, "no runner yet")
	}
	name := c.String(h.t, "r", "")
	if name == "" {
		return h.runners[0]
	}
	for _, r := range h.runners {
		if r.Name() == name {
			return r
		}
	}
	c.Fatalf(h.t, "r=%q: no such runner", name)
	return nil
}

func (h *runnerScript) newRunner(c *script.Command) string {
	t := h.t
	cfg := testConfig()
	cfg.MaxAttempts = int(c.Int(t, "max-attempts", int64(cfg.MaxAttempts)))
	cfg.MaxAttemptsNoPlacement = int(c.Int(t, "max-no-placement", int64(cfg.MaxAttemptsNoPlacement)))
	cfg.RetryDelay = dur(t, c, "retry-delay", cfg.RetryDelay)
	cfg.TJob = dur(t, c, "tjob", cfg.TJob)
	cfg.TTask = dur(t, c, "ttask", cfg.TTask)
	cfg.Reasons = c.Has("reasons")
	var sched Scheduler
	switch k := c.String(t, "sched", "batch"); k {
	case "batch":
		sched = NewBatch()
	case "service":
		sched = NewService()
	default:
		c.Fatalf(t, "sched=%q: batch or service", k)
	}
	var wrap func(client.Transport) client.Transport
	if c.Has("lagging") {
		wrap = func(tr client.Transport) client.Transport { return laggingTransport{tr} }
	}
	seed := uint64(c.Int(t, "seed", 1))
	h.seeds = append(h.seeds, seed)
	cl := h.cell.client(c.String(t, "name", "batch-0"), seed, testkit.NewClock(t0), wrap)
	r, err := NewRunner(sched, cl, rand.New(rand.NewPCG(seed, 2)), cfg)
	if err != nil {
		c.Fatalf(t, "%v", err)
	}
	if c.Has("retire") {
		r.SetRetire(func(rec JobRecord) { h.retired = append(h.retired, rec) })
	}
	h.runners = append(h.runners, &scriptRunner{Runner: r})
	return ""
}

func (h *runnerScript) addMachines(c *script.Command) string {
	t := h.t
	n := int(c.Int(t, "n", 1))
	cpu, mem := c.Int(t, "cpu", 4000), c.Int(t, "mem", 16)*gib
	domains := int(c.Int(t, "domains", 0))
	var ops []txn.Op
	var names []string
	for range n {
		u := h.cell.ids.next()
		name := fmt.Sprintf("m%d", h.machines)
		m := testkit.Machine(u, name, txn.Resources{CPU: cpu, Memory: mem})
		if domains > 0 {
			m.Spec.FailureDomain = fmt.Sprintf("d%d", h.machines%domains)
		}
		h.machines++
		h.nameAs(u, name)
		names = append(names, name)
		ops = append(ops, txn.CreateMachine(m))
	}
	res := h.cell.commit(ops...)
	return fmt.Sprintf("revision %d: %s", res.Revision, strings.Join(names, " "))
}

func (h *runnerScript) addJob(c *script.Command) string {
	t := h.t
	name := c.String(t, "name", "")
	if name == "" {
		c.Fatalf(t, "name= is required")
	}
	spec := jobSpec{kind: batchKind, scheduler: c.String(t, "sched", "batch"), tasks: int(c.Int(t, "tasks", 1)), replicas: int(c.Int(t, "replicas", 0)),
		cpu: c.Int(t, "cpu", 1000), mem: c.Int(t, "mem", 1) * gib, gang: c.Has("gang")}
	if spec.scheduler == "service" {
		spec.kind = serviceKind
	}
	if c.Has("different-machines") {
		spec.constraints = []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}
	}
	j := h.cell.ids.next()
	h.nameAs(j, name)
	ops := []txn.Op{txn.CreateJob(spec.proto(j, name))}
	for i := range spec.tasks {
		u := h.cell.ids.next()
		tn := fmt.Sprintf("%s-%d", name, i)
		h.nameAs(u, tn)
		ops = append(ops, txn.CreateTask(taskProto(u, j, tn, spec)))
	}
	res := h.cell.commit(ops...)
	tasks := "tasks"
	if spec.tasks == 1 {
		tasks = "task"
	}
	return fmt.Sprintf("revision %d: %s with %d pending %s", res.Revision, name, spec.tasks, tasks)
}

// fill has another writer claim, on each machine named, a task taking its
// free room.
func (h *runnerScript) fill(c *script.Command) string {
	t := h.t
	names := c.Strings("fill")
	if len(names) == 0 {
		c.Fatalf(t, "fill=(M,...) is required")
	}
	s := h.cell.state()
	var ops []txn.Op
	for _, n := range names {
		u, ok := h.byName[n]
		m, found := s.Machine(u)
		if !ok || !found {
			c.Fatalf(t, "fill: no machine %q", n)
		}
		free := m.Free()
		tu := h.cell.ids.next()
		tn := "other-" + n
		h.nameAs(tu, tn)
		ops = append(ops,
			txn.CreateTask(testkit.Task(tu, uuid.Nil, tn, free)),
			txn.Claim(tu, u, free, 0))
	}
	res, err := h.cell.st.Commit(context.Background(), &txn.Txn{ViewRevision: h.cell.st.Revision(), Component: "other", UnixNanos: t0.UnixNano(), Ops: ops})
	if err != nil || res.Conflicted() {
		c.Fatalf(t, "the other writer's commit: %v %+v", err, res.Outcomes)
	}
	return fmt.Sprintf("revision %d: %s full", res.Revision, strings.Join(names, " "))
}

// lose has another writer set a task LOST, as a machine's death does,
// and tells the runner, as the intake does when it sees the change.
func (h *runnerScript) lose(c *script.Command) string {
	r := h.runner(c)
	tk := h.cell.task(h.uid(c, "task"))
	out := "already LOST"
	if tk.State != omegav1.TaskState_TASK_STATE_LOST {
		res := h.cell.commit(txn.SetStatus(tk.UID, omegav1.TaskState_TASK_STATE_LOST, tk.Version, "machine failed"))
		out = fmt.Sprintf("revision %d: %s LOST", res.Revision, h.name(tk.UID))
	}
	queued := r.Lost(tk.Job, h.cell.task(tk.UID), h.at(c, t0))
	return fmt.Sprintf("%s; queued by Lost %t\n%s", out, queued, h.queue(r))
}

func (h *runnerScript) deleteJob(c *script.Command) string {
	job := h.uid(c, "job")
	ops := []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, job, 0)}
	h.cell.state().RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == job {
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk.UID, 0))
		}
		return true
	})
	res := h.cell.commit(ops...)
	return fmt.Sprintf("revision %d: %s and its %d tasks deleted", res.Revision, h.name(job), len(ops)-1)
}

func (h *runnerScript) begin(c *script.Command) string {
	r := h.runner(c)
	if r.inFlight != nil {
		c.Fatalf(h.t, "%s has an attempt in flight", r.Name())
	}
	now, ok := r.NextReady()
	now = h.at(c, now)
	if !ok && !c.Has("t") {
		return "nothing queued"
	}
	a, ok, err := r.Begin(context.Background(), now)
	if err != nil {
		c.Fatalf(h.t, "Begin: %v", err)
	}
	if !ok {
		return fmt.Sprintf("at %s: nothing ready\n%s", since(now), h.queue(r))
	}
	r.inFlight, r.began = a, now
	var b strings.Builder
	fmt.Fprintf(&b, "at %s: attempt %d of %s on view %d, decision time %v (considered %d, unplaceable %d)\n",
		since(now), h.record(r, a.Job).Attempts, h.name(a.Job), a.Txn.ViewRevision, a.DecisionTime, a.Decision.Considered, a.Decision.Unplaceable)
	if a.Txn.Commit == omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING {
		b.WriteString("all or nothing\n")
	}
	for _, op := range a.Txn.Ops {
		if op.NewTask != nil { // a replacement: named for the claims that follow
			if u, err := uuid.Parse(op.NewTask.GetMeta().GetUid()); err == nil {
				h.nameAs(u, op.NewTask.GetMeta().GetName())
			}
		}
		b.WriteString(h.op(op) + "\n")
	}
	return b.String()
}

// op names an operation of an attempt.
func (h *runnerScript) op(op txn.Op) string {
	switch op.Kind {
	case txn.OpClaim:
		return fmt.Sprintf("claim %s on %s", h.name(op.Task), h.name(op.Machine))
	case txn.OpCreate:
		if op.NewTask != nil {
			return "create " + op.NewTask.GetMeta().GetName()
		}
	case txn.OpEvict:
		return "evict " + h.name(op.Task)
	}
	return op.Kind.String()
}

func (h *runnerScript) finish(c *script.Command) string {
	r := h.runner(c)
	a := r.inFlight
	if a == nil {
		c.Fatalf(h.t, "%s has no attempt in flight", r.Name())
	}
	r.inFlight = nil
	now := h.at(c, r.began.Add(a.DecisionTime))
	o, err := r.Finish(context.Background(), a, now)
	if err != nil {
		c.Fatalf(h.t, "Finish: %v", err)
	}
	var b strings.Builder
	res := a.Result
	fmt.Fprintf(&b, "at %s: ", since(now))
	switch {
	case o == OutcomeMoved:
		b.WriteString("dropped (the job moved)\n")
	case len(a.Txn.Ops) == 0:
		b.WriteString("nothing to commit\n")
	default:
		fmt.Fprintf(&b, "committed %d of %d at revision %d (base %d)\n", res.Committed, len(res.Outcomes), res.Revision, res.Base)
		for i, oc := range res.Outcomes {
			if !oc.Committed() {
				fmt.Fprintf(&b, "  %s: %s\n", h.op(a.Txn.Ops[i]), strings.TrimPrefix(oc.Code.String(), "OUTCOME_CODE_"))
			}
		}
	}
	fmt.Fprintf(&b, "outcome %s; view at %d\n%s", outcomeName(o), r.Client().View().Revision(), h.queue(r))
	return b.String()
}

// nonZero writes out a struct of counters, its nonzero fields only.
func nonZero(v any) string {
	rv := reflect.ValueOf(v)
	var parts []string
	for i := range rv.NumField() {
		if f := rv.Field(i); !f.IsZero() {
			parts = append(parts, fmt.Sprintf("%s=%v", rv.Type().Field(i).Name, f.Interface()))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func outcomeName(o Outcome) string {
	switch o {
	case OutcomeRetry:
		return "retry"
	case OutcomePlaced:
		return "placed"
	case OutcomeAbandoned:
		return "abandoned"
	case OutcomeMoved:
		return "moved"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

func (h *runnerScript) queue(r *scriptRunner) string {
	at, ok := r.NextReady()
	if !ok {
		return "queue empty"
	}
	return fmt.Sprintf("queued %d, next ready at %s", r.Queued(), since(at))
}

func (h *runnerScript) record(r *scriptRunner, job uuid.UUID) JobRecord {
	for _, rec := range r.Records() {
		if rec.UID == job {
			return rec
		}
	}
	return JobRecord{}
}

func (h *runnerScript) records(recs []JobRecord) string {
	if len(recs) == 0 {
		return "no records"
	}
	var b strings.Builder
	for _, rec := range recs {
		fmt.Fprintf(&b, "%s: submitted %s, first attempt %s, placed %s, attempts %d, placements %d (requested %d), conflicted %d, lost %d, replaced %d",
			h.name(rec.UID), since(rec.Submitted), since(rec.FirstAttempt), since(rec.Placed), rec.Attempts, rec.TasksPlaced, rec.Requested, rec.Conflicted, rec.Lost, rec.Replaced)
		if rec.Abandoned {
			b.WriteString(", abandoned")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// held is what the runner keeps to schedule a job: the set of its placed
// tasks, the lost ones to replace, and its flags.
func (h *runnerScript) held(c *script.Command) string {
	r, job := h.runner(c), h.uid(c, "job")
	j, ok := r.jobs[job]
	if !ok {
		return "not held"
	}
	placed := make([]string, 0, len(j.placed))
	for u := range j.placed {
		placed = append(placed, h.name(u))
	}
	slices.Sort(placed)
	s := fmt.Sprintf("placed set {%s}, lost %d", strings.Join(placed, " "), len(j.lost))
	if j.placed == nil {
		s = fmt.Sprintf("placed set let go, lost %d", len(j.lost))
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{"queued", j.queued}, {"in flight", j.inFlight > 0}, {"gone", j.gone}, {"done", j.done}} {
		if f.on {
			s += ", " + f.name
		}
	}
	return s
}

func (h *runnerScript) state(c *script.Command) string {
	s := h.cell.state()
	var only uuid.UUID
	if c.Has("job") {
		only = h.uid(c, "job")
	}
	type line struct{ key, text string }
	var jobs []line
	s.RangeJobs(func(j *txn.Job) bool {
		if only != uuid.Nil && j.UID != only {
			return true
		}
		text := fmt.Sprintf("job %s: %s", j.Name(), strings.TrimPrefix(j.Phase().String(), "JOB_PHASE_"))
		if st := j.Status; st.GetMessage() != "" {
			text += fmt.Sprintf(" %q at %s", st.GetMessage(), since(time.Unix(0, st.GetFinishUnixNanos()).UTC()))
		}
		if c.Has("versions") {
			text += fmt.Sprintf(" (version %d)", j.Version)
		}
		if w := j.Status.GetWaiting(); w != nil {
			text += fmt.Sprintf("\n  waiting: %s", strings.TrimPrefix(w.GetReason().String(), "WAIT_REASON_"))
			if w.GetResource() != "" {
				text += " " + w.GetResource()
			}
			text += fmt.Sprintf(", %d tasks, by %s since %s: %s", w.GetTasks(), w.GetReporter(), since(time.Unix(0, w.GetSinceUnixNanos()).UTC()), w.GetMessage())
		}
		var tasks []line
		s.RangeTasks(func(tk *txn.Task) bool {
			if tk.Job != j.UID {
				return true
			}
			tl := fmt.Sprintf("  %s %s", h.name(tk.UID), strings.TrimPrefix(tk.State.String(), "TASK_STATE_"))
			if c.Has("versions") {
				tl += fmt.Sprintf(" (version %d)", tk.Version)
			}
			if tk.Placed() {
				tl += fmt.Sprintf(" on %s by %s at %s", h.name(tk.Machine), tk.Scheduler, since(time.Unix(0, tk.Assigned).UTC()))
			}
			if tk.Evictions > 0 {
				tl += fmt.Sprintf(", evicted %d", tk.Evictions)
			}
			switch m := tk.Message(); {
			case m == "":
			case m == j.Status.GetMessage():
				tl += " (the job's reason)"
			default:
				tl += fmt.Sprintf(" %q", m)
			}
			tasks = append(tasks, line{h.name(tk.UID), tl})
			return true
		})
		slices.SortFunc(tasks, func(a, b line) int { return strings.Compare(a.key, b.key) })
		for _, tl := range tasks {
			text += "\n" + tl.text
		}
		jobs = append(jobs, line{j.Name(), text})
		return true
	})
	if len(jobs) == 0 {
		return "no jobs"
	}
	slices.SortFunc(jobs, func(a, b line) int { return strings.Compare(a.key, b.key) })
	var b strings.Builder
	for _, j := range jobs {
		b.WriteString(j.text + "\n")
	}
	return b.String()
}
