package workload

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// This file reads the Google 2011 cluster trace (clusterdata-2011-2):
// task_events and job_events rows, comma-separated, no header, no quoting
// (user and job names are base64 hashes and never contain a comma or a
// quote). The enums here are the 2011 trace's own; the 2019 trace renumbers
// its event types, so a reader of that trace must define its own and never
// reuse these.

// Google2011EventType is the event_type column of the 2011 trace's
// task_events and job_events tables. Its values are the 2011 trace's codes;
// do not use them for the 2019 trace, which renumbers them.
type Google2011EventType uint8

// The 2011 event types, with their trace codes.
const (
	Google2011Submit        Google2011EventType = 0 // became eligible for scheduling
	Google2011Schedule      Google2011EventType = 1 // placed on a machine
	Google2011Evict         Google2011EventType = 2 // descheduled (preempted, machine gone, ...)
	Google2011Fail          Google2011EventType = 3 // descheduled by a task failure
	Google2011Finish        Google2011EventType = 4 // completed normally
	Google2011Kill          Google2011EventType = 5 // cancelled by the user or a driver program
	Google2011Lost          Google2011EventType = 6 // presumably terminated; the record is missing
	Google2011UpdatePending Google2011EventType = 7 // scheduling class, resources or constraints changed while waiting
	Google2011UpdateRunning Google2011EventType = 8 // same, while scheduled
)

var google2011EventNames = [...]string{"SUBMIT", "SCHEDULE", "EVICT", "FAIL", "FINISH", "KILL", "LOST", "UPDATE_PENDING", "UPDATE_RUNNING"}

func (t Google2011EventType) String() string {
	if int(t) < len(google2011EventNames) {
		return google2011EventNames[t]
	}
	return "Google2011EventType(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is one of the nine 2011 codes.
func (t Google2011EventType) Valid() bool { return t <= Google2011UpdateRunning }

// Google2011MissingInfo is the missing_info column: empty for a complete
// record, else a code saying the record was synthesised. The zero value is
// Google2011MissingNone (the column is empty), so a record built in code is
// complete unless it says otherwise; Code gives the trace's own code.
type Google2011MissingInfo uint8

// The missing_info values. The trace codes are 0, 1 and 2; they are stored
// here plus one so that the zero value means "empty column".
const (
	// The column is empty: nothing is missing.
	Google2011MissingNone Google2011MissingInfo = 0
	// Trace code 0: the state was seen in a snapshot but its transition
	// event is missing.
	Google2011SnapshotButNoTransition Google2011MissingInfo = 1
	// Trace code 1: neither a snapshot nor a transition was recorded; the
	// event is inferred.
	Google2011NoSnapshotOrTransition Google2011MissingInfo = 2
	// Trace code 2: the object existed but its creation was not recorded;
	// its resource requests are unknown (empty columns).
	Google2011ExistsButNoCreation Google2011MissingInfo = 3
)

// Code returns the trace's code (0, 1 or 2) and true, or false for
// Google2011MissingNone.
func (m Google2011MissingInfo) Code() (int, bool) {
	if m == Google2011MissingNone {
		return 0, false
	}
	return int(m) - 1, true
}

func (m Google2011MissingInfo) String() string {
	switch m {
	case Google2011MissingNone:
		return "NONE"
	case Google2011SnapshotButNoTransition:
		return "SNAPSHOT_BUT_NO_TRANSITION"
	case Google2011NoSnapshotOrTransition:
		return "NO_SNAPSHOT_OR_TRANSITION"
	case Google2011ExistsButNoCreation:
		return "EXISTS_BUT_NO_CREATION"
	}
	return "Google2011MissingInfo(" + strconv.Itoa(int(m)) + ")"
}

// Limits of the 2011 trace's columns.
const (
	// Google2011MaxPriority is the highest task priority (0..11; 9, 10 and
	// 11 are the "production" band, 0 and 1 "free").
	Google2011MaxPriority = 11
	// Google2011MaxSchedulingClass is the most latency-sensitive scheduling
	// class (0..3).
	Google2011MaxSchedulingClass = 3
	// Google2011ProductionPriority is the lowest production priority.
	Google2011ProductionPriority = 9
	// Google2011AfterTrace is the timestamp of an event after the trace's
	// window (2^63-1).
	Google2011AfterTrace = math.MaxInt64
)

// Optional is a column that may be empty. Known is false for an empty
// column, which means "unknown", never zero.
type Optional[T any] struct {
	Value T
	Known bool
}

// Known returns a known value.
func Known[T any](v T) Optional[T] { return Optional[T]{Value: v, Known: true} }

// TaskEvent is one row of task_events. Resource requests are normalised so
// that the largest machine of the cell has 1.0 of each resource.
type TaskEvent struct {
	// Time is microseconds since 600 s before the trace window opened; 0
	// marks the snapshot of what existed when it opened, and
	// Google2011AfterTrace an event after it closed.
	Time            int64
	MissingInfo     Google2011MissingInfo
	JobID           int64
	TaskIndex       int64
	MachineID       Optional[int64] // empty while the task is not placed
	Type            Google2011EventType
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
	MissingInfo     Google2011MissingInfo
	JobID           int64
	Type            Google2011EventType
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

// Parse errors. A ParseError wraps one of these, or a *strconv.NumError for a
// number that does not parse.
var (
	// ErrFieldCount: the row does not have the table's number of columns.
	ErrFieldCount = errors.New("wrong number of fields")
	// ErrOutOfRange: a number parsed but is outside the column's range
	// (negative, not finite, or not one of an enum's codes).
	ErrOutOfRange = errors.New("value out of range")
	// ErrMissing: a column that is never empty is empty.
	ErrMissing = errors.New("required field is empty")
)

// ParseError names the file, line and field of a malformed row.
type ParseError struct {
	File  string // empty when parsing a lone line
	Line  int    // 1-based; 0 when parsing a lone line
	Field string // column name; empty for a row with the wrong number of columns
	Value string // the offending text (the whole row for ErrFieldCount), truncated to 80 bytes
	Err   error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(":")
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %s: ", e.Field)
	}
	fmt.Fprintf(&b, "%q: %v", e.Value, e.Err)
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

func fieldError(field, value string, err error) *ParseError {
	if len(value) > 80 {
		value = value[:80]
	}
	return &ParseError{Field: field, Value: value, Err: err}
}

// splitFields splits line at commas into out and reports whether it had
// exactly len(out) fields.
func splitFields(line string, out []string) bool {
	for i := range out {
		if i == len(out)-1 {
			if strings.IndexByte(line, ',') >= 0 {
				return false
			}
			out[i] = line
			return true
		}
		j := strings.IndexByte(line, ',')
		if j < 0 {
			return false
		}
		out[i], line = line[:j], line[j+1:]
	}
	return true
}

func countFields(line string) int { return strings.Count(line, ",") + 1 }

// parseInt parses a required non-negative decimal int64 no larger than max.
func parseInt(field, s string, max int64) (int64, error) {
	if s == "" {
		return 0, fieldError(field, s, ErrMissing)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fieldError(field, s, err)
	}
	if v < 0 || v > max {
		return 0, fieldError(field, s, ErrOutOfRange)
	}
	return v, nil
}

func parseOptInt(field, s string) (Optional[int64], error) {
	if s == "" {
		return Optional[int64]{}, nil
	}
	v, err := parseInt(field, s, math.MaxInt64)
	return Known(v), err
}

// parseOptFloat parses an optional finite non-negative amount.
func parseOptFloat(field, s string) (Optional[float64], error) {
	if s == "" {
		return Optional[float64]{}, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Optional[float64]{}, fieldError(field, s, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return Optional[float64]{}, fieldError(field, s, ErrOutOfRange)
	}
	return Known(v), nil
}

func parseMissing(field, s string) (Google2011MissingInfo, error) {
	if s == "" {
		return Google2011MissingNone, nil
	}
	v, err := parseInt(field, s, 2)
	return Google2011MissingInfo(v + 1), err
}

// ParseTaskEvent parses one task_events row (without its line end). The
// error is a *ParseError naming the field; its File and Line are empty.
func ParseTaskEvent(line string) (TaskEvent, error) {
	return parseTaskEvent(line, nil)
}

func parseTaskEvent(line string, intern func(string) string) (TaskEvent, error) {
	var f [len(taskEventFields)]string
	if !splitFields(line, f[:]) {
		return TaskEvent{}, fieldError("", line,
			fmt.Errorf("%w: task_events has %d, got %d", ErrFieldCount, len(taskEventFields), countFields(line)))
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
	if v, err = parseInt("event_type", f[5], int64(Google2011UpdateRunning)); err != nil {
		return TaskEvent{}, err
	}
	e.Type = Google2011EventType(v)
	e.User = f[6]
	if intern != nil {
		e.User = intern(e.User)
	}
	if v, err = parseInt("scheduling_class", f[7], Google2011MaxSchedulingClass); err != nil {
		return TaskEvent{}, err
	}
	e.SchedulingClass = int8(v)
	if v, err = parseInt("priority", f[8], Google2011MaxPriority); err != nil {
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
	if !splitFields(line, f[:]) {
		return JobEvent{}, fieldError("", line,
			fmt.Errorf("%w: job_events has %d, got %d", ErrFieldCount, len(jobEventFields), countFields(line)))
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
	if v, err = parseInt("event_type", f[3], int64(Google2011UpdateRunning)); err != nil {
		return JobEvent{}, err
	}
	e.Type = Google2011EventType(v)
	e.User = f[4]
	if intern != nil {
		e.User = intern(e.User)
	}
	if v, err = parseInt("scheduling_class", f[5], Google2011MaxSchedulingClass); err != nil {
		return JobEvent{}, err
	}
	e.SchedulingClass = int8(v)
	e.JobName, e.LogicalJobName = f[6], f[7]
	return e, nil
}

func appendMissing(b []byte, m Google2011MissingInfo) []byte {
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

// maxLine bounds a row; real rows are under 200 bytes.
const maxLine = 1 << 20

// lineReader reads the rows of one trace file, gzip-compressed or not.
type lineReader struct {
	name    string
	sc      *bufio.Scanner
	line    int
	gz      *gzip.Reader
	file    *os.File // owned, closed by Close; nil if the caller owns the input
	interns map[string]string
}

func newLineReader(r io.Reader, name string) (*lineReader, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	lr := &lineReader{name: name, interns: map[string]string{}}
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var src io.Reader = br
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		lr.gz, src = gz, gz
	}
	lr.sc = bufio.NewScanner(src)
	lr.sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return lr, nil
}

// intern shares the strings of columns with few distinct values (users).
func (lr *lineReader) intern(s string) string {
	if v, ok := lr.interns[s]; ok {
		return v
	}
	if len(lr.interns) < 1<<16 {
		lr.interns[s] = s
	}
	return s
}

// next returns the next row, or io.EOF.
func (lr *lineReader) next() (string, error) {
	if !lr.sc.Scan() {
		if err := lr.sc.Err(); err != nil {
			return "", &ParseError{File: lr.name, Line: lr.line + 1, Err: err}
		}
		return "", io.EOF
	}
	lr.line++
	b := lr.sc.Bytes()
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return string(b), nil
}

func (lr *lineReader) wrap(err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		pe.File, pe.Line = lr.name, lr.line
		return pe
	}
	return &ParseError{File: lr.name, Line: lr.line, Err: err}
}

func (lr *lineReader) close() error {
	var err error
	if lr.gz != nil {
		err = lr.gz.Close()
	}
	if lr.file != nil {
		if cerr := lr.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Reader streams the rows of one trace table (task_events, job_events),
// parsed into T. It is not safe for concurrent use.
type Reader[T any] struct {
	lr    *lineReader
	parse func(line string, intern func(string) string) (T, error)
}

// TaskEventReader streams the rows of a task_events file.
type TaskEventReader = Reader[TaskEvent]

// JobEventReader streams the rows of a job_events file.
type JobEventReader = Reader[JobEvent]

func newReader[T any](r io.Reader, name string, parse func(string, func(string) string) (T, error)) (*Reader[T], error) {
	lr, err := newLineReader(r, name)
	if err != nil {
		return nil, err
	}
	return &Reader[T]{lr: lr, parse: parse}, nil
}

func openReader[T any](path string, parse func(string, func(string) string) (T, error)) (*Reader[T], error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := newReader(f, path, parse)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.lr.file = f
	return r, nil
}

// NewTaskEventReader reads task_events rows from r, which may be gzip
// compressed (detected by its magic bytes); name is used in errors. Close
// releases the decompressor but does not close r.
func NewTaskEventReader(r io.Reader, name string) (*TaskEventReader, error) {
	return newReader(r, name, parseTaskEvent)
}

// OpenTaskEvents opens a task_events file (e.g. part-00000-of-00500.csv.gz);
// Close closes it.
func OpenTaskEvents(path string) (*TaskEventReader, error) { return openReader(path, parseTaskEvent) }

// NewJobEventReader is NewTaskEventReader for job_events.
func NewJobEventReader(r io.Reader, name string) (*JobEventReader, error) {
	return newReader(r, name, parseJobEvent)
}

// OpenJobEvents is OpenTaskEvents for job_events.
func OpenJobEvents(path string) (*JobEventReader, error) { return openReader(path, parseJobEvent) }

// Next returns the next row; io.EOF after the last one. Any other error is a
// *ParseError naming the file, the line and the field; the reader can go on
// with the next row after a malformed one.
func (r *Reader[T]) Next() (T, error) {
	line, err := r.lr.next()
	if err != nil {
		var zero T
		return zero, err
	}
	e, err := r.parse(line, r.lr.intern)
	if err != nil {
		var zero T
		return zero, r.lr.wrap(err)
	}
	return e, nil
}

// Line returns the number of the row Next returned last (1-based).
func (r *Reader[T]) Line() int { return r.lr.line }

// Close releases the reader (and closes the file if Open opened it).
func (r *Reader[T]) Close() error { return r.lr.close() }

// ReadAll reads every remaining row.
func (r *Reader[T]) ReadAll() ([]T, error) {
	var out []T
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
}

// ReadAllTaskEvents reads every row of a task_events file.
func ReadAllTaskEvents(path string) ([]TaskEvent, error) {
	r, err := OpenTaskEvents(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadAll()
}

// ReadAllJobEvents reads every row of a job_events file.
func ReadAllJobEvents(path string) ([]JobEvent, error) {
	r, err := OpenJobEvents(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadAll()
}
