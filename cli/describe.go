package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/omega-cell/omega/agents/live"
	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
)

// `omega describe`: one object in full, with what it holds (a job's tasks,
// a machine's) and what the cell's state tells of its history, like
// kubectl describe.

func newDescribeCmd() *cobra.Command {
	var cf cellFlags
	var output string
	var last int
	cmd := &cobra.Command{
		Use:   "describe job|task|machine NAME [-o json|yaml] [--server ADDR]",
		Short: "Show a job, a task or a machine in full, with its tasks and their recent transitions",
		Long: `Shows one object in full. NAME is its name or a prefix of its uid (an ambiguous
one lists its matches and exits non-zero).

  job      the job (kind, scheduler, priority, replicas, phase and counts,
           submit and finish times, message, labels), its tasks (state,
           machine, the task's own address, restarts, health, last exit, age)
           and their recent transitions
  task     the task (its job, state, machine, run report, resources,
           command, restart policy, times) and its transitions
  machine  the machine (state, capacity, allocated, agent and log endpoint,
           failure domain, attributes) and its tasks

The transitions are what the cell's state still tells of each object: when it
was created, assigned (where, by which scheduler), started and finished, how
many times it was evicted, its last message; earlier placements of an evicted
task are not kept. -o json or yaml prints the objects instead (a job with its
tasks, a machine with its tasks, a task with its machine).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kinds := map[string]omegav1.ObjectKind{
				"machines": omegav1.ObjectKind_OBJECT_KIND_MACHINE, "machine": omegav1.ObjectKind_OBJECT_KIND_MACHINE,
				"jobs": omegav1.ObjectKind_OBJECT_KIND_JOB, "job": omegav1.ObjectKind_OBJECT_KIND_JOB,
				"tasks": omegav1.ObjectKind_OBJECT_KIND_TASK, "task": omegav1.ObjectKind_OBJECT_KIND_TASK,
			}
			kind, ok := kinds[args[0]]
			if !ok {
				return fmt.Errorf("%q: want job, task or machine", args[0])
			}
			switch output {
			case "", "text", "json", "yaml":
			default:
				return fmt.Errorf("-o %q: want json or yaml (or text, the default)", output)
			}
			if last < 0 {
				return fmt.Errorf("--transitions %d: want a number (0: all)", last)
			}
			ctx := cmd.Context()
			tr, err := cf.connect(ctx, "describe")
			if err != nil {
				return err
			}
			defer tr.Close()
			d, err := gatherDescription(ctx, tr, kind, args[1])
			if d != nil {
				sayNote(cmd.ErrOrStderr(), d.note)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "json" || output == "yaml" {
				return d.printDoc(out, output)
			}
			return d.print(out, time.Now(), last)
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: the objects instead of the description")
	cmd.Flags().IntVar(&last, "transitions", 50, "show the last N transitions (0: all)")
	return cmd
}

// description is what describe shows: one object and what it holds, at a
// revision.
type description struct {
	revision uint64
	kind     omegav1.ObjectKind
	note     string           // which of several objects of the name this is (pick)
	job      *omegav1.Job     // describe job; a task's job, if still in the cell
	task     *omegav1.Task    // describe task
	machine  *omegav1.Machine // describe machine; a task's machine, if any
	tasks    []*omegav1.Task  // a job's or a machine's
	names    map[string]string
}

// gatherDescription reads the object NAME names and what describe shows
// with it.
func gatherDescription(ctx context.Context, tr *remote.Transport, kind omegav1.ObjectKind, name string) (*description, error) {
	l, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: kind})
	if err != nil {
		return nil, err
	}
	note, err := pick(l, name)
	if err != nil {
		return nil, err
	}
	d := &description{revision: l.Revision, kind: kind, names: map[string]string{}, note: note}
	machines, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE})
	if err != nil {
		return nil, err
	}
	for _, m := range machines.Machines {
		d.names[m.GetMeta().GetUid()] = m.GetMeta().GetName()
	}
	switch kind {
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		d.job = l.Jobs[0]
		ts, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, JobUid: d.job.GetMeta().GetUid()})
		if err != nil {
			return nil, err
		}
		d.tasks = ts.Tasks
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		d.machine = l.Machines[0]
		ts, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, MachineUid: d.machine.GetMeta().GetUid()})
		if err != nil {
			return nil, err
		}
		d.tasks = ts.Tasks
	default:
		d.task = l.Tasks[0]
		if j := ownerJob(d.task); j != "" {
			if r, err := tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_JOB, j, ""); err == nil {
				d.job = r.GetJob()
			}
		}
		for _, m := range machines.Machines {
			if m.GetMeta().GetUid() == d.task.GetStatus().GetMachineUid() {
				d.machine = m
			}
		}
	}
	sort.Slice(d.tasks, func(i, j int) bool {
		return naturalLess(d.tasks[i].GetMeta().GetName(), d.tasks[j].GetMeta().GetName())
	})
	return d, nil
}

// ownerJob is the uid of the job that controls t ("" if none).
func ownerJob(t *omegav1.Task) string {
	for _, o := range t.GetMeta().GetOwnerReferences() {
		if o.GetKind() == "Job" && o.GetController() {
			return o.GetUid()
		}
	}
	return ""
}

func ownerName(t *omegav1.Task) string {
	for _, o := range t.GetMeta().GetOwnerReferences() {
		if o.GetKind() == "Job" && o.GetController() {
			return o.GetName()
		}
	}
	return ""
}

// machineName is a machine's name by its uid: its uid's start if it is no
// longer in the cell, "-" for none.
func (d *description) machineName(uid string) string {
	if uid == "" {
		return "-"
	}
	if n, ok := d.names[uid]; ok {
		return n
	}
	return uid[:min(8, len(uid))] + " (gone)"
}

// printDoc prints the objects as JSON or YAML.
func (d *description) printDoc(w io.Writer, output string) error {
	raw := func(m proto.Message) (json.RawMessage, error) {
		if m == nil || !m.ProtoReflect().IsValid() {
			return json.RawMessage("null"), nil
		}
		b, err := protojson.Marshal(m)
		return json.RawMessage(b), err
	}
	doc := struct {
		Revision uint64            `json:"revision"`
		Job      json.RawMessage   `json:"job,omitempty"`
		Task     json.RawMessage   `json:"task,omitempty"`
		Machine  json.RawMessage   `json:"machine,omitempty"`
		Tasks    []json.RawMessage `json:"tasks,omitempty"`
	}{Revision: d.revision}
	var err error
	switch d.kind {
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		doc.Job, err = raw(d.job)
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		doc.Machine, err = raw(d.machine)
	default:
		if doc.Task, err = raw(d.task); err == nil && d.machine != nil {
			doc.Machine, err = raw(d.machine)
		}
	}
	if err != nil {
		return err
	}
	if d.kind != omegav1.ObjectKind_OBJECT_KIND_TASK {
		doc.Tasks = []json.RawMessage{}
		for _, t := range d.tasks {
			b, err := raw(t)
			if err != nil {
				return err
			}
			doc.Tasks = append(doc.Tasks, b)
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// print prints the description for people, the last transitions (0:
// all).
func (d *description) print(w io.Writer, now time.Time, last int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	var trans []transition
	switch d.kind {
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		j := d.job
		sp, st := j.GetSpec(), j.GetStatus()
		field("Name", j.GetMeta().GetName())
		field("UID", j.GetMeta().GetUid())
		field("Kind", strings.ToLower(strings.TrimPrefix(sp.GetKind().String(), "JOB_KIND_")))
		field("Scheduler", sp.GetScheduler())
		field("Priority", strconv.Itoa(int(sp.GetPriority())))
		reps := strconv.Itoa(int(max(sp.GetReplicas(), 1))) // unset is one, as every reader takes it (txn.Job.Replicas)
		if sp.GetGang() {
			reps += " (gang: all or none)"
		}
		field("Replicas", reps)
		if mr := sp.GetMapreduce(); mr != nil {
			field("MapReduce", fmt.Sprintf("%d map, %d reduce tasks, at most %d workers", mr.GetMapTasks(), mr.GetReduceTasks(), mr.GetMaxWorkers()))
		}
		field("Phase", strings.TrimPrefix(st.GetPhase().String(), "JOB_PHASE_"))
		field("Tasks", fmt.Sprintf("%d pending, %d running, %d succeeded, %d failed", st.GetPending(), st.GetRunning(), st.GetSucceeded(), st.GetFailed()))
		field("Submitted", when(sp.GetSubmitUnixNanos(), now))
		field("Finished", when(st.GetFinishUnixNanos(), now))
		field("Message", orNone(st.GetMessage()))
		if w := st.GetWaiting(); w != nil {
			field("Waiting", fmt.Sprintf("%s, %d tasks, since %s (%s): %s", waitingShort(w), w.GetTasks(), when(w.GetSinceUnixNanos(), now), w.GetReporter(), w.GetMessage()))
		}
		field("Labels", mapText(j.GetMeta().GetLabels()))
		field("Annotations", mapText(j.GetMeta().GetAnnotations()))
		tmpl := sp.GetTemplate()
		field("Resources", resourcesText(tmpl.GetResources())+" each")
		field("Command", commandText(tmpl.GetCommand()))
		tw.Flush()
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Tasks (%d):\n", len(d.tasks))
		if len(d.tasks) == 0 {
			fmt.Fprintln(w, "  <none>")
		} else {
			tt := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tt, "  NAME\tSTATE\tMACHINE\tADDRESS\tRESTARTS\tHEALTH\tLAST EXIT\tAGE")
			for _, t := range d.tasks {
				st, run := t.GetStatus(), t.GetStatus().GetRun()
				fmt.Fprintf(tt, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.GetMeta().GetName(), stateText(st.GetState()), d.machineName(st.GetMachineUid()),
					orDash(run.GetAddress()), run.GetRestarts(), healthText(run.GetHealth()), lastExitText(run.GetLastExit()), age(t.GetMeta().GetCreationUnixNanos(), now))
			}
			tt.Flush()
		}
		trans = jobTransitions(j)
		for _, t := range d.tasks {
			trans = append(trans, d.taskTransitions(t)...)
		}
	case omegav1.ObjectKind_OBJECT_KIND_TASK:
		t := d.task
		sp, st, run := t.GetSpec(), t.GetStatus(), t.GetStatus().GetRun()
		field("Name", t.GetMeta().GetName())
		field("UID", t.GetMeta().GetUid())
		job := ownerName(t)
		if d.job != nil {
			job += " (" + strings.TrimPrefix(d.job.GetStatus().GetPhase().String(), "JOB_PHASE_") + ")"
		}
		field("Job", orNone(job))
		field("State", stateText(st.GetState()))
		field("Machine", d.machineName(st.GetMachineUid()))
		field("Scheduler", orDash(st.GetScheduler()))
		field("Address", orDash(run.GetAddress()))
		field("Restarts", strconv.Itoa(int(run.GetRestarts())))
		field("Health", healthText(run.GetHealth()))
		field("Last exit", lastExitText(run.GetLastExit()))
		field("Evictions", strconv.Itoa(int(st.GetEvictions())))
		field("Message", orNone(st.GetMessage()))
		field("Priority", strconv.Itoa(int(sp.GetPriority())))
		res := "requested " + resourcesText(sp.GetResources())
		if st.GetClaimed() != nil && st.GetMachineUid() != "" {
			res += ", claimed " + resourcesText(st.GetClaimed())
		}
		field("Resources", res)
		field("Command", commandText(sp.GetCommand()))
		field("Restart policy", strings.ToLower(strings.TrimPrefix(sp.GetRestartPolicy().String(), "RESTART_POLICY_")))
		if hc := sp.GetHealthCheck(); hc != nil {
			field("Health check", healthCheckText(hc))
		}
		field("Created", when(t.GetMeta().GetCreationUnixNanos(), now))
		field("Assigned", when(st.GetAssignUnixNanos(), now))
		field("Started", when(st.GetStartUnixNanos(), now))
		field("Finished", when(st.GetFinishUnixNanos(), now))
		field("Labels", mapText(t.GetMeta().GetLabels()))
		if d.machine != nil {
			if u := d.machine.GetMeta().GetAnnotations()[process.LogsAnnotation]; u != "" {
				field("Logs", "omega logs "+t.GetMeta().GetUid()[:8]+" (from "+u+")")
			}
		}
		tw.Flush()
		trans = d.taskTransitions(t)
	default:
		m := d.machine
		sp, st := m.GetSpec(), m.GetStatus()
		field("Name", m.GetMeta().GetName())
		field("UID", m.GetMeta().GetUid())
		field("State", strings.TrimPrefix(st.GetState().String(), "MACHINE_STATE_"))
		field("Capacity", resourcesText(sp.GetCapacity()))
		field("Allocated", allocatedText(st.GetAllocated(), sp.GetCapacity()))
		field("Tasks", fmt.Sprintf("%d placed (not ended)", st.GetTasks()))
		field("Agent", orDash(st.GetAgentAddress()))
		field("Logs", orDash(m.GetMeta().GetAnnotations()[process.LogsAnnotation]))
		field("Failure domain", orDash(sp.GetFailureDomain()))
		field("Attributes", mapText(sp.GetAttributes()))
		field("Labels", mapText(m.GetMeta().GetLabels()))
		field("Created", when(m.GetMeta().GetCreationUnixNanos(), now))
		tw.Flush()
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Tasks (%d):\n", len(d.tasks))
		if len(d.tasks) == 0 {
			fmt.Fprintln(w, "  <none>")
		} else {
			tt := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tt, "  NAME\tSTATE\tJOB\tCPU\tMEMORY\tADDRESS\tRESTARTS\tAGE")
			for _, t := range d.tasks {
				st := t.GetStatus()
				fmt.Fprintf(tt, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", t.GetMeta().GetName(), stateText(st.GetState()), orDash(ownerName(t)),
					cpuText(st.GetClaimed().GetCpuMillis()), bytesH(st.GetClaimed().GetMemoryBytes()), orDash(st.GetRun().GetAddress()), st.GetRun().GetRestarts(),
					age(t.GetMeta().GetCreationUnixNanos(), now))
			}
			tt.Flush()
		}
		return nil // a machine's history is its tasks'
	}
	fmt.Fprintln(w)
	printTransitions(w, trans, now, last)
	return nil
}

// transition is one line of an object's history.
type transition struct {
	at     int64 // Unix nanoseconds; 0: not recorded
	key    int64 // where it sorts (at, or its neighbours' time)
	object string
	what   string
}

// jobTransitions are what a job's state tells of its history.
func jobTransitions(j *omegav1.Job) []transition {
	obj := "job/" + j.GetMeta().GetName()
	sub := j.GetSpec().GetSubmitUnixNanos()
	if sub == 0 {
		sub = j.GetMeta().GetCreationUnixNanos()
	}
	out := []transition{{at: sub, key: sub, object: obj, what: fmt.Sprintf("submitted: %d replicas for scheduler %s", max(j.GetSpec().GetReplicas(), 1), j.GetSpec().GetScheduler())}}
	if w := j.GetStatus().GetWaiting(); w != nil && w.GetSinceUnixNanos() != 0 {
		at := w.GetSinceUnixNanos()
		out = append(out, transition{at: at, key: at, object: obj, what: fmt.Sprintf("waiting (%s, %s): %s", waitingShort(w), w.GetReporter(), w.GetMessage())})
	}
	if f := j.GetStatus().GetFinishUnixNanos(); f != 0 {
		what := strings.TrimPrefix(j.GetStatus().GetPhase().String(), "JOB_PHASE_")
		if m := j.GetStatus().GetMessage(); m != "" {
			what += ": " + m
		}
		out = append(out, transition{at: f, key: f, object: obj, what: what})
	}
	return out
}

// taskTransitions are what a task's state tells of its history: created,
// evicted (how many times; when is not kept), assigned, started, ended;
// the last with the task's message.
func (d *description) taskTransitions(t *omegav1.Task) []transition {
	obj := "task/" + t.GetMeta().GetName()
	st := t.GetStatus()
	created := t.GetMeta().GetCreationUnixNanos()
	out := []transition{{at: created, key: created, object: obj, what: "created"}}
	if n := st.GetEvictions(); n > 0 {
		what := "evicted once"
		if n > 1 {
			what = fmt.Sprintf("evicted %d times", n)
		}
		if st.GetState() != omegav1.TaskState_TASK_STATE_PENDING {
			what += ", then placed again"
		}
		// Between its creation and its current placement.
		out = append(out, transition{key: created, object: obj, what: what})
	}
	if a := st.GetAssignUnixNanos(); a != 0 {
		what := "assigned to " + d.machineName(st.GetMachineUid())
		if s := st.GetScheduler(); s != "" {
			what += " by " + s
		}
		out = append(out, transition{at: a, key: a, object: obj, what: what})
	}
	if s := st.GetStartUnixNanos(); s != 0 {
		out = append(out, transition{at: s, key: s, object: obj, what: "RUNNING"})
	}
	state := stateText(st.GetState())
	if f := st.GetFinishUnixNanos(); f != 0 {
		out = append(out, transition{at: f, key: f, object: obj, what: state})
	}
	lastT := &out[len(out)-1]
	if msg := st.GetMessage(); msg != "" {
		switch {
		case lastT.what == "created" || strings.HasPrefix(lastT.what, "evicted"):
			lastT.what += " (" + state + ": " + msg + ")"
		default:
			lastT.what += ": " + msg
		}
	}
	return out
}

// printTransitions prints the last of trans (0: all) in time order.
func printTransitions(w io.Writer, trans []transition, now time.Time, last int) {
	sort.SliceStable(trans, func(i, j int) bool { return trans[i].key < trans[j].key })
	fmt.Fprintln(w, "Recent transitions:")
	if len(trans) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	if last > 0 && len(trans) > last {
		fmt.Fprintf(w, "  (%d earlier not shown: --transitions 0 shows all)\n", len(trans)-last)
		trans = trans[len(trans)-last:]
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tAGE\tOBJECT\tTRANSITION")
	for _, t := range trans {
		at, ago := "-", "-"
		if t.at != 0 {
			at, ago = clock(t.at, now), age(t.at, now)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", at, ago, t.object, t.what)
	}
	tw.Flush()
}

// clock is a time of day (with the date, if not today), local.
func clock(unixNanos int64, now time.Time) string {
	t := time.Unix(0, unixNanos).Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05.000")
}

// when is a time and how long ago ("-" for none).
func when(unixNanos int64, now time.Time) string {
	if unixNanos == 0 {
		return "-"
	}
	return time.Unix(0, unixNanos).Local().Format(time.RFC3339) + " (" + age(unixNanos, now) + " ago)"
}

func stateText(s omegav1.TaskState) string { return strings.TrimPrefix(s.String(), "TASK_STATE_") }

func healthText(h omegav1.HealthState) string {
	switch h {
	case omegav1.HealthState_HEALTH_STATE_HEALTHY:
		return "healthy"
	case omegav1.HealthState_HEALTH_STATE_UNHEALTHY:
		return "unhealthy"
	}
	return "-"
}

func lastExitText(e *omegav1.ExitStatus) string {
	if e == nil {
		return "-"
	}
	return live.ExitText(e)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func mapText(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func cpuText(millis int64) string {
	if millis%1000 == 0 {
		return strconv.FormatInt(millis/1000, 10)
	}
	return strconv.FormatInt(millis, 10) + "m"
}

func resourcesText(r *omegav1.Resources) string {
	s := "cpu " + cpuText(r.GetCpuMillis()) + ", memory " + bytesH(r.GetMemoryBytes())
	if len(r.GetExtended()) > 0 {
		keys := make([]string, 0, len(r.GetExtended()))
		for k := range r.GetExtended() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s += fmt.Sprintf(", %s %d", k, r.GetExtended()[k])
		}
	}
	return s
}

func allocatedText(a, c *omegav1.Resources) string {
	pct := func(x, of int64) string {
		if of <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.0f%%)", 100*float64(x)/float64(of))
	}
	return fmt.Sprintf("cpu %s of %s%s, memory %s of %s%s", cpuText(a.GetCpuMillis()), cpuText(c.GetCpuMillis()), pct(a.GetCpuMillis(), c.GetCpuMillis()),
		bytesH(a.GetMemoryBytes()), bytesH(c.GetMemoryBytes()), pct(a.GetMemoryBytes(), c.GetMemoryBytes()))
}

// commandText is a command as a shell would take it.
func commandText(c *omegav1.Command) string {
	if c.GetPath() == "" {
		return "<none>"
	}
	parts := []string{shellQuote(c.GetPath())}
	for _, a := range c.GetArgs() {
		parts = append(parts, shellQuote(a))
	}
	s := strings.Join(parts, " ")
	if len(c.GetEnv()) > 0 {
		s = mapText(c.GetEnv()) + " " + s
	}
	if wd := c.GetWorkingDir(); wd != "" {
		s += " (in " + wd + ")"
	}
	return s
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func healthCheckText(hc *omegav1.HealthCheck) string {
	var s string
	switch p := hc.GetProbe().(type) {
	case *omegav1.HealthCheck_Exec:
		s = "exec " + commandText(&omegav1.Command{Path: p.Exec.GetPath(), Args: p.Exec.GetArgs()})
	case *omegav1.HealthCheck_Http:
		s = fmt.Sprintf("http :%d%s", p.Http.GetPort(), p.Http.GetPath())
	default:
		s = "<no probe>"
	}
	ms := func(v, def int64) string {
		if v <= 0 {
			v = def
		}
		return (time.Duration(v) * time.Millisecond).String()
	}
	th := hc.GetFailureThreshold()
	if th <= 0 {
		th = 3
	}
	return fmt.Sprintf("%s every %s, timeout %s, unhealthy after %d failures", s, ms(hc.GetPeriodMillis(), 10_000), ms(hc.GetTimeoutMillis(), 1000), th)
}

// naturalLess orders names with their numbers as numbers: job-2 before
// job-10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
