package script

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// counter is the scripted model the tests run: add n [tags], echo, reset.
func counter() func(c *Command) string {
	n := int64(0)
	return func(c *Command) string {
		switch c.Name {
		case "add":
			v, err := parseInt(c.Strings("n"))
			if err != nil {
				return err.Error()
			}
			n += v
			out := itoa(n)
			if tags := c.Strings("tags"); tags != nil {
				out += " [" + strings.Join(tags, " ") + "]"
			}
			return out
		case "echo":
			return c.Input
		case "reset":
			n = 0
			return ""
		}
		return "unknown command " + c.Name
	}
}

func parseInt(vals []string) (int64, error) {
	var n int64
	for _, r := range strings.Join(vals, "") {
		n = n*10 + int64(r-'0')
	}
	return n, nil
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestRunPassesOnMatchingOutputs(t *testing.T) {
	do := counter()
	Run(t, "testdata/counter.txt", func(_ *testing.T, c *Command) string { return do(c) })
}

func TestRunReportsTheFirstDifferingCommandByLine(t *testing.T) {
	src, err := os.ReadFile("testdata/counter.txt")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "5 [a b]", "6 [a b]", 1)
	_, err = run("counter.txt", bad, false, counter())
	if err == nil || !strings.Contains(err.Error(), "counter.txt:6: add: output differs") {
		t.Fatalf("err = %v, want the add at line 6 named", err)
	}
}

// Rewriting a script whose outputs are right gives the same file back; a
// wrong or missing output is replaced by the code's.
func TestRewriteRoundTrips(t *testing.T) {
	src, err := os.ReadFile("testdata/counter.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := run("counter.txt", string(src), true, counter())
	if err != nil {
		t.Fatal(err)
	}
	if got != string(src) {
		t.Fatalf("rewrite changed a script whose outputs were right:\n%s", got)
	}
	stale := strings.Replace(string(src), "5 [a b]", "stale", 1)
	stale = strings.Replace(stale, "reset\n----\n", "reset\n----\nleftover\n", 1)
	if got, err = run("counter.txt", stale, true, counter()); err != nil {
		t.Fatal(err)
	}
	if got != string(src) {
		t.Fatalf("rewrite did not restore the outputs:\n%s", got)
	}
	// And through the file, as -rewrite does.
	p := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(p, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	*rewrite = true
	defer func() { *rewrite = false }()
	do := counter()
	Run(t, p, func(_ *testing.T, c *Command) string { return do(c) })
	if b, _ := os.ReadFile(p); string(b) != string(src) {
		t.Fatalf("Run -rewrite wrote:\n%s", b)
	}
}

func TestMalformedScriptsAreRefusedWithTheirLine(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"add n=1\n", "s.txt:1: add: no ---- separator"},
		{"\n\nadd tags=(a,b\n----\n", "s.txt:3: \"add tags=(a,b\": a ( not closed"},
		{"echo\n----\n----\nnever closed\n", "s.txt:1: echo: an output opened with ----/---- is not closed"},
	} {
		_, err := run("s.txt", tc.src, false, counter())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}
