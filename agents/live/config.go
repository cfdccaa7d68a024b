package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/membership"
)

// member is the agent's member of the cell's gossip membership, as the
// runtime's loop uses it (gossipMember, over package membership). Its
// methods are called from Run's goroutine.
type member interface {
	// Addr is the member's gossip address (host:port), recorded as the
	// machine's agent address and kept for the next start.
	Addr() string
	// ServerAlive reports whether the cell's server is a live member in
	// this member's view. Once it is not (the server restarted: it knows no
	// member until they join again), Run calls Rejoin.
	ServerAlive() bool
	// Rejoin joins the membership again. An error is logged and the next
	// step tries again.
	Rejoin() error
	// Close shuts the member down without leaving, so that an agent that
	// restarts within the failure-detection time keeps its machine UP.
	Close()
}

// Config configures Run: what a node agent is. Start from DefaultConfig;
// a zero Gossip, Tick or Logger takes its default too, but an empty
// LogsAddr means no log endpoint.
type Config struct {
	// Name is the machine's name in the cell. Required.
	Name string
	// Data is the agent's directory (created if missing): the machine's uid
	// (machine.uid, so a restarted agent is the same machine), the gossip
	// address it last had (gossip.addr), and a directory per task (tasks/,
	// which the tasks' processes outlive the agent in). Required.
	Data string
	// CPUMillis and MemoryBytes are the machine's capacity, set when the
	// machine is first registered. 0: the host's (its cores; its memory
	// from /proc/meminfo), what a machine given to the cell whole has.
	CPUMillis, MemoryBytes int64
	// Attributes are the machine's attributes, which task constraints match
	// (zone=eu, arch=arm64), and FailureDomain the domain the service
	// scheduler spreads a job's replicas over (rack, power domain; none: the
	// machine is a domain of its own). Put at every registration.
	Attributes    map[string]string
	FailureDomain string
	// TaskPrefix is the range the tasks' own IP addresses come from. Zero: a
	// /24 of 127.0.0.0/8 picked by the machine's uid
	// (agents.DefaultTaskPrefix), which every process on one host can bind
	// without configuration, so copies of a server share a well-known
	// port.
	TaskPrefix netip.Prefix

	// Transport is the cell's transport for the machine's client, seeing
	// only the machine's part of the cell (a remote transport's
	// ForMachine), so the agent's copy and traffic do not grow with the
	// cell. Required; the caller closes what it dialled after Run returns.
	Transport func(machine uuid.UUID) client.Transport
	// MachinesNamed, if set, returns the uids of the machines of the whole
	// cell that carry a name (the machine's own client sees only its
	// machine): an agent whose --name another machine carries is refused
	// before it registers a second machine of that name. nil: not checked
	// (an in-process agent of a test).
	MachinesNamed func(ctx context.Context, name string) ([]uuid.UUID, error)
	// Gossip is the address this agent's gossip member binds. Default
	// 127.0.0.1:0: with port 0, the port chosen the first time is kept in
	// Data (gossip.addr) and bound again after a restart, since a member
	// that comes back at another address is a new member and the old one is
	// declared dead (its machine DOWN).
	Gossip string
	// Membership is how the agent's member joins the cell's gossip
	// membership: its Join (the server's gossip address; required), Profile
	// and Key. Run sets the rest: the member's name (Name), its bind
	// address (Gossip, or the one kept in Data) and its metadata (the
	// machine's uid, membership.Agent).
	Membership membership.Config

	// LogsAddr is where the log endpoint listens (omega logs). Default
	// (DefaultConfig) 127.0.0.1:0: loopback, a port chosen at start,
	// published on the machine. "": no endpoint (and the machine's
	// annotation is removed).
	LogsAddr string
	// LogsTokensFile holds the bearer tokens the log endpoint accepts, one a
	// line. "": the endpoint is open to whoever reaches it (the default,
	// safe on loopback only).
	LogsTokensFile string

	// Shim is the command line, before the task's directory, that runs a
	// task's supervisor. Default: this executable's task-shim command (the
	// omega binary's).
	Shim []string
	// Tick is how often the agent steps with nothing else to wake it.
	// Default 500 ms: the restarts and probes due are acted on within it,
	// and a step with nothing to do costs a poll of the watch.
	Tick time.Duration
	// Logger says what the agent does. Default slog.Default(), with the
	// machine's name.
	Logger *slog.Logger
}

// DefaultConfig is a Config with every default set; Name, Data, Transport
// and Membership.Join are left for the caller.
func DefaultConfig() Config {
	return Config{
		Gossip:   "127.0.0.1:0",
		LogsAddr: "127.0.0.1:0",
		Tick:     500 * time.Millisecond,
	}
}

// Validate reports the first field that cannot run, by name.
func (c *Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("agent config: Name is required: the machine's name")
	case c.Data == "":
		return errors.New("agent config: Data is required: the agent's directory")
	case c.Transport == nil:
		return errors.New("agent config: Transport is required")
	case len(c.Membership.Join) == 0:
		return errors.New("agent config: Membership.Join is required: the server's gossip address")
	case c.CPUMillis < 0 || c.MemoryBytes < 0:
		return fmt.Errorf("agent config: capacity %d millicores, %d bytes: want 0 (the host's) or more", c.CPUMillis, c.MemoryBytes)
	case c.Tick < 0:
		return fmt.Errorf("agent config: Tick %v: want a positive duration (0: the default)", c.Tick)
	case c.LogsAddr == "" && c.LogsTokensFile != "":
		return errors.New("agent config: LogsTokensFile: there is no log endpoint (LogsAddr is empty)")
	case c.TaskPrefix != (netip.Prefix{}) && !c.TaskPrefix.IsValid():
		return fmt.Errorf("agent config: TaskPrefix %v: not a CIDR range", c.TaskPrefix)
	}
	if _, err := membership.Profile(c.Membership.Profile); err != nil {
		return fmt.Errorf("agent config: Membership.Profile: %w", err)
	}
	if c.Gossip != "" {
		if _, _, err := net.SplitHostPort(c.Gossip); err != nil {
			return fmt.Errorf("agent config: Gossip %s: %w", quote(c.Gossip), err)
		}
	}
	return nil
}

// withDefaults fills the zero optional fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Gossip == "" {
		c.Gossip = d.Gossip
	}
	if c.Tick == 0 {
		c.Tick = d.Tick
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
