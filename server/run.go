package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/jobs"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/replica"
	replicalive "github.com/omega-cell/omega/replica/live"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// Config is how Run serves a cell: `omega server`'s flags, as a plain
// struct. Start from DefaultConfig; Run calls Validate.
type Config struct {
	// DataDir is the store's directory, created if missing. Required: the
	// store is durable, every commit synced before it is acknowledged.
	DataDir string
	// Listen is the gRPC address (omega.v1.Cell). Default
	// "127.0.0.1:7070": loopback, so a cell is not open to the network by
	// accident; port 0 picks one (Ready says which).
	Listen string
	// HTTP is the address of /metrics (Prometheus) and /healthz, and of
	// whatever the caller mounted on Mux. Default "127.0.0.1:7071"; ""
	// serves no HTTP.
	HTTP string
	// Mux, if set, is served on HTTP beside Run's own /metrics and
	// /healthz, which take precedence (Run mounts Mux under "/" of a mux of
	// its own and never writes it, so the same Config runs again). Needs
	// HTTP. Nil: Run's two paths only.
	Mux *http.ServeMux
	// Drain bounds how long, once ctx is done, the commits in flight may
	// take before the server stops anyway. Default 30 s: longer than any
	// commit takes on a healthy disk, shorter than an orchestrator's
	// patience.
	Drain time.Duration
	// StopNow, closed during the drain, cuts it short: the server stops at
	// once, the commits in flight unacknowledged, and Run returns
	// ErrDrainCut (the CLI closes it on a second signal). Nil: the drain
	// runs its course.
	StopNow <-chan struct{}
	// Gossip is the gossip membership address agents join (port 0 picks
	// one); "" runs no membership (default: a cell without agents' liveness,
	// as in tests and single-host demos).
	Gossip string
	// GossipProfile is memberlist's defaults to run with
	// (membership.Profiles). Default "lan".
	GossipProfile string
	// GossipKeyFile, if set, is the cell's gossip key (membership.ReadKey):
	// the membership encrypted, only members with the key let in. Default
	// "": in clear, and Run warns.
	GossipKeyFile string
	// GossipTransport, if set, carries the gossip instead of UDP and TCP
	// on Gossip (membership.MemNetwork's in tests).
	GossipTransport memberlist.Transport
	// AgentGrace is how long after the start (a replicated member: after
	// it takes the lead) a machine UP may go without its agent joining the
	// membership before it goes DOWN. Default 30 s:
	// time for the agents to notice a restarted server and rejoin.
	AgentGrace time.Duration
	// SchedulerGrace is how long after the start a job may wait for a
	// scheduler of its kind before the job controller says none runs
	// (WAIT_REASON_NO_SCHEDULER: no live scheduler lease of that kind).
	// Default 15 s: a scheduler instance's lease duration, time for the
	// instances to take their leases.
	SchedulerGrace time.Duration
	// Retention is how long finished tasks and jobs stay in the cell; a
	// scheduler lease left expired this long is deleted too.
	// Default 15 minutes: long enough to look at what just ended.
	Retention time.Duration
	// ExpireEvery is how often the store deletes what Retention let go.
	// Default 10 s: a small fraction of Retention, cheap when nothing ends.
	ExpireEvery time.Duration
	// TokensFile names every component's token and role (LoadTokens).
	// Default "": an open cell, and Run warns.
	TokensFile string
	// TLSCert and TLSKey, together, serve the API over TLS; TLSCA, with
	// them, requires client certificates it signed. Default "": plaintext.
	TLSCert, TLSKey, TLSCA string
	// Member and Peers make this server one member of a replicated cell
	// (replica, issue 31): Member its raft id, Peers every member's
	// address (this one's --listen included) by id; the members talk raft
	// over the same gRPC port as the cell API (service omega.v1.Peer), a
	// commit sent to a follower is forwarded to the leader, and the
	// store's durable log is raft's, in DataDir/raft. Empty: a single
	// server. The job controller and retention write on the leader only.
	// Still to come: tokens and TLS between members (refused with Peers for
	// now). With Gossip, each member is a member of the gossip membership
	// under a name of its own (ServerNodeName), and only the leader commits
	// what the membership says (MembershipOptions.Leads).
	Member  uint64
	Peers   map[uint64]string
	Cluster string
	// Join: a new DataDir is a member joining the cell as it runs — a
	// server whose data was lost (wiped, or a disk replaced) — under a raft
	// id of its own, which the leader puts in place of the member's old one
	// and then sends a snapshot (replica/live.Config.Join). A DataDir that
	// holds a member starts as it is. Without Join, a new DataDir starts a
	// new cell; a member whose data was lost and that starts without it
	// stops at the leader's first heartbeat (replica.ErrLostLog), saying to
	// start it with Join.
	Join bool
	// PeerTokenFile holds the token this member presents to its peers (on
	// the peer service and on the commits it forwards): a token of role
	// peer in the cell's TokensFile. Required with Peers and TokensFile.
	// With TLS the members dial each other over TLS too, checking each
	// other's certificates against TLSCA (else the host's roots), and
	// presenting their own (TLSCert, which must allow client
	// authentication when TLSCA asks for client certificates).
	PeerTokenFile string
	// RaftTick is one raft tick (replica/live.Config.Tick): an election
	// starts after 10 to 20 ticks without a leader's word. Default 50 ms:
	// elections after 0.5 to 1 s, so a failover stays under a second or so
	// on loopback (etcd's default tick is 100 ms; 10 ms lost the leader to
	// elections under the store bench's load on two cores).
	RaftTick time.Duration
	// Logger receives the server's log. Nil: slog.Default().
	Logger *slog.Logger
	// Ready, if set, is called once, when every listener is bound and the
	// server serves, with their addresses (port 0 resolved).
	Ready func(Addrs)
}

// Addrs are the addresses a server listens on; "" for what it does not
// serve.
type Addrs struct {
	GRPC, HTTP, Gossip string
}

// DefaultConfig is the configuration `omega server` runs with but for
// DataDir, which the caller sets.
func DefaultConfig() Config {
	return Config{
		Listen:         "127.0.0.1:7070",
		HTTP:           "127.0.0.1:7071",
		Drain:          30 * time.Second,
		GossipProfile:  "lan",
		AgentGrace:     30 * time.Second,
		SchedulerGrace: 15 * time.Second,
		Retention:      15 * time.Minute,
		ExpireEvery:    10 * time.Second,
	}
}

// Validate reports the first field that is wrong, by its name. It reads
// no file: Run reports a file it cannot read.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Why: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.DataDir == "":
		return bad("DataDir", "required: the directory of the store")
	case c.Listen == "":
		return bad("Listen", "required: the gRPC address")
	}
	if _, err := membership.Profile(c.GossipProfile); err != nil {
		return bad("GossipProfile", "%v", err)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Drain", c.Drain}, {"Retention", c.Retention}, {"ExpireEvery", c.ExpireEvery}, {"AgentGrace", c.AgentGrace}, {"SchedulerGrace", c.SchedulerGrace}} {
		if d.v <= 0 {
			return bad(d.field, "%v: want a positive duration", d.v)
		}
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return bad("TLSCert", "TLSCert and TLSKey go together")
	case c.TLSCA != "" && c.TLSCert == "":
		return bad("TLSCA", "needs TLSCert and TLSKey")
	case c.Mux != nil && c.HTTP == "":
		return bad("Mux", "there is no HTTP address to serve it on (HTTP is empty)")
	}
	return nil
}

// ConfigError is a Config that Validate refused, or that Run could not
// start with (a file that does not read, an address that does not bind):
// the field, and why or the error that came of it. A command line names
// its flag instead (Field is the Config field's name).
type ConfigError struct {
	Field, Why string
	Err        error // the cause, when Run met it
}

func (e *ConfigError) Error() string {
	if e.Err != nil {
		return "server config: " + e.Field + ": " + e.Err.Error()
	}
	return "server config: " + e.Field + ": " + e.Why
}

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrDrainCut is Run's error when StopNow cut the drain short: the
// commits in flight were not acknowledged (their clients cannot tell
// whether they committed), and the store may not have closed (it reopens
// as after a crash, with every acknowledged commit).
var ErrDrainCut = errors.New("stopped at once by a second signal: the drain was cut short, the commits in flight unacknowledged")

// Run serves a cell until ctx is done, then drains and returns nil with
// the store closed; a failure to start or to serve returns its error,
// naming what failed. It blocks; its goroutines (gRPC, HTTP, the job
// controller, expiry, the membership) have all ended when it returns,
// but for a membership's join of the agents (bounded by memberlist's
// timeouts) and, after ErrDrainCut, what the drain was cut short on.
//
// The drain's order: first the writers in this process (job controller,
// expiry, the membership), so that the watches end at the last revision
// there will be and a client resumes from it after the restart; then new
// commits are refused (unavailable), those in flight finish (within
// Drain), every watch sends up to the last revision and ends; then HTTP
// stops and the store closes. StopNow closed at any point of it stops at
// once (ErrDrainCut).
func Run(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	var gossipKey []byte
	if c.GossipKeyFile != "" {
		k, err := membership.ReadKey(c.GossipKeyFile)
		if err != nil {
			return &ConfigError{Field: "GossipKeyFile", Err: err}
		}
		gossipKey = k
	} else if c.Gossip != "" {
		log.Warn("the gossip membership is not encrypted: any host that reaches --gossip may join it (--gossip-key-file)")
	}
	gopts := ServerOptions()
	if c.TokensFile != "" {
		toks, err := LoadTokens(c.TokensFile)
		if err != nil {
			return &ConfigError{Field: "TokensFile", Err: err}
		}
		if c.PeerTokenFile != "" {
			if err := toks.checkPeerToken(c.PeerTokenFile); err != nil {
				return &ConfigError{Field: "PeerTokenFile", Err: err}
			}
		}
		gopts = append(gopts, toks.ServerOptions()...)
		log.Info("access by token", "tokens", toks.Len(), "file", c.TokensFile)
	} else {
		log.Warn("THE CELL IS OPEN: no --tokens, so any client that reaches --listen may do anything, as any component")
	}
	if c.TLSCert != "" {
		creds, err := TLS(c.TLSCert, c.TLSKey, c.TLSCA)
		if err != nil {
			return &ConfigError{Field: "TLSCert", Err: err}
		}
		gopts = append(gopts, creds)
	} else if c.TokensFile != "" {
		log.Warn("tokens travel in plaintext: serve with --tls-cert and --tls-key beyond one host")
	}
	opts := store.DefaultOptions(c.DataDir)
	opts.Logger = log
	opts.Retention = c.Retention
	opts.JobsManaged = true // the server runs the job controller (below)
	if err := checkDataDir(c); err != nil {
		return err
	}
	var rep *lateReplicator
	if len(c.Peers) > 0 {
		if c.TokensFile != "" && c.PeerTokenFile == "" {
			return &ConfigError{Field: "PeerTokenFile", Why: "a replicated cell with tokens needs this member's own token (a peer's, in the token file): its peers refuse its messages without one"}
		}
		rep = &lateReplicator{}
		opts.Durability, opts.Dir, opts.Replicator = store.DurabilityNone, "", rep
	}
	st, err := store.Open(opts)
	if err != nil {
		return fmt.Errorf("open the store in %s: %w", c.DataDir, err)
	}
	var member *replicalive.Driver
	if rep != nil {
		member, err = startMember(c, st, log)
		if err != nil {
			st.Close()
			return err
		}
		rep.f = member.Forwarder()
	}
	closeStore := func() error {
		var merr error
		if member != nil {
			rep.f.Close()
			merr = member.Stop() // with why it stopped by itself, if it did
			if errors.Is(merr, replica.ErrRemoved) {
				merr = nil // said already: not a failure
			}
		}
		if err := errors.Join(merr, st.Close()); err != nil {
			return fmt.Errorf("close the store: %w", err)
		}
		return nil
	}
	lis, err := net.Listen("tcp", c.Listen)
	if err != nil {
		closeStore()
		return &ConfigError{Field: "Listen", Err: err}
	}
	var addrs Addrs
	addrs.GRPC = lis.Addr().String()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc := New(st)
	svc.Metrics = NewMetrics(reg, st)
	if member != nil {
		reg.MustRegister(newRaftCollector(member))
		svc.ReadBarrier = func(ctx context.Context) error { _, err := member.Read(ctx); return err }
		svc.Describe = func(ctx context.Context) (*cellgrpc.ServerStatus, error) {
			return describeMember(ctx, c, member, addrs.GRPC, st.Revision())
		}
		svc.ChangeMembers = member.ChangeServers
	}
	g := grpc.NewServer(gopts...)
	svc.Register(g)
	if member != nil {
		cellgrpc.RegisterPeerServer(g, member.PeerServer())
	}

	var web *http.Server
	if c.HTTP != "" {
		hl, err := net.Listen("tcp", c.HTTP)
		if err != nil {
			lis.Close()
			closeStore()
			return &ConfigError{Field: "HTTP", Err: err}
		}
		// Run's own paths on a mux of its own, the caller's mounted
		// under it: a caller's mux is never written, so the same Config
		// runs again, and a path of the caller's cannot clash with these.
		mux := http.NewServeMux()
		if c.Mux != nil {
			mux.Handle("/", c.Mux)
		}
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			if member != nil {
				fmt.Fprintf(w, "ok revision %d member %d leader %d\n", st.Revision(), c.Member, member.Leader())
				if !member.Voter() {
					fmt.Fprintf(w, "joining: waiting for the leader's snapshot\n")
				}
				// Whether a linearizable read would be answered now: a read
				// index confirmed by a leader within a second.
				rctx, cancel := context.WithTimeout(r.Context(), time.Second)
				defer cancel()
				if _, err := member.Read(rctx); err != nil {
					fmt.Fprintf(w, "reads stale only: no leader confirmed a read index within 1s (%v)\n", err)
				} else {
					fmt.Fprintf(w, "reads linearizable\n")
				}
				return
			}
			fmt.Fprintf(w, "ok revision %d\n", st.Revision())
		})
		web = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go web.Serve(hl)
		addrs.HTTP = hl.Addr().String()
		log.Info("listening", "http", addrs.HTTP)
	}
	var members *Membership
	if c.Gossip != "" || c.GossipTransport != nil {
		mc := membership.Config{Bind: c.Gossip, Profile: c.GossipProfile, Key: gossipKey, Transport: c.GossipTransport}
		mo := MembershipOptions{Grace: c.AgentGrace, Name: ServerNodeName(c.Member)}
		if member != nil {
			// The deaths, returns and sweep on the leader only, the grace
			// counted from its taking the lead.
			mo.Leads = member.Leads
		}
		if members, err = StartMembershipOpts(st, mc, mo, log); err != nil {
			lis.Close()
			if web != nil {
				web.Close()
			}
			closeStore()
			return &ConfigError{Field: "Gossip", Err: err}
		}
		addrs.Gossip = members.Addr()
		log.Info("listening", "gossip", addrs.Gossip)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	// The job controller: a client of the store like any other, in this
	// process, writing the jobs' status from their tasks once a second.
	jc, err := startJobController(ctx, st, c.SchedulerGrace, c.Retention)
	if err != nil {
		g.Stop()
		if members != nil {
			members.Close()
		}
		if web != nil {
			web.Close()
		}
		closeStore()
		return fmt.Errorf("job controller: %w", err)
	}
	expiring := make(chan struct{})
	expired := make(chan struct{})
	controlled := make(chan struct{})
	// The job controller once a second, and retention on the wall clock
	// (the store's clock is monotonic), until the drain begins.
	// In a replicated cell they write on the leader only; a follower's
	// controller follows the cell, and its retention notes what became
	// terminal when (at apply, by Store.Install, stamped here on its
	// clock), so a new leader takes both up where the cell is, its
	// retention window not started again.
	leads := func() bool { return member == nil || member.Leads() }
	go every(time.Second, expiring, controlled, func(now time.Time) {
		var err error
		if leads() {
			_, err = jc.Tick(context.Background(), now.UnixNano())
		} else {
			err = jc.Poll(context.Background())
		}
		if err != nil {
			log.Error("job controller", "err", err)
		}
	}, jc.Close)
	go every(c.ExpireEvery, expiring, expired, func(now time.Time) {
		if !leads() {
			st.Stamp(now)
			return
		}
		if _, err := st.Expire(context.Background(), now); err != nil {
			log.Error("expire", "err", err)
		}
	}, nil)
	log.Info("listening", "grpc", addrs.GRPC, "data", c.DataDir, "revision", st.Revision())
	if c.Ready != nil {
		c.Ready(addrs)
	}

	var memberDone <-chan struct{}
	if member != nil {
		memberDone = member.Done()
	}
	select {
	case err = <-served: // the listener failed
		err = fmt.Errorf("serve gRPC: %w", err)
	case <-memberDone: // the raft member failed (its log lost, a disk error), or was removed
		err = fmt.Errorf("raft member %d stopped: %w", c.Member, member.Err())
		if errors.Is(err, replica.ErrRemoved) {
			// Removed from the cell: its state is no longer the cell's,
			// and its clients move on to the members they know. The calls
			// in flight are let finish (a removal it forwarded, say), for
			// a few seconds at most.
			log.Info("removed from the cell: this server stops", "member", c.Member, "why", member.Err())
			err = nil
			stopped := make(chan struct{})
			go func() { g.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
			}
		}
		g.Stop()
	case <-ctx.Done():
		log.Info("draining")
		if member != nil && member.Leads() {
			// A planned stop costs no election timeout: the lead goes to
			// the most up-to-date member first (raft's transfer), bounded
			// by an election timeout's worth of ticks.
			tick := c.RaftTick
			if tick <= 0 {
				tick = 50 * time.Millisecond
			}
			tctx, cancel := context.WithTimeout(context.Background(), 20*tick)
			start := time.Now()
			to, terr := member.TransferLeadership(tctx, 0)
			cancel()
			if terr != nil {
				log.Warn("the lead did not move before the stop: the others elect a leader after their election timeout", "err", terr)
			} else {
				log.Info("leadership transferred", "to", to, "took", time.Since(start).Round(time.Millisecond))
			}
		}
		// Each step of the drain waits for what it waits for, or for
		// StopNow, which cuts the drain short.
		cut := false
		wait := func(ch <-chan struct{}) bool {
			if !cut {
				select {
				case <-ch:
				case <-c.StopNow:
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
				if member != nil {
					// Its peers' streams into this server end with it.
					if err := member.Stop(); err != nil {
						log.Error("stop the raft member", "err", err)
					}
				}
				g.GracefulStop()
				close(stopped)
			}()
			timer := time.NewTimer(c.Drain)
			select {
			case <-stopped:
			case <-timer.C:
				log.Warn("the commits in flight did not finish within --drain: stopping", "drain", c.Drain)
				g.Stop()
			case <-c.StopNow:
				cut = true
			}
			timer.Stop()
		}
		if cut {
			log.Warn("a second signal: the drain is cut short, stopping at once; the commits still in flight are not acknowledged")
			g.Stop()
			err = ErrDrainCut
		}
	}
	if errors.Is(err, ErrDrainCut) {
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

// startJobController starts the job controller on st, in process, with
// the scheduler leases' duty (jobs.Options.SchedulerLeases).
func startJobController(ctx context.Context, st *store.Store, grace, retention time.Duration) (*jobs.Controller, error) {
	jcc, err := client.New(ctx, inproc.New(st), client.Config{Component: jobs.Component, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))})
	if err != nil {
		return nil, err
	}
	return jobs.NewWith(ctx, jcc, jobs.Options{SchedulerLeases: true, Grace: grace, Retention: retention})
}

// every calls f with the time on a ticker of interval d until stop is
// closed, then calls last (if set) and closes done.
func every(d time.Duration, stop <-chan struct{}, done chan<- struct{}, f func(now time.Time), last func()) {
	defer close(done)
	if last != nil {
		defer last()
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// lateReplicator is the store's Replicator before the member that commits
// exists (the member's hooks need the store first).
type lateReplicator struct{ f *replicalive.Forwarder }

func (l *lateReplicator) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	return l.f.Commit(ctx, tx)
}
