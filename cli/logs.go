package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
)

// The agent's log endpoint (agents/process/logs.go) and `omega logs`, its
// client: the task found through the server, its machine's agent through
// the machine's omega.io/logs annotation.

const agentLogsHelp = `The agent serves its tasks' stdout and stderr over HTTP for omega logs (--http,
default a port of 127.0.0.1 chosen at start) and publishes where on its machine,
as the annotation omega.io/logs: http://HOST:PORT (an address of every interface,
0.0.0.0, is published as the host of --gossip). With --logs-token-file, a request
must carry one of the file's tokens (Authorization: Bearer TOKEN; omega logs sends
its --logs-token-file's token, else its --token-file's); the agent cannot ask the
cell's server which tokens it accepts, so give it those of the people who may read
logs (the server's --tokens file works as it is). Without the file, anyone who
reaches the address reads every task's output: keep it on loopback. The endpoint
is plain HTTP, tokens included: across hosts, on a network you trust.`

func newLogsCmd() *cobra.Command {
	var cf cellFlags
	var (
		followFlag, stderr bool
		tail               int
		logsTokenFile      string
	)
	cmd := &cobra.Command{
		Use:   "logs TASK [-f] [--stderr] [--tail N] [--server ADDR]",
		Short: "Print a task's output (stdout, or stderr), from the agent that runs it",
		Long: `Prints the stdout (--stderr: the stderr) of the task TASK names (its name, or a
prefix of its uid; an ambiguous one lists its matches and exits non-zero; a job
of one task names it too), read from the agent of the machine the task is placed on: the server tells which
machine, the machine's omega.io/logs annotation where its agent serves them.
With -f, goes on printing as the task writes until its process ends (a task
that its agent restarts: this run's), or Ctrl-C. --tail N prints only the last N lines first. The output of a task's
restarts on one placement is one file; an evicted or lost task's earlier runs
stay on the machines they ran on.

The agent's endpoint may want a token: this command sends --logs-token-file's,
else --token-file's (the one it presents to the server).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < -1 {
				return fmt.Errorf("--tail %d: want a number of lines (-1: all)", tail)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			tr, err := cf.connect(ctx, "logs")
			if err != nil {
				return err
			}
			defer tr.Close()
			l, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK})
			if err != nil {
				return err
			}
			note, err := pick(l, args[0])
			sayNote(cmd.ErrOrStderr(), note)
			if err != nil {
				if len(l.Tasks) > 0 { // ambiguous
					return err
				}
				if l, err = onlyTaskOfJob(ctx, tr, args[0], err); err != nil {
					return err
				}
			}
			t := l.Tasks[0]
			req, err := logsTarget(ctx, tr, t)
			if err != nil {
				return err
			}
			tf := logsTokenFile
			if tf == "" {
				tf = cf.tokenFile
			}
			if tf != "" {
				if req.token, err = remote.ReadToken(tf); err != nil {
					return err
				}
			}
			req.stream, req.follow, req.tail = "stdout", followFlag, tail
			if stderr {
				req.stream = "stderr"
			}
			return streamLogs(ctx, cmd.OutOrStdout(), req)
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().BoolVarP(&followFlag, "follow", "f", false, "go on printing as the task writes, until its process ends")
	cmd.Flags().BoolVar(&stderr, "stderr", false, "the task's stderr instead of its stdout")
	cmd.Flags().IntVar(&tail, "tail", -1, "only the last N lines (-1: all)")
	cmd.Flags().StringVar(&logsTokenFile, "logs-token-file", "", "the token to present to the agent (default: --token-file's)")
	return cmd
}

// onlyTaskOfJob is the task of the job NAME names, if it has one only:
// `omega logs JOB` for a job of one task. notTask is the error if NAME
// names no job either.
func onlyTaskOfJob(ctx context.Context, tr *remote.Transport, name string, notTask error) (*remote.Listing, error) {
	jobs, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB})
	if err != nil {
		return nil, err
	}
	if _, err := pick(jobs, name); err != nil {
		return nil, notTask
	}
	j := jobs.Jobs[0]
	l, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, JobUid: j.GetMeta().GetUid()})
	if err != nil {
		return nil, err
	}
	switch len(l.Tasks) {
	case 1:
		return l, nil
	case 0:
		return nil, fmt.Errorf("%q is a job with no task (yet): no output", name)
	}
	sort.Slice(l.Tasks, func(a, b int) bool {
		return naturalLess(l.Tasks[a].GetMeta().GetName(), l.Tasks[b].GetMeta().GetName())
	})
	var b strings.Builder
	for _, t := range l.Tasks {
		fmt.Fprintf(&b, "\n  %s  %s  %s", t.GetMeta().GetUid(), t.GetMeta().GetName(), stateText(t.GetStatus().GetState()))
	}
	return nil, fmt.Errorf("%q is a job of %d tasks: name one of them%s", name, len(l.Tasks), b.String())
}

// logsRequest is what to ask which agent for.
type logsRequest struct {
	base          string // the agent's endpoint, http://HOST:PORT
	machine, task string // names, for errors
	uid           string // the task's
	stream        string // stdout or stderr
	follow        bool
	tail          int // -1: all
	token         string
}

// logsTarget finds where task t's output is: its machine and the address
// its agent publishes.
func logsTarget(ctx context.Context, tr *remote.Transport, t *omegav1.Task) (logsRequest, error) {
	name, st := t.GetMeta().GetName(), t.GetStatus()
	state := strings.TrimPrefix(st.GetState().String(), "TASK_STATE_")
	if st.GetMachineUid() == "" {
		if st.GetState() == omegav1.TaskState_TASK_STATE_PENDING || st.GetState() == omegav1.TaskState_TASK_STATE_UNSPECIFIED {
			why := fmt.Sprintf("task %s is PENDING: not placed on a machine yet, so it has no output", name)
			if n := st.GetEvictions(); n > 0 {
				why += fmt.Sprintf(" (it was evicted %d times: the output of its earlier runs stays on the machines they ran on)", n)
			}
			return logsRequest{}, errors.New(why)
		}
		return logsRequest{}, fmt.Errorf("task %s never ran: it is %s and was never placed on a machine", name, state)
	}
	r, err := tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_MACHINE, st.GetMachineUid(), "")
	if err != nil {
		return logsRequest{}, fmt.Errorf("task %s's machine %s: %w", name, st.GetMachineUid(), err)
	}
	m := r.GetMachine()
	base := m.GetMeta().GetAnnotations()[process.LogsAnnotation]
	if base == "" {
		return logsRequest{}, fmt.Errorf("machine %s (task %s's) publishes no log endpoint (no %s annotation): its agent predates omega logs or runs with --http ''",
			m.GetMeta().GetName(), name, process.LogsAnnotation)
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return logsRequest{}, fmt.Errorf("machine %s's %s annotation %q is no http://HOST:PORT", m.GetMeta().GetName(), process.LogsAnnotation, base)
	}
	return logsRequest{base: strings.TrimSuffix(base, "/"), machine: m.GetMeta().GetName(), task: name, uid: t.GetMeta().GetUid(), tail: -1}, nil
}

// logsHTTP is the client of agents' log endpoints: no proxy (agents are on
// the cell's network), bounded connects and headers, no bound on a body
// (a follow lasts as long as the task).
var logsHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 nil,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	ResponseHeaderTimeout: 30 * time.Second,
}}

// streamLogs copies what the agent sends for r to out. An interrupted
// follow (ctx done) is no error.
func streamLogs(ctx context.Context, out io.Writer, r logsRequest) error {
	q := url.Values{"stream": {r.stream}}
	if r.follow {
		q.Set("follow", "1")
	}
	if r.tail >= 0 {
		q.Set("tail", strconv.Itoa(r.tail))
	}
	u := r.base + "/v1/tasks/" + url.PathEscape(r.uid) + "/logs?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("machine %s's log endpoint %s: %w", r.machine, r.base, err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := logsHTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the agent of machine %s is unreachable at %s: %w", r.machine, r.base, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		msg := strings.TrimSpace(string(b))
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("the agent of machine %s refused: %s", r.machine, msg)
		case http.StatusNotFound:
			return fmt.Errorf("task %s has no output on machine %s yet (%s)", r.task, r.machine, msg)
		}
		return fmt.Errorf("the agent of machine %s: %s: %s", r.machine, resp.Status, msg)
	}
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 {
			if _, werr := out.Write(buf[:k]); werr != nil {
				return werr // our reader went away (a closed pipe)
			}
			n += int64(k)
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil && ctx.Err() != nil:
			return nil // interrupted
		case err != nil:
			return fmt.Errorf("the output of task %s from machine %s was cut after %d bytes (the agent went away?): %w", r.task, r.machine, n, err)
		}
	}
}
