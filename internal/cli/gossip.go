package cli

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"

	"github.com/hashicorp/memberlist"
	"github.com/spf13/pflag"

	"github.com/omega-cell/omega/server"
)

// The cell's gossip membership (memberlist, LAN defaults) holds the
// server, the agents — their node's metadata is their machine's uid, 16
// bytes — and the scheduler instances, whose metadata names their kind
// and instance, so the instances of a kind know each other and share its
// jobs (and the server, which reads 16-byte metadata as a machine, leaves
// them alone).

// schedulerMetaPrefix starts a scheduler's node metadata: 16 bytes, so the
// whole is never 16.
const schedulerMetaPrefix = "omega-scheduler\x00"

func schedulerMeta(kind, name string) []byte {
	return []byte(schedulerMetaPrefix + kind + "\x00" + name)
}

// parseSchedulerMeta reads a scheduler's node metadata.
func parseSchedulerMeta(b []byte) (kind, name string, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(schedulerMetaPrefix))
	if !ok {
		return "", "", false
	}
	k, n, ok := bytes.Cut(rest, []byte{0})
	if !ok || len(k) == 0 || len(n) == 0 {
		return "", "", false
	}
	return string(k), string(n), true
}

// gossipMeta is a node's metadata as a memberlist delegate.
type gossipMeta []byte

func (d gossipMeta) NodeMeta(limit int) []byte       { return d }
func (d gossipMeta) NotifyMsg([]byte)                {}
func (d gossipMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (d gossipMeta) LocalState(bool) []byte          { return nil }
func (d gossipMeta) MergeRemoteState([]byte, bool)   {}

// startGossip creates this process's member (named name, bound on bind,
// port 0 allowed) and joins the membership at join. events, if set,
// receives the membership's changes.
func startGossip(name, bind, join string, g gossipFlags, meta []byte, events memberlist.EventDelegate) (*memberlist.Memberlist, error) {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("--gossip %q: %w", bind, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--gossip %q: port: %w", bind, err)
	}
	cfg, err := server.MemberlistConfig(g.profile)
	if err != nil {
		return nil, fmt.Errorf("--gossip-profile: %w", err)
	}
	if g.keyFile != "" {
		if cfg.SecretKey, err = server.GossipKey(g.keyFile); err != nil {
			return nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
	}
	cfg.Name = name
	cfg.BindAddr, cfg.BindPort = host, p
	// The advertised address is the bound one (memberlist works it out,
	// port 0 included); the LAN defaults would advertise 7946 whatever the
	// bind.
	cfg.Delegate = gossipMeta(meta)
	cfg.Events = events
	cfg.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return nil, fmt.Errorf("gossip membership on %s: %w", bind, err)
	}
	if _, err := ml.Join([]string{join}); err != nil {
		ml.Shutdown()
		return nil, fmt.Errorf("join the membership at %s: %w", join, err)
	}
	return ml, nil
}

// instancesOf lists the live scheduler instances of kind among ml's
// members, sorted.
func instancesOf(ml *memberlist.Memberlist, kind string) []string {
	var out []string
	for _, n := range ml.Members() {
		if k, name, ok := parseSchedulerMeta(n.Meta); ok && k == kind && n.State == memberlist.StateAlive {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// memberChanges is an event delegate that only says something changed.
type memberChanges chan struct{}

func (c memberChanges) poke() {
	select {
	case c <- struct{}{}:
	default:
	}
}
func (c memberChanges) NotifyJoin(*memberlist.Node)   { c.poke() }
func (c memberChanges) NotifyLeave(*memberlist.Node)  { c.poke() }
func (c memberChanges) NotifyUpdate(*memberlist.Node) { c.poke() }

// gossipProfileHelp is the --gossip-profile flag's help.
const gossipProfileHelp = "memberlist's defaults to run with: lan (failure detection in a few seconds), wan (slower, more tolerant) or local (one host)"

func validProfile(p string) bool { _, err := server.MemberlistConfig(p); return err == nil }

// gossipKeyHelp is the --gossip-key-file flag's help.
const gossipKeyHelp = "a file holding the cell's gossip key in base64 (16, 24 or 32 bytes; openssl rand -base64 32): the membership is encrypted and only members with the key join it (every member needs the same)"

// gossipFlags are how a member joins the cell's gossip membership.
type gossipFlags struct{ profile, keyFile string }

func (g *gossipFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.profile, "gossip-profile", "lan", gossipProfileHelp)
	fs.StringVar(&g.keyFile, "gossip-key-file", "", gossipKeyHelp)
}
