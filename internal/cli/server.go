package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/jobs"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
)

type serverFlags struct {
	data, listen, http string
	gossip             string
	gossipProfile      string
	gossipKeyFile      string
	grace              time.Duration
	drain              time.Duration
	retention, expire  time.Duration
	tokens             string
	tlsCert, tlsKey    string
	tlsCA              string
}

func newServerCmd() *cobra.Command {
	var f serverFlags
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
			if f.data == "" {
				return errors.New("--data: required: the directory of the store")
			}
			if !validProfile(f.gossipProfile) {
				return fmt.Errorf("--gossip-profile %q: want lan, wan or local", f.gossipProfile)
			}
			for _, d := range []struct {
				flag string
				v    time.Duration
			}{{"--drain", f.drain}, {"--retention", f.retention}, {"--expire-every", f.expire}, {"--agent-grace", f.grace}} {
				if d.v <= 0 {
					return fmt.Errorf("%s %v: want a positive duration", d.flag, d.v)
				}
			}
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
			return runServer(ctx, now, f, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "", "the store's directory (created if missing)")
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:7070", "gRPC address")
	cmd.Flags().StringVar(&f.http, "http", "127.0.0.1:7071", "HTTP address for /metrics and /healthz (empty: none)")
	cmd.Flags().DurationVar(&f.drain, "drain", 30*time.Second, "on SIGTERM, how long the commits in flight may take before the server stops anyway")
	cmd.Flags().StringVar(&f.gossipProfile, "gossip-profile", "lan", membership.ProfileHelp)
	cmd.Flags().StringVar(&f.gossipKeyFile, "gossip-key-file", "", membership.KeyHelp)
	cmd.Flags().StringVar(&f.gossip, "gossip", "", "gossip membership address agents join (memberlist, LAN defaults; empty: no membership)")
	cmd.Flags().DurationVar(&f.grace, "agent-grace", 30*time.Second, "with --gossip: how long after the start a machine UP may go without its agent joining before it goes DOWN")
	cmd.Flags().DurationVar(&f.retention, "retention", 15*time.Minute, "how long finished tasks and jobs stay in the cell")
	cmd.Flags().DurationVar(&f.expire, "expire-every", 10*time.Second, "how often the store deletes what its retention window let go")
	cmd.Flags().StringVar(&f.tokens, "tokens", "", "the token file: TOKEN,ROLE[,NAME] per line (empty: an open cell)")
	cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: its key")
	cmd.Flags().StringVar(&f.tlsCA, "tls-ca", "", "with --tls-cert: require client certificates signed by this CA")
	return cmd
}

// errDrainCut is runServer's error when a second signal cut the drain short.
var errDrainCut = errors.New("stopped at once by a second signal: the drain was cut short, the commits in flight unacknowledged")

// runServer serves until ctx is done, then drains; stopNow closed during
// the drain stops the server at once (errDrainCut).
func runServer(ctx context.Context, stopNow <-chan struct{}, f serverFlags, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var gossipKey []byte
	if f.gossipKeyFile != "" {
		k, err := server.GossipKey(f.gossipKeyFile)
		if err != nil {
			return fmt.Errorf("--gossip-key-file: %w", err)
		}
		gossipKey = k
	} else if f.gossip != "" {
		log.Warn("the gossip membership is not encrypted: any host that reaches --gossip may join it (--gossip-key-file)")
	}
	gopts := server.ServerOptions()
	if f.tokens != "" {
		toks, err := server.LoadTokens(f.tokens)
		if err != nil {
			return fmt.Errorf("--tokens: %w", err)
		}
		gopts = append(gopts, toks.ServerOptions()...)
		log.Info("access by token", "tokens", toks.Len(), "file", f.tokens)
	} else {
		log.Warn("THE CELL IS OPEN: no --tokens, so any client that reaches --listen may do anything, as any component")
	}
	switch {
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case f.tlsCA != "" && f.tlsCert == "":
		return errors.New("--tls-ca needs --tls-cert and --tls-key")
	case f.tlsCert != "":
		creds, err := server.TLS(f.tlsCert, f.tlsKey, f.tlsCA)
		if err != nil {
			return err
		}
		gopts = append(gopts, creds)
	default:
		if f.tokens != "" {
			log.Warn("tokens travel in plaintext: serve with --tls-cert and --tls-key beyond one host")
		}
	}
	opts := store.DefaultOptions(f.data)
	opts.Logger = log
	opts.Retention = f.retention
	opts.JobsManaged = true // the server runs the job controller (below)
	st, err := store.Open(opts)
	if err != nil {
		return fmt.Errorf("open the store in %s: %w", f.data, err)
	}
	closeStore := func() error {
		if err := st.Close(); err != nil {
			return fmt.Errorf("close the store: %w", err)
		}
		return nil
	}
	lis, err := net.Listen("tcp", f.listen)
	if err != nil {
		closeStore()
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc := server.New(st)
	svc.Metrics = server.NewMetrics(reg, st)
	g := grpc.NewServer(gopts...)
	svc.Register(g)

	var web *http.Server
	if f.http != "" {
		hl, err := net.Listen("tcp", f.http)
		if err != nil {
			lis.Close()
			closeStore()
			return fmt.Errorf("--http %s: %w", f.http, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "ok revision %d\n", st.Revision())
		})
		web = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go web.Serve(hl)
		log.Info("listening", "http", hl.Addr().String())
	}
	var members *server.Membership
	if f.gossip != "" {
		if members, err = server.StartMembershipWith(st, membership.Config{Bind: f.gossip, Profile: f.gossipProfile, Key: gossipKey}, f.grace, log); err != nil {
			lis.Close()
			closeStore()
			return fmt.Errorf("--gossip: %w", err)
		}
		log.Info("listening", "gossip", members.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	// The job controller: a client of the store like any other, in this
	// process, writing the jobs' status from their tasks once a second.
	jcc, err := client.New(ctx, inproc.New(st), client.Config{Component: jobs.Component, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))})
	if err != nil {
		g.Stop()
		closeStore()
		return fmt.Errorf("job controller: %w", err)
	}
	jc, err := jobs.New(ctx, jcc)
	if err != nil {
		g.Stop()
		closeStore()
		return fmt.Errorf("job controller: %w", err)
	}
	expiring := make(chan struct{})
	expired := make(chan struct{})
	controlled := make(chan struct{})
	go func() {
		defer close(controlled)
		defer jc.Close()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-expiring:
				return
			case now := <-t.C:
				if _, err := jc.Tick(context.Background(), now.UnixNano()); err != nil {
					log.Error("job controller", "err", err)
				}
			}
		}
	}()
	go func() { // retention on the wall clock (the store's clock is monotonic)
		defer close(expired)
		t := time.NewTicker(f.expire)
		defer t.Stop()
		for {
			select {
			case <-expiring:
				return
			case now := <-t.C:
				if _, err := st.Expire(context.Background(), now); err != nil {
					log.Error("expire", "err", err)
				}
			}
		}
	}()
	log.Info("listening", "grpc", lis.Addr().String(), "data", f.data, "revision", st.Revision())

	select {
	case err = <-served: // the listener failed
		err = fmt.Errorf("serve gRPC: %w", err)
	case <-ctx.Done():
		log.Info("draining")
		// Each step of the drain waits for what it waits for, or for a
		// second signal, which cuts the drain short.
		cut := false
		wait := func(ch <-chan struct{}) bool {
			if !cut {
				select {
				case <-ch:
				case <-stopNow:
					cut = true
				}
			}
			return !cut
		}
		// First the writers in this process (job controller, expiry, the
		// membership), so that the watches end at the last revision there
		// will be and a client resumes from it after the restart.
		close(expiring)
		if wait(expired) && wait(controlled) && members != nil {
			left, mb := make(chan struct{}), members
			members = nil
			go func() { mb.Close(); close(left) }()
			wait(left)
		}
		if !cut {
			stopped := make(chan struct{})
			go func() {
				// New commits are refused, those in flight finish, the
				// watches send up to the last revision and end; then the
				// graceful stop waits for the answers to go out.
				svc.Drain()
				g.GracefulStop()
				close(stopped)
			}()
			timer := time.NewTimer(f.drain)
			select {
			case <-stopped:
			case <-timer.C:
				log.Warn("the commits in flight did not finish within --drain: stopping", "drain", f.drain)
				g.Stop()
			case <-stopNow:
				cut = true
			}
			timer.Stop()
		}
		if cut {
			log.Warn("a second signal: the drain is cut short, stopping at once; the commits still in flight are not acknowledged")
			g.Stop()
			err = errDrainCut
		}
	}
	if errors.Is(err, errDrainCut) {
		// At once: nothing more is waited for but the store's close, and
		// that briefly (a commit stuck on the disk would hold it). The
		// store is durable at every acknowledged commit: a store not
		// closed is reopened as after a crash.
		if web != nil {
			web.Close()
		}
		closed := make(chan error, 1)
		go func() { closed <- closeStore() }()
		select {
		case cerr := <-closed:
			if cerr != nil {
				log.Error("close the store", "err", cerr)
			}
		case <-time.After(time.Second):
			log.Warn("the store did not close within a second: exiting without")
		}
		return err
	}
	select {
	case <-expiring:
	default: // the listener failed: the writers still run
		close(expiring)
		<-expired
		<-controlled
	}
	if members != nil {
		members.Close()
	}
	if web != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		web.Shutdown(sctx)
		cancel()
	}
	if cerr := closeStore(); err == nil {
		err = cerr
	}
	if err == nil {
		log.Info("stopped", "revision", st.Revision())
	}
	return err
}
