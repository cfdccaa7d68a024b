package trace

import (
	"errors"
	"io"
)

// Stream is one table's events, in the table's own order (time order, the
// file's order among rows of one time). Next returns io.EOF after the last.
type Stream interface {
	Next() (Event, error)
	Table() string
	Close() error
}

// Merged is a Source over several tables' streams, merged in time order;
// among events of one time, the stream given first goes first, then each
// stream's own order. A stream whose time goes backwards has that row
// skipped (ErrOutOfOrder; an error with strict).
type Merged struct {
	streams []Stream
	heads   []Event
	live    []bool
	last    []int64
	started bool
	err     error // met while reading ahead, returned by the next call
	strict  bool
	stats   *Stats
	units   Units
}

// Merge merges streams (first given wins ties) into one Source.
func Merge(units Units, stats *Stats, strict bool, streams ...Stream) *Merged {
	return &Merged{streams: streams, heads: make([]Event, len(streams)), live: make([]bool, len(streams)),
		last: make([]int64, len(streams)), strict: strict, stats: stats, units: units}
}

func (m *Merged) fill(i int) error {
	for {
		e, err := m.streams[i].Next()
		if errors.Is(err, io.EOF) {
			m.live[i] = false
			return nil
		}
		if err != nil {
			return err
		}
		if e.Time < m.last[i] {
			perr := &ParseError{File: e.Pos.File, Line: e.Pos.Line, Field: "time", Value: itoa(e.Time), Err: ErrOutOfOrder}
			if m.strict {
				return perr
			}
			m.stats.Skip(Cause(m.streams[i].Table(), perr), e.Pos)
			continue
		}
		m.last[i] = e.Time
		m.heads[i], m.live[i] = e, true
		return nil
	}
}

// Next returns the earliest head.
func (m *Merged) Next() (Event, error) {
	if m.err != nil {
		return Event{}, m.err
	}
	if !m.started {
		m.started = true
		for i := range m.streams {
			if err := m.fill(i); err != nil {
				return Event{}, err
			}
		}
	}
	best := -1
	for i, ok := range m.live {
		if ok && (best < 0 || m.heads[i].Time < m.heads[best].Time) {
			best = i
		}
	}
	if best < 0 {
		return Event{}, io.EOF
	}
	e := m.heads[best]
	m.live[best] = false
	m.err = m.fill(best)
	m.stats.Events++
	return e, nil
}

// TasksDone says every stream still live has a head that is not a task
// event. Each stream is one table, whose rows are of one kind of object
// (machines, jobs or tasks), so a stream whose next row is not a task's
// has none to come.
func (m *Merged) TasksDone() bool {
	if !m.started || m.err != nil {
		return false // an error read ahead is yet to be returned
	}
	for i, ok := range m.live {
		if ok && m.heads[i].Kind.Task() {
			return false
		}
	}
	return true
}

// Stats are the reader's counts.
func (m *Merged) Stats() *Stats { return m.stats }

// Units are the trace's units.
func (m *Merged) Units() Units { return m.units }

// Close closes every stream.
func (m *Merged) Close() error {
	var first error
	for _, s := range m.streams {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
