// Package script runs scripted protocol tests: a file in testdata/ is a
// sequence of commands, each with the output the test expects, in the
// manner of etcd-io/raft's interaction tests (cockroachdb/datadriven's
// format, which is not served here). A test hands Run a function that
// carries out one command against the real code and returns what it
// printed; Run compares it with the file, and with -rewrite writes the
// file anew with the outputs the code gave.
//
// The format, one command after another:
//
//	# a comment, up to the end of its line (blank lines between commands too)
//	name arg key=value key=(v1,v2)
//	optional input lines
//	----
//	the expected output, up to a blank line
//
// An output that holds blank lines is written between two separators,
// "----\n----\n" before it and "----\n----\n" after, so that the file
// still reads back. An empty output is the separator alone.
//
// Only test code imports it; it is below every layer.
package script

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "scripted tests (internal/script): write each testdata file anew with the outputs the code gave")

// Command is one command of a script.
type Command struct {
	// Pos is where it is: "file:line".
	Pos string
	// Name is the command's first word.
	Name string
	// Args are its arguments in order.
	Args []Arg
	// Input is the text between the command's line and its separator,
	// without the last newline ("" when there is none).
	Input string

	want string // the expected output, as in the file
}

// Arg is an argument: a bare word (Key set, Vals empty), key=value or
// key=(v1,v2,...).
type Arg struct {
	Key  string
	Vals []string
}

// Has says whether the command has an argument named key.
func (c *Command) Has(key string) bool {
	_, ok := c.arg(key)
	return ok
}

func (c *Command) arg(key string) (Arg, bool) {
	for _, a := range c.Args {
		if a.Key == key {
			return a, true
		}
	}
	return Arg{}, false
}

// String returns the one value of key, or def when the command has no
// such argument. A key given with several values, or none, fails the test.
func (c *Command) String(t testing.TB, key, def string) string {
	t.Helper()
	a, ok := c.arg(key)
	if !ok {
		return def
	}
	if len(a.Vals) != 1 {
		t.Fatalf("%s: %s %s: want one value, got %d", c.Pos, c.Name, key, len(a.Vals))
	}
	return a.Vals[0]
}

// Strings returns the values of key (nil when the command has none).
func (c *Command) Strings(key string) []string {
	a, _ := c.arg(key)
	return a.Vals
}

// Int returns key's value as an integer, or def.
func (c *Command) Int(t testing.TB, key string, def int64) int64 {
	t.Helper()
	s := c.String(t, key, "")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s %s=%q: %v", c.Pos, c.Name, key, s, err)
	}
	return n
}

// Fatalf fails the test at the command's position.
func (c *Command) Fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s: %s: %s", c.Pos, c.Name, fmt.Sprintf(format, args...))
}

// Run runs the script in path: each command through do, whose returned
// text must equal the command's expected output (a missing final newline
// is added). With -rewrite the file is written anew with do's outputs
// instead, its commands and comments kept. Commands run in order in one
// test, so state carries from one to the next; the first output that
// differs fails the test, naming the command's line.
func Run(t *testing.T, path string, do func(t *testing.T, c *Command) string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text, err := run(path, string(src), *rewrite, func(c *Command) string { return do(t, c) })
	if err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs the script src (from file) through do. It returns the first
// output that differs as an error, or, with rewrite, the script written
// anew with do's outputs.
func run(file, src string, rewrite bool, do func(c *Command) string) (string, error) {
	p := parser{file: file, lines: strings.Split(src, "\n")}
	var out bytes.Buffer
	for {
		pre, c, err := p.next()
		if err != nil {
			return "", err
		}
		out.WriteString(pre)
		if c == nil {
			break
		}
		got := do(c)
		if got != "" && !strings.HasSuffix(got, "\n") {
			got += "\n"
		}
		if rewrite {
			out.WriteString(c.header())
			writeOutput(&out, got)
			continue
		}
		if got != c.want {
			return "", fmt.Errorf("%s: %s: output differs (go test -rewrite writes it anew)\n--- want\n%s--- got\n%s", c.Pos, c.Name, c.want, got)
		}
	}
	return strings.TrimRight(out.String(), "\n") + "\n", nil
}

// header is the command as the file gives it, up to its separator.
func (c *Command) header() string {
	var b strings.Builder
	b.WriteString(c.Name)
	for _, a := range c.Args {
		b.WriteByte(' ')
		b.WriteString(a.Key)
		switch len(a.Vals) {
		case 0:
		case 1:
			b.WriteString("=" + a.Vals[0])
		default:
			b.WriteString("=(" + strings.Join(a.Vals, ",") + ")")
		}
	}
	b.WriteByte('\n')
	if c.Input != "" {
		b.WriteString(c.Input + "\n")
	}
	return b.String()
}

func writeOutput(w *bytes.Buffer, got string) {
	if strings.Contains(got, "\n\n") || strings.HasPrefix(got, "\n") {
		w.WriteString("----\n----\n" + got + "----\n----\n\n")
		return
	}
	w.WriteString("----\n" + got + "\n")
}

type parser struct {
	file  string
	lines []string
	at    int // the next line, 0-based
}

// next returns the comments and blank lines before the next command, and
// the command (nil at the end of the file).
func (p *parser) next() (string, *Command, error) {
	var pre strings.Builder
	for p.at < len(p.lines) {
		l := p.lines[p.at]
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			if p.at < len(p.lines)-1 || l != "" {
				pre.WriteString(l + "\n")
			}
			p.at++
			continue
		}
		break
	}
	if p.at >= len(p.lines) {
		return pre.String(), nil, nil
	}
	c := &Command{Pos: fmt.Sprintf("%s:%d", p.file, p.at+1)}
	fields, err := splitArgs(p.lines[p.at])
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", c.Pos, err)
	}
	c.Name = fields[0]
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		a := Arg{Key: k}
		switch {
		case !ok:
		case strings.HasPrefix(v, "(") && strings.HasSuffix(v, ")"):
			if in := v[1 : len(v)-1]; in != "" {
				a.Vals = strings.Split(in, ",")
			}
		default:
			a.Vals = []string{v}
		}
		c.Args = append(c.Args, a)
	}
	p.at++
	var input []string
	for ; p.at < len(p.lines) && p.lines[p.at] != "----"; p.at++ {
		input = append(input, p.lines[p.at])
	}
	if p.at >= len(p.lines) {
		return "", nil, fmt.Errorf("%s: %s: no ---- separator before the end of the file", c.Pos, c.Name)
	}
	c.Input = strings.Join(input, "\n")
	p.at++                                              // the separator
	if p.at < len(p.lines) && p.lines[p.at] == "----" { // the blank-line form
		p.at++
		var b strings.Builder
		for ; ; p.at++ {
			if p.at+1 >= len(p.lines) {
				return "", nil, fmt.Errorf("%s: %s: an output opened with ----/---- is not closed", c.Pos, c.Name)
			}
			if p.lines[p.at] == "----" && p.lines[p.at+1] == "----" {
				p.at += 2
				break
			}
			b.WriteString(p.lines[p.at] + "\n")
		}
		c.want = b.String()
		if p.at < len(p.lines) && p.lines[p.at] == "" {
			p.at++
		}
		return pre.String(), c, nil
	}
	var b strings.Builder
	for ; p.at < len(p.lines) && p.lines[p.at] != ""; p.at++ {
		b.WriteString(p.lines[p.at] + "\n")
	}
	if p.at < len(p.lines) {
		p.at++ // the blank line that ends it
	}
	c.want = b.String()
	return pre.String(), c, nil
}

// splitArgs splits a command line at spaces outside parentheses.
func splitArgs(l string) ([]string, error) {
	var out []string
	depth, start := 0, -1
	for i, r := range l {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth == 0 {
				return nil, fmt.Errorf("%q: a ) with no (", trunc(l))
			}
			depth--
		case (r == ' ' || r == '\t') && depth == 0:
			if start >= 0 {
				out = append(out, l[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: a ( not closed", trunc(l))
	}
	if start >= 0 {
		out = append(out, l[start:])
	}
	return out, nil
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
