package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimBadInput: bad flags and config files are errors naming the field.
func TestSimBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("machines: 100\nmachinez: 3\n"), 0o644)
	wrongType := filepath.Join(dir, "type.yaml")
	os.WriteFile(wrongType, []byte("days: lots\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--json", "--schedulers", "batch"}, "--schedulers"},
		{[]string{"sim", "--json", "--schedulers", "batch=x,service=1"}, "--schedulers"},
		{[]string{"sim", "--json", "--t-job", "batch=fast"}, "--t-job"},
		{[]string{"sim", "--json", "--conflict", "medium"}, "--conflict"},
		{[]string{"sim", "--json", "--mapreduce-policy", "greedy"}, "--mapreduce-policy"},
		{[]string{"sim", "--json", "--decision-time", "wall"}, "--decision-time"},
		{[]string{"sim", "--json", "--load", "0"}, "--load"},
		{[]string{"sim", "--json", "--schedulers", "service=1"}, "batch"},
		{[]string{"sim", "--json", "--schedulers", "batch=1,service=1,magic=1"}, "magic"},
		{[]string{"sim", "--schedulers", "batch=1,service=1"}, "--out"},
		{[]string{"sim", "--json", "--config", bad}, "machinez"},
		{[]string{"sim", "--json", "--config", wrongType}, "days"},
		{[]string{"sim", "--json", "--config", filepath.Join(dir, "absent.yaml")}, "--config"},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}

// TestSimOutputsDeterministic: a run writes the four files, and two runs
// with one seed write the same bytes (summary.json outside its host object).
func TestSimOutputsDeterministic(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	os.WriteFile(cfg, []byte("machines: 100\ndays: 0.01\nschedulers: {batch: 1, service: 1, mapreduce: 1}\nt_job: {service: 2s}\nseed: 4\n"), 0o644)
	var outs [2]string
	for i := range outs {
		outs[i] = t.TempDir()
		if _, err := run(t, "sim", "--config", cfg, "--out", outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"summary.json", "jobs.csv", "schedulers.csv", "utilization.csv"} {
		a, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(outs[1], name))
		if name == "summary.json" {
			a, b = withoutHost(t, a), withoutHost(t, b)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with one seed", name)
		}
		if len(a) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	var s map[string]any
	b, _ := os.ReadFile(filepath.Join(outs[0], "summary.json"))
	json.Unmarshal(b, &s)
	if s["seed"].(float64) != 4 || s["machines"].(float64) != 100 || len(s["schedulers"].([]any)) != 3 {
		t.Errorf("summary does not reflect the config: %v", s)
	}
}

func withoutHost(t *testing.T, b []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "host")
	out, _ := json.Marshal(m)
	return out
}

// TestSimSeedsInParallel: --seeds run side by side (--jobs) give, seed by
// seed, the same files as run one after another, and each seed's files
// are its own run's (a single-seed run of the same seed matches them).
func TestSimSeedsInParallel(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	os.WriteFile(cfg, []byte("machines: 100\ndays: 0.01\nschedulers: {batch: 1, service: 1}\nt_job: {service: 2s}\nseed: 7\n"), 0o644)
	one, par, alone := t.TempDir(), t.TempDir(), t.TempDir()
	if _, err := run(t, "sim", "--config", cfg, "--seeds", "3", "--jobs", "1", "--out", one); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "sim", "--config", cfg, "--seeds", "3", "--jobs", "3", "--out", par); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "sim", "--config", cfg, "--seed", "8", "--out", alone); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []string{"seed-7", "seed-8", "seed-9"} {
		for _, name := range []string{"summary.json", "jobs.csv", "schedulers.csv", "utilization.csv"} {
			a, err := os.ReadFile(filepath.Join(one, seed, name))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(par, seed, name))
			if err != nil {
				t.Fatal(err)
			}
			if name == "summary.json" {
				a, b = withoutHost(t, a), withoutHost(t, b)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s/%s differs between --jobs 1 and --jobs 3", seed, name)
			}
			if seed == "seed-8" {
				c, _ := os.ReadFile(filepath.Join(alone, name))
				if name == "summary.json" {
					c = withoutHost(t, c)
				}
				if !bytes.Equal(b, c) {
					t.Errorf("%s: seed 8 beside others differs from seed 8 alone", name)
				}
			}
		}
	}
	if _, err := run(t, "sim", "--config", cfg, "--seeds", "2", "--jobs", "0", "--out", t.TempDir()); err == nil {
		t.Error("--jobs 0 was taken")
	}
}
