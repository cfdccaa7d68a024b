package trace

import (
	"errors"
	"fmt"
	"io"
)

// RowTable is a Stream over one table's files, read in order, a row at a
// time: Parse turns a row into an event (ok false: the row says nothing a
// replay uses, or Ignore names why it is left out); a malformed row (an
// error naming its field, or ErrSyntax, ErrFieldCount) is an error with
// Strict, else counted by cause and skipped. A file that cannot be read
// is always an error.
type RowTable struct {
	Name   string
	Files  []string
	Strict bool
	Stats  *Stats
	// Parse converts a row (valid until the next call) read at pos.
	Parse func(row []byte, pos Pos) (e Event, ok bool, err error)

	next int
	l    *Lines
}

// Table is the table's name.
func (t *RowTable) Table() string { return t.Name }

// Next returns the table's next event.
func (t *RowTable) Next() (Event, error) {
	for {
		if t.l == nil {
			if t.next >= len(t.Files) {
				return Event{}, io.EOF
			}
			l, err := OpenLines(t.Files[t.next])
			if err != nil {
				return Event{}, fmt.Errorf("%s: %w", t.Name, err)
			}
			t.next++
			t.l = l
		}
		row, err := t.l.Next()
		if errors.Is(err, io.EOF) {
			if err := t.l.Close(); err != nil {
				return Event{}, err
			}
			t.l = nil
			continue
		}
		if err != nil {
			return Event{}, err
		}
		t.Stats.Rows[t.Name]++
		e, ok, err := t.Parse(row, t.l.Pos())
		if err != nil {
			err = t.l.Wrap(err)
			if t.Strict {
				return Event{}, err
			}
			t.Stats.Skip(Cause(t.Name, err), t.l.Pos())
			continue
		}
		if ok {
			e.Pos = t.l.Pos()
			return e, nil
		}
	}
}

// Close closes the file being read.
func (t *RowTable) Close() error {
	if t.l != nil {
		return t.l.Close()
	}
	return nil
}
