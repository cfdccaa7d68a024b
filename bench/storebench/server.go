package storebench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/txn"
)

// serverProc is `omega server` in a process of its own, serving the store
// the committers reach over gRPC.
type serverProc struct {
	cmd    *exec.Cmd
	addr   string
	exited chan error
	done   bool
}

var listeningGRPC = regexp.MustCompile(`msg=listening grpc=(\S+)`)

// startServer runs bin server on dir, with the bench's retention (finished
// tasks leave a second after they finish, expired every 100 ms), and waits
// for its gRPC address.
func startServer(ctx context.Context, bin, dir, cpuprofile string, log *slog.Logger, extra ...string) (*serverProc, error) {
	listen := "127.0.0.1:0"
	if len(extra) >= 2 && extra[0] == "--listen" {
		listen, extra = extra[1], extra[2:]
	}
	args := append([]string{"server", "--data", dir, "--listen", listen, "--http", "", "--retention", "1s", "--expire-every", "100ms"}, extra...)
	if cpuprofile != "" {
		args = append(args, "--cpuprofile", cpuprofile)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server (%s): %w", bin, err)
	}
	p := &serverProc{cmd: cmd, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if m := listeningGRPC.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pipe)
		p.exited <- cmd.Wait()
	}()
	select {
	case p.addr = <-addr:
		log.Info("server started", "pid", cmd.Process.Pid, "grpc", p.addr)
		return p, nil
	case err := <-p.exited:
		p.done = true
		return nil, fmt.Errorf("the server exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, errors.New("the server did not listen within 60 s")
	}
}

// stop sends SIGTERM and waits for the exit (killing it after 60 s); it
// reports a server that did not exit cleanly.
func (p *serverProc) stop() error {
	if p == nil || p.done {
		return nil
	}
	p.done = true
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			return fmt.Errorf("the server's exit: %w", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return errors.New("the server did not exit within 60 s of SIGTERM: killed")
	}
}

// replicatedCell is three `omega server --peers` on loopback.
type replicatedCell struct {
	procs  []*serverProc
	leader string // the leader's gRPC address
}

// startReplicated starts three members in dir/1..3 and finds the
// leader: the member that commits a transaction marked forwarded (which a
// follower refuses rather than forward again).
func startReplicated(ctx context.Context, bin, dir string, log *slog.Logger) (*replicatedCell, error) {
	var addrs []string
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
	}
	var peers []string
	for i, a := range addrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	c := &replicatedCell{}
	for i, a := range addrs {
		p, err := startServer(ctx, bin, filepath.Join(dir, fmt.Sprint(i+1)), profile(i+1), log, "--listen", a, "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1))
		if err != nil {
			c.stop()
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	deadline := time.Now().Add(60 * time.Second)
	for c.leader == "" {
		for _, a := range addrs {
			if leads(ctx, a) {
				c.leader = a
				break
			}
		}
		if c.leader == "" {
			if time.Now().After(deadline) {
				c.stop()
				return nil, errors.New("no member of the replicated cell led within 60 s")
			}
			time.Sleep(100 * time.Millisecond) // polling for a leader with a deadline
		}
	}
	log.Info("replicated cell", "members", addrs, "leader", c.leader)
	return c, nil
}

// leads reports whether the member at addr commits without forwarding.
func leads(ctx context.Context, addr string) bool {
	tr, err := remote.Dial(addr)
	if err != nil {
		return false
	}
	defer tr.Close()
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "omega-forwarded", "1"), 2*time.Second)
	defer cancel()
	_, err = tr.Commit(cctx, &txn.Txn{Component: "bench"})
	return err == nil
}

func (c *replicatedCell) stop() {
	for _, p := range c.procs {
		p.stop()
	}
}

// profile is where member i writes its CPU profile: OMEGA_BENCH_PROF with
// its number, or nowhere when that is unset.
func profile(i int) string {
	if p := os.Getenv("OMEGA_BENCH_PROF"); p != "" {
		return p + fmt.Sprint(i)
	}
	return ""
}
