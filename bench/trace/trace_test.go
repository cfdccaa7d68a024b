package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixed is a Stream of given events.
type fixed struct {
	name string
	evs  []Event
}

func (f *fixed) Next() (Event, error) {
	if len(f.evs) == 0 {
		return Event{}, io.EOF
	}
	e := f.evs[0]
	f.evs = f.evs[1:]
	return e, nil
}
func (f *fixed) Table() string { return f.name }
func (f *fixed) Close() error  { return nil }

func ev(t int64, table string, line int) Event {
	return Event{Time: t, Pos: Pos{File: table, Line: line}}
}

func drain(t *testing.T, s Source) []string {
	t.Helper()
	var got []string
	for {
		e, err := s.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Pos.String())
	}
}

func TestMergeOrdersByTimeThenStream(t *testing.T) {
	m := Merge(Units{}, NewStats(), false,
		&fixed{"a", []Event{ev(0, "a", 1), ev(5, "a", 2), ev(5, "a", 3)}},
		&fixed{"b", []Event{ev(0, "b", 1), ev(0, "b", 2), ev(5, "b", 3), ev(7, "b", 4)}},
	)
	got := strings.Join(drain(t, m), " ")
	if want := "a:1 b:1 b:2 a:2 a:3 b:3 b:4"; got != want {
		t.Fatalf("merged %s, want %s", got, want)
	}
	if m.Stats().Events != 7 {
		t.Errorf("events %d", m.Stats().Events)
	}
}

func TestMergeSkipsTimeGoingBack(t *testing.T) {
	mk := func() *fixed { return &fixed{"a", []Event{ev(3, "a", 1), ev(2, "a", 2), ev(4, "a", 3)}} }
	st := NewStats()
	got := strings.Join(drain(t, Merge(Units{}, st, false, mk())), " ")
	if got != "a:1 a:3" || st.Skipped["a: time: time goes backwards"] != 1 {
		t.Fatalf("lenient: %s, skipped %v", got, st.Skipped)
	}
	m := Merge(Units{}, NewStats(), true, mk())
	m.Next()
	if _, err := m.Next(); !errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), "a:2:") {
		t.Fatalf("strict: %v, want ErrOutOfOrder naming a:2", err)
	}
}

// TasksDone turns true once the last task event is read, though a
// machine table runs on, and stays false while an error read ahead waits to
// be returned.
func TestMergeTasksDone(t *testing.T) {
	kind := func(e Event, k Kind) Event { e.Kind = k; return e }
	m := Merge(Units{}, NewStats(), false,
		&fixed{"machines", []Event{kind(ev(0, "m", 1), MachineAdd), kind(ev(9, "m", 2), MachineRemove)}},
		&fixed{"tasks", []Event{kind(ev(1, "t", 1), TaskSubmit), kind(ev(2, "t", 2), TaskEnd)}},
	)
	var done []bool
	for {
		if _, err := m.Next(); err != nil {
			break
		}
		done = append(done, m.TasksDone())
	}
	if got := fmt.Sprint(done); got != "[false false true true]" {
		t.Errorf("TasksDone after each event %s, want [false false true true]", got)
	}
	bad := &fixed{"tasks", []Event{kind(ev(5, "t", 1), TaskSubmit), kind(ev(4, "t", 2), TaskSubmit)}}
	m = Merge(Units{}, NewStats(), true, bad)
	if _, err := m.Next(); err != nil {
		t.Fatal(err)
	}
	if m.TasksDone() {
		t.Errorf("TasksDone with an out-of-order row read ahead under strict: the error would never be returned")
	}
}

func TestLines(t *testing.T) {
	long := strings.Repeat("x", 300<<10) // longer than the read buffer
	l, err := NewLines(strings.NewReader("a\r\n"+long+"\nlast"), "f")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a", long, "last"} {
		b, err := l.Next()
		if err != nil || string(b) != want || l.Line() != i+1 {
			t.Fatalf("row %d: %d bytes, %v (line %d)", i+1, len(b), err, l.Line())
		}
	}
	if _, err := l.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last: %v", err)
	}
	l, _ = NewLines(strings.NewReader(strings.Repeat("y", MaxLine+10)), "big")
	if _, err := l.Next(); err == nil || !strings.Contains(err.Error(), "big:1:") {
		t.Fatalf("an oversized row: %v", err)
	}
}

func TestCause(t *testing.T) {
	_, err := ParseInt("priority", "x", 0, 11)
	if c := Cause("task_events", err); c != "task_events: priority: not a number" {
		t.Errorf("cause %q", c)
	}
	_, err = ParseInt("priority", "12", 0, 11)
	if c := Cause("task_events", err); c != "task_events: priority: value out of range" {
		t.Errorf("cause %q", c)
	}
	if c := Cause("t", FieldCountError("t", "1,2", ',', 3)); c != "t: wrong number of fields" {
		t.Errorf("cause %q", c)
	}
}

// TestOpenLinesRefusesWhatIsNotATable: a table file that is not what its
// name says (not gzip under .gz), an empty one and a gzip cut short are
// errors naming the file (and where the reading stopped), never no rows;
// gzip and plain files of rows read alike.
func TestOpenLinesRefusesWhatIsNotATable(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for i := range 2000 {
		fmt.Fprintf(zw, "%d,row of a table with some text to compress poorly %x\n", i, i*7919)
	}
	zw.Close()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	readAll := func(p string) (int, error) {
		l, err := OpenLines(p)
		if err != nil {
			return 0, err
		}
		defer l.Close()
		n := 0
		for {
			if _, err := l.Next(); errors.Is(err, io.EOF) {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	for _, tc := range []struct {
		name string
		body []byte
		rows int
		want string
	}{
		{"rows.csv.gz", gz.Bytes(), 2000, ""},
		{"rows.csv", []byte("a,b\nc,d\n"), 2, ""},
		{"plain.csv.gz", []byte("a,b\nc,d\n"), 0, `not gzip, though its name says so: it starts "a,", not gzip's 1f 8b`},
		{"empty.csv.gz", nil, 0, "the file is empty (0 bytes)"},
		{"empty.csv", nil, 0, "the file is empty (0 bytes)"},
		{"cut.csv.gz", gz.Bytes()[:gz.Len()/2], -1, fmt.Sprintf("gzip, having read %d bytes of the file: the file is cut short or corrupt: unexpected EOF", gz.Len()/2)},
	} {
		p := write(tc.name, tc.body)
		n, err := readAll(p)
		switch {
		case tc.want == "" && (err != nil || n != tc.rows):
			t.Errorf("%s: %d rows, %v; want %d rows", tc.name, n, err, tc.rows)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), p+":") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %d rows, %v; want an error naming the file and %q", tc.name, n, err, tc.want)
		}
	}
}
