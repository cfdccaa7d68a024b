package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuildsInAModuleOfItsOwn: the README's way of plugging in a scheduler
// works from outside this module. The example's source is copied into a
// module of its own in a temporary directory (omega required through a
// replace directive, as a user's go.mod would while developing against a
// checkout), built with the modules omega's own build fetched, and run in a
// short simulation, where its scheduler takes the workload's batch jobs.
// Importing internal/cli, as the example once did, fails here.
func TestBuildsInAModuleOfItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary in a module of its own")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Skipf("no go tool at %s", goTool)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(src), "/internal/") {
		t.Fatalf("the example imports an internal package, which no module but omega's may")
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/mysched\n\ngo 1.26\n\nrequire github.com/omega-cell/omega v0.0.0\n\nreplace github.com/omega-cell/omega => " + root + "\n"
	for name, body := range map[string][]byte{"main.go": src, "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off") // modules from the cache, else the module proxy
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}
	run(goTool, "mod", "tidy")
	bin := filepath.Join(dir, "mysched")
	run(goTool, "build", "-o", bin, ".")
	out := filepath.Join(dir, "out")
	stdout := run(bin, "sim", "--days", "0.01", "--machines", "100", "--schedulers", "leastloaded=1,service=1",
		"--route", "batch=leastloaded", "--out", out, "--json")
	var sum2 struct {
		Schedulers []struct {
			Kind          string `json:"kind"`
			JobsScheduled int    `json:"jobs_scheduled"`
		} `json:"schedulers"`
	}
	if err := json.Unmarshal(stdout, &sum2); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	for _, s := range sum2.Schedulers {
		if s.Kind == "leastloaded" && s.JobsScheduled > 0 {
			return
		}
	}
	t.Fatalf("the custom scheduler scheduled nothing: %s", stdout)
}
