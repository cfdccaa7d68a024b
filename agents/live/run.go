package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"

	"github.com/omega-cell/omega/agents"
	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/hostinfo"
	"github.com/omega-cell/omega/membership"
)

// Run is a node agent, live: the code around the Core that owns the wall
// clock, the goroutines and the I/O. It keeps the machine's uid in
// cfg.Data, connects to the cell, joins the membership (cfg.Membership), starts
// the log endpoint, registers the machine (Register), runs the tasks as
// processes (agents/process: under their supervisor, confined by cgroup v2
// where it is delegated, adopting those an earlier agent left running),
// and then steps the core every cfg.Tick, whenever the executor has exits
// and whenever a probe answers, running the probes it asks for on
// goroutines of their own. It rejoins the membership when the server is
// no longer in it.
//
// Run blocks until ctx ends (then it returns nil: the tasks' processes go
// on, and the member is closed without leaving, so a restart keeps the
// machine UP) or something fails that the agent cannot go on without (the
// directory, the cell, the membership, the watch): the error says which.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	logger := cfg.Logger.With("machine", cfg.Name)
	unlock, err := lockData(cfg.Data)
	if err != nil {
		return err
	}
	defer unlock()
	uid, err := machineUID(cfg.Data)
	if err != nil {
		return fmt.Errorf("agent directory: %w", err)
	}
	cpu, mem := cfg.CPUMillis, cfg.MemoryBytes
	if cpu == 0 {
		cpu = int64(runtime.NumCPU()) * 1000
	}
	if mem == 0 {
		mem = int64(hostinfo.MemTotal())
	}
	prefix := cfg.TaskPrefix
	if !prefix.IsValid() {
		prefix = agents.DefaultTaskPrefix(uid)
	}
	pool, err := agents.NewAddressPool(prefix)
	if err != nil {
		return fmt.Errorf("agent config: TaskPrefix: %w", err)
	}
	c, err := client.New(ctx, cfg.Transport(uid), client.Config{Component: "agent/" + cfg.Name, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))})
	if err != nil {
		return fmt.Errorf("connect to the cell: %w", err)
	}

	addrFile := filepath.Join(cfg.Data, "gossip.addr")
	bind := gossipBind(addrFile, cfg.Gossip)
	// Before joining the membership (a member under a live agent's name
	// would confuse it): the name, the directory's uid and the cell agree.
	if err := CheckIdentity(c.View().State, uid, cfg.Name, bind); err != nil {
		return err
	}
	if cfg.MachinesNamed != nil {
		named, err := cfg.MachinesNamed(ctx, cfg.Name)
		if err != nil {
			return fmt.Errorf("machine identity: the machines named %s: %w", quote(cfg.Name), err)
		}
		if err := checkName(cfg.Name, uid, named); err != nil {
			return err
		}
	}
	ml, err := joinGossip(cfg, uid, bind, logger)
	if err != nil {
		return err
	}
	defer ml.Close()
	addr := ml.Addr()
	if err := os.WriteFile(addrFile, []byte(addr+"\n"), 0o644); err != nil {
		return fmt.Errorf("agent directory: %w", err)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	logs, logsURL, err := startLogs(cfg, host, logger)
	if err != nil {
		return err
	}
	if logs != nil {
		defer logs.Close()
	}
	if err := Register(ctx, c, Machine{UID: uid, Name: cfg.Name, CPUMillis: cpu, MemoryBytes: mem, Agent: addr, LogsURL: logsURL,
		Attributes: cfg.Attributes, FailureDomain: cfg.FailureDomain}); err != nil {
		return err
	}
	logger.Info("registered", "uid", uid, "cpu_millis", cpu, "memory_bytes", mem, "gossip", addr, "task_range", prefix, "logs", logsURL)

	shim := cfg.Shim
	if len(shim) == 0 {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("the task supervisor: %w", err)
		}
		shim = []string{self, "task-shim"}
	}
	cg, why := process.DetectCgroups()
	if cg == nil {
		logger.Warn("tasks are not confined to their requests (cgroup v2 with the cpu and memory controllers delegated is needed)", "why", why)
	} else {
		logger.Info("tasks are confined to their requests by cgroup v2")
	}
	exec, err := process.New(process.Config{Dir: filepath.Join(cfg.Data, "tasks"), Shim: shim, Cgroups: cg})
	if err != nil {
		return err
	}
	core, err := NewCore(ctx, c, CoreConfig{Machine: uid, Executor: exec, Pool: pool, Logger: logger}, time.Now().UnixNano())
	if err != nil {
		return err
	}
	defer core.Close()
	return drive(ctx, core, exec, ml, cfg.Tick, logger)
}

// drive steps the core until ctx ends or a step fails: on the ticker, on
// the executor's exits, on a probe's answer. The probes run on goroutines
// of their own, each bounded by its check's timeout; drive waits for them
// before it returns.
func drive(ctx context.Context, core *Core, exec prober, ml member, tick time.Duration, logger *slog.Logger) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the wait: a probe's sends give up
	t := time.NewTicker(tick)
	defer t.Stop()
	answers := make(chan ProbeAnswer, 64)
	var answered []ProbeAnswer
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopped", "running", core.Running())
			return nil
		case <-exec.Ready():
		case a := <-answers:
			answered = append(answered, a)
		case <-t.C:
		}
		if !ml.ServerAlive() { // the server restarted: it knows no member until we join again
			if err := ml.Rejoin(); err != nil {
				logger.Warn("rejoin the membership", "err", err)
			}
		}
	drain:
		for {
			select {
			case a := <-answers:
				answered = append(answered, a)
			default:
				break drain
			}
		}
		now := time.Now().UnixNano()
		probes, err := core.Plan(ctx, now, answered)
		answered = answered[:0]
		if err != nil {
			return err
		}
		for _, p := range probes { // before the report: a slow cell does not hold them back
			wg.Add(1)
			go func() {
				defer wg.Done()
				probe(ctx, exec, p, answers)
			}()
		}
		core.Report(ctx, now)
	}
}

// prober is what drive needs of the process executor beside the core's
// Executor: a signal that exits are ready, and the health probes, which
// drive runs on goroutines of their own (the process executor's Probe is
// safe for that).
type prober interface {
	Ready() <-chan struct{}
	Probe(ctx context.Context, uid uuid.UUID, hc *omegav1.HealthCheck) error
}

// probe runs one probe and sends its answer, unless ctx ends first.
func probe(ctx context.Context, exec prober, p Probe, answers chan<- ProbeAnswer) {
	pctx, cancel := context.WithTimeout(ctx, agents.ProbeTimeout(p.Check))
	defer cancel()
	err := exec.Probe(pctx, p.Task, p.Check)
	select {
	case answers <- ProbeAnswer{Task: p.Task, Probe: p.Probe, Err: err, At: time.Now().UnixNano()}:
	case <-ctx.Done():
	}
}

// lockData takes the agent's lock on its data directory (agent.lock, an
// exclusive flock held while the agent runs, with its pid in it): a second
// agent on the same directory is refused, naming the one that holds it.
// The kernel lets the lock go when the process dies, however it dies.
func lockData(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent directory: %w", err)
	}
	p := filepath.Join(dir, "agent.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("agent directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(p)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if holder == "" {
			holder = "unknown"
		}
		return nil, fmt.Errorf("%w: the data directory %s is in use by another agent (pid %s): one agent a directory", ErrIdentity, dir, holder)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { f.Close() }, nil
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

// gossipBind is the address to bind the member on: bind, or, when bind
// asks for any port (0), the address the agent had last time (kept in
// addrFile) if its host is bind's — a quick restart must come back at the
// same gossip address, or the membership sees a new member and declares
// the old one dead.
func gossipBind(addrFile, bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil || port != "0" {
		return bind
	}
	b, err := os.ReadFile(addrFile)
	if err != nil {
		return bind
	}
	if h, p, err := net.SplitHostPort(strings.TrimSpace(string(b))); err == nil && h == host {
		return net.JoinHostPort(h, p)
	}
	return bind
}

// gossipMember is the agent's member of the cell's gossip membership.
type gossipMember struct {
	ml   *memberlist.Memberlist
	join []string
}

func (m gossipMember) Addr() string      { return m.ml.LocalNode().Address() }
func (m gossipMember) ServerAlive() bool { return membership.ServerAlive(m.ml) }
func (m gossipMember) Rejoin() error {
	_, err := m.ml.Join(m.join)
	return err
}
func (m gossipMember) Close() { m.ml.Shutdown() } // no Leave: a quick restart keeps the machine UP

// joinGossip starts the agent's member on bind, its metadata the machine's
// uid, and joins the membership at cfg.Membership.Join.
func joinGossip(cfg Config, machine uuid.UUID, bind string, logger *slog.Logger) (member, error) {
	mc := cfg.Membership
	mc.Name, mc.Bind, mc.Meta = cfg.Name, bind, membership.Agent(machine)
	ml, err := membership.Start(mc)
	if err != nil {
		return nil, err
	}
	logger.Info("joined", "membership", mc.Join, "members", ml.NumMembers())
	return gossipMember{ml: ml, join: mc.Join}, nil
}
