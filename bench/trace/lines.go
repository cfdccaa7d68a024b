package trace

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

// MaxLine bounds a row; real rows are under a kilobyte.
const MaxLine = 1 << 20

// Lines reads the rows of one table file, gzip-compressed or not (told by
// its magic bytes), a row at a time, counting lines for errors. A file
// named .gz must be gzip, and a file opened by OpenLines may not be empty:
// a trace's table file that is either is not what it says, and reading it
// as no rows would replay nothing without a word.
type Lines struct {
	name string
	br   *bufio.Reader
	gz   *gzip.Reader
	in   *countingReader // the file's bytes read so far, for errors
	file *os.File        // owned, closed by Close; nil if the caller owns the input
	line int
	long []byte // a row longer than the buffer, assembled
}

// countingReader counts what it reads.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// NewLines reads rows from r; name is used in errors (and a name ending in
// .gz says the input must be gzip). Close releases the decompressor but
// does not close r.
func NewLines(r io.Reader, name string) (*Lines, error) {
	in := &countingReader{r: r}
	br := bufio.NewReaderSize(in, 256<<10)
	l := &Lines{name: name, in: in}
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case len(magic) == 0:
		// No rows (OpenLines refuses an empty file).
	case bytes.Equal(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip, at byte %d of the file: %w", name, in.n, err)
		}
		l.gz = gz
		br = bufio.NewReaderSize(gz, 256<<10)
	case strings.HasSuffix(name, ".gz"):
		return nil, fmt.Errorf("%s: not gzip, though its name says so: it starts %s, not gzip's 1f 8b", name, strconv.Quote(string(magic)))
	}
	l.br = br
	return l, nil
}

// OpenLines opens a table file; Close closes it. An empty file is refused.
func OpenLines(path string) (*Lines, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		f.Close()
		return nil, fmt.Errorf("%s: the file is empty (0 bytes): a table file holds rows", path)
	}
	l, err := NewLines(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	l.file = f
	return l, nil
}

// Name is the file's name, as errors give it.
func (l *Lines) Name() string { return l.name }

// Line is the 1-based number of the row Next returned last.
func (l *Lines) Line() int { return l.line }

// Pos is the place of the row Next returned last.
func (l *Lines) Pos() Pos { return Pos{File: l.name, Line: l.line} }

// Next returns the next row without its line end (a trailing "\r" too),
// valid until the next call, or io.EOF. A read or decompression error is a
// *ParseError naming the file and the line it stopped at.
func (l *Lines) Next() ([]byte, error) {
	b, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) && len(l.long) <= MaxLine {
			b, err = l.br.ReadSlice('\n')
			l.long = append(l.long, b...)
		}
		if len(l.long) > MaxLine {
			l.line++
			return nil, &ParseError{File: l.name, Line: l.line, Err: fmt.Errorf("row longer than %d bytes", MaxLine)}
		}
		b = l.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if l.gz != nil {
			// The decompressor's error: say where in the file it stopped.
			err = fmt.Errorf("gzip, having read %d bytes of the file: the file is cut short or corrupt: %w", l.in.n, err)
		}
		return nil, &ParseError{File: l.name, Line: l.line + 1, Err: err}
	}
	if len(b) == 0 && errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	l.line++
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, nil
}

// Wrap gives a row's error the file and line it came from.
func (l *Lines) Wrap(err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		pe.File, pe.Line = l.name, l.line
		return pe
	}
	return &ParseError{File: l.name, Line: l.line, Err: err}
}

// Close releases the reader (and closes the file if OpenLines opened it).
func (l *Lines) Close() error {
	var err error
	if l.gz != nil {
		err = l.gz.Close()
	}
	if l.file != nil {
		if cerr := l.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// SplitFields splits a row at sep into out and reports whether it had
// exactly len(out) fields. The fields share the row's memory.
func SplitFields(line string, sep byte, out []string) bool {
	for i := range out {
		if i == len(out)-1 {
			if strings.IndexByte(line, sep) >= 0 {
				return false
			}
			out[i] = line
			return true
		}
		j := strings.IndexByte(line, sep)
		if j < 0 {
			return false
		}
		out[i], line = line[:j], line[j+1:]
	}
	return true
}

// CountFields is the number of sep-separated fields in a row.
func CountFields(line string, sep byte) int { return strings.Count(line, string(sep)) + 1 }

// FieldCountError is the error of a row with the wrong number of fields.
func FieldCountError(table, line string, sep byte, want int) *ParseError {
	return FieldError("", line, fmt.Errorf("%w: %s has %d, got %d", ErrFieldCount, table, want, CountFields(line, sep)))
}

// ParseInt parses a required decimal int64 in [lo, hi].
func ParseInt(field, s string, lo, hi int64) (int64, error) {
	if s == "" {
		return 0, FieldError(field, s, ErrMissing)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, FieldError(field, s, err)
	}
	if v < lo || v > hi {
		return 0, FieldError(field, s, ErrOutOfRange)
	}
	return v, nil
}

// ParseOptInt parses an optional non-negative int64; ok is false for an
// empty field.
func ParseOptInt(field, s string) (v int64, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	v, err = ParseInt(field, s, 0, math.MaxInt64)
	return v, err == nil, err
}

// ParseFloat parses a required finite float in [lo, hi].
func ParseFloat(field, s string, lo, hi float64) (float64, error) {
	if s == "" {
		return 0, FieldError(field, s, ErrMissing)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, FieldError(field, s, err)
	}
	if math.IsNaN(v) || v < lo || v > hi {
		return 0, FieldError(field, s, ErrOutOfRange)
	}
	return v, nil
}

// ParseAmount parses an optional finite non-negative amount: an empty
// field is unknown, never zero.
func ParseAmount(field, s string) (Amount, error) {
	if s == "" {
		return Amount{}, nil
	}
	v, err := ParseFloat(field, s, 0, math.MaxFloat64)
	if err != nil {
		return Amount{}, err
	}
	return Known(v), nil
}

// Interner shares the strings of columns with few distinct values (users,
// platforms), up to a bound.
type Interner map[string]string

// Intern returns s, shared (and copied out of the row's memory) when seen
// before.
func (in Interner) Intern(b string) string {
	if v, ok := in[b]; ok {
		return v
	}
	s := strings.Clone(b)
	if len(in) < 1<<16 {
		in[s] = s
	}
	return s
}
