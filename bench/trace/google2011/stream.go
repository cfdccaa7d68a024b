package google2011

import (
	"errors"
	"fmt"
	"io"

	"github.com/omega-cell/omega/bench/trace"
)

// Reader streams the rows of one table file parsed into T. It is not safe
// for concurrent use.
type Reader[T any] struct {
	l      *trace.Lines
	in     trace.Interner
	parse  func(line string, intern func(string) string) (T, error)
	intern func(string) string
}

// TaskEventReader streams the rows of a task_events file.
type TaskEventReader = Reader[TaskEvent]

// JobEventReader streams the rows of a job_events file.
type JobEventReader = Reader[JobEvent]

// MachineEventReader streams the rows of a machine_events file.
type MachineEventReader = Reader[MachineEvent]

// TaskConstraintReader streams the rows of a task_constraints file.
type TaskConstraintReader = Reader[TaskConstraint]

func wrapLines[T any](l *trace.Lines, parse func(string, func(string) string) (T, error)) *Reader[T] {
	r := &Reader[T]{l: l, in: trace.Interner{}, parse: parse}
	r.intern = r.in.Intern
	return r
}

func newReader[T any](rd io.Reader, name string, parse func(string, func(string) string) (T, error)) (*Reader[T], error) {
	l, err := trace.NewLines(rd, name)
	if err != nil {
		return nil, err
	}
	return wrapLines(l, parse), nil
}

func openReader[T any](path string, parse func(string, func(string) string) (T, error)) (*Reader[T], error) {
	l, err := trace.OpenLines(path)
	if err != nil {
		return nil, err
	}
	return wrapLines(l, parse), nil
}

// NewTaskEventReader reads task_events rows from r, which may be gzip
// compressed (told by its magic bytes); name is used in errors. Close
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

// NewMachineEventReader is NewTaskEventReader for machine_events.
func NewMachineEventReader(r io.Reader, name string) (*MachineEventReader, error) {
	return newReader(r, name, parseMachineEvent)
}

// OpenMachineEvents is OpenTaskEvents for machine_events.
func OpenMachineEvents(path string) (*MachineEventReader, error) {
	return openReader(path, parseMachineEvent)
}

// OpenTaskConstraints is OpenTaskEvents for task_constraints.
func OpenTaskConstraints(path string) (*TaskConstraintReader, error) {
	return openReader(path, parseTaskConstraint)
}

// Next returns the next row; io.EOF after the last one. Any other error is a
// *trace.ParseError naming the file, the line and the field; the reader can
// go on with the next row after a malformed one.
func (r *Reader[T]) Next() (T, error) {
	var zero T
	b, err := r.l.Next()
	if err != nil {
		return zero, err
	}
	e, err := r.parse(string(b), r.intern)
	if err != nil {
		return zero, r.l.Wrap(err)
	}
	return e, nil
}

// Line returns the number of the row Next returned last (1-based).
func (r *Reader[T]) Line() int { return r.l.Line() }

// Pos is the place of the row Next returned last.
func (r *Reader[T]) Pos() trace.Pos { return r.l.Pos() }

// Close releases the reader (and closes the file if Open opened it).
func (r *Reader[T]) Close() error { return r.l.Close() }

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

func readAll[T any](path string, parse func(string, func(string) string) (T, error)) ([]T, error) {
	r, err := openReader(path, parse)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadAll()
}

// ReadAllTaskEvents reads every row of a task_events file.
func ReadAllTaskEvents(path string) ([]TaskEvent, error) { return readAll(path, parseTaskEvent) }

// ReadAllJobEvents reads every row of a job_events file.
func ReadAllJobEvents(path string) ([]JobEvent, error) { return readAll(path, parseJobEvent) }

// ReadAllMachineEvents reads every row of a machine_events file.
func ReadAllMachineEvents(path string) ([]MachineEvent, error) {
	return readAll(path, parseMachineEvent)
}

// table is one table's shards read in order as trace events: each row
// converted by conv (false: the row says nothing the replay uses), a
// malformed row an error with strict, else counted and skipped.
type table[T any] struct {
	name   string
	shards trace.Shards
	next   int
	r      *Reader[T]
	parse  func(string, func(string) string) (T, error)
	conv   func(T, trace.Pos) (trace.Event, bool)
	strict bool
	stats  *trace.Stats
	in     trace.Interner // shared by the table's shards
}

func (t *table[T]) Table() string { return t.name }

func (t *table[T]) Next() (trace.Event, error) {
	for {
		if t.r == nil {
			if t.next >= len(t.shards.Files) {
				return trace.Event{}, io.EOF
			}
			l, err := trace.OpenLines(t.shards.Files[t.next])
			if err != nil {
				return trace.Event{}, fmt.Errorf("%s: %w", t.name, err)
			}
			t.next++
			t.r = &Reader[T]{l: l, in: t.in, parse: t.parse, intern: t.in.Intern}
		}
		row, err := t.r.Next()
		if errors.Is(err, io.EOF) {
			if err := t.r.Close(); err != nil {
				return trace.Event{}, err
			}
			t.r = nil
			continue
		}
		if err == nil {
			t.stats.Rows[t.name]++
		}
		var pe *trace.ParseError
		if errors.As(err, &pe) && pe.Field != "" || errors.Is(err, trace.ErrFieldCount) {
			t.stats.Rows[t.name]++
			if t.strict {
				return trace.Event{}, err
			}
			t.stats.Skip(trace.Cause(t.name, err), t.r.Pos())
			continue
		}
		if err != nil {
			return trace.Event{}, err // the file itself: a read or gzip error
		}
		if e, ok := t.conv(row, t.r.Pos()); ok {
			return e, nil
		}
	}
}

func (t *table[T]) Close() error {
	if t.r != nil {
		return t.r.Close()
	}
	return nil
}
