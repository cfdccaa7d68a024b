package google2011

import (
	"fmt"
	"os"

	"github.com/omega-cell/omega/bench/trace"
)

// The tables a replay reads, each a directory of shards under the trace's
// directory, as Google publishes them (gs://clusterdata-2011-2).
const (
	TableMachineEvents   = "machine_events"
	TableJobEvents       = "job_events"
	TableTaskEvents      = "task_events"
	TableTaskConstraints = "task_constraints"
)

// Units of the 2011 trace: requests and capacities normalised so that the
// largest machine of the cell has 1.0 of each.
var Units = trace.Units{CPU: "normalised (largest machine 1.0)", Memory: "normalised (largest machine 1.0)", Normalised: true}

// Options configure Open.
type Options struct {
	// Strict makes a malformed row an error naming its file, line and
	// column; otherwise it is counted by cause and skipped.
	Strict bool
}

// Open reads the trace in dir (a directory holding machine_events,
// job_events, task_events and, when present, task_constraints, each a
// directory of part-NNNNN-of-NNNNN.csv.gz shards) as one stream of events
// in time order: at one time, machines first, then jobs, constraints and
// tasks, each table in its file order (the rows at time 0, the tasks
// running when the trace opened, keep the order of their file). A shard
// missing from the middle of a table is an error; task_events is
// required, the other tables optional (their absence is a warning in the
// stats).
func Open(dir string, o Options) (*trace.Merged, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (google2011 reads the trace's directory, with task_events/ and the other tables under it)", dir)
	}
	stats := trace.NewStats()
	find := func(name string) (trace.Shards, error) {
		s, warn, err := trace.FindShards(dir, name)
		if err != nil {
			return s, err
		}
		if warn != "" {
			stats.Warn(warn)
		}
		if len(s.Files) == 0 && name != TableTaskEvents {
			stats.Warn(name + ": absent")
		}
		return s, nil
	}
	var streams []trace.Stream
	for _, name := range []string{TableMachineEvents, TableJobEvents, TableTaskConstraints, TableTaskEvents} {
		s, err := find(name)
		if err != nil {
			return nil, err
		}
		if name == TableTaskEvents && len(s.Files) == 0 {
			return nil, fmt.Errorf("%s: no task_events shards (part-NNNNN-of-NNNNN.csv.gz) under %s/%s", dir, dir, TableTaskEvents)
		}
		if len(s.Files) == 0 {
			continue
		}
		in := trace.Interner{}
		switch name {
		case TableMachineEvents:
			streams = append(streams, &table[MachineEvent]{name: name, shards: s, parse: parseMachineEvent, conv: machineToEvent, strict: o.Strict, stats: stats, in: in})
		case TableJobEvents:
			streams = append(streams, &table[JobEvent]{name: name, shards: s, parse: parseJobEvent, conv: jobToEvent, strict: o.Strict, stats: stats, in: in})
		case TableTaskConstraints:
			streams = append(streams, &table[TaskConstraint]{name: name, shards: s, parse: parseTaskConstraint, conv: constraintToEvent, strict: o.Strict, stats: stats, in: in})
		case TableTaskEvents:
			streams = append(streams, &table[TaskEvent]{name: name, shards: s, parse: parseTaskEvent, conv: taskToEvent, strict: o.Strict, stats: stats, in: in})
		}
	}
	return trace.Merge(Units, stats, o.Strict, streams...), nil
}

func amount(o Optional[float64]) trace.Amount { return trace.Amount{Value: o.Value, Known: o.Known} }

func missing(m MissingInfo) string {
	if m == MissingNone {
		return ""
	}
	return m.String()
}

var ends = [...]trace.End{Evict: trace.EndEvict, Fail: trace.EndFail, Finish: trace.EndFinish, Kill: trace.EndKill, Lost: trace.EndLost}

func machineToEvent(m MachineEvent, at trace.Pos) (trace.Event, bool) {
	e := trace.Event{Time: m.Time, Machine: m.MachineID, HasMachine: true, Name: m.Platform, Pos: at,
		Resources: trace.Resources{CPU: amount(m.CPUs), Memory: amount(m.Memory)}}
	switch m.Type {
	case MachineAdd:
		e.Kind = trace.MachineAdd
	case MachineRemove:
		e.Kind = trace.MachineRemove
	default:
		e.Kind = trace.MachineUpdate
	}
	return e, true
}

func jobToEvent(j JobEvent, at trace.Pos) (trace.Event, bool) {
	e := trace.Event{Time: j.Time, Job: j.JobID, Class: j.SchedulingClass, Name: j.JobName, Missing: missing(j.MissingInfo), Pos: at}
	switch j.Type {
	case Submit:
		e.Kind = trace.JobSubmit
	case Evict, Fail, Finish, Kill, Lost:
		e.Kind, e.End = trace.JobEnd, ends[j.Type]
	default:
		return e, false // SCHEDULE and updates: the tasks' rows tell them
	}
	return e, true
}

var constraintOps = [...]string{OpEqual: "==", OpNotEqual: "!=", OpLessThan: "<", OpGreaterThan: ">"}

func constraintToEvent(c TaskConstraint, at trace.Pos) (trace.Event, bool) {
	return trace.Event{Time: c.Time, Kind: trace.TaskConstraint, Job: c.JobID, Task: c.TaskIndex, Pos: at,
		Constraint: &trace.Constraint{Attribute: c.Attribute, Op: constraintOps[c.Op], Value: c.Value}}, true
}

func taskToEvent(t TaskEvent, at trace.Pos) (trace.Event, bool) {
	e := trace.Event{Time: t.Time, Job: t.JobID, Task: t.TaskIndex, Machine: t.MachineID.Value, HasMachine: t.MachineID.Known,
		Priority: int32(t.Priority), Class: t.SchedulingClass, Missing: missing(t.MissingInfo), Pos: at,
		Resources:         trace.Resources{CPU: amount(t.CPURequest), Memory: amount(t.MemoryRequest)},
		DifferentMachines: t.DifferentMachines.Known && t.DifferentMachines.Value}
	switch t.Type {
	case Submit:
		e.Kind = trace.TaskSubmit
	case Schedule:
		e.Kind = trace.TaskSchedule
	case UpdatePending, UpdateRunning:
		e.Kind = trace.TaskUpdate
	default:
		e.Kind, e.End = trace.TaskEnd, ends[t.Type]
	}
	return e, true
}
