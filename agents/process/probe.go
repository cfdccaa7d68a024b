package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Probe runs one probe of a placement's health check: an exec probe in the
// task's working directory with the task's environment (exit 0 is
// healthy), or an HTTP GET of http://OMEGA_TASK_IP:port/path (2xx and 3xx
// are healthy; 127.0.0.1 for a task with no address of its own). ctx bounds
// it (the check's timeout). A nil error is healthy; the error says why not.
func (x *Executor) Probe(ctx context.Context, uid uuid.UUID, hc *omegav1.HealthCheck) error {
	x.mu.Lock()
	p, ok := x.procs[uid]
	var dir, address string
	var env []string
	if ok {
		dir, address, env = filepath.Join(p.dir, dirWork), p.address, p.env
		if p.task != nil && p.task.Command().GetWorkingDir() != "" {
			dir = filepath.Join(dir, filepath.Clean("/"+p.task.Command().GetWorkingDir()))
		}
	}
	x.mu.Unlock()
	if !ok {
		return errors.New("no such task")
	}
	switch pr := hc.GetProbe().(type) {
	case *omegav1.HealthCheck_Exec:
		cmd := exec.CommandContext(ctx, pr.Exec.GetPath(), pr.Exec.GetArgs()...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("exec probe timed out: %w", ctx.Err())
			}
			return fmt.Errorf("exec probe: %v: %s", err, strings.TrimSpace(string(out[:min(len(out), 200)])))
		}
		return nil
	case *omegav1.HealthCheck_Http:
		host := address
		if host == "" {
			host = "127.0.0.1"
		}
		path := pr.Http.GetPath()
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(int(pr.Http.GetPort()))) + path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return fmt.Errorf("http probe: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("http probe: GET %s: %s", url, resp.Status)
		}
		return nil
	}
	return errors.New("the health check has no probe")
}

// probeClient follows no redirects (a 3xx is an answer) and keeps no
// connections (a probe is a fresh connection, as a client's would be).
var probeClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
}
