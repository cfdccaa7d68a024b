package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/agents/live"
	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/objfile"
	"github.com/omega-cell/omega/txn"
)

type agentFlags struct {
	cell                                       cellFlags
	join, gossip, name, data, memory, taskCIDR string
	http, logsTokenFile                        string
	attributes                                 []string
	failureDomain                              string
	gossipOpts                                 gossipFlags
	cpu                                        float64
}

func newAgentCmd() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent --server ADDR --join GOSSIP --name NAME --data DIR [--cpu N --memory SIZE] [--gossip ADDR]",
		Short: "Run a machine's agent: register it and join the cell's membership",
		Long: `Registers this machine in the cell (its uid kept in --data, so a restarted agent
is the same machine; capacity from --cpu and --memory, or from the host), joins the
cell's gossip membership at --join (memberlist, LAN defaults) so that the server
marks the machine DOWN if the agent dies, and follows the tasks placed on it.

Each task runs as a process in a session of its own, under a supervisor (omega
task-shim) that writes its exit status into --data/tasks/UID, with its stdout
and stderr; the agent reports RUNNING, then SUCCEEDED or FAILED. Tasks outlive
the agent: a restarted agent adopts those still placed on it and reports them
when they end, and stops those no longer placed. On SIGTERM it stops without
leaving the membership, so a restart within the failure-detection time keeps
its machine UP.

Each task gets an IP address of its own from --task-cidr, passed as
OMEGA_TASK_IP (on one host, the default /24 of 127.0.0.0/8 lets copies of a
server share a well-known port), and its command's environment and working
directory. The agent probes its health check (exec, or HTTP at its address),
stops a task that fails it, and restarts tasks by their restart policy (never,
on-failure, always) with a backoff from the task's restart delay doubling to 5
minutes; restarts, the last exit and the health go into the task's status. A
task the cell stops gets SIGTERM, then SIGKILL after its grace period. Where
cgroup v2 has the cpu and memory controllers delegated, each task is confined
to its request; where not, the agent says so once at start.

The agent keeps a copy of its own part of the cell only (its machine and the
tasks placed on it), watched with the server's machine filter.

` + agentLogsHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.cell.server == "":
				return errors.New("--server: required")
			case f.join == "":
				return errors.New("--join: required: the server's gossip address")
			case f.name == "":
				return errors.New("--name: required: the machine's name")
			case f.data == "":
				return errors.New("--data: required: the agent's directory")
			case !validProfile(f.gossipOpts.profile):
				return fmt.Errorf("--gossip-profile %q: want lan, wan or local", f.gossipOpts.profile)
			case f.cpu < 0:
				return fmt.Errorf("--cpu %v: want a number of cores", f.cpu)
			}
			if f.logsTokenFile != "" && f.http == "" {
				return errors.New("--logs-token-file: there is no log endpoint (--http is empty)")
			}
			tr, err := f.cell.dial()
			if err != nil {
				return err
			}
			defer tr.Close()
			cfg, err := agentConfig(f, tr)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if err := waitForServer(ctx, tr, f.cell.server, "agent "+f.name, f.cell.wait, cfg.Logger); err != nil {
				return err
			}
			return live.Run(ctx, cfg)
		},
	}
	fl := cmd.Flags()
	f.cell.registerWaiting(fl, time.Minute)
	fl.StringVar(&f.join, "join", "", "the server's gossip address; a replicated cell's servers' addresses, comma-separated (the agent joins those it reaches, and again when it sees no server)")
	f.gossipOpts.register(fl)
	fl.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "this agent's gossip address (port 0: one chosen the first time, kept in --data for restarts)")
	fl.StringVar(&f.name, "name", "", "the machine's name")
	fl.StringVar(&f.data, "data", "", "the agent's directory (created if missing)")
	fl.Float64Var(&f.cpu, "cpu", 0, "cores (0: the host's)")
	fl.StringVar(&f.memory, "memory", "", "memory, e.g. 8Gi (empty: the host's)")
	fl.StringArrayVar(&f.attributes, "attribute", nil, "an attribute of the machine, name=value (repeatable), which task constraints match, e.g. zone=eu")
	fl.StringVar(&f.failureDomain, "failure-domain", "", "the machine's failure domain (rack, power domain), which the service scheduler spreads replicas over (empty: a domain of its own)")
	fl.StringVar(&f.http, "http", "127.0.0.1:0", "the log endpoint's address (omega logs), published on the machine as its omega.io/logs annotation (empty: none)")
	fl.StringVar(&f.logsTokenFile, "logs-token-file", "", "bearer tokens the log endpoint accepts, one a line (the server's --tokens file works: its first column); none: served to anyone who reaches it")
	fl.StringVar(&f.taskCIDR, "task-cidr", "", "the range the tasks' own IP addresses come from, passed as OMEGA_TASK_IP (empty: a /24 of 127.0.0.0/8 picked by the machine's uid)")
	return cmd
}

// agentConfig turns the flags into the runtime's config; tr is the cell's
// transport (the caller closes it).
func agentConfig(f agentFlags, tr *remote.Transport) (live.Config, error) {
	cfg := live.DefaultConfig()
	cfg.Name, cfg.Data, cfg.Gossip = f.name, f.data, f.gossip
	cfg.CPUMillis = int64(f.cpu * 1000)
	cfg.FailureDomain = f.failureDomain
	for _, kv := range f.attributes {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("--attribute %s: want name=value", txn.Quote(kv))
		}
		if cfg.Attributes == nil {
			cfg.Attributes = map[string]string{}
		}
		if _, dup := cfg.Attributes[k]; dup {
			return cfg, fmt.Errorf("--attribute %s: %s given twice", txn.Quote(kv), txn.Quote(k))
		}
		cfg.Attributes[k] = v
	}
	if f.memory != "" {
		mem, err := objfile.Quantity(f.memory, 1)
		if err != nil {
			return cfg, fmt.Errorf("--memory: %w", err)
		}
		cfg.MemoryBytes = mem
	}
	if f.taskCIDR != "" {
		prefix, err := netip.ParsePrefix(f.taskCIDR)
		if err != nil {
			return cfg, fmt.Errorf("--task-cidr %q: %w", f.taskCIDR, err)
		}
		cfg.TaskPrefix = prefix
	}
	cfg.LogsAddr, cfg.LogsTokensFile = f.http, f.logsTokenFile
	cfg.Logger = slog.Default()
	cfg.Transport = func(machine uuid.UUID) client.Transport { return tr.ForMachine(machine) }
	cfg.MachinesNamed = func(ctx context.Context, name string) ([]uuid.UUID, error) {
		l, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE})
		if err != nil {
			return nil, err
		}
		var uids []uuid.UUID
		for _, m := range l.Machines {
			if m.GetMeta().GetName() == name {
				u, err := uuid.Parse(m.GetMeta().GetUid())
				if err != nil {
					return nil, err
				}
				uids = append(uids, u)
			}
		}
		return uids, nil
	}
	gc, err := f.gossipOpts.config()
	if err != nil {
		return cfg, err
	}
	gc.Join = joinList(f.join)
	cfg.Membership = gc
	return cfg, cfg.Validate()
}

func newTaskShimCmd() *cobra.Command {
	var workdir string
	cmd := &cobra.Command{
		Use:    "task-shim [--workdir DIR] TASKDIR -- PATH [ARGS...]",
		Short:  "Supervise one task's process for its agent (started by omega agent)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 1 {
				return errors.New("usage: task-shim [--workdir DIR] TASKDIR -- PATH [ARGS...]")
			}
			if code := process.RunShim(args[0], workdir, args[1:]); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workdir, "workdir", "", "the task's working directory (default TASKDIR/work)")
	return cmd
}
