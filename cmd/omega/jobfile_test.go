package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitRefusesBadJobFiles: the trial of the README's
// walk-through against the binary. `omega submit` refuses a job file whose
// name is no DNS label, whose replicas are 0 or whose cpu is negative, each
// by an error naming the file, the field and the value (a long name cut to
// 64 bytes), and the cell is left without a job; a good file still goes in.
func TestSubmitRefusesBadJobFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	dir := t.TempDir()
	job := func(name, replicas, cpu string) string {
		return "meta:\n  name: " + name + "\nspec:\n  replicas: " + replicas +
			"\n  template:\n    resources: {cpu: " + cpu + ", memory: 64Mi}\n    command: {path: /bin/true}\n"
	}
	long := strings.Repeat("a", 5000)
	for _, tc := range []struct{ what, src, says string }{
		{"a name with a capital, a space and a bang", job(`"Bad Name!"`, "1", "100m"), `meta.name: "Bad Name!": not a DNS label`},
		{"a name with a dot", job("web.1", "1", "100m"), `meta.name: "web.1": not a DNS label`},
		{"a name of 5,000 bytes", job(long, "1", "100m"), `meta.name: "` + strings.Repeat("a", 61) + `…" (5000 bytes): not a DNS label`},
		{"no replicas", job("web", "0", "100m"), ":4:13: spec.replicas: 0: want at least 1"},
		{"a negative cpu", job("web", "1", "-1"), ":6:22: spec.template.resources.cpu: -1: negative"},
		{"a scheduler's name in capitals", job("web", "1", "100m") + "  scheduler: Batch\n", `spec.scheduler: "Batch": not a DNS label`},
	} {
		file := filepath.Join(dir, "job.yaml")
		if err := os.WriteFile(file, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, err := run(t, "", "submit", "-f", file, "--server", srv.grpc)
		if err == nil || !strings.Contains(errs, file) || !strings.Contains(errs, tc.says) || len(errs) > 1000 {
			t.Errorf("%s: %v\n%s%.1000s\nwant an error saying %q", tc.what, err, out, errs, tc.says)
		}
	}
	if out, errs, err := run(t, "", "get", "jobs", "--server", srv.grpc); err != nil || strings.Contains(out, "web") || strings.Contains(out, "Bad") {
		t.Fatalf("get jobs after the refusals: %v\n%s%s", err, out, errs)
	}
	file := filepath.Join(dir, "good.yaml")
	os.WriteFile(file, []byte(job("web-1", "2", "100m")), 0o644)
	if out, errs, err := run(t, "", "submit", "-f", file, "--server", srv.grpc); err != nil || !strings.Contains(out, "job/web-1 created") || !strings.Contains(out, "2 tasks") {
		t.Fatalf("a good file: %v\n%s%s", err, out, errs)
	}
}
