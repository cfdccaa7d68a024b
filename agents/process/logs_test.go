package process

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/internal/testkit"
)

// logTask makes a task directory under dir with the given stdout and
// stderr, and returns its uid.
func logTask(t *testing.T, dir string, n uint32, stdout, stderr string) string {
	t.Helper()
	uid := testkit.UID('t', n, 0).String()
	td := filepath.Join(dir, uid)
	if err := os.MkdirAll(td, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(td, fileStdout), []byte(stdout), 0o644)
	os.WriteFile(filepath.Join(td, fileStderr), []byte(stderr), 0o644)
	return uid
}

// get GETs path from srv (bounded) and returns the status, the body and
// the response.
func get(t *testing.T, srv *httptest.Server, path, token string) (int, string, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b), resp
}

// The endpoint serves a task's stdout or stderr, from an offset or its
// last lines; bad requests are 400 and say what is wrong, an unknown task
// is 404.
func TestLogsReadAndRange(t *testing.T) {
	dir := t.TempDir()
	uid := logTask(t, dir, 1, "line 1\nline 2\nline 3\n", "oops\n")
	noNL := logTask(t, dir, 2, "a\nb\nc", "")
	srv := httptest.NewServer((&LogServer{Dir: dir}).Handler())
	defer srv.Close()
	base := "/v1/tasks/" + uid + "/logs"
	for _, tc := range []struct {
		path, want, offset string
	}{
		{base, "line 1\nline 2\nline 3\n", "0"},
		{base + "?stream=stdout", "line 1\nline 2\nline 3\n", "0"},
		{base + "?stream=stderr", "oops\n", "0"},
		{base + "?offset=7", "line 2\nline 3\n", "7"},
		{base + "?offset=100", "", "100"},
		{base + "?tail=1", "line 3\n", "14"},
		{base + "?tail=2", "line 2\nline 3\n", "7"},
		{base + "?tail=3", "line 1\nline 2\nline 3\n", "0"},
		{base + "?tail=9", "line 1\nline 2\nline 3\n", "0"},
		{base + "?tail=0", "", "21"},
		{"/v1/tasks/" + noNL + "/logs?tail=1", "c", "4"},
		{"/v1/tasks/" + noNL + "/logs?tail=2", "b\nc", "2"},
		{"/v1/tasks/" + noNL + "/logs?stream=stderr", "", "0"},
	} {
		code, body, resp := get(t, srv, tc.path, "")
		if code != http.StatusOK || body != tc.want || resp.Header.Get(LogOffsetHeader) != tc.offset {
			t.Errorf("GET %s: %d %q offset %s, want 200 %q offset %s", tc.path, code, body, resp.Header.Get(LogOffsetHeader), tc.want, tc.offset)
		}
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/tasks/nope/logs", 400, "not a uid"},
		{"/v1/tasks/../logs", 404, ""},
		{base + "?stream=stdin", 400, "want stdout or stderr"},
		{base + "?offset=-1", 400, "offset"},
		{base + "?offset=x", 400, "offset"},
		{base + "?tail=-2", 400, "tail"},
		{base + "?tail=1&offset=3", 400, "one or the other"},
		{base + "?follow=maybe", 400, "follow"},
		{"/v1/tasks/" + testkit.UID('t', 9, 0).String() + "/logs", 404, "has not started here"},
	} {
		code, body, _ := get(t, srv, tc.path, "")
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want %d and %q", tc.path, code, body, tc.code, tc.want)
		}
	}
}

// TailOffset over more than one read's worth of lines.
func TestTailOffsetLongFile(t *testing.T) {
	var b strings.Builder
	for i := range 20000 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte(b.String()), 0o644)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{1, 2, 5000, 19999, 20000, 20001} {
		off, err := TailOffset(f, n)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String()[off:], "\n"), "\n")
		want := min(n, 20000)
		if len(lines) != want || lines[len(lines)-1] != "line 19999" || (n < 20000 && lines[0] != "line "+strconv.Itoa(20000-n)) {
			t.Fatalf("tail %d: offset %d gives %d lines from %q", n, off, len(lines), lines[0])
		}
	}
	empty := filepath.Join(t.TempDir(), "e")
	os.WriteFile(empty, nil, 0o644)
	ef, _ := os.Open(empty)
	defer ef.Close()
	if off, err := TailOffset(ef, 3); off != 0 || err != nil {
		t.Fatalf("tail of an empty file: %d %v", off, err)
	}
}

// streamReader reads a followed stream in a goroutine, so that a test can
// wait (bounded) for what it expects.
type streamReader struct {
	got  chan string
	done chan error
}

func follow(t *testing.T, ctx context.Context, srv *httptest.Server, path string) *streamReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	r := &streamReader{got: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		buf := make([]byte, 1024)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				r.got <- string(buf[:n])
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				r.done <- err
				return
			}
		}
	}()
	return r
}

// want waits (bounded) until what the stream sent, from now, adds up to s.
func (r *streamReader) want(t *testing.T, s string) {
	t.Helper()
	var got string
	deadline := time.After(10 * time.Second)
	for got != s {
		select {
		case b := <-r.got:
			got += b
			if !strings.HasPrefix(s, got) {
				t.Fatalf("the stream sent %q, want %q", got, s)
			}
		case err := <-r.done:
			t.Fatalf("the stream ended (%v) after %q, want %q", err, got, s)
		case <-deadline:
			t.Fatalf("the stream sent %q within 10 s, want %q", got, s)
		}
	}
}

// end waits (bounded) for the stream to end, with nothing more sent.
func (r *streamReader) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		select {
		case b := <-r.got:
			t.Fatalf("the stream sent %q more", b)
		default:
		}
		return err
	case b := <-r.got:
		t.Fatalf("the stream sent %q more, want its end", b)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end within 10 s")
	}
	return nil
}

// A follow sends what the file holds, then what is appended as it is
// written, and ends once the task ended and what it wrote before was
// sent; from an offset or the last lines too.
func TestLogsFollowUntilEnded(t *testing.T) {
	dir := t.TempDir()
	uid := logTask(t, dir, 1, "first\n", "")
	late := testkit.UID('t', 2, 0).String()
	var ended atomic.Bool
	srv := httptest.NewServer((&LogServer{Dir: dir, Poll: time.Millisecond, Ended: func(d string) bool {
		if b := filepath.Base(d); b != uid && b != late {
			t.Errorf("Ended asked of %s", d)
		}
		return ended.Load()
	}}).Handler())
	defer srv.Close()
	out, err := os.OpenFile(filepath.Join(dir, uid, fileStdout), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	r := follow(t, context.Background(), srv, "/v1/tasks/"+uid+"/logs?follow=1")
	r.want(t, "first\n")
	out.WriteString("second\n")
	r.want(t, "second\n")
	out.WriteString("third, then the end\n")
	ended.Store(true) // written before it ended: sent before the stream ends
	r.want(t, "third, then the end\n")
	if err := r.end(t); err != nil {
		t.Fatalf("the stream of an ended task ended with %v", err)
	}

	// Already ended: the whole file, then the end. From the last line.
	r = follow(t, context.Background(), srv, "/v1/tasks/"+uid+"/logs?follow=1&tail=1")
	r.want(t, "third, then the end\n")
	if err := r.end(t); err != nil {
		t.Fatal(err)
	}

	// A file the task has not written yet is followed once it appears.
	ended.Store(false)
	os.MkdirAll(filepath.Join(dir, late), 0o755)
	r = follow(t, context.Background(), srv, "/v1/tasks/"+late+"/logs?follow=1&stream=stderr")
	os.WriteFile(filepath.Join(dir, late, fileStderr), []byte("late\n"), 0o644)
	r.want(t, "late\n")
	ended.Store(true)
	if err := r.end(t); err != nil {
		t.Fatal(err)
	}
}

// A follow whose client goes away ends: the handler returns.
func TestLogsFollowEndsWithTheClient(t *testing.T) {
	dir := t.TempDir()
	uid := logTask(t, dir, 1, "hello\n", "")
	h := (&LogServer{Dir: dir, Poll: time.Millisecond, Ended: func(string) bool { return false }}).Handler()
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		close(returned)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r := follow(t, ctx, srv, "/v1/tasks/"+uid+"/logs?follow=1")
	r.want(t, "hello\n")
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still streams 10 s after its client went away")
	}
}

// With tokens, a request without one of them is 401 and says why.
func TestLogsTokens(t *testing.T) {
	dir := t.TempDir()
	uid := logTask(t, dir, 1, "secret\n", "")
	tf := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tf, []byte("# the server's format works too\nsubmit-0123456789abcdef,submitter,alice\n\nbare-0123456789abcdef\n"), 0o600)
	toks, err := LoadLogTokens(tf)
	if err != nil || len(toks) != 2 {
		t.Fatalf("LoadLogTokens: %v %v", toks, err)
	}
	srv := httptest.NewServer((&LogServer{Dir: dir, Tokens: toks}).Handler())
	defer srv.Close()
	path := "/v1/tasks/" + uid + "/logs"
	for tok, want := range map[string]string{"": "no token", "wrong-0123456789abcdef": "unknown token"} {
		code, body, resp := get(t, srv, path, tok)
		if code != http.StatusUnauthorized || !strings.Contains(body, want) || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %q", tok, code, body)
		}
	}
	for _, tok := range toks {
		if code, body, _ := get(t, srv, path, tok); code != 200 || body != "secret\n" {
			t.Errorf("token %q: %d %q", tok, code, body)
		}
	}
	for body, want := range map[string]string{"": "holds no token", "short\n": "want at least 16"} {
		os.WriteFile(tf, []byte(body), 0o600)
		if _, err := LoadLogTokens(tf); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tokens %q: %v, want %q", body, err, want)
		}
	}
}

// TaskEnded: the exit status written, or the supervisor gone; not before
// the supervisor started, nor while it runs.
func TestTaskEnded(t *testing.T) {
	dir := t.TempDir()
	if TaskEnded(dir) {
		t.Fatal("a task whose supervisor has not started ended")
	}
	os.WriteFile(filepath.Join(dir, filePID), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	if TaskEnded(dir) {
		t.Fatal("a task whose supervisor runs ended")
	}
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, filePID), []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o644)
	if !TaskEnded(dir) {
		t.Fatal("a task whose supervisor is gone did not end")
	}
	os.WriteFile(filepath.Join(dir, filePID), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	writeJSON(dir, fileExit, ExitStatus{Code: 0})
	if !TaskEnded(dir) {
		t.Fatal("a task whose exit status is written did not end")
	}
}

// The executor's own tasks, followed with the default end (the exit status
// its supervisor writes): the stream ends when the process does. Served on
// a listener of its own, as the agent serves it.
func TestLogsOfARealTask(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	l, err := ListenLogs("127.0.0.1:0", &LogServer{Dir: dir, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Loopback() || !strings.HasPrefix(l.URL(""), "http://127.0.0.1:") {
		t.Fatalf("listener %v, url %s", l.Addr(), l.URL(""))
	}
	tk := task(t, 1, "/bin/sh", "-c", "echo one; echo two >&2; echo three")
	x.Start(tk, agents.Placement{Gen: 1})
	shimPID(t, dir, tk)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.URL("")+"/v1/tasks/"+tk.UID.String()+"/logs?follow=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "one\nthree\n" {
		t.Fatalf("followed stdout %q, %v", b, err)
	}
	exits(t, x, 1)
}

// LogsURL: the bound IP, or the advertised host for every address.
func TestLogsURL(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		addr      *net.TCPAddr
		advertise string
		want      string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}, "10.0.0.1", "http://127.0.0.1:80"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 81}, "10.0.0.1", "http://10.0.0.1:81"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 82}, "node-7", "http://node-7:82"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 83}, "0.0.0.0", "http://" + net.JoinHostPort(host, "83")},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 84}, "", "http://[::1]:84"},
	} {
		if got := LogsURL(tc.addr, tc.advertise); got != tc.want {
			t.Errorf("LogsURL(%v, %q) = %s, want %s", tc.addr, tc.advertise, got, tc.want)
		}
	}
}
