package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestBenchStoreBadFlags: a bad value is an error that names the flag.
func TestBenchStoreBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "store", "--conflict", "medium"}, "--conflict"},
		{[]string{"bench", "store", "--commit", "some"}, "--commit"},
		{[]string{"bench", "store", "--durability", "maybe"}, "--durability"},
		{[]string{"bench", "store", "--machines", "0"}, "machines"},
		{[]string{"bench", "store", "--utilization", "2"}, "utilization"},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}

// TestBenchStoreJSON: --json prints one object with the figures the issue
// names.
func TestBenchStoreJSON(t *testing.T) {
	out, err := run(t, "bench", "store", "--json", "--machines", "100", "--fill", "400", "--committers", "2",
		"--claims", "10", "--duration", "200ms", "--warmup", "200ms", "--dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"claims_per_sec", "txns_per_sec", "commit_p50_ms", "commit_p99_ms", "conflict_fraction",
		"pebble_claims_per_sec", "pebble_commit_p99_ms", "ratio_to_pebble", "view_us", "rss_mb"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if rep["claims_per_sec"].(float64) <= 0 {
		t.Errorf("claims_per_sec %v", rep["claims_per_sec"])
	}
}

// A command a program adds to the tree after newRootCmd (as one built on
// cli.NewRootCommand does) honours --cpuprofile and --memprofile too.
func TestProfilesOfAnAddedCommand(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	root := newRootCmd()
	ran := 0
	root.AddCommand(&cobra.Command{Use: "mine", RunE: func(*cobra.Command, []string) error { ran++; return nil }})
	root.SetArgs([]string{"mine", "--cpuprofile", cpu, "--memprofile", mem})
	if err := root.Execute(); err != nil || ran != 1 {
		t.Fatalf("execute: ran %d, %v", ran, err)
	}
	for _, p := range []string{cpu, mem} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", p, err)
		}
	}
}
