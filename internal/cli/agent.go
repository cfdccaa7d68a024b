package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"
	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/hostinfo"
	"github.com/omega-cell/omega/internal/objfile"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/txn"
)

type agentFlags struct {
	cell                                       cellFlags
	join, gossip, name, data, memory, taskCIDR string
	http, logsTokenFile                        string
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
			if f.gossipOpts.keyFile != "" {
				if _, err := server.GossipKey(f.gossipOpts.keyFile); err != nil {
					return fmt.Errorf("--gossip-key-file: %w", err)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runAgent(ctx, f)
		},
	}
	fl := cmd.Flags()
	f.cell.register(fl)
	fl.StringVar(&f.join, "join", "", "the server's gossip address")
	f.gossipOpts.register(fl)
	fl.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "this agent's gossip address (port 0: one chosen the first time, kept in --data for restarts)")
	fl.StringVar(&f.name, "name", "", "the machine's name")
	fl.StringVar(&f.data, "data", "", "the agent's directory (created if missing)")
	fl.Float64Var(&f.cpu, "cpu", 0, "cores (0: the host's)")
	fl.StringVar(&f.memory, "memory", "", "memory, e.g. 8Gi (empty: the host's)")
	fl.StringVar(&f.http, "http", "127.0.0.1:0", "the log endpoint's address (omega logs), published on the machine as its omega.io/logs annotation (empty: none)")
	fl.StringVar(&f.logsTokenFile, "logs-token-file", "", "bearer tokens the log endpoint accepts, one a line (the server's --tokens file works: its first column); none: served to anyone who reaches it")
	fl.StringVar(&f.taskCIDR, "task-cidr", "", "the range the tasks' own IP addresses come from, passed as OMEGA_TASK_IP (empty: a /24 of 127.0.0.0/8 picked by the machine's uid)")
	return cmd
}

// machineUID reads the machine's uid from dir, or makes and keeps one.
func machineUID(dir string) (uuid.UUID, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return uuid.Nil, err
	}
	p := filepath.Join(dir, "machine.uid")
	if b, err := os.ReadFile(p); err == nil {
		u, err := uuid.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			return uuid.Nil, fmt.Errorf("%s: %w", p, err)
		}
		return u, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return uuid.Nil, err
	}
	u := uuid.New()
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(u.String()+"\n"), 0o644); err != nil {
		return uuid.Nil, err
	}
	return u, os.Rename(tmp, p)
}

func hostMemory() int64 { return int64(hostinfo.MemTotal()) }

// agentCore connects the tracker to the executor and the supervisor: a
// placement starts a process with an address of its own, its end in the
// cell stops it; the supervisor decides restarts and health.
type agentCore struct {
	exec     *process.Executor
	sup      *agents.Supervisor
	pool     *agents.AddressPool
	log      *slog.Logger
	started  []uuid.UUID // to report RUNNING
	relisted bool        // a re-list since the last sweep
}

func (a *agentCore) Relisted(*txn.State) {
	a.exec.Unclaim() // the re-list's placements claim theirs again; the loop sweeps the rest
	a.relisted = true
}
func (a *agentCore) MachineChanged(*txn.Machine) {}
func (a *agentCore) MachineDeleted(uuid.UUID)    {}
func (a *agentCore) Placed(t *txn.Task, p agents.Placement) {
	addr := a.sup.Address(t.UID)
	if addr == "" {
		addr = a.exec.Address(t.UID, t.Assigned) // adopted: it keeps its own
	}
	if addr == "" {
		if ip, ok := a.pool.Take(); ok {
			addr = ip.String()
		} else {
			a.log.Warn("the task range is used up: the task runs without an address of its own", "task", t.Name(), "range", a.pool.Prefix())
		}
	}
	a.exec.Run(t, p, addr)
	a.sup.Begin(t, addr, time.Now().UnixNano())
	if t.State == omegav1.TaskState_TASK_STATE_ASSIGNED {
		a.started = append(a.started, t.UID)
	}
	a.log.Info("started", "task", t.Name(), "uid", t.UID, "address", addr)
}
func (a *agentCore) Unplaced(u uuid.UUID, p agents.Placement) {
	a.exec.Stop(u, p)
	a.end(u)
}

// end forgets a task's supervision and lets its address go.
func (a *agentCore) end(u uuid.UUID) {
	if ip, err := netip.ParseAddr(a.sup.Address(u)); err == nil {
		a.pool.Release(ip)
	}
	a.sup.End(u)
}

// report is what a status report stands for.
type report struct {
	uid  uuid.UUID
	exit *agents.Exit // nil: RUNNING
}

// probeResult is a health probe's answer.
type probeResult struct {
	uid   uuid.UUID
	probe uint64 // Action.Probe
	err   error
	at    int64
}

func runAgent(ctx context.Context, f agentFlags) error {
	logger := slog.Default().With("machine", f.name)
	uid, err := machineUID(f.data)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	cpu := int64(f.cpu * 1000)
	if cpu == 0 {
		cpu = int64(runtime.NumCPU()) * 1000
	}
	mem := hostMemory()
	if f.memory != "" {
		if mem, err = objfile.Quantity(f.memory, 1); err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
	}
	prefix := agents.DefaultTaskPrefix(uid)
	if f.taskCIDR != "" {
		if prefix, err = netip.ParsePrefix(f.taskCIDR); err != nil {
			return fmt.Errorf("--task-cidr %q: %w", f.taskCIDR, err)
		}
	}
	pool, err := agents.NewAddressPool(prefix)
	if err != nil {
		return fmt.Errorf("--task-cidr: %w", err)
	}
	// The agent keeps a copy of its own machine's part of the cell only
	// (its machine and the tasks placed on it), listed and watched with the
	// server's machine filter: its memory and its traffic do not grow with
	// the cell.
	tr, err := f.cell.dial()
	if err != nil {
		return err
	}
	defer tr.Close()
	c, err := client.New(ctx, tr.ForMachine(uid), client.Config{Component: "agent/" + f.name, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))})
	if err != nil {
		return fmt.Errorf("the cell at %s: %w", f.cell.server, err)
	}

	// A quick restart must come back at the same gossip address, or the
	// membership sees a new member and declares the old one dead: with
	// port 0, the port chosen the first time is kept in --data.
	addrFile := filepath.Join(f.data, "gossip.addr")
	if host, port, err := net.SplitHostPort(f.gossip); err == nil && port == "0" {
		if b, err := os.ReadFile(addrFile); err == nil {
			if h, p, err := net.SplitHostPort(strings.TrimSpace(string(b))); err == nil && h == host {
				f.gossip = net.JoinHostPort(h, p)
			}
		}
	}
	ml, err := joinMembership(f, uid, logger)
	if err != nil {
		return err
	}
	if err := os.WriteFile(addrFile, []byte(ml.LocalNode().Address()+"\n"), 0o644); err != nil {
		ml.Shutdown()
		return err
	}
	defer ml.Shutdown() // no Leave: a quick restart keeps the machine UP
	addr := ml.LocalNode().Address()
	logs, logsURL, err := startAgentLogs(f, ml.LocalNode().Addr.String(), logger)
	if err != nil {
		return err
	}
	if logs != nil {
		defer logs.Close()
	}
	if _, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		tx := c.NewTxn(v)
		if m, ok := v.Machine(uid); ok {
			if m.State == omegav1.MachineState_MACHINE_STATE_UP && m.Agent == addr && m.Meta.GetAnnotations()[process.LogsAnnotation] == logsURL {
				return nil, nil
			}
			p := m.Proto()
			p.Status.State, p.Status.AgentAddress = omegav1.MachineState_MACHINE_STATE_UP, addr
			p.Meta = withLogsAnnotation(p.Meta, logsURL)
			tx.Ops = []txn.Op{txn.PutMachine(p, m.Version)}
			return tx, nil
		}
		tx.Ops = []txn.Op{txn.CreateMachine(&omegav1.Machine{
			Meta:   withLogsAnnotation(&omegav1.ObjectMeta{Uid: uid.String(), Name: f.name}, logsURL),
			Spec:   &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: cpu, MemoryBytes: mem}},
			Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP, AgentAddress: addr},
		})}
		return tx, nil
	}); err != nil {
		return fmt.Errorf("register machine %s: %w", f.name, err)
	}
	logger.Info("registered", "uid", uid, "cpu_millis", cpu, "memory_bytes", mem, "gossip", addr, "task_range", prefix, "logs", logsURL)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cg, why := process.DetectCgroups()
	if cg == nil {
		logger.Warn("tasks are not confined to their requests (cgroup v2 with the cpu and memory controllers delegated is needed)", "why", why)
	} else {
		logger.Info("tasks are confined to their requests by cgroup v2")
	}
	exec, err := process.New(process.Config{Dir: filepath.Join(f.data, "tasks"), Shim: []string{self, "task-shim"}, Cgroups: cg})
	if err != nil {
		return err
	}
	for _, a := range exec.Addresses() { // adopted tasks keep theirs
		if ip, err := netip.ParseAddr(a); err == nil {
			pool.Reserve(ip)
		}
	}
	sup := agents.NewSupervisor()
	core := &agentCore{exec: exec, sup: sup, pool: pool, log: logger}
	trk, err := agents.NewTracker(c, agents.TrackerConfig{Machines: func(u uuid.UUID) bool { return u == uid }}, core)
	if err != nil {
		return err
	}
	defer trk.Close()
	if err := trk.List(ctx); err != nil {
		return err
	}
	sweep := func() {
		exec.Sweep() // processes the cell no longer places on this machine
		for _, u := range sup.Tasks(nil) {
			if _, ok := trk.Task(u); !ok {
				core.end(u)
			}
		}
	}
	core.relisted = false
	sweep()
	rep := agents.NewReporter[report](c)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	probes := make(chan probeResult, 64)
	var (
		exits    []agents.Exit
		actions  []agents.Action
		dirty    []uuid.UUID
		answered []probeResult
	)
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopped", "running", exec.Running())
			return nil
		case <-exec.Ready():
		case r := <-probes:
			answered = append(answered, r)
		case <-tick.C:
		}
		if err := trk.Poll(ctx); err != nil {
			return err
		}
		if core.relisted { // placements the re-list no longer told of end here
			core.relisted = false
			sweep()
		}
		if !serverAlive(ml) { // the server restarted: it knows no member until we join again
			if _, err := ml.Join([]string{f.join}); err != nil {
				logger.Warn("rejoin the membership", "err", err)
			}
		}
		now := time.Now().UnixNano()
		// Health answers: a task that just became unhealthy is stopped,
		// and its end goes through the restart policy as a failure.
	answers:
		for {
			select {
			case r := <-probes:
				answered = append(answered, r)
			default:
				break answers
			}
		}
		for _, r := range answered {
			if sup.Probed(r.uid, r.probe, r.err == nil, r.at) {
				logger.Warn("unhealthy: stopping", "uid", r.uid, "why", r.err)
				exec.Kill(r.uid)
			}
		}
		answered = answered[:0]
		// Restarts and probes due.
		actions = sup.Due(now, actions[:0])
		for _, a := range actions {
			switch a.Kind {
			case agents.ActRestart:
				if exec.Restart(a.Task) {
					sup.Restarted(a.Task, now)
					logger.Info("restarted", "uid", a.Task)
				} else if p, ok := trk.Task(a.Task); ok {
					// Nothing of it to run again: the task ends FAILED,
					// once, rather than be asked for every tick.
					logger.Error("the task could not be restarted: it fails", "uid", a.Task)
					sup.End(a.Task)
					exec.Unsent(agents.Exit{Task: a.Task, Gen: p.Gen, At: now, State: omegav1.TaskState_TASK_STATE_FAILED, Message: "could not be restarted"})
				} else {
					sup.End(a.Task)
				}
			case agents.ActProbe:
				hc := sup.Check(a.Task)
				go func(u uuid.UUID, probe uint64) { // live code: the probe's I/O
					pctx, cancel := context.WithTimeout(ctx, agents.ProbeTimeout(hc))
					defer cancel()
					err := exec.Probe(pctx, u, hc)
					select {
					case probes <- probeResult{uid: u, probe: probe, err: err, at: time.Now().UnixNano()}:
					case <-ctx.Done():
					}
				}(a.Task, a.Probe)
			}
		}
		rep.Reset()
		exits = exec.Exits(0, exits[:0])
		ending := map[uuid.UUID]bool{}
		for i := range exits {
			e := &exits[i]
			p, ok := trk.Current(e.Task, e.Gen)
			if !ok {
				continue
			}
			v, ok := sup.Exited(e.Task, e.Status, e.At)
			switch {
			case !ok && sup.Supervised(e.Task):
				continue // told twice; already waiting to restart
			case !ok:
				v = agents.Verdict{Final: true, State: e.State} // no longer supervised: as it ended
			}
			if !v.Final {
				logger.Info("exited: restarting", "uid", e.Task, "how", e.Message, "in", time.Duration(v.RestartAt-now).Round(time.Millisecond))
				continue // the run report (its last exit) goes out below
			}
			e.State = v.State
			rep.Add(txn.SetStatus(e.Task, e.State, p.Version, e.Message).WithRun(sup.Report(e.Task)), report{uid: e.Task, exit: e})
			ending[e.Task] = true
		}
		for _, u := range core.started {
			if p, ok := trk.Task(u); ok && !ending[u] {
				rep.Add(txn.SetStatus(u, omegav1.TaskState_TASK_STATE_RUNNING, p.Version, "started").WithRun(sup.Report(u)), report{uid: u})
				ending[u] = true
			}
		}
		core.started = core.started[:0]
		dirty = sup.Dirty(dirty[:0])
		for _, u := range dirty {
			if p, ok := trk.Task(u); ok && !ending[u] {
				r := sup.Report(u)
				rep.Add(txn.SetStatus(u, omegav1.TaskState_TASK_STATE_RUNNING, p.Version, runMessage(r)).WithRun(r), report{uid: u})
			}
		}
		res, err := rep.Commit(ctx, trk.Revision(), time.Now().UnixNano())
		if err != nil {
			logger.Warn("status report", "err", err)
			for _, r := range rep.Roles() {
				if r.exit != nil {
					exec.Unsent(*r.exit)
				} else {
					sup.Unreported(r.uid)
				}
			}
			continue
		}
		for i, r := range rep.Roles() {
			if res.Outcomes[i].Committed() {
				if r.exit != nil {
					logger.Info("ended", "uid", r.uid, "state", r.exit.State, "how", r.exit.Message)
				}
				continue
			}
			if r.exit != nil {
				exec.Unsent(*r.exit) // its version moved (our own RUNNING, say): again after the next poll
			} else {
				sup.Unreported(r.uid) // RUNNING again, if still placed
			}
		}
	}
}

// runMessage is the message of a RUNNING report that updates the run.
func runMessage(r *omegav1.TaskRun) string {
	switch {
	case r.GetHealth() == omegav1.HealthState_HEALTH_STATE_UNHEALTHY:
		return "unhealthy: stopping"
	case r.GetLastExit() != nil && r.GetRestarts() == 0:
		return "exited (" + exitText(r.GetLastExit()) + "): restarting"
	case r.GetRestarts() > 0:
		return fmt.Sprintf("restarted %d times, last exit: %s", r.GetRestarts(), exitText(r.GetLastExit()))
	}
	return "running"
}

func exitText(e *omegav1.ExitStatus) string {
	return process.ExitStatus{Code: int(e.GetCode()), Signal: e.GetSignal(), Error: e.GetError()}.String()
}

func joinMembership(f agentFlags, uid uuid.UUID, logger *slog.Logger) (*memberlist.Memberlist, error) {
	cfg, err := f.gossipOpts.config()
	if err != nil {
		return nil, err
	}
	cfg.Name, cfg.Bind, cfg.Join, cfg.Meta = f.name, f.gossip, []string{f.join}, membership.Agent(uid)
	ml, err := membership.Start(cfg)
	if err != nil {
		return nil, err
	}
	logger.Info("joined", "membership", f.join, "members", ml.NumMembers())
	return ml, nil
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

// serverAlive reports whether the server is a live member of the agent's
// view of the membership.
func serverAlive(ml *memberlist.Memberlist) bool { return membership.ServerAlive(ml) }
