package experiment

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the plan goldens in testdata/ to what the code prints (review the diff: the lines format must not move)")

// golden compares got with testdata/name, or rewrites the file with
// -rewrite.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./bench/experiment -run %s -rewrite writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from what the code prints:\n%s\nwant:\n%s", path, got, want)
	}
}

// The plan's command lines, byte for byte as the first plans printed them
// (scripts and batch systems read them): a synthetic sweep with values
// that need quoting, and a replay's.
func TestPlanLinesGolden(t *testing.T) {
	e, _ := Lookup("mapreduce")
	s, err := NewSweep(e, Size{Quick: true}, []Param{{"load", "1 2"}, {"days", "0.1"}}, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.Plan(&b, "/opt/omega bin/omega", "/out dir/it's"); err != nil {
		t.Fatal(err)
	}
	r, _ := Lookup("replay")
	s, err = NewSweep(r, Size{Quick: true}, []Param{{"format", "google2011"}, {"trace", "/traces/google 2011"}, {"to", "1h"}}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Plan(&b, "omega", "out"); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-lines.txt", b.String())
}
