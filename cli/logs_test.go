package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omega-cell/omega/agents/process"
)

// streamLogs against an agent's endpoint: the output, and errors that say
// what went wrong (a refused token, a task the agent has no output of, an
// agent that does not answer, a stream cut short).
func TestStreamLogs(t *testing.T) {
	dir := t.TempDir()
	uid := "61305e98-5c10-4223-ad9a-794a78973a3b"
	os.MkdirAll(filepath.Join(dir, uid), 0o755)
	os.WriteFile(filepath.Join(dir, uid, "stdout"), []byte("one\ntwo\n"), 0o644)
	os.WriteFile(filepath.Join(dir, uid, "stderr"), []byte("err\n"), 0o644)
	srv := httptest.NewServer((&process.LogServer{Dir: dir, Tokens: []string{"logs-0123456789abcdef"}}).Handler())
	defer srv.Close()
	req := logsRequest{base: srv.URL, machine: "m1", task: "echo-0", uid: uid, stream: "stdout", tail: -1, token: "logs-0123456789abcdef"}
	ctx := context.Background()
	var out bytes.Buffer
	if err := streamLogs(ctx, &out, req); err != nil || out.String() != "one\ntwo\n" {
		t.Fatalf("stdout %q, %v", out.String(), err)
	}
	out.Reset()
	r := req
	r.stream, r.tail = "stderr", 0
	if err := streamLogs(ctx, &out, r); err != nil || out.String() != "" {
		t.Fatalf("stderr, tail 0: %q, %v", out.String(), err)
	}
	r = req
	r.tail = 1
	out.Reset()
	if err := streamLogs(ctx, &out, r); err != nil || out.String() != "two\n" {
		t.Fatalf("tail 1: %q, %v", out.String(), err)
	}
	for name, tc := range map[string]struct {
		mod  func(*logsRequest)
		want string
	}{
		"no token":     {func(r *logsRequest) { r.token = "" }, "the agent of machine m1 refused: no token"},
		"wrong token":  {func(r *logsRequest) { r.token = "nope-0123456789abcdef" }, "refused: unknown token"},
		"unknown task": {func(r *logsRequest) { r.uid = "71305e98-5c10-4223-ad9a-794a78973a3b" }, "task echo-0 has no output on machine m1 yet"},
		"unreachable":  {func(r *logsRequest) { r.base = "http://" + closedAddr(t) }, "the agent of machine m1 is unreachable at http://"},
	} {
		r := req
		tc.mod(&r)
		if err := streamLogs(ctx, &out, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// An agent that goes away in the middle of a stream.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial\n"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer cut.Close()
	r = req
	r.base = cut.URL
	out.Reset()
	if err := streamLogs(ctx, &out, r); err == nil || !strings.Contains(err.Error(), "was cut after 8 bytes") || out.String() != "partial\n" {
		t.Fatalf("a cut stream: %v, %q", err, out.String())
	}
}

func closedAddr(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	a := srv.Listener.Addr().String()
	srv.Close()
	return a
}
