// Package google2019 reads Google's 2019 Borg traces (clusterdata 2019,
// eight cells, "Google cluster-usage traces v3"), exported from BigQuery as
// JSON lines: machine_events, collection_events and instance_events, with
// the fields of the trace's own format definition
// (google/cluster-data clusterdata_trace_format_v3.proto, whose enum codes
// this package keeps: they are the 2019 trace's own and never the 2011
// trace's, which numbers its events from SUBMIT 0 to UPDATE_RUNNING 8 and
// its machine events from ADD 0).
//
// BigQuery exports a 64-bit integer as a string ("time": "600000000"), so
// an integer field is read as a number or a string of one; anything else
// is an error naming the field. An absent or null field is unknown. The
// reader streams: each table's files must be in time order (export with
// ORDER BY time, as docs/REPLAY.md shows); a row whose time goes back is
// an error with Strict, else skipped and counted.
package google2019

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/omega-cell/omega/bench/trace"
)

// The tables a replay reads, each a directory of JSON-lines files (or one
// file, TABLE.json or TABLE.json.gz) in the trace's directory.
const (
	TableMachineEvents    = "machine_events"
	TableCollectionEvents = "collection_events"
	TableInstanceEvents   = "instance_events"
)

// EventType is the type field of collection_events and instance_events
// (the 2019 codes).
type EventType uint8

// The 2019 event types.
const (
	Submit        EventType = 0  // submitted to the scheduler
	Queue         EventType = 1  // marked not eligible for scheduling (the batch scheduler holds it)
	Enable        EventType = 2  // became eligible for scheduling
	Schedule      EventType = 3  // started running on a machine
	Evict         EventType = 4  // descheduled for a higher priority or over-commitment
	Fail          EventType = 5  // descheduled by a failure
	Finish        EventType = 6  // completed normally
	Kill          EventType = 7  // cancelled by its user or a depended-upon collection's death
	Lost          EventType = 8  // presumably ended; the record is missing
	UpdatePending EventType = 9  // changed while waiting
	UpdateRunning EventType = 10 // changed while running
)

var eventNames = [...]string{"SUBMIT", "QUEUE", "ENABLE", "SCHEDULE", "EVICT", "FAIL", "FINISH", "KILL", "LOST", "UPDATE_PENDING", "UPDATE_RUNNING"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// MachineEventType is machine_events' type (the 2019 codes, from 1).
type MachineEventType uint8

// The 2019 machine event types; 0, EVENT_TYPE_UNKNOWN ("should never
// happen"), is refused.
const (
	MachineAdd    MachineEventType = 1
	MachineRemove MachineEventType = 2
	MachineUpdate MachineEventType = 3
)

// CollectionType: a job (with tasks) or an alloc set (with alloc
// instances, reservations that tasks run inside).
const (
	CollectionJob      = 0
	CollectionAllocSet = 1
)

// Machine ids with a meaning (the format's Constants).
const (
	NoMachine        = 0
	DedicatedMachine = -1
)

// MaxPriority bounds a priority (the 2019 trace's run 0..450).
const MaxPriority = math.MaxInt32

// Units of the 2019 trace: normalised compute units and memory, the
// largest machine 1.0.
var Units = trace.Units{CPU: "normalised compute units (largest machine 1.0)", Memory: "normalised memory (largest machine 1.0)", Normalised: true}

// Options configure Open.
type Options struct {
	// Strict makes a malformed row an error naming file, line and field.
	Strict bool
	// Allocs keeps the rows of alloc sets and their instances; by default
	// they are left out (counted as ignored): an alloc is a reservation,
	// not work, and the tasks that run in it are in the trace on their own.
	Allocs bool
}

var (
	machineRelations = [...]string{0: "==", 1: "!=", 2: "<", 3: ">", 4: "<=", 5: ">=", 6: "present", 7: "absent"}
	ends             = [...]trace.End{Evict: trace.EndEvict, Fail: trace.EndFail, Finish: trace.EndFinish, Kill: trace.EndKill, Lost: trace.EndLost}
)

// Open reads the trace in dir as one stream of events in time order:
// machines, then collections, then instances at one time. instance_events
// is required.
func Open(dir string, o Options) (*trace.Merged, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (google2019 reads a directory holding instance_events and the other tables)", dir)
	}
	stats := trace.NewStats()
	var streams []trace.Stream
	for _, name := range []string{TableMachineEvents, TableCollectionEvents, TableInstanceEvents} {
		files, warn, err := trace.TableFiles(dir, name, ".json", ".json.gz")
		if err != nil {
			return nil, err
		}
		if warn != "" {
			stats.Warn(warn)
		}
		if len(files) == 0 {
			if name == TableInstanceEvents {
				return nil, fmt.Errorf("%s: no instance_events (a directory of .json or .json.gz files, or instance_events.json[.gz])", dir)
			}
			stats.Warn(name + ": absent")
			continue
		}
		t := &trace.RowTable{Name: name, Files: files, Strict: o.Strict, Stats: stats}
		switch name {
		case TableMachineEvents:
			t.Parse = ParseMachineEvent
		case TableCollectionEvents:
			t.Parse = func(row []byte, _ trace.Pos) (trace.Event, bool, error) { return parseCollection(row, o, stats) }
		case TableInstanceEvents:
			t.Parse = func(row []byte, _ trace.Pos) (trace.Event, bool, error) { return parseInstance(row, o, stats) }
		}
		streams = append(streams, t)
	}
	return trace.Merge(Units, stats, o.Strict, streams...), nil
}

func resources(field string, raw []byte, kind byte) (trace.Resources, error) {
	var r trace.Resources
	if kind == trace.JSONNull {
		return r, nil
	}
	if kind != trace.JSONObject {
		return r, trace.FieldError(field, string(raw), trace.ErrSyntax)
	}
	err := trace.ScanObject(raw, func(key, v []byte, k byte) error {
		var err error
		switch string(key) {
		case "cpus":
			r.CPU, err = trace.JSONAmount(field+".cpus", v, k)
		case "memory":
			r.Memory, err = trace.JSONAmount(field+".memory", v, k)
		}
		return err
	})
	if trace.IsSyntax(err) && !isParseError(err) {
		err = trace.FieldError(field, string(raw), trace.ErrSyntax)
	}
	return r, err
}

func isParseError(err error) bool {
	_, ok := err.(*trace.ParseError)
	return ok
}

// rowError makes a row that is not one JSON object an error.
func rowError(row []byte, err error) error {
	if err != nil && !isParseError(err) {
		return trace.FieldError("", string(row), err)
	}
	return err
}

// ParseMachineEvent parses one machine_events row.
func ParseMachineEvent(row []byte, _ trace.Pos) (trace.Event, bool, error) {
	var e trace.Event
	var haveTime, haveID, haveType bool
	err := trace.ScanObject(row, func(key, raw []byte, kind byte) error {
		var err error
		var v int64
		switch string(key) {
		case "time":
			e.Time, haveTime, err = trace.JSONInt("time", raw, kind, 0, math.MaxInt64)
		case "machine_id":
			e.Machine, haveID, err = trace.JSONInt("machine_id", raw, kind, 1, math.MaxInt64)
			e.HasMachine = haveID
		case "type":
			if v, haveType, err = trace.JSONInt("type", raw, kind, int64(MachineAdd), int64(MachineUpdate)); err == nil && haveType {
				e.Kind = [...]trace.Kind{MachineAdd: trace.MachineAdd, MachineRemove: trace.MachineRemove, MachineUpdate: trace.MachineUpdate}[v]
			}
		case "capacity":
			e.Resources, err = resources("capacity", raw, kind)
		case "platform_id":
			e.Name, err = trace.JSONText("platform_id", raw, kind)
		}
		return err
	})
	if err = rowError(row, err); err != nil {
		return trace.Event{}, false, err
	}
	switch {
	case !haveTime:
		return trace.Event{}, false, trace.FieldError("time", "", trace.ErrMissing)
	case !haveID:
		return trace.Event{}, false, trace.FieldError("machine_id", "", trace.ErrMissing)
	case !haveType:
		return trace.Event{}, false, trace.FieldError("type", "", trace.ErrMissing)
	}
	return e, true, nil
}

// common are the fields collection and instance events share.
type common struct {
	e                    trace.Event
	typ                  EventType
	collType             int64
	haveTime, haveID, ok bool
}

func (c *common) field(key, raw []byte, kind byte) (bool, error) {
	var err error
	var v int64
	switch string(key) {
	case "time":
		c.e.Time, c.haveTime, err = trace.JSONInt("time", raw, kind, 0, math.MaxInt64)
	case "type":
		if v, c.ok, err = trace.JSONInt("type", raw, kind, 0, int64(UpdateRunning)); err == nil {
			c.typ = EventType(v)
		}
	case "collection_id":
		c.e.Job, c.haveID, err = trace.JSONInt("collection_id", raw, kind, 0, math.MaxInt64)
	case "scheduling_class":
		v, _, err = trace.JSONInt("scheduling_class", raw, kind, 0, 3)
		c.e.Class = int8(v)
	case "missing_type":
		if v, _, err = trace.JSONInt("missing_type", raw, kind, 0, 5); err == nil && v != 0 {
			c.e.Missing = [...]string{"", "SNAPSHOT_BUT_NO_TRANSITION", "NO_SNAPSHOT_OR_TRANSITION", "EXISTS_BUT_NO_CREATION", "TRANSITION_MISSING_STEP", "TOO_MANY_EVENTS"}[v]
		}
	case "collection_type":
		c.collType, _, err = trace.JSONInt("collection_type", raw, kind, CollectionJob, CollectionAllocSet)
	case "priority":
		v, _, err = trace.JSONInt("priority", raw, kind, 0, MaxPriority)
		c.e.Priority = int32(v)
	default:
		return false, nil
	}
	return true, err
}

func (c *common) check() error {
	switch {
	case !c.haveTime:
		return trace.FieldError("time", "", trace.ErrMissing)
	case !c.ok:
		return trace.FieldError("type", "", trace.ErrMissing)
	case !c.haveID:
		return trace.FieldError("collection_id", "", trace.ErrMissing)
	}
	return nil
}

func parseCollection(row []byte, o Options, st *trace.Stats) (trace.Event, bool, error) {
	var c common
	err := trace.ScanObject(row, func(key, raw []byte, kind byte) error {
		if ok, err := c.field(key, raw, kind); ok || err != nil {
			return err
		}
		if string(key) == "collection_name" {
			var err error
			c.e.Name, err = trace.JSONText("collection_name", raw, kind)
			return err
		}
		return nil
	})
	if err = rowError(row, err); err == nil {
		err = c.check()
	}
	if err != nil {
		return trace.Event{}, false, err
	}
	if c.collType == CollectionAllocSet && !o.Allocs {
		st.Ignore("collection_events: alloc sets")
		return trace.Event{}, false, nil
	}
	switch c.typ {
	case Submit:
		c.e.Kind = trace.JobSubmit
	case Evict, Fail, Finish, Kill, Lost:
		c.e.Kind, c.e.End = trace.JobEnd, ends[c.typ]
	default:
		return trace.Event{}, false, nil // the instances' rows tell the rest
	}
	return c.e, true, nil
}

// ParseInstanceEvent parses one instance_events row with the default
// options, for tests and tools.
func ParseInstanceEvent(row []byte) (trace.Event, bool, error) {
	return parseInstance(row, Options{}, trace.NewStats())
}

// ParseCollectionEvent parses one collection_events row with the default
// options.
func ParseCollectionEvent(row []byte) (trace.Event, bool, error) {
	return parseCollection(row, Options{}, trace.NewStats())
}

func parseInstance(row []byte, o Options, st *trace.Stats) (trace.Event, bool, error) {
	var c common
	var haveIndex bool
	var constraints []byte
	err := trace.ScanObject(row, func(key, raw []byte, kind byte) error {
		if ok, err := c.field(key, raw, kind); ok || err != nil {
			return err
		}
		var err error
		var v int64
		switch string(key) {
		case "instance_index":
			c.e.Task, haveIndex, err = trace.JSONInt("instance_index", raw, kind, 0, math.MaxInt32)
		case "machine_id":
			var ok bool
			if v, ok, err = trace.JSONInt("machine_id", raw, kind, DedicatedMachine, math.MaxInt64); err == nil && ok && v > 0 {
				c.e.Machine, c.e.HasMachine = v, true
			}
		case "resource_request":
			c.e.Resources, err = resources("resource_request", raw, kind)
		case "constraint":
			if kind != trace.JSONNull {
				constraints = raw
			}
		}
		return err
	})
	if err = rowError(row, err); err == nil {
		err = c.check()
	}
	if err == nil && !haveIndex {
		err = trace.FieldError("instance_index", "", trace.ErrMissing)
	}
	if err != nil {
		return trace.Event{}, false, err
	}
	if c.collType == CollectionAllocSet && !o.Allocs {
		st.Ignore("instance_events: alloc instances")
		return trace.Event{}, false, nil
	}
	if constraints != nil {
		if n, err := countConstraints(constraints); err != nil {
			return trace.Event{}, false, err
		} else if n > 0 {
			st.Ignore("instance_events: constraints not replayed")
		}
	}
	switch c.typ {
	case Submit:
		c.e.Kind = trace.TaskSubmit
	case Schedule:
		c.e.Kind = trace.TaskSchedule
	case UpdatePending, UpdateRunning:
		c.e.Kind = trace.TaskUpdate
	case Evict, Fail, Finish, Kill, Lost:
		c.e.Kind, c.e.End = trace.TaskEnd, ends[c.typ]
	default:
		return trace.Event{}, false, nil // QUEUE and ENABLE: the submission is what a replay uses
	}
	return c.e, true, nil
}

// countConstraints checks an instance's constraint array (each an object
// with name, value and relation 0..7) and counts its elements.
func countConstraints(raw []byte) (int, error) {
	n := 0
	err := trace.ScanArray(raw, func(elem []byte, kind byte) error {
		if kind != trace.JSONObject {
			return trace.FieldError("constraint", string(elem), trace.ErrSyntax)
		}
		n++
		return trace.ScanObject(elem, func(key, v []byte, k byte) error {
			if string(key) == "relation" {
				_, _, err := trace.JSONInt("constraint.relation", v, k, 0, int64(len(machineRelations)-1))
				return err
			}
			return nil
		})
	})
	if err != nil && !isParseError(err) {
		err = trace.FieldError("constraint", string(raw), trace.ErrSyntax)
	}
	return n, err
}
