// Package alibaba2018 reads Alibaba's cluster-trace-v2018 (about 4,000
// machines over 8 days): machine_meta, batch_task, batch_instance and
// container_meta, comma-separated, no header, with the columns of the
// trace's schema document (alibaba/clusterdata,
// cluster-trace-v2018/schema.md), corrected where ../shared/traces/README.md
// records that the files disagree with it: batch_instance's third column is
// job_name.
//
// Times are seconds from the trace's start; events carry microseconds, as
// the other traces' do. plan_cpu and cpu_request are hundredths of a core
// (100 is one core); memory is a percentage of a machine's (0..100). The
// published files are not all in time order: machine_meta is grouped by
// machine, so it is read whole (a row per machine event, bounded by the
// cell) and sorted; batch_task, batch_instance and container_meta are
// streamed and must be sorted by their time column first (docs/REPLAY.md
// gives the commands); a row whose time goes back is an error with Strict,
// else skipped and counted.
//
// An instance row holds its whole run: it becomes a submission and the
// trace's placement at start_time and, when end_time is a time after
// start_time, an end then, held in a queue until the stream reaches it
// (bounded by the instances running). Its request is its task's plan,
// joined from batch_task by (job, task), whose rows are kept while the
// task may still start instances (until its end_time) and no longer.
package alibaba2018

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/omega-cell/omega/bench/trace"
)

// The tables, each a file TABLE.csv (or .csv.gz) in the trace's directory,
// or a directory of such files read in name order.
const (
	TableMachineMeta   = "machine_meta"
	TableBatchTask     = "batch_task"
	TableBatchInstance = "batch_instance"
	TableContainerMeta = "container_meta"
)

// Units of the 2018 trace.
var Units = trace.Units{CPU: "hundredths of a core (100 is 1 core)", Memory: "percent of a machine's memory (0..100)", CPUCores: 0.01}

// Options configure Open.
type Options struct {
	Strict bool
}

const second = 1_000_000 // µs

// MachineRow is one row of machine_meta.
type MachineRow struct {
	Machine        string
	Time           int64 // seconds
	FailureDomain1 int64
	FailureDomain2 string
	CPUs           int64
	Memory         int64 // normalised, 0..100
	Status         string
}

// ParseMachineRow parses one machine_meta row.
func ParseMachineRow(line string) (MachineRow, error) {
	var f [7]string
	if !trace.SplitFields(line, ',', f[:]) {
		return MachineRow{}, trace.FieldCountError("machine_meta", line, ',', 7)
	}
	var m MachineRow
	var err error
	if m.Machine, err = name("machine_id", f[0], "m_"); err != nil {
		return MachineRow{}, err
	}
	if m.Time, err = trace.ParseInt("time_stamp", f[1], 0, math.MaxInt64/second); err != nil {
		return MachineRow{}, err
	}
	if m.FailureDomain1, err = trace.ParseInt("failure_domain_1", f[2], 0, math.MaxInt64); err != nil {
		return MachineRow{}, err
	}
	m.FailureDomain2 = f[3]
	if m.CPUs, err = trace.ParseInt("cpu_num", f[4], 1, 1<<20); err != nil {
		return MachineRow{}, err
	}
	if m.Memory, err = trace.ParseInt("mem_size", f[5], 0, 100); err != nil {
		return MachineRow{}, err
	}
	if f[6] == "" {
		return MachineRow{}, trace.FieldError("status", f[6], trace.ErrMissing)
	}
	m.Status = f[6]
	return m, nil
}

// name checks an id column: non-empty, and with the trace's prefix when
// it has one (m_1932, j_1234, c_10).
func name(field, s, prefix string) (string, error) {
	if s == "" {
		return "", trace.FieldError(field, s, trace.ErrMissing)
	}
	if prefix != "" && !strings.HasPrefix(s, prefix) {
		return "", trace.FieldError(field, s, trace.ErrOutOfRange)
	}
	return s, nil
}

// ID maps a trace name to the int64 that events carry: the number after
// its prefix when it is a prefix and a number (m_1932 is 1932, j_12 is
// 12), else HashID of it.
func ID(s string) int64 {
	if i := strings.IndexByte(s, '_'); i > 0 && !strings.ContainsRune(s[:i], '/') {
		if v, err := strconv.ParseInt(s[i+1:], 10, 64); err == nil && v >= 0 && v < 1<<61 {
			return v
		}
	}
	return HashID(s)
}

// HashID is a name's 64-bit FNV-1a hash with bit 61 set and the sign bit
// clear, so it never meets a numbered id (those are below 2^61).
func HashID(s string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return int64(h.Sum64()>>3) | 1<<61
}

// TaskRow is one row of batch_task.
type TaskRow struct {
	Task      string // DAG-encoded (M5_3_4) or not (task_...)
	Instances int64
	Job       string
	Type      string
	Status    string
	Start     int64 // seconds
	End       int64 // seconds; 0 or before Start: unknown
	PlanCPU   trace.Amount
	PlanMem   trace.Amount
}

// ParseTaskRow parses one batch_task row.
func ParseTaskRow(line string) (TaskRow, error) {
	var f [9]string
	if !trace.SplitFields(line, ',', f[:]) {
		return TaskRow{}, trace.FieldCountError("batch_task", line, ',', 9)
	}
	var t TaskRow
	var err error
	if t.Task, err = name("task_name", f[0], ""); err != nil {
		return TaskRow{}, err
	}
	if t.Instances, err = trace.ParseInt("instance_num", f[1], 0, math.MaxInt32); err != nil {
		return TaskRow{}, err
	}
	if t.Job, err = name("job_name", f[2], "j_"); err != nil {
		return TaskRow{}, err
	}
	t.Type, t.Status = f[3], f[4]
	if t.Start, err = trace.ParseInt("start_time", f[5], 0, math.MaxInt64/second); err != nil {
		return TaskRow{}, err
	}
	if t.End, err = trace.ParseInt("end_time", f[6], 0, math.MaxInt64/second); err != nil {
		return TaskRow{}, err
	}
	if t.PlanCPU, err = trace.ParseAmount("plan_cpu", f[7]); err != nil {
		return TaskRow{}, err
	}
	if t.PlanMem, err = trace.ParseAmount("plan_mem", f[8]); err != nil {
		return TaskRow{}, err
	}
	if t.PlanMem.Known && t.PlanMem.Value > 100 {
		return TaskRow{}, trace.FieldError("plan_mem", f[8], trace.ErrOutOfRange)
	}
	return t, nil
}

// InstanceRow is one row of batch_instance.
type InstanceRow struct {
	Instance, Task, Job, Type, Status string
	Start, End                        int64 // seconds; End 0 or before Start: unknown
	Machine                           string
	Seq, TotalSeq                     int64
}

// ParseInstanceRow parses one batch_instance row (usage columns are checked
// to be numbers, -1 and 101 marking invalid values, and not kept).
func ParseInstanceRow(line string) (InstanceRow, error) {
	var f [14]string
	if !trace.SplitFields(line, ',', f[:]) {
		return InstanceRow{}, trace.FieldCountError("batch_instance", line, ',', 14)
	}
	var r InstanceRow
	var err error
	if r.Instance, err = name("instance_name", f[0], ""); err != nil {
		return InstanceRow{}, err
	}
	if r.Task, err = name("task_name", f[1], ""); err != nil {
		return InstanceRow{}, err
	}
	if r.Job, err = name("job_name", f[2], "j_"); err != nil {
		return InstanceRow{}, err
	}
	r.Type, r.Status = f[3], f[4]
	if r.Start, err = trace.ParseInt("start_time", f[5], 0, math.MaxInt64/second); err != nil {
		return InstanceRow{}, err
	}
	if r.End, err = trace.ParseInt("end_time", f[6], 0, math.MaxInt64/second); err != nil {
		return InstanceRow{}, err
	}
	r.Machine = f[7] // empty: never placed
	if r.Machine != "" && !strings.HasPrefix(r.Machine, "m_") {
		return InstanceRow{}, trace.FieldError("machine_id", f[7], trace.ErrOutOfRange)
	}
	var ok bool
	if r.Seq, ok, err = trace.ParseOptInt("seq_no", f[8]); err != nil {
		return InstanceRow{}, err
	}
	_ = ok
	if r.TotalSeq, _, err = trace.ParseOptInt("total_seq_no", f[9]); err != nil {
		return InstanceRow{}, err
	}
	for i, col := range []string{"cpu_avg", "cpu_max", "mem_avg", "mem_max"} {
		if s := f[10+i]; s != "" {
			if _, err := trace.ParseFloat(col, s, -1, math.MaxFloat64); err != nil {
				return InstanceRow{}, err
			}
		}
	}
	return r, nil
}

// ContainerRow is one row of container_meta.
type ContainerRow struct {
	Container, Machine string
	Time               int64 // seconds
	App, Status        string
	CPURequest         trace.Amount // hundredths of a core
	CPULimit           trace.Amount
	Memory             trace.Amount // percent of a machine
}

// ParseContainerRow parses one container_meta row.
func ParseContainerRow(line string) (ContainerRow, error) {
	var f [8]string
	if !trace.SplitFields(line, ',', f[:]) {
		return ContainerRow{}, trace.FieldCountError("container_meta", line, ',', 8)
	}
	var c ContainerRow
	var err error
	if c.Container, err = name("container_id", f[0], "c_"); err != nil {
		return ContainerRow{}, err
	}
	if c.Machine, err = name("machine_id", f[1], "m_"); err != nil {
		return ContainerRow{}, err
	}
	if c.Time, err = trace.ParseInt("time_stamp", f[2], 0, math.MaxInt64/second); err != nil {
		return ContainerRow{}, err
	}
	if c.App, err = name("app_du", f[3], ""); err != nil {
		return ContainerRow{}, err
	}
	c.Status = f[4]
	if c.CPURequest, err = trace.ParseAmount("cpu_request", f[5]); err != nil {
		return ContainerRow{}, err
	}
	if c.CPULimit, err = trace.ParseAmount("cpu_limit", f[6]); err != nil {
		return ContainerRow{}, err
	}
	if c.Memory, err = trace.ParseAmount("mem_size", f[7]); err != nil {
		return ContainerRow{}, err
	}
	if c.Memory.Known && c.Memory.Value > 100 {
		return ContainerRow{}, trace.FieldError("mem_size", f[7], trace.ErrOutOfRange)
	}
	return c, nil
}

// DAG is a batch task's place in its job's graph, from its name: "M5_3_4"
// is task 5, which starts when every instance of tasks 3 and 4 is done
// (only the numbers matter, not the letter). ok is false for a name that
// encodes no graph (task_..., MergeTask).
func DAG(taskName string) (id int, deps []int, ok bool) {
	if taskName == "" || taskName[0] < 'A' || taskName[0] > 'Z' {
		return 0, nil, false
	}
	i := 0
	for i < len(taskName) && taskName[i] >= 'A' && taskName[i] <= 'Z' {
		i++
	}
	parts := strings.Split(taskName[i:], "_")
	for j, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" {
			return 0, nil, false
		}
		if j == 0 {
			id = v
		} else {
			deps = append(deps, v)
		}
	}
	return id, deps, true
}

var errNotSorted = errors.New("rows not in time order")

// Open reads the trace in dir as one stream of events in time order:
// machines, then containers, then batch instances at one time.
// batch_instance or container_meta is required.
func Open(dir string, o Options) (*trace.Merged, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (alibaba2018 reads the directory holding batch_instance.csv and the other tables)", dir)
	}
	stats := trace.NewStats()
	files := map[string][]string{}
	for _, t := range []string{TableMachineMeta, TableBatchTask, TableBatchInstance, TableContainerMeta} {
		fs, warn, err := trace.TableFiles(dir, t, ".csv", ".csv.gz")
		if err != nil {
			return nil, err
		}
		if warn != "" {
			stats.Warn(warn)
		}
		if len(fs) == 0 {
			stats.Warn(t + ": absent")
		}
		files[t] = fs
	}
	if len(files[TableBatchInstance]) == 0 && len(files[TableContainerMeta]) == 0 {
		return nil, fmt.Errorf("%s: neither batch_instance nor container_meta (TABLE.csv[.gz], or a directory of them)", dir)
	}
	var streams []trace.Stream
	if fs := files[TableMachineMeta]; len(fs) > 0 {
		ms, err := readMachines(fs, o, stats)
		if err != nil {
			return nil, err
		}
		streams = append(streams, ms)
	}
	if fs := files[TableContainerMeta]; len(fs) > 0 {
		streams = append(streams, newContainers(fs, o, stats))
	}
	if fs := files[TableBatchInstance]; len(fs) > 0 {
		streams = append(streams, newBatch(files[TableBatchTask], fs, o, stats))
	}
	return trace.Merge(Units, stats, o.Strict, streams...), nil
}

// machines is machine_meta read whole and sorted by time (the file groups
// rows by machine). USING makes a machine available (its first row an
// add, a later one after another status an add again, else an update);
// any other status (IMPORT_INSTALLING, ...) takes it out.
type machines struct {
	evs []trace.Event
}

func readMachines(files []string, o Options, st *trace.Stats) (*machines, error) {
	type row struct {
		m   MachineRow
		pos trace.Pos
	}
	var rows []row
	for _, f := range files {
		l, err := trace.OpenLines(f)
		if err != nil {
			return nil, err
		}
		for {
			b, err := l.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				l.Close()
				return nil, err
			}
			st.Rows[TableMachineMeta]++
			m, err := ParseMachineRow(string(b))
			if err != nil {
				err = l.Wrap(err)
				if o.Strict {
					l.Close()
					return nil, err
				}
				st.Skip(trace.Cause(TableMachineMeta, err), l.Pos())
				continue
			}
			rows = append(rows, row{m, l.Pos()})
		}
		l.Close()
	}
	slices.SortStableFunc(rows, func(a, b row) int { return int(a.m.Time - b.m.Time) })
	up := map[string]bool{}
	ms := &machines{}
	for _, r := range rows {
		// cpu_num cores, in the trace's hundredths; mem_size is already a
		// percentage of the largest machine's memory.
		e := trace.Event{Time: r.m.Time * second, Machine: ID(r.m.Machine), HasMachine: true, Name: r.m.Machine, Pos: r.pos,
			Resources: trace.Resources{CPU: trace.Known(float64(r.m.CPUs) * 100), Memory: trace.Known(float64(r.m.Memory))}}
		using, was := r.m.Status == "USING", up[r.m.Machine]
		switch {
		case using && !was:
			e.Kind = trace.MachineAdd
		case using:
			e.Kind = trace.MachineUpdate
		case was:
			e.Kind = trace.MachineRemove
		default:
			st.Ignore("machine_meta: a machine not in service (" + r.m.Status + ") that was not up")
			continue
		}
		up[r.m.Machine] = using
		ms.evs = append(ms.evs, e)
	}
	return ms, nil
}

func (m *machines) Table() string { return TableMachineMeta }
func (m *machines) Close() error  { return nil }
func (m *machines) Next() (trace.Event, error) {
	if len(m.evs) == 0 {
		return trace.Event{}, io.EOF
	}
	e := m.evs[0]
	m.evs = m.evs[1:]
	return e, nil
}

// queued is a table's rows turned into events, some now and some later:
// out[head:] holds those of the current row still to give, ends those
// that come due later. (out keeps its storage from row to row: pull
// appends to out[:0].)
type queued struct {
	out  []trace.Event
	head int
	ends ends
	last int64 // the time of the last row read, µs
	done bool
}

func (q *queued) later(e trace.Event) {
	q.ends.push(e)
}

// next gives the earliest of: an end due no later than the next row's
// time, the current row's events. pull reads the next row's events into
// q.out (and sets q.last), or sets done.
func (q *queued) next(pull func() error) (trace.Event, error) {
	for {
		if q.head < len(q.out) && (q.ends.len() == 0 || q.ends.first() >= q.out[q.head].Time) {
			e := q.out[q.head]
			q.out[q.head] = trace.Event{}
			q.head++
			return e, nil
		}
		if q.ends.len() > 0 && (q.done || q.head < len(q.out)) {
			return q.ends.pop(), nil
		}
		if q.done {
			return trace.Event{}, io.EOF
		}
		q.out, q.head = q.out[:0], 0
		if err := pull(); err != nil {
			return trace.Event{}, err
		}
	}
}

// endOf maps an instance's or container's final status to how it ended.
func endOf(status string) (trace.End, bool) {
	switch status {
	case "Terminated":
		return trace.EndFinish, true
	case "Failed":
		return trace.EndFail, true
	case "Cancelled":
		return trace.EndKill, true
	case "Interrupted":
		return trace.EndEvict, true
	}
	return 0, false // Running, Waiting, Ready: no end in the trace
}

// batch joins batch_instance with batch_task.
type batch struct {
	tasks     *trace.Lines
	taskFiles []string
	taskPeek  *TaskRow
	taskLast  int64               // the last batch_task row's start_time
	plans     map[planKey]TaskRow // tasks that may still start instances
	expiry    expiries            // when each plan can be dropped
	inst      *trace.RowTable
	q         queued
	strict    bool
	st        *trace.Stats
	row       InstanceRow
}

type planKey struct{ job, task string }

type expiry struct {
	at  int64 // µs
	key planKey
}

type expiries []expiry

func (h expiries) Len() int           { return len(h) }
func (h expiries) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiries) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiries) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiries) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newBatch(taskFiles, instFiles []string, o Options, st *trace.Stats) *batch {
	b := &batch{taskFiles: taskFiles, plans: map[planKey]TaskRow{}, strict: o.Strict, st: st}
	b.inst = &trace.RowTable{Name: TableBatchInstance, Files: instFiles, Strict: o.Strict, Stats: st,
		Parse: func(row []byte, _ trace.Pos) (trace.Event, bool, error) {
			r, err := ParseInstanceRow(string(row))
			if err != nil {
				return trace.Event{}, false, err
			}
			b.row = r
			return trace.Event{Time: r.Start * second}, true, nil
		}}
	return b
}

func (b *batch) Table() string { return TableBatchInstance }

func (b *batch) Close() error {
	var err error
	if b.tasks != nil {
		err = b.tasks.Close()
	}
	if cerr := b.inst.Close(); err == nil {
		err = cerr
	}
	return err
}

func (b *batch) Next() (trace.Event, error) { return b.q.next(b.pull) }

// readPlans reads batch_task rows that start no later than t.
func (b *batch) readPlans(t int64) error {
	for {
		if b.taskPeek == nil {
			if b.tasks == nil {
				if len(b.taskFiles) == 0 {
					return nil
				}
				l, err := trace.OpenLines(b.taskFiles[0])
				if err != nil {
					return err
				}
				b.taskFiles, b.tasks = b.taskFiles[1:], l
			}
			row, err := b.tasks.Next()
			if errors.Is(err, io.EOF) {
				b.tasks.Close()
				b.tasks = nil
				continue
			}
			if err != nil {
				return err
			}
			b.st.Rows[TableBatchTask]++
			tr, err := ParseTaskRow(string(row))
			if err != nil {
				err = b.tasks.Wrap(err)
				if b.strict {
					return err
				}
				b.st.Skip(trace.Cause(TableBatchTask, err), b.tasks.Pos())
				continue
			}
			if tr.Start < b.taskLast {
				perr := &trace.ParseError{File: b.tasks.Name(), Line: b.tasks.Line(), Field: "start_time", Value: strconv.FormatInt(tr.Start, 10),
					Err: fmt.Errorf("%w: %w (sort batch_task by its 6th column first)", trace.ErrOutOfOrder, errNotSorted)}
				if b.strict {
					return perr
				}
				b.st.Skip(trace.Cause(TableBatchTask, perr), b.tasks.Pos())
				continue
			}
			b.taskLast = tr.Start
			b.taskPeek = &tr
		}
		if b.taskPeek.Start*second > t {
			return nil
		}
		tr := *b.taskPeek
		b.taskPeek = nil
		b.plans[planKey{tr.Job, tr.Task}] = tr
		if tr.End > tr.Start {
			heap.Push(&b.expiry, expiry{tr.End * second, planKey{tr.Job, tr.Task}})
		}
	}
}

func (b *batch) pull() error {
	e, err := b.inst.Next()
	if errors.Is(err, io.EOF) {
		b.q.done = true
		return nil
	}
	if err != nil {
		return err
	}
	if e.Time < b.q.last {
		perr := &trace.ParseError{File: e.Pos.File, Line: e.Pos.Line, Field: "start_time", Value: strconv.FormatInt(b.row.Start, 10), Err: fmt.Errorf("%w: %w (sort batch_instance by its 6th column first)", trace.ErrOutOfOrder, errNotSorted)}
		if b.strict {
			return perr
		}
		b.st.Skip(trace.Cause(TableBatchInstance, perr), e.Pos)
		return nil
	}
	b.q.last = e.Time
	if err := b.readPlans(e.Time); err != nil {
		return err
	}
	// A plan can go once its task has ended and no instance of it starts
	// later; keep each until a minute after its end.
	for len(b.expiry) > 0 && b.expiry[0].at+60*second < e.Time {
		x := heap.Pop(&b.expiry).(expiry)
		delete(b.plans, x.key)
	}
	r := b.row
	job, task := ID(r.Job), HashID(r.Task+"/"+r.Instance)
	sub := trace.Event{Time: e.Time, Kind: trace.TaskSubmit, Job: job, Task: task, Name: r.Task, Pos: e.Pos}
	if plan, ok := b.plans[planKey{r.Job, r.Task}]; ok {
		sub.Resources = trace.Resources{CPU: plan.PlanCPU, Memory: plan.PlanMem}
	} else {
		b.st.Ignore("batch_instance: no batch_task row for its task (request unknown)")
	}
	b.q.out = append(b.q.out[:0], sub)
	if r.Machine == "" {
		return nil
	}
	sched := sub
	sched.Kind, sched.Machine, sched.HasMachine = trace.TaskSchedule, ID(r.Machine), true
	b.q.out = append(b.q.out, sched)
	end, ok := endOf(r.Status)
	switch {
	case !ok:
	case r.End < r.Start:
		b.st.Ignore("batch_instance: end_time 0 or before start_time (no end)")
	default:
		fin := sched
		fin.Kind, fin.End, fin.Time = trace.TaskEnd, end, r.End*second
		b.q.later(fin)
	}
	return nil
}

// containers streams container_meta: a container's first row submits it
// and places it where the trace did (a service task of the job named by
// its app_du); a row with a status that ends it (stopped) ends it.
type containers struct {
	t    *trace.RowTable
	q    queued
	row  ContainerRow
	st   *trace.Stats
	live map[int64]bool // the containers running, by id
}

func newContainers(files []string, o Options, st *trace.Stats) *containers {
	c := &containers{st: st, live: map[int64]bool{}}
	c.t = &trace.RowTable{Name: TableContainerMeta, Files: files, Strict: o.Strict, Stats: st,
		Parse: func(row []byte, _ trace.Pos) (trace.Event, bool, error) {
			r, err := ParseContainerRow(string(row))
			if err != nil {
				return trace.Event{}, false, err
			}
			c.row = r
			return trace.Event{Time: r.Time * second}, true, nil
		}}
	return c
}

func (c *containers) Table() string { return TableContainerMeta }
func (c *containers) Close() error  { return c.t.Close() }
func (c *containers) Next() (trace.Event, error) {
	return c.q.next(func() error {
		e, err := c.t.Next()
		if errors.Is(err, io.EOF) {
			c.q.done = true
			return nil
		}
		if err != nil {
			return err
		}
		r := c.row
		ev := trace.Event{Time: e.Time, Job: ID(r.App), Task: ID(r.Container), Name: r.App, Pos: e.Pos,
			Priority: 1, Resources: trace.Resources{CPU: r.CPURequest, Memory: r.Memory}}
		switch strings.ToLower(r.Status) {
		case "started", "allocated":
			if c.live[ev.Task] {
				return nil // a later snapshot of a running container
			}
			c.live[ev.Task] = true
			sub := ev
			sub.Kind = trace.TaskSubmit
			sched := ev
			sched.Kind, sched.Machine, sched.HasMachine = trace.TaskSchedule, ID(r.Machine), true
			c.q.out = append(c.q.out[:0], sub, sched)
		case "stopped", "deleted", "offline":
			if !c.live[ev.Task] {
				return nil
			}
			delete(c.live, ev.Task)
			ev.Kind, ev.End = trace.TaskEnd, trace.EndKill
			c.q.out = append(c.q.out[:0], ev)
		default:
			c.st.Ignore("container_meta: status " + r.Status)
		}
		return nil
	})
}
