package membership

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// ServerName is the server's node name. Agents tell the server by it (and
// by RoleServer): before the codec the server had no metadata.
const ServerName = "omega-server"

// Config is how this process becomes a member of the cell's gossip.
type Config struct {
	// Name is the member's node name, unique in the cell (the server's is
	// ServerName; an agent's its machine's name; a scheduler's
	// "scheduler/KIND/INSTANCE"). Required.
	Name string
	// Bind is the host:port the member listens on, UDP and TCP; port 0
	// picks one. The member advertises the bound address (memberlist's
	// LAN defaults would advertise port 7946 whatever the bind). Required
	// unless Transport is set.
	Bind string
	// Profile is memberlist's defaults to run with (Profiles; "" is
	// "lan").
	Profile string
	// Key, if set, encrypts and authenticates the gossip (ReadKey); nil:
	// in clear, open to any host that reaches Bind.
	Key []byte
	// Meta is who the member is, gossiped as its node's metadata.
	// Required.
	Meta Meta
	// Events, if set, is told of every member joining, leaving (or
	// declared dead) and updating, from memberlist's goroutines, holding
	// memberlist's lock: it must never wait (Changes does not).
	Events memberlist.EventDelegate
	// Join, if set, are members' addresses to join at the start; Start
	// fails if none is reached. Empty: the member waits to be joined.
	Join []string
	// Transport, if set, carries the gossip instead of UDP and TCP on
	// Bind: memberlist.MockNetwork's in tests.
	Transport memberlist.Transport
	// Tune, if set, changes memberlist's configuration last, after the
	// profile and the fields above: for what Config does not name (tests
	// shorten the intervals with it). Nil: the profile as it is.
	Tune func(*memberlist.Config)
}

// metaDelegate is a member's metadata as memberlist's delegate.
type metaDelegate []byte

func (d metaDelegate) NodeMeta(int) []byte             { return d }
func (d metaDelegate) NotifyMsg([]byte)                {}
func (d metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d metaDelegate) LocalState(bool) []byte          { return nil }
func (d metaDelegate) MergeRemoteState([]byte, bool)   {}

// Start creates this process's member of the membership and, if c.Join is
// set, joins it there. memberlist's own logger is discarded (the callers
// log what matters with slog). The member runs memberlist's goroutines
// until the caller's Shutdown (after a Leave, if the others should learn
// at once that it is gone). The errors name the configuration field at
// fault, the address that could not be bound, or the join that failed.
func Start(c Config) (*memberlist.Memberlist, error) {
	if c.Name == "" {
		return nil, errors.New("gossip member: no name")
	}
	cfg, err := Profile(c.Profile)
	if err != nil {
		return nil, err
	}
	meta, err := c.Meta.Encode()
	if err != nil {
		return nil, fmt.Errorf("gossip member %s: %w", c.Name, err)
	}
	if c.Transport != nil {
		cfg.Transport = c.Transport
	} else {
		host, port, err := net.SplitHostPort(c.Bind)
		if err != nil {
			return nil, fmt.Errorf("gossip address %s: %w", quote(c.Bind), err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("gossip address %s: port: %w", quote(c.Bind), err)
		}
		// The advertised address is the bound one (memberlist works it
		// out, port 0 included).
		cfg.BindAddr, cfg.BindPort = host, p
	}
	cfg.Name = c.Name
	cfg.SecretKey = c.Key
	cfg.Delegate = metaDelegate(meta)
	cfg.Events = c.Events
	cfg.Logger = log.New(io.Discard, "", 0)
	if c.Tune != nil {
		c.Tune(cfg)
	}
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return nil, fmt.Errorf("gossip membership on %s: %w", c.Bind, err)
	}
	if len(c.Join) > 0 {
		if _, err := ml.Join(c.Join); err != nil {
			ml.Shutdown()
			return nil, fmt.Errorf("join the membership at %v: %w", c.Join, err)
		}
	}
	return ml, nil
}

// Addr is a member's own gossip address, host:port, the one others join.
func Addr(ml *memberlist.Memberlist) string {
	n := ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Instances lists the live instances of a scheduler kind among ml's
// members (legacy and current metadata alike), sorted, each once: this
// member included, if it is one. Safe from any goroutine; the slice is
// the caller's.
func Instances(ml *memberlist.Memberlist, kind string) []string {
	var out []string
	for _, n := range ml.Members() {
		if n.State != memberlist.StateAlive {
			continue // suspect: not yet dead, but not counted on
		}
		if m, err := Decode(n.Meta); err == nil && m.Role == RoleScheduler && m.Kind == kind {
			out = append(out, m.Instance)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ServerAlive reports whether ml's view of the membership holds the
// server as a member not dead nor gone: by its metadata (RoleServer), or
// by its name (a server of before the codec had no metadata). An agent
// that no longer sees it joins again (a restarted server knows no member
// until it is joined). Safe from any goroutine.
func ServerAlive(ml *memberlist.Memberlist) bool {
	for _, n := range ml.Members() {
		if n.Name == ServerName {
			return true
		}
		if m, err := Decode(n.Meta); err == nil && m.Role == RoleServer {
			return true
		}
	}
	return false
}

// Changes is an event delegate that only says something changed: a
// channel of capacity one that every join, leave and update signals
// unless a signal is already pending, so memberlist never waits on it and
// a burst of events is one wake-up. The reader then reads the membership
// as it is (Instances). Make one with NewChanges.
type Changes chan struct{}

// NewChanges is a Changes with its one slot.
func NewChanges() Changes { return make(Changes, 1) }

// Poke signals a change unless one is pending. It never blocks.
func (c Changes) Poke() {
	select {
	case c <- struct{}{}:
	default:
	}
}

var _ memberlist.EventDelegate = Changes(nil)

// NotifyJoin signals a change.
func (c Changes) NotifyJoin(*memberlist.Node) { c.Poke() }

// NotifyLeave signals a change.
func (c Changes) NotifyLeave(*memberlist.Node) { c.Poke() }

// NotifyUpdate signals a change.
func (c Changes) NotifyUpdate(*memberlist.Node) { c.Poke() }
