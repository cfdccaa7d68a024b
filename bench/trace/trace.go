// Package trace is the common form of the public cluster traces that omega
// replays (omega replay): one time-ordered stream of events — machines
// joining, leaving and changing, job and task submissions, the trace's own
// placements and how each task's run ended — whatever the format the trace
// was published in. A reader per format (google2011, google2019,
// alibaba2018, in the packages beside this one) parses its tables as they
// are published, streams them (memory bounded by the rows in flight, never
// by the trace) and merges them in time order.
//
// Values keep the trace's own units (Units says which); the replay scales
// them to a cell's by a documented rule (docs/REPLAY.md).
package trace

import (
	"errors"
	"fmt"
	"strconv"
)

// Kind is what an event says happened.
type Kind uint8

// The kinds of event, in the order a replay applies those that share a
// time: a machine before the placements on it, a job before its tasks, a
// task's submission before its placement and its placement before its end.
const (
	MachineAdd     Kind = iota + 1 // a machine joined the cell (again), with its capacity
	MachineUpdate                  // a machine's capacity or attributes changed
	MachineRemove                  // a machine left the cell (failed or taken out)
	JobSubmit                      // a job was submitted (its tasks follow as TaskSubmit)
	TaskSubmit                     // a task became pending (first, or again after it ended)
	TaskUpdate                     // a task's request or priority changed
	TaskSchedule                   // the trace's own scheduler placed the task on Machine
	TaskEnd                        // the task's run ended (End says how)
	JobEnd                         // the job ended (End says how)
	TaskConstraint                 // a task may run only where Constraint holds
)

var kindNames = [...]string{"", "MACHINE_ADD", "MACHINE_UPDATE", "MACHINE_REMOVE", "JOB_SUBMIT", "TASK_SUBMIT",
	"TASK_UPDATE", "TASK_SCHEDULE", "TASK_END", "JOB_END", "TASK_CONSTRAINT"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Task says the event is about a task (its submission, update,
// placement, end or constraint).
func (k Kind) Task() bool {
	return k >= TaskSubmit && k <= TaskEnd || k == TaskConstraint
}

// End is how a task's (or a job's) run ended.
type End uint8

// The ends, common to the traces (each reader maps its own codes to these).
const (
	EndNone   End = iota
	EndFinish     // completed normally
	EndFail       // failed
	EndKill       // cancelled by its user or a driver program
	EndEvict      // descheduled by the cluster (preempted, machine gone, ...)
	EndLost       // the trace lost track of it
)

var endNames = [...]string{"NONE", "FINISH", "FAIL", "KILL", "EVICT", "LOST"}

func (e End) String() string {
	if int(e) < len(endNames) {
		return endNames[e]
	}
	return "End(" + strconv.Itoa(int(e)) + ")"
}

// Amount is a resource amount that may be unknown: the traces leave a
// column empty when they do not know it, which never means zero.
type Amount struct {
	Value float64
	Known bool
}

// Known returns a known amount.
func Known(v float64) Amount { return Amount{Value: v, Known: true} }

// Resources are a request or a capacity, in the trace's units (Units).
type Resources struct {
	CPU    Amount
	Memory Amount
}

// Units says what a trace's resource values mean, for the replay's scaling
// rule.
type Units struct {
	// CPU and Memory name the unit, for reports ("normalised to the largest
	// machine", "cores", ...).
	CPU, Memory string
	// Normalised is true when the largest machine of the cell has 1.0 of
	// each resource (Google's traces): the replay multiplies by its
	// machine size. Otherwise CPUCores converts a CPU value to cores and
	// Memory values are a percentage of a machine's memory (Alibaba's).
	Normalised bool
	CPUCores   float64
}

// Pos is where an event came from: a table's file and a 1-based line.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return p.File + ":" + strconv.Itoa(p.Line) }

// Event is one thing that happened in the traced cell.
type Event struct {
	// Time is microseconds from the trace's origin (its first
	// timestamp's zero; Google's traces start their window at 600 s).
	Time int64
	Kind Kind
	End  End // TaskEnd, JobEnd
	// Job and Task name a task: the job's id and the task's index in it.
	Job, Task int64
	// Machine is the machine of a machine event or of a placement; zero
	// with HasMachine false when the row names none.
	Machine    int64
	HasMachine bool
	// Priority and Class are a submission's (or update's) priority and
	// latency class, in the trace's own scale.
	Priority int32
	Class    int8
	// Resources is a task's request, or a machine's capacity.
	Resources Resources
	// Name is a job's name (JobSubmit), a task's name in its job where the
	// trace has one (Alibaba's DAG names, e.g. "M5_3_4"), or a machine's
	// platform, as the trace writes it.
	Name string
	// DifferentMachines: the job's tasks must run on distinct machines.
	DifferentMachines bool
	// Constraint is a TaskConstraint's condition.
	Constraint *Constraint
	// Missing says the trace synthesised this record (Google 2011's
	// missing_info), in its own words; empty for a complete record.
	Missing string
	Pos     Pos
}

// Constraint is a condition on a machine's attribute (Google 2011's
// task_constraints): Op is "==", "!=", "<" or ">"; an empty Value with "=="
// or "!=" is the attribute's absence or presence.
type Constraint struct {
	Attribute, Op, Value string
}

// Source is a trace as one stream of events in time order.
type Source interface {
	// Next returns the next event, or io.EOF after the last. With Strict
	// a malformed row is an error (a *ParseError); otherwise it is counted
	// in Stats and skipped.
	Next() (Event, error)
	// Stats counts what was read and skipped so far.
	Stats() *Stats
	// Units are the trace's resource units.
	Units() Units
	// TasksDone says no task event follows: what is left, if anything, is
	// other tables' rows (machines, jobs), so a replay's horizon, the last
	// task event, is known.
	TasksDone() bool
	Close() error
}

// Parse errors. A ParseError wraps one of these, or a *strconv.NumError
// for a number that does not parse.
var (
	// ErrFieldCount: the row does not have the table's number of columns.
	ErrFieldCount = errors.New("wrong number of fields")
	// ErrOutOfRange: a number parsed but is outside the column's range
	// (negative, not finite, or not one of an enum's codes).
	ErrOutOfRange = errors.New("value out of range")
	// ErrMissing: a column that is never empty is empty.
	ErrMissing = errors.New("required field is empty")
	// ErrOutOfOrder: a row's time is before the previous row's in a table
	// whose rows are in time order.
	ErrOutOfOrder = errors.New("time goes backwards")
	// ErrSyntax: the row is not well-formed (JSON that does not parse).
	ErrSyntax = errors.New("malformed row")
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
	var b []byte
	if e.File != "" {
		b = append(b, e.File...)
		b = append(b, ':')
	}
	if e.Line > 0 {
		b = strconv.AppendInt(b, int64(e.Line), 10)
		b = append(b, ':')
	}
	if len(b) > 0 {
		b = append(b, ' ')
	}
	if e.Field != "" {
		b = fmt.Appendf(b, "field %s: ", e.Field)
	}
	if e.Value != "" || e.Field != "" {
		b = fmt.Appendf(b, "%q: ", e.Value)
	} // else no text to quote: a read error, a decompressor's
	b = fmt.Appendf(b, "%v", e.Err)
	return string(b)
}

func (e *ParseError) Unwrap() error { return e.Err }

// FieldError is a ParseError for one field, without file and line (the
// reader adds them).
func FieldError(field, value string, err error) *ParseError {
	if len(value) > 80 {
		value = value[:80]
	}
	return &ParseError{Field: field, Value: value, Err: err}
}

// Cause is the short reason a row was skipped, for Stats: the table, the
// field if any and the error's kind ("task_events: cpu_request: value out
// of range").
func Cause(table string, err error) string {
	var pe *ParseError
	if !errors.As(err, &pe) {
		return table + ": " + err.Error()
	}
	kind := "malformed"
	for _, k := range []error{ErrFieldCount, ErrOutOfRange, ErrMissing, ErrOutOfOrder, ErrSyntax} {
		if errors.Is(pe.Err, k) {
			kind = k.Error()
			break
		}
	}
	var ne *strconv.NumError
	if errors.As(pe.Err, &ne) {
		kind = "not a number"
	}
	if pe.Field != "" {
		return table + ": " + pe.Field + ": " + kind
	}
	return table + ": " + kind
}
