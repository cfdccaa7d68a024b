package google2011

import (
	"math"

	"strconv"

	"github.com/omega-cell/omega/bench/trace"
)

// This file reads the Google 2011 cluster trace (clusterdata-2011-2):
// task_events and job_events rows, comma-separated, no header, no quoting
// (user and job names are base64 hashes and never contain a comma or a
// quote). The enums here are the 2011 trace's own; the 2019 trace renumbers
// its event types, so a reader of that trace must define its own and never
// reuse these.

// EventType is the event_type column of the 2011 trace's
// task_events and job_events tables. Its values are the 2011 trace's codes;
// do not use them for the 2019 trace, which renumbers them.
type EventType uint8

// The 2011 event types, with their trace codes.
const (
	Submit        EventType = 0 // became eligible for scheduling
	Schedule      EventType = 1 // placed on a machine
	Evict         EventType = 2 // descheduled (preempted, machine gone, ...)
	Fail          EventType = 3 // descheduled by a task failure
	Finish        EventType = 4 // completed normally
	Kill          EventType = 5 // cancelled by the user or a driver program
	Lost          EventType = 6 // presumably terminated; the record is missing
	UpdatePending EventType = 7 // scheduling class, resources or constraints changed while waiting
	UpdateRunning EventType = 8 // same, while scheduled
)

var eventNames = [...]string{"SUBMIT", "SCHEDULE", "EVICT", "FAIL", "FINISH", "KILL", "LOST", "UPDATE_PENDING", "UPDATE_RUNNING"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is one of the nine 2011 codes.
func (t EventType) Valid() bool { return t <= UpdateRunning }

// MissingInfo is the missing_info column: empty for a complete
// record, else a code saying the record was synthesised. The zero value is
// MissingNone (the column is empty), so a record built in code is
// complete unless it says otherwise; Code gives the trace's own code.
type MissingInfo uint8

// The missing_info values. The trace codes are 0, 1 and 2; they are stored
// here plus one so that the zero value means "empty column".
const (
	// The column is empty: nothing is missing.
	MissingNone MissingInfo = 0
	// Trace code 0: the state was seen in a snapshot but its transition
	// event is missing.
	SnapshotButNoTransition MissingInfo = 1
	// Trace code 1: neither a snapshot nor a transition was recorded; the
	// event is inferred.
	NoSnapshotOrTransition MissingInfo = 2
	// Trace code 2: the object existed but its creation was not recorded;
	// its resource requests are unknown (empty columns).
	ExistsButNoCreation MissingInfo = 3
)

// Code returns the trace's code (0, 1 or 2) and true, or false for
// MissingNone.
func (m MissingInfo) Code() (int, bool) {
	if m == MissingNone {
		return 0, false
	}
	return int(m) - 1, true
}

func (m MissingInfo) String() string {
	switch m {
	case MissingNone:
		return "NONE"
	case SnapshotButNoTransition:
		return "SNAPSHOT_BUT_NO_TRANSITION"
	case NoSnapshotOrTransition:
		return "NO_SNAPSHOT_OR_TRANSITION"
	case ExistsButNoCreation:
		return "EXISTS_BUT_NO_CREATION"
	}
	return "MissingInfo(" + strconv.Itoa(int(m)) + ")"
}

// Limits of the 2011 trace's columns.
const (
	// MaxPriority is the highest task priority (0..11; 9, 10 and
	// 11 are the "production" band, 0 and 1 "free").
	MaxPriority = 11
	// MaxSchedulingClass is the most latency-sensitive scheduling
	// class (0..3).
	MaxSchedulingClass = 3
	// ProductionPriority is the lowest production priority.
	ProductionPriority = 9
	// AfterTrace is the timestamp of an event after the trace's
	// window (2^63-1).
	AfterTrace = math.MaxInt64
)

// Optional is a column that may be empty. Known is false for an empty
// column, which means "unknown", never zero.
type Optional[T any] struct {
	Value T
	Known bool
}

// Known returns a known value.
func Known[T any](v T) Optional[T] { return Optional[T]{Value: v, Known: true} }

func parseInt(field, s string, max int64) (int64, error) { return trace.ParseInt(field, s, 0, max) }

func parseOptInt(field, s string) (Optional[int64], error) {
	v, ok, err := trace.ParseOptInt(field, s)
	return Optional[int64]{Value: v, Known: ok}, err
}

func parseOptFloat(field, s string) (Optional[float64], error) {
	a, err := trace.ParseAmount(field, s)
	return Optional[float64]{Value: a.Value, Known: a.Known}, err
}

func fieldCount(table, line string, want int) error {
	return trace.FieldCountError(table, line, ',', want)
}

// TaskEvent is one row of task_events. Resource requests are normalised so
// that the largest machine of the cell has 1.0 of each resource.
type TaskEvent struct {
	// Time is microseconds since 600 s before the trace window opened; 0
	// marks the snapshot of what existed when it opened, and
	// AfterTrace an event after it closed.
	Time            int64
	MissingInfo     MissingInfo
	JobID           int64
	TaskIndex       int64
	MachineID       Optional[int64] // empty while the task is not placed
	Type            EventType
	User            string // hashed
	SchedulingClass int8   // 0..3, higher is more latency-sensitive
	Priority        int8   // 0..11
	CPURequest      Optional[float64]
	MemoryRequest   Optional[float64]
	DiskRequest     Optional[float64]
	// DifferentMachines is the different_machines_restriction column: the
	// job's tasks must run on distinct machines.
	DifferentMachines Optional[bool]
}

// JobEvent is one row of job_events.
type JobEvent struct {
	Time            int64 // as TaskEvent.Time
	MissingInfo     MissingInfo
	JobID           int64
	Type            EventType
	User            string // hashed
	SchedulingClass int8
	JobName         string // hashed
	LogicalJobName  string // hashed
}

// The columns, in file order.
var (
	taskEventFields = [...]string{"time", "missing_info", "job_id", "task_index", "machine_id", "event_type",
		"user", "scheduling_class", "priority", "cpu_request", "memory_request", "disk_request",
		"different_machines_restriction"}
	jobEventFields = [...]string{"time", "missing_info", "job_id", "event_type", "user", "scheduling_class",
		"job_name", "logical_job_name"}
)

func parseMissing(field, s string) (MissingInfo, error) {
	if s == "" {
		return MissingNone, nil
	}
	v, err := parseInt(field, s, 2)
	return MissingInfo(v + 1), err
}

// ParseTaskEvent parses one task_events row (without its line end). The
// error is a *ParseError naming the field; its File and Line are empty.
func ParseTaskEvent(line string) (TaskEvent, error) {
	return parseTaskEvent(line, nil)
}

func parseTaskEvent(line string, intern func(string) string) (TaskEvent, error) {
	var f [len(taskEventFields)]string
	if !trace.SplitFields(line, ',', f[:]) {
		return TaskEvent{}, fieldCount("task_events", line, len(taskEventFields))
	}
	var e TaskEvent
	var err error
	var v int64
	if e.Time, err = parseInt("time", f[0], math.MaxInt64); err != nil {
		return TaskEvent{}, err
	}
	if e.MissingInfo, err = parseMissing("missing_info", f[1]); err != nil {
		return TaskEvent{}, err
	}
	if e.JobID, err = parseInt("job_id", f[2], math.MaxInt64); err != nil {
		return TaskEvent{}, err
	}
	if e.TaskIndex, err = parseInt("task_index", f[3], math.MaxInt64); err != nil {
		return TaskEvent{}, err
	}
	if e.MachineID, err = parseOptInt("machine_id", f[4]); err != nil {
		return TaskEvent{}, err
	}
	if v, err = parseInt("event_type", f[5], int64(UpdateRunning)); err != nil {
		return TaskEvent{}, err
	}
	e.Type = EventType(v)
	e.User = f[6]
	if intern != nil {
		e.User = intern(e.User)
	}
	if v, err = parseInt("scheduling_class", f[7], MaxSchedulingClass); err != nil {
		return TaskEvent{}, err
	}
	e.SchedulingClass = int8(v)
	if v, err = parseInt("priority", f[8], MaxPriority); err != nil {
		return TaskEvent{}, err
	}
	e.Priority = int8(v)
	if e.CPURequest, err = parseOptFloat("cpu_request", f[9]); err != nil {
		return TaskEvent{}, err
	}
	if e.MemoryRequest, err = parseOptFloat("memory_request", f[10]); err != nil {
		return TaskEvent{}, err
	}
	if e.DiskRequest, err = parseOptFloat("disk_request", f[11]); err != nil {
		return TaskEvent{}, err
	}
	if f[12] != "" {
		if v, err = parseInt("different_machines_restriction", f[12], 1); err != nil {
			return TaskEvent{}, err
		}
		e.DifferentMachines = Known(v == 1)
	}
	return e, nil
}

// ParseJobEvent parses one job_events row (without its line end); errors as
// ParseTaskEvent.
func ParseJobEvent(line string) (JobEvent, error) {
	return parseJobEvent(line, nil)
}

func parseJobEvent(line string, intern func(string) string) (JobEvent, error) {
	var f [len(jobEventFields)]string
	if !trace.SplitFields(line, ',', f[:]) {
		return JobEvent{}, fieldCount("job_events", line, len(jobEventFields))
	}
	var e JobEvent
	var err error
	var v int64
	if e.Time, err = parseInt("time", f[0], math.MaxInt64); err != nil {
		return JobEvent{}, err
	}
	if e.MissingInfo, err = parseMissing("missing_info", f[1]); err != nil {
		return JobEvent{}, err
	}
	if e.JobID, err = parseInt("job_id", f[2], math.MaxInt64); err != nil {
		return JobEvent{}, err
	}
	if v, err = parseInt("event_type", f[3], int64(UpdateRunning)); err != nil {
		return JobEvent{}, err
	}
	e.Type = EventType(v)
	e.User = f[4]
	if intern != nil {
		e.User = intern(e.User)
	}
	if v, err = parseInt("scheduling_class", f[5], MaxSchedulingClass); err != nil {
		return JobEvent{}, err
	}
	e.SchedulingClass = int8(v)
	e.JobName, e.LogicalJobName = f[6], f[7]
	return e, nil
}

func appendMissing(b []byte, m MissingInfo) []byte {
	if c, ok := m.Code(); ok {
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return append(b, ',')
}

func appendOptFloat(b []byte, v Optional[float64]) []byte {
	if v.Known {
		b = strconv.AppendFloat(b, v.Value, 'g', -1, 64)
	}
	return b
}

// AppendTaskEvent appends e as a task_events row, without a line end.
// Floats are written in their shortest exact form, so parsing the row gives
// e back (the text may differ from the trace's: "4.292e-05" stays, "0.50"
// becomes "0.5").
func AppendTaskEvent(b []byte, e TaskEvent) []byte {
	b = strconv.AppendInt(b, e.Time, 10)
	b = append(b, ',')
	b = appendMissing(b, e.MissingInfo)
	b = strconv.AppendInt(b, e.JobID, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.TaskIndex, 10)
	b = append(b, ',')
	if e.MachineID.Known {
		b = strconv.AppendInt(b, e.MachineID.Value, 10)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Type), 10)
	b = append(b, ',')
	b = append(b, e.User...)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.SchedulingClass), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Priority), 10)
	b = append(b, ',')
	b = appendOptFloat(b, e.CPURequest)
	b = append(b, ',')
	b = appendOptFloat(b, e.MemoryRequest)
	b = append(b, ',')
	b = appendOptFloat(b, e.DiskRequest)
	b = append(b, ',')
	if e.DifferentMachines.Known {
		if e.DifferentMachines.Value {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	return b
}

// FormatTaskEvent returns e as a task_events row, without a line end.
func FormatTaskEvent(e TaskEvent) string { return string(AppendTaskEvent(nil, e)) }

// AppendJobEvent appends e as a job_events row, without a line end.
func AppendJobEvent(b []byte, e JobEvent) []byte {
	b = strconv.AppendInt(b, e.Time, 10)
	b = append(b, ',')
	b = appendMissing(b, e.MissingInfo)
	b = strconv.AppendInt(b, e.JobID, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Type), 10)
	b = append(b, ',')
	b = append(b, e.User...)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.SchedulingClass), 10)
	b = append(b, ',')
	b = append(b, e.JobName...)
	b = append(b, ',')
	b = append(b, e.LogicalJobName...)
	return b
}

// FormatJobEvent returns e as a job_events row, without a line end.
func FormatJobEvent(e JobEvent) string { return string(AppendJobEvent(nil, e)) }
