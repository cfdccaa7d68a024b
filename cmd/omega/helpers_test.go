package main_test

// The process helpers of the integration tests: the binary built once, its
// processes started on loopback and ended with the test, their output waited
// on, the cell polled with a deadline.

import (
	"bufio"
	"context"
	"fmt"
	"google.golang.org/grpc"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// binDir holds the binary the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// omegaBinary builds the omega binary once for the package's tests.
var omegaBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "omega-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "omega")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// serverProc is a running `omega server`.
type serverProc struct {
	cmd                *exec.Cmd
	grpc, http, gossip string
	stderr             *strings.Builder
	mu                 *sync.Mutex
	exited             chan error
	wrote              chan struct{} // a line was logged
}

func (p *serverProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop sends SIGTERM and waits (with a deadline) for the exit status.
func (p *serverProc) stop(t testing.TB) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("the server did not exit within 60 s of SIGTERM:\n%s", p.log())
	}
	return nil
}

var listening = regexp.MustCompile(`msg=listening (grpc|http|gossip)=(\S+)`)

// startServer starts `omega server` on loopback ports the kernel picks and
// waits (with a deadline) for the addresses it prints. The process is
// killed when the test ends if it still runs.
func startServer(t testing.TB, data string) *serverProc { return startServerAt(t, data, "127.0.0.1:0") }

// startServerAt is startServer with a gRPC address of the caller's.
func startServerAt(t testing.TB, data, listen string, extra ...string) *serverProc {
	t.Helper()
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"server", "--data", data, "--listen", listen, "--http", "127.0.0.1:0"}, extra...)...)
	wantGossip := len(extra) > 0 && slices.Contains(extra, "--gossip")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}, exited: make(chan error, 1), wrote: make(chan struct{}, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			for _, m := range listening.FindAllStringSubmatch(line, -1) {
				switch m[1] {
				case "grpc":
					p.grpc = m[2]
				case "http":
					p.http = m[2]
				default:
					p.gossip = m[2]
				}
			}
			if p.grpc != "" && p.http != "" && (!wantGossip || p.gossip != "") {
				select {
				case <-found:
				default:
					close(found)
				}
			}
			p.mu.Unlock()
			select {
			case p.wrote <- struct{}{}:
			default:
			}
		}
		io.Copy(io.Discard, pipe)
		p.exited <- cmd.Wait()
	}()
	select {
	case <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not say where it listens within 30 s:\n%s", p.log())
	}
	return p
}

func newRemoteClient(t testing.TB, addr, component string) (*client.Client, *remote.Transport) {
	t.Helper()
	return newRemoteClientWith(t, addr, component, "")
}

// newRemoteClientWith is newRemoteClient presenting the token in tokenFile
// (none if empty).
func newRemoteClientWith(t testing.TB, addr, component, tokenFile string) (*client.Client, *remote.Transport) {
	t.Helper()
	var opts []grpc.DialOption
	if tokenFile != "" {
		tok, err := remote.ReadToken(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, remote.WithToken(tok))
	}
	tr, err := remote.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	c, err := client.New(context.Background(), tr, client.Config{Component: component, Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// proc is a running omega process other than the server.
type proc struct {
	cmd    *exec.Cmd
	out    *strings.Builder
	mu     sync.Mutex
	exited chan error
	wrote  chan struct{} // a line was logged
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) stop(t testing.TB) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not exit within 60 s of SIGTERM:\n%s", p.cmd.Args, p.log())
	}
	return nil
}

func startProc(t testing.TB, args ...string) *proc {
	t.Helper()
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, args...), out: &strings.Builder{}, exited: make(chan error, 1), wrote: make(chan struct{}, 1)}
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.wrote <- struct{}{}:
			default:
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	if args[0] == "agent" {
		// Its tasks run in sessions of their own and outlive it: end them
		// with the test, however it ends — after the agent (cleanups run
		// last first), which could otherwise start one again.
		for i := range args {
			if args[i] == "--data" && i+1 < len(args) {
				dir := args[i+1]
				t.Cleanup(func() { killTaskSessions(dir) })
			}
		}
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// killTaskSessions kills the session of every task an agent started in
// dir.
func killTaskSessions(dir string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "tasks", "*", "shim.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 1 {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// run runs the omega binary to completion (bounded) and returns its stdout,
// stderr and exit error.
func run(t testing.TB, stdin string, args ...string) (string, string, error) {
	t.Helper()
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// waitFor polls cond (each time after syncing c to the newest revision)
// until it holds or the deadline passes.
func waitFor(t testing.TB, c *client.Client, within time.Duration, what string, cond func(v client.View) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Sync(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if cond(c.View()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		wctx, cancel := context.WithTimeout(context.Background(), time.Second) // the next commit, or a second
		c.SyncTo(wctx, c.View().Revision()+1)
		cancel()
	}
}

// freePort returns a loopback address no one listens on (now).
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// output collects what a process writes and lets a test wait for a piece
// of it: every write wakes the waiters (no polling).
type output struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	n, err := o.b.Write(p)
	o.mu.Unlock()
	select {
	case o.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits, at most within, for want in the output.
func (o *output) waitFor(t testing.TB, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for !strings.Contains(o.String(), want) {
		select {
		case <-o.wrote:
		case <-deadline:
			t.Fatalf("no %q within %v in:\n%s", want, within, o.String())
		}
	}
}

func newOutput() *output { return &output{wrote: make(chan struct{}, 1)} }

// runningTask returns a task the view shows RUNNING, or nil.
func runningTask(v client.View) *txn.Task {
	var task *txn.Task
	v.RangeTasks(func(tk *txn.Task) bool {
		if tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
			task = tk
		}
		return task == nil
	})
	return task
}

// waitRunning waits, at most within, for a task RUNNING and returns it.
func waitRunning(t testing.TB, c *client.Client, within time.Duration) *txn.Task {
	t.Helper()
	var task *txn.Task
	waitFor(t, c, within, "a task RUNNING", func(v client.View) bool {
		task = runningTask(v)
		return task != nil
	})
	return task
}

// waitLog waits, at most within, for want in a process's log.
func waitLog(t *testing.T, p *proc, want string, within time.Duration) {
	t.Helper()
	waitLogLine(t, p, within, fmt.Sprintf("%q in the log of %v", want, p.cmd.Args), func(line string) bool { return strings.Contains(line, want) })
}

// waitLogLine waits, at most within, for a line of p's log that match
// accepts: each line logged wakes it; the process's exit fails it.
func waitLogLine(t *testing.T, p *proc, within time.Duration, what string, match func(string) bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		for _, line := range strings.Split(p.log(), "\n") {
			if match(line) {
				return
			}
		}
		select {
		case <-p.wrote:
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("%s: the process exited (%v):\n%s", what, err, p.log())
		case <-deadline.C:
			t.Fatalf("%s: not within %v:\n%s", what, within, p.log())
		}
	}
}
