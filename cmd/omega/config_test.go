package main_test

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestClientConfigLive: a context names the cell's servers (the first not
// listening: the client moves on to the next), and a command with no
// --server reaches the cell through it; OMEGA_SERVER wins over the
// context and a flag over both; `omega version` says what was built.
func TestClientConfigLive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	t.Setenv("OMEGA_CONFIG", filepath.Join(t.TempDir(), "omega", "config.yaml"))
	t.Setenv("OMEGA_SERVER", "")
	t.Setenv("OMEGA_CONTEXT", "")
	closed := freePort(t)
	if _, errs, err := run(t, "", "config", "set-context", "lab", "--server", closed+","+srv.grpc); err != nil {
		t.Fatalf("set-context: %v\n%s", err, errs)
	}
	out, errs, err := run(t, "", "config", "get-contexts")
	if err != nil || !strings.Contains(out, "*        lab") {
		t.Fatalf("get-contexts: %v\n%s%s", err, out, errs)
	}
	if out, errs, err := run(t, "", "get", "machines", "-o", "json"); err != nil || !strings.Contains(out, `"items"`) {
		t.Fatalf("get machines through the context: %v\n%s%s", err, out, errs)
	}

	t.Setenv("OMEGA_SERVER", closed)
	_, errs, err = run(t, "", "get", "machines", "--wait", "0")
	if err == nil || !strings.Contains(errs, "nothing listens at --server") || !strings.Contains(errs, closed) {
		t.Fatalf("with OMEGA_SERVER=%s: %v\n%s", closed, err, errs)
	}
	if _, errs, err := run(t, "", "get", "machines", "--server", srv.grpc); err != nil {
		t.Fatalf("--server over OMEGA_SERVER: %v\n%s", err, errs)
	}

	out, errs, err = run(t, "", "version", "-o", "json")
	var v struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
		Platform  string `json:"platform"`
	}
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("version: %v %+v\n%s%s", err, v, out, errs)
	}
}
