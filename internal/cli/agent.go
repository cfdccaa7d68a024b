package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"
	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/objfile"
	"github.com/omega-cell/omega/txn"
)

type agentFlags struct {
	server, join, gossip, name, data, memory string
	cpu                                      float64
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

Still to come (issue 8): running the tasks as processes — until then the agent
follows its placements and logs them, and runs nothing. On SIGTERM it stops
without leaving the membership, so a restart within the failure-detection time
keeps its machine UP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.server == "":
				return errors.New("--server: required")
			case f.join == "":
				return errors.New("--join: required: the server's gossip address")
			case f.name == "":
				return errors.New("--name: required: the machine's name")
			case f.data == "":
				return errors.New("--data: required: the agent's directory")
			case f.cpu < 0:
				return fmt.Errorf("--cpu %v: want a number of cores", f.cpu)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runAgent(ctx, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.server, "server", "127.0.0.1:7070", "the cell's server")
	fl.StringVar(&f.join, "join", "", "the server's gossip address")
	fl.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "this agent's gossip address")
	fl.StringVar(&f.name, "name", "", "the machine's name")
	fl.StringVar(&f.data, "data", "", "the agent's directory (created if missing)")
	fl.Float64Var(&f.cpu, "cpu", 0, "cores (0: the host's)")
	fl.StringVar(&f.memory, "memory", "", "memory, e.g. 8Gi (empty: the host's)")
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

func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// placements logs the tracker's events (the executor comes with the rest
// of the agent).
type placements struct{ log *slog.Logger }

func (p placements) Relisted(*txn.State)         {}
func (p placements) MachineChanged(*txn.Machine) {}
func (p placements) MachineDeleted(uuid.UUID)    {}
func (p placements) Placed(t *txn.Task, _ agents.Placement) {
	p.log.Info("placed", "task", t.Name(), "uid", t.UID)
}
func (p placements) Unplaced(u uuid.UUID, _ agents.Placement) { p.log.Info("unplaced", "uid", u) }

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
	c, tr, err := dialCell(ctx, f.server, "agent/"+f.name)
	if err != nil {
		return err
	}
	defer tr.Close()

	ml, err := joinMembership(f, uid, logger)
	if err != nil {
		return err
	}
	defer ml.Shutdown() // no Leave: a quick restart keeps the machine UP
	addr := ml.LocalNode().Address()
	if _, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		tx := c.NewTxn(v)
		if m, ok := v.Machine(uid); ok {
			if m.State == omegav1.MachineState_MACHINE_STATE_UP && m.Agent == addr {
				return nil, nil
			}
			p := m.Proto()
			p.Status.State, p.Status.AgentAddress = omegav1.MachineState_MACHINE_STATE_UP, addr
			tx.Ops = []txn.Op{txn.PutMachine(p, m.Version)}
			return tx, nil
		}
		tx.Ops = []txn.Op{txn.CreateMachine(&omegav1.Machine{
			Meta:   &omegav1.ObjectMeta{Uid: uid.String(), Name: f.name},
			Spec:   &omegav1.MachineSpec{Capacity: &omegav1.Resources{CpuMillis: cpu, MemoryBytes: mem}},
			Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP, AgentAddress: addr},
		})}
		return tx, nil
	}); err != nil {
		return fmt.Errorf("register machine %s: %w", f.name, err)
	}
	logger.Info("registered", "uid", uid, "cpu_millis", cpu, "memory_bytes", mem, "gossip", addr)

	trk, err := agents.NewTracker(c, agents.TrackerConfig{Machines: func(u uuid.UUID) bool { return u == uid }}, placements{logger})
	if err != nil {
		return err
	}
	defer trk.Close()
	if err := trk.List(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("stopped")
	return nil
}

func joinMembership(f agentFlags, uid uuid.UUID, logger *slog.Logger) (*memberlist.Memberlist, error) {
	host, port, err := net.SplitHostPort(f.gossip)
	if err != nil {
		return nil, fmt.Errorf("--gossip %q: %w", f.gossip, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--gossip %q: port: %w", f.gossip, err)
	}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = f.name
	cfg.BindAddr, cfg.BindPort = host, p
	cfg.AdvertiseAddr = host
	cfg.Delegate = metaDelegate(uid[:])
	cfg.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return nil, fmt.Errorf("gossip membership on %s: %w", f.gossip, err)
	}
	if _, err := ml.Join([]string{f.join}); err != nil {
		ml.Shutdown()
		return nil, fmt.Errorf("join the membership at %s: %w", f.join, err)
	}
	logger.Info("joined", "membership", f.join, "members", ml.NumMembers())
	return ml, nil
}

// metaDelegate gives the agent's node its machine's uid as metadata.
type metaDelegate []byte

func (d metaDelegate) NodeMeta(limit int) []byte       { return d }
func (d metaDelegate) NotifyMsg([]byte)                {}
func (d metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d metaDelegate) LocalState(bool) []byte          { return nil }
func (d metaDelegate) MergeRemoteState([]byte, bool)   {}
