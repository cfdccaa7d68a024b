package google2011

import (
	"math"
	"strconv"

	"github.com/omega-cell/omega/bench/trace"
)

// MachineEventType is machine_events' event_type column (the 2011 codes;
// the 2019 trace numbers its machine events from 1).
type MachineEventType uint8

// The 2011 machine event types.
const (
	MachineAdd    MachineEventType = 0 // joined the cell (capacity given)
	MachineRemove MachineEventType = 1 // left it: failed, or taken out for maintenance
	MachineUpdate MachineEventType = 2 // its resources changed (most updates repeat them)
)

func (t MachineEventType) String() string {
	switch t {
	case MachineAdd:
		return "ADD"
	case MachineRemove:
		return "REMOVE"
	case MachineUpdate:
		return "UPDATE"
	}
	return "MachineEventType(" + strconv.Itoa(int(t)) + ")"
}

// MachineEvent is one row of machine_events. Capacities are normalised so
// that the largest machine has 1.0 of each; an empty capacity is unknown
// (32 ADD rows of the public table have none; an UPDATE gives it later).
type MachineEvent struct {
	Time      int64
	MachineID int64
	Type      MachineEventType
	Platform  string // hashed
	CPUs      Optional[float64]
	Memory    Optional[float64]
}

var machineEventFields = [...]string{"time", "machine_id", "event_type", "platform_id", "cpus", "memory"}

// ParseMachineEvent parses one machine_events row (without its line end).
func ParseMachineEvent(line string) (MachineEvent, error) { return parseMachineEvent(line, nil) }

func parseMachineEvent(line string, intern func(string) string) (MachineEvent, error) {
	var f [len(machineEventFields)]string
	if !trace.SplitFields(line, ',', f[:]) {
		return MachineEvent{}, fieldCount("machine_events", line, len(machineEventFields))
	}
	var e MachineEvent
	var err error
	var v int64
	if e.Time, err = parseInt("time", f[0], math.MaxInt64); err != nil {
		return MachineEvent{}, err
	}
	if e.MachineID, err = parseInt("machine_id", f[1], math.MaxInt64); err != nil {
		return MachineEvent{}, err
	}
	if v, err = parseInt("event_type", f[2], int64(MachineUpdate)); err != nil {
		return MachineEvent{}, err
	}
	e.Type = MachineEventType(v)
	e.Platform = f[3]
	if intern != nil {
		e.Platform = intern(e.Platform)
	}
	if e.CPUs, err = parseOptFloat("cpus", f[4]); err != nil {
		return MachineEvent{}, err
	}
	if e.Memory, err = parseOptFloat("memory", f[5]); err != nil {
		return MachineEvent{}, err
	}
	return e, nil
}

// ConstraintOp is task_constraints' comparison operator. The codes are
// those of the converter written by one of the trace's authors (Charles
// Reiss, google/cluster-data amplab-charles/src/main/protobuf/trace.proto,
// MachineConstraint.Type): EQUAL 0, NOT_EQUAL 1, LESS_THAN 2,
// GREATER_THAN 3.
type ConstraintOp uint8

// The comparison operators.
const (
	OpEqual       ConstraintOp = 0
	OpNotEqual    ConstraintOp = 1
	OpLessThan    ConstraintOp = 2
	OpGreaterThan ConstraintOp = 3
)

func (o ConstraintOp) String() string {
	switch o {
	case OpEqual:
		return "EQUAL"
	case OpNotEqual:
		return "NOT_EQUAL"
	case OpLessThan:
		return "LESS_THAN"
	case OpGreaterThan:
		return "GREATER_THAN"
	}
	return "ConstraintOp(" + strconv.Itoa(int(o)) + ")"
}

// TaskConstraint is one row of task_constraints: a task may run only on a
// machine whose attribute compares so with the value (an empty value is
// the attribute's absence, for EQUAL and NOT_EQUAL).
type TaskConstraint struct {
	Time      int64
	JobID     int64
	TaskIndex int64
	Op        ConstraintOp
	Attribute string // hashed name
	Value     string // hashed string or an integer, as the trace writes it
}

var taskConstraintFields = [...]string{"time", "job_id", "task_index", "comparison_operator", "attribute_name", "attribute_value"}

// ParseTaskConstraint parses one task_constraints row (without its line
// end).
func ParseTaskConstraint(line string) (TaskConstraint, error) { return parseTaskConstraint(line, nil) }

func parseTaskConstraint(line string, intern func(string) string) (TaskConstraint, error) {
	var f [len(taskConstraintFields)]string
	if !trace.SplitFields(line, ',', f[:]) {
		return TaskConstraint{}, fieldCount("task_constraints", line, len(taskConstraintFields))
	}
	var c TaskConstraint
	var err error
	var v int64
	if c.Time, err = parseInt("time", f[0], math.MaxInt64); err != nil {
		return TaskConstraint{}, err
	}
	if c.JobID, err = parseInt("job_id", f[1], math.MaxInt64); err != nil {
		return TaskConstraint{}, err
	}
	if c.TaskIndex, err = parseInt("task_index", f[2], math.MaxInt64); err != nil {
		return TaskConstraint{}, err
	}
	if v, err = parseInt("comparison_operator", f[3], int64(OpGreaterThan)); err != nil {
		return TaskConstraint{}, err
	}
	c.Op = ConstraintOp(v)
	if f[4] == "" {
		return TaskConstraint{}, trace.FieldError("attribute_name", f[4], trace.ErrMissing)
	}
	c.Attribute, c.Value = f[4], f[5]
	if intern != nil {
		c.Attribute, c.Value = intern(c.Attribute), intern(c.Value)
	}
	return c, nil
}
