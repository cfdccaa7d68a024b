package process

// The agent's log endpoint: a task's stdout and stderr, read from its
// directory, served over HTTP for `omega logs`.
//
//	GET /v1/tasks/UID/logs?stream=stdout|stderr&offset=N&tail=N&follow=1
//
// The answer is the file from byte offset N (default 0), or its last N
// lines (tail; tail=0 is nothing), in chunks as it is read; the header
// Omega-Log-Offset says where in the file it starts, so a client that
// lost its connection can ask again from where it was. With follow=1 the
// stream goes on as the file grows (polled every LogServer.Poll) until
// the task's process ended and everything it wrote was sent, or the
// client goes away. A task directory that does not exist is 404: the task
// has not started on this machine (or never ran here).
//
// Access: with tokens (an agent's --logs-token-file), a request must
// carry one of them as "Authorization: Bearer TOKEN"; without, the
// endpoint is open — meant for a loopback address.

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// LogsAnnotation is the machine annotation in which an agent publishes
// where its log endpoint is: http://HOST:PORT.
const LogsAnnotation = "omega.io/logs"

// LogOffsetHeader is the answer's header saying at which byte of the file
// the stream starts.
const LogOffsetHeader = "Omega-Log-Offset"

// DefaultLogPoll is how often a followed file is checked for more.
const DefaultLogPoll = 200 * time.Millisecond

// logChunk is the most read (and sent as one chunk) at a time.
const logChunk = 32 << 10

// LogServer serves the output of the tasks under Dir (an Executor's
// Config.Dir: one directory per task, named by its uid).
type LogServer struct {
	Dir string
	// Tokens, if any, are the bearer tokens a request must carry one of;
	// none: every request is served.
	Tokens []string
	// Poll is how often a followed file is checked for more and the task
	// for its end. Default DefaultLogPoll.
	Poll time.Duration
	// Ended reports whether the process of the task in dir ended (a
	// follow then ends once the file is drained). Default TaskEnded.
	Ended func(dir string) bool
}

// TaskEnded reports whether the process of the task whose directory is
// dir ended: its supervisor wrote the exit status, or the supervisor
// whose pid the directory names is gone. A task whose supervisor has not
// started yet has not ended.
func TaskEnded(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, fileExit)); err == nil {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, filePID))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) // gone (EPERM: it runs, as another user)
}

// LoadLogTokens reads the tokens the log endpoint accepts from path: one
// per line, blank lines and lines starting with # skipped. A line may be
// a line of the server's token file (TOKEN,ROLE[,NAME]): its first column
// is the token, whatever the role.
func LoadLogTokens(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("logs tokens: %w", err)
	}
	defer f.Close()
	var toks []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		tok, _, _ := strings.Cut(s, ",")
		tok = strings.TrimSpace(tok)
		if len(tok) < 16 {
			return nil, fmt.Errorf("%s:%d: the token is %d bytes: want at least 16", path, line, len(tok))
		}
		toks = append(toks, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("logs tokens: %s: %w", path, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("logs tokens: %s holds no token", path)
	}
	return toks, nil
}

// Handler is the endpoint's handler.
func (s *LogServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tasks/{uid}/logs", s.serveLogs)
	return mux
}

func (s *LogServer) authorized(r *http.Request) bool {
	if len(s.Tokens) == 0 {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	tok = strings.TrimSpace(tok)
	found := false
	for _, t := range s.Tokens { // constant time per entry: no early exit
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			found = true
		}
	}
	return found
}

func (s *LogServer) serveLogs(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="omega agent logs"`)
		what := "no token"
		if r.Header.Get("Authorization") != "" {
			what = "unknown token"
		}
		http.Error(w, what+": this agent's log endpoint needs one of its --logs-token-file tokens (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
		return
	}
	uid, err := uuid.Parse(r.PathValue("uid"))
	if err != nil {
		http.Error(w, fmt.Sprintf("task %q: not a uid", r.PathValue("uid")), http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	name := fileStdout
	switch q.Get("stream") {
	case "", "stdout":
	case "stderr":
		name = fileStderr
	default:
		http.Error(w, fmt.Sprintf("stream %q: want stdout or stderr", q.Get("stream")), http.StatusBadRequest)
		return
	}
	var offset int64
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.ParseInt(v, 10, 64); err != nil || offset < 0 {
			http.Error(w, fmt.Sprintf("offset %q: want a byte offset, 0 or more", v), http.StatusBadRequest)
			return
		}
	}
	tail := -1
	if v := q.Get("tail"); v != "" {
		if tail, err = strconv.Atoi(v); err != nil || tail < 0 {
			http.Error(w, fmt.Sprintf("tail %q: want a number of lines, 0 or more", v), http.StatusBadRequest)
			return
		}
		if q.Get("offset") != "" {
			http.Error(w, "offset and tail: one or the other", http.StatusBadRequest)
			return
		}
	}
	follow := false
	switch q.Get("follow") {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		http.Error(w, fmt.Sprintf("follow %q: want 1 or 0", q.Get("follow")), http.StatusBadRequest)
		return
	}
	dir := filepath.Join(s.Dir, uid.String())
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		http.Error(w, fmt.Sprintf("task %s has no output on this machine: it has not started here", uid), http.StatusNotFound)
		return
	}
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if f != nil {
		defer f.Close()
		if tail >= 0 {
			if offset, err = TailOffset(f, tail); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(LogOffsetHeader, strconv.FormatInt(offset, 10))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the header now: a follow of a quiet task is not a hung request
	}
	if tail == 0 && !follow {
		return
	}
	ended := s.Ended
	if ended == nil {
		ended = TaskEnded
	}
	poll := s.Poll
	if poll <= 0 {
		poll = DefaultLogPoll
	}
	ctx := r.Context()
	buf := make([]byte, logChunk)
	var tick *time.Ticker
	for {
		// Whether it ended is asked before the file is drained: all it
		// wrote before it ended is then read before the stream ends.
		done := !follow || ended(dir)
		if f == nil { // not written yet
			if f, err = os.Open(path); err == nil {
				defer f.Close()
			} else if !errors.Is(err, os.ErrNotExist) {
				return // the answer is under way: cut it, the client sees it cut
			}
		}
		if f != nil {
			for {
				n, err := f.ReadAt(buf, offset)
				if n > 0 {
					if _, werr := w.Write(buf[:n]); werr != nil {
						return // the client went away
					}
					offset += int64(n)
					if flusher != nil {
						flusher.Flush()
					}
				}
				if err == io.EOF || n == 0 {
					break
				}
				if err != nil {
					return
				}
				if ctx.Err() != nil {
					return
				}
			}
		}
		if done {
			return
		}
		if tick == nil {
			tick = time.NewTicker(poll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// TailOffset is the byte offset at which the last n lines of f begin (a
// last line without its newline counts as one); 0 if f has no more than
// n lines, its size if n is 0.
func TailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if n == 0 {
		return size, nil
	}
	buf := make([]byte, logChunk)
	end := size
	// A last newline ends the last line: it does not begin another.
	if end > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], end-1); err != nil {
			return 0, err
		}
		if last[0] == '\n' {
			end--
		}
	}
	seen := 0
	for end > 0 {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] == '\n' {
				seen++
				if seen == n {
					return start + int64(i) + 1, nil
				}
			}
		}
		end = start
	}
	return 0, nil
}

// LogListener is a LogServer served on a listener.
type LogListener struct {
	srv *http.Server
	ln  net.Listener
}

// ListenLogs serves s on addr (host:port; port 0 picks one).
func ListenLogs(addr string, s *LogServer) (*LogListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("log endpoint on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &LogListener{srv: srv, ln: ln}, nil
}

// Addr is where it listens.
func (l *LogListener) Addr() net.Addr { return l.ln.Addr() }

// Loopback reports whether it listens on a loopback address only.
func (l *LogListener) Loopback() bool {
	a, ok := l.ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// URL is where clients reach it: http://HOST:PORT, HOST the bound one, or
// advertise when it listens on every address (0.0.0.0, ::).
func (l *LogListener) URL(advertise string) string { return LogsURL(l.ln.Addr(), advertise) }

// LogsURL is http://HOST:PORT for a bound address: its IP, or advertise
// (a host name or IP) when the IP is unspecified (every address), or the
// host's name when advertise is empty or unspecified too.
func LogsURL(addr net.Addr, advertise string) string {
	a, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = advertise
		if ip := net.ParseIP(advertise); advertise == "" || (ip != nil && ip.IsUnspecified()) {
			host, _ = os.Hostname()
		}
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}

// Close stops serving: streams under way are cut (their clients see an
// answer that ends early, not a task that ended).
func (l *LogListener) Close() error { return l.srv.Close() }
