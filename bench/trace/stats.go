package trace

import (
	"maps"
	"slices"
	"strconv"
)

// Stats counts what a reader read, emitted and skipped. A skipped row is
// counted by its cause (Cause), with the first few places it happened.
type Stats struct {
	// Rows read per table (every line, parsed or not).
	Rows map[string]int64
	// Events emitted.
	Events int64
	// Skipped rows by cause, and the first examples of each.
	Skipped  map[string]int64
	Examples map[string][]Pos
	// Ignored rows by reason: well-formed rows a replay leaves out (an
	// alloc set's, say), each reason documented in docs/REPLAY.md.
	Ignored map[string]int64
	// Warnings about the input as a whole (a table absent, shards that
	// do not start at 0), each once.
	Warnings []string
}

// maxExamples bounds the places kept per cause.
const maxExamples = 5

// NewStats returns empty stats.
func NewStats() *Stats {
	return &Stats{Rows: map[string]int64{}, Skipped: map[string]int64{}, Examples: map[string][]Pos{}, Ignored: map[string]int64{}}
}

// Skip counts a skipped row.
func (s *Stats) Skip(cause string, at Pos) {
	s.Skipped[cause]++
	if ex := s.Examples[cause]; len(ex) < maxExamples {
		s.Examples[cause] = append(ex, at)
	}
}

// Ignore counts a well-formed row left out, by reason.
func (s *Stats) Ignore(reason string) { s.Ignored[reason]++ }

// Warn records a warning once.
func (s *Stats) Warn(w string) {
	if !slices.Contains(s.Warnings, w) {
		s.Warnings = append(s.Warnings, w)
	}
}

// SkippedTotal is the number of rows skipped.
func (s *Stats) SkippedTotal() int64 {
	var n int64
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

// RowsTotal is the number of rows read.
func (s *Stats) RowsTotal() int64 {
	var n int64
	for _, v := range s.Rows {
		n += v
	}
	return n
}

// Causes are the skip causes, sorted.
func (s *Stats) Causes() []string { return slices.Sorted(maps.Keys(s.Skipped)) }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
