package storebench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"regexp"
	"syscall"
	"time"
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
func startServer(ctx context.Context, bin, dir, cpuprofile string, log *slog.Logger) (*serverProc, error) {
	args := []string{"server", "--data", dir, "--listen", "127.0.0.1:0", "--http", "", "--retention", "1s", "--expire-every", "100ms"}
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
