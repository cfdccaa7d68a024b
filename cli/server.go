package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/replica"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/txn"
)

func newServerCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	var gf gossipFlags
	var peers string
	cmd := &cobra.Command{
		Use:   "server --data DIR [--listen ADDR] [--http ADDR]",
		Short: "Serve a cell's state store over gRPC",
		Long: `Opens the cell-state store in --data (durable: every commit is synced before it
is acknowledged) and serves its gRPC API (omega.v1.Cell: Commit, Snapshot, Watch)
on --listen, with Prometheus metrics on /metrics and /healthz on --http. The job
controller runs in it, writing each job's phase and counts from its tasks.

SIGTERM (or an interrupt) drains: watch streams end (clients watch again after
the restart), the commits in flight finish and are acknowledged, the store
closes, and the server exits 0. A second SIGTERM (or interrupt) during the
drain stops it at once: the commits still in flight are not acknowledged (their
clients cannot tell whether they committed), and the server exits 1.

The addresses it listens on go to stderr as "listening" lines (useful with
port 0). With --gossip, the server is a member of the cell's gossip membership:
a machine whose agent the membership declares dead goes DOWN and its tasks LOST,
and comes back UP when its agent does.

--tokens FILE names every component's token and role, one per line as
TOKEN,ROLE,NAME (admin, submitter, scheduler NAME, agent NAME): a call without
a known token is refused, each role commits only its kinds of operation (an
agent cannot claim, a scheduler cannot report a task's status, only admins and
submitters create and kill jobs), and each transaction's component is set from
its token. Without --tokens the cell is open, and the server says so. With
--tls-cert and --tls-key the API is served over TLS; with --tls-ca too, clients
must present a certificate that CA signed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The first signal drains (ctx), the second stops at once (now):
			// signal.NotifyContext would swallow the second.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
			defer signal.Stop(sigs)
			now, done := make(chan struct{}), make(chan struct{})
			defer close(done)
			go func() {
				for n := 1; ; n++ {
					select {
					case <-sigs:
					case <-done:
						return
					}
					if n > 1 {
						close(now)
						return
					}
					cancel()
				}
			}()
			cfg.StopNow = now
			cfg.GossipProfile, cfg.GossipKeyFile = gf.profile, gf.keyFile
			if peers != "" {
				p, err := parsePeers(peers)
				if err != nil {
					return err
				}
				cfg.Peers = p
			} else if cfg.Member != 0 {
				return errors.New("--member: needs --peers")
			} else if cfg.Join {
				return errors.New("--join: needs --peers and --member")
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return flagError(server.Run(ctx, cfg))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data", "", "the store's directory (created if missing)")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "gRPC address")
	f.StringVar(&cfg.HTTP, "http", cfg.HTTP, "HTTP address for /metrics and /healthz (empty: none)")
	f.DurationVar(&cfg.Drain, "drain", cfg.Drain, "on SIGTERM, how long the commits in flight may take before the server stops anyway")
	gf.register(f)
	f.StringVar(&cfg.Gossip, "gossip", "", "gossip membership address agents join (memberlist, LAN defaults; empty: no membership)")
	f.DurationVar(&cfg.AgentGrace, "agent-grace", cfg.AgentGrace, "with --gossip: how long after the start a machine UP may go without its agent joining before it goes DOWN")
	f.DurationVar(&cfg.SchedulerGrace, "scheduler-grace", cfg.SchedulerGrace, "how long after the start a job waits for a scheduler of its kind before it is said that none runs (no live scheduler lease of that kind)")
	f.DurationVar(&cfg.Retention, "retention", cfg.Retention, "how long finished tasks and jobs stay in the cell")
	f.DurationVar(&cfg.ExpireEvery, "expire-every", cfg.ExpireEvery, "how often the store deletes what its retention window let go")
	f.StringVar(&cfg.TokensFile, "tokens", "", "the token file: TOKEN,ROLE[,NAME] per line (empty: an open cell)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "with --tls-cert: its key")
	f.StringVar(&cfg.TLSCA, "tls-ca", "", "with --tls-cert: require client certificates signed by this CA")
	f.StringVar(&peers, "peers", "", "a replicated cell's members, ID=ADDR,... (each member's --listen, this one's included): the store becomes a raft member")
	f.Uint64Var(&cfg.Member, "member", 0, "with --peers: this server's id among them")
	f.StringVar(&cfg.PeerTokenFile, "peer-token-file", "", "with --peers and --tokens: the token this member presents to the others (role peer in --tokens); with --tls-cert the members talk TLS, checking each other against --tls-ca")
	f.BoolVar(&cfg.Join, "join", false, "with --peers: an empty --data joins the running cell as --member — a member omega server add added, or one whose data was lost (a new raft id; the leader's snapshot); a --data that holds a member starts as it is")
	f.DurationVar(&cfg.RaftTick, "raft-tick", 50*time.Millisecond, "with --peers: one raft tick; an election starts after 10 to 20 of them without a word from the leader")
	f.StringVar(&cfg.Cluster, "cluster", "omega", "with --peers: the cell's name, the same on every member (a message from another cell is refused)")
	cmd.AddCommand(serverChangeCmds()...)
	cmd.AddCommand(serverUpgradeCmd())
	return cmd
}

// parsePeers reads --peers: ID=ADDR,... with distinct ids above 0.
func parsePeers(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for _, kv := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		switch {
		case !ok || addr == "":
			return nil, fmt.Errorf("--peers %s: want ID=ADDR", txn.Quote(kv))
		case err != nil || n == 0 || n > replica.MaxMember:
			return nil, fmt.Errorf("--peers %s: the id is not a number from 1 to %d", txn.Quote(kv), uint64(replica.MaxMember))
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("--peers: member %d given twice", n)
		}
		out[n] = addr
	}
	return out, nil
}

// serverFlags names the flag of each server.Config field.
var serverFlags = map[string]string{
	"DataDir": "--data", "Listen": "--listen", "HTTP": "--http", "Drain": "--drain",
	"GossipProfile": "--gossip-profile", "GossipKeyFile": "--gossip-key-file", "Gossip": "--gossip",
	"AgentGrace": "--agent-grace", "SchedulerGrace": "--scheduler-grace", "Retention": "--retention", "ExpireEvery": "--expire-every",
	"TokensFile": "--tokens", "TLSCert": "--tls-cert", "TLSKey": "--tls-key", "TLSCA": "--tls-ca",
	"Peers": "--peers", "Member": "--member", "Join": "--join", "PeerTokenFile": "--peer-token-file",
}

// flagError says a refused server.Config by its flag.
func flagError(err error) error {
	var ce *server.ConfigError
	if errors.As(err, &ce) {
		if flag, ok := serverFlags[ce.Field]; ok && ce.Err != nil {
			return fmt.Errorf("%s: %w", flag, ce.Err)
		} else if ok {
			return fmt.Errorf("%s: %s", flag, ce.Why)
		}
	}
	return err
}
