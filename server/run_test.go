package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// logged is a log handler that hands each record's message to a channel
// (dropped when it is full), so a test waits for one.
type logged chan string

func (l logged) Enabled(context.Context, slog.Level) bool { return true }
func (l logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logged) WithGroup(string) slog.Handler            { return l }
func (l logged) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default:
	}
	return nil
}

// await waits, at most 30 s, for the message want.
func (l logged) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-l:
			if m == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q logged within 30 s", want)
		}
	}
}

// runServer runs server.Run with cfg on loopback port 0 in a temporary
// directory, and waits until it is ready; done receives Run's error.
func runServer(t *testing.T, ctx context.Context, cfg server.Config) (addrs server.Addrs, done chan error) {
	t.Helper()
	ready := make(chan server.Addrs, 1)
	cfg.Ready = func(a server.Addrs) { ready <- a }
	done = make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run not ready within 30 s")
	}
	return addrs, done
}

func testConfig(t *testing.T, log logged) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.HTTP = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(log)
	return cfg
}

// Run serves a commit over gRPC, a handler mounted on its mux and its own
// /healthz, its gossip on the transport given; a cancelled context drains
// it and it returns nil with the store closed: the store reopens (pebble
// locks a store open elsewhere) with the commit.
func TestRunServesAndDrains(t *testing.T) {
	log := make(logged, 1024)
	cfg := testConfig(t, log)
	cfg.Mux = http.NewServeMux()
	cfg.Mux.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello from a mounted handler\n") })
	net := membership.NewMemNetwork(membership.ServerName)
	t.Cleanup(net.Close)
	cfg.GossipTransport, cfg.GossipProfile = net.Transport(membership.ServerName), "local"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, done := runServer(t, ctx, cfg)
	if addrs.GRPC == "" || strings.HasSuffix(addrs.GRPC, ":0") || addrs.HTTP == "" || addrs.Gossip == "" {
		t.Fatalf("Ready's addresses %+v: want the bound gRPC, HTTP and gossip addresses", addrs)
	}

	tr, err := remote.Dial(addrs.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res, err := tr.Commit(ctx, machineTxn("tester", 1))
	if err != nil || res.Committed != 1 {
		t.Fatalf("commit over gRPC: %+v %v", res, err)
	}
	for path, want := range map[string]string{"/hello": "hello from a mounted handler", "/healthz": "ok revision"} {
		resp, err := http.Get("http://" + addrs.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %s %q, want %q", path, resp.Status, body, want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after its context's cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not drain within 30 s with nothing in flight")
	}
	o := store.DefaultOptions(cfg.DataDir)
	o.Logger = slog.New(slog.DiscardHandler)
	st, err := store.Open(o)
	if err != nil {
		t.Fatalf("reopen the store Run closed: %v", err)
	}
	defer st.Close()
	if _, ok := st.Snapshot().Machine(testkit.UID('d', 1, 0)); !ok || st.Revision() < res.Revision {
		t.Fatalf("the store reopened at revision %d without the machine committed at %d", st.Revision(), res.Revision)
	}
}

// StopNow closed while the drain waits for a commit in flight cuts it
// short: Run returns ErrDrainCut at once, the commit unacknowledged, and
// the store reopens.
func TestRunStopNowCutsTheDrain(t *testing.T) {
	log := make(logged, 1024)
	cfg := testConfig(t, log)
	cfg.Drain = 10 * time.Minute
	stopNow := make(chan struct{})
	cfg.StopNow = stopNow
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, done := runServer(t, ctx, cfg)

	// A Commit call whose transaction never comes: in flight for as long
	// as the test likes. A call after it on the same connection answered
	// means the server has it (it reads a connection's frames in order).
	conn, err := grpc.NewClient(addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Its own context, not Run's: cancelling Run's must not end the call
	// (the drain would then finish on its own, and the cut prove nothing).
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	held, err := conn.NewStream(hctx, &grpc.StreamDesc{StreamName: "Commit", ClientStreams: true}, cellgrpc.Cell_Commit_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer gcancel()
	if _, err := cellgrpc.NewCellClient(conn).Get(gctx, &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Uid: testkit.UID('x', 1, 1).String()}); err == nil {
		t.Fatal("Get of a machine never made: found")
	}

	cancel()
	log.await(t, "draining")
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) with a commit in flight, within Drain", err)
	default:
	}
	close(stopNow)
	select {
	case err := <-done:
		if !errors.Is(err, server.ErrDrainCut) {
			t.Fatalf("Run after StopNow: %v, want ErrDrainCut", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop within 30 s of StopNow")
	}
	if err := held.RecvMsg(&omegav1.TransactionResult{}); err == nil {
		t.Fatal("the commit in flight was acknowledged")
	}
	o := store.DefaultOptions(cfg.DataDir)
	o.Logger = slog.New(slog.DiscardHandler)
	st, err := store.Open(o)
	if err != nil {
		t.Fatalf("reopen the store after the cut: %v", err)
	}
	st.Close()
}

// A bad Config is refused by Validate, and by Run before it opens
// anything, naming the field.
func TestConfigValidate(t *testing.T) {
	if err := server.DefaultConfig().Validate(); err == nil || !strings.Contains(err.Error(), "DataDir") {
		t.Fatalf("the default config without a data dir: %v", err)
	}
	for _, c := range []struct {
		field string
		set   func(*server.Config)
	}{
		{"DataDir", func(c *server.Config) { c.DataDir = "" }},
		{"Listen", func(c *server.Config) { c.Listen = "" }},
		{"GossipProfile", func(c *server.Config) { c.GossipProfile = "fast" }},
		{"Drain", func(c *server.Config) { c.Drain = 0 }},
		{"Retention", func(c *server.Config) { c.Retention = -time.Second }},
		{"ExpireEvery", func(c *server.Config) { c.ExpireEvery = 0 }},
		{"AgentGrace", func(c *server.Config) { c.AgentGrace = 0 }},
		{"TLSKey", func(c *server.Config) { c.TLSCert = "cert.pem" }},
		{"TLSCert", func(c *server.Config) { c.TLSKey = "key.pem" }},
		{"TLSCA", func(c *server.Config) { c.TLSCA = "ca.pem" }},
	} {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir() + "/never-made"
		if err := cfg.Validate(); err != nil {
			t.Fatalf("a good config: %v", err)
		}
		c.set(&cfg)
		err := cfg.Validate()
		var ce *server.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want a ConfigError naming it", c.field, err)
		}
		if rerr := server.Run(context.Background(), cfg); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("%s: Run: %v, want Validate's error", c.field, rerr)
		}
	}
}

// What Run cannot start with (a file that does not read, an address that
// does not bind) is a ConfigError naming the field, with its cause.
func TestRunStartFailuresNameTheField(t *testing.T) {
	for _, c := range []struct {
		field string
		set   func(*server.Config)
	}{
		{"TokensFile", func(c *server.Config) { c.TokensFile = "/nonexistent/tokens" }},
		{"GossipKeyFile", func(c *server.Config) { c.GossipKeyFile = "/nonexistent/key" }},
		{"TLSCert", func(c *server.Config) { c.TLSCert, c.TLSKey = "/nonexistent/cert.pem", "/nonexistent/key.pem" }},
		{"Listen", func(c *server.Config) { c.Listen = "bogus" }},
		{"HTTP", func(c *server.Config) { c.HTTP = "bogus" }},
	} {
		cfg := testConfig(t, make(logged, 1024))
		c.set(&cfg)
		err := server.Run(context.Background(), cfg)
		var ce *server.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || ce.Err == nil {
			t.Errorf("%s: Run: %v, want a ConfigError of %s with its cause", c.field, err, c.field)
		}
	}
}

// The caller's mux is served beside Run's own paths and never written:
// the same Config runs twice.
func TestRunMountsTheCallersMuxWithoutWritingIt(t *testing.T) {
	cfg := testConfig(t, make(logged, 1024))
	cfg.Mux = http.NewServeMux()
	cfg.Mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "the caller's\n") })
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		addrs, done := runServer(t, ctx, cfg)
		resp, err := http.Get("http://" + addrs.HTTP + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "go_goroutines") {
			t.Fatalf("/metrics answered %q: want Run's own", body)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	cfg.HTTP = ""
	var ce *server.ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "Mux" {
		t.Fatalf("a Mux with no HTTP: %v, want refused", err)
	}
}

// The drain ends the watches at the last revision there will be: the job
// controller in the server writes a job's status from its tasks, and a
// watch open over gRPC through the drain receives every revision up to
// the one the store reopens at, then ends (a client resumes from it after
// the restart, missing nothing).
func TestRunDrainEndsWatchesAtTheLastRevision(t *testing.T) {
	cfg := testConfig(t, make(logged, 1024))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, done := runServer(t, ctx, cfg)
	tr, err := remote.Dial(addrs.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	w, err := tr.Watch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ids := testkit.NewIDs(3, 3)
	job := ids.Next()
	ops := []txn.Op{txn.CreateJob(testkit.Job(job, "j", "batch"))}
	for i := range 3 {
		ops = append(ops, txn.CreateTask(testkit.Task(ids.Next(), job, fmt.Sprintf("j-%d", i), testkit.Res(1, 1))))
	}
	if _, err := tr.Commit(ctx, &txn.Txn{Component: "submitter", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	// Wait, at most 30 s, for the job controller's write (the job's
	// status, by the component jobs.Component), then drain.
	var last uint64
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	for controlled := false; !controlled; {
		sets, err := w.Next(wctx, 0)
		if err != nil {
			t.Fatalf("no write of the job controller within 30 s: %v", err)
		}
		for _, ws := range sets {
			last = ws.Revision
			for _, ch := range ws.Changes {
				if ch.Job != nil && ch.Job.UID == job && !ch.Created {
					controlled = true
				}
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	o := store.DefaultOptions(cfg.DataDir)
	o.Logger = slog.New(slog.DiscardHandler)
	st, err := store.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	end := st.Revision()
	st.Close()
	// The server is gone: the watch must already hold every revision up
	// to the store's last (its stream ended after sending them), and none
	// beyond.
	for last < end {
		sets, err := w.Next(wctx, 0)
		if err != nil {
			t.Fatalf("the watch ended at revision %d, the store reopens at %d: a write came after the watches ended (%v)", last, end, err)
		}
		for _, ws := range sets {
			last = ws.Revision
		}
	}
	if last != end {
		t.Fatalf("the watch delivered revision %d, beyond the store's last, %d", last, end)
	}
}

// A data directory of the other kind is refused before anything is
// opened, naming it: a single server's store given to a replicated
// member (which keeps the cell in DataDir/raft and would start without
// it), and a replicated member's directory given to a single server
// (which would open an empty store beside it). Each still opens as what
// it is afterwards, its revision unchanged.
func TestDataDirOfTheOtherKind(t *testing.T) {
	runOnce := func(cfg server.Config, commit bool) uint64 {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		addrs, done := runServer(t, ctx, cfg)
		tr, err := remote.Dial(addrs.GRPC)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		var rev uint64
		if commit {
			res, err := tr.Commit(ctx, &txn.Txn{Component: "t", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), "j", "batch"))}})
			if err != nil {
				t.Fatal(err)
			}
			rev = res.Revision
		} else {
			st, err := tr.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rev = st.Revision()
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return rev
	}
	single := testConfig(t, make(logged, 1024))
	rev := runOnce(single, true)
	member := single
	member.Member, member.Peers = 1, map[uint64]string{1: freeAddr(t)}
	member.Listen = member.Peers[1]
	err := server.Run(context.Background(), member)
	var ce *server.ConfigError
	if !errors.As(err, &ce) || ce.Field != "DataDir" || !strings.Contains(err.Error(), "single server's store") {
		t.Fatalf("a single server's directory as a member's: %v", err)
	}
	if got := runOnce(single, false); got != rev {
		t.Fatalf("the single server's store at revision %d after the refusal, was %d", got, rev)
	}

	member.DataDir = t.TempDir()
	mrev := runOnce(member, true)
	single.DataDir = member.DataDir
	err = server.Run(context.Background(), single)
	if !errors.As(err, &ce) || ce.Field != "DataDir" || !strings.Contains(err.Error(), "replicated cell's member") {
		t.Fatalf("a member's directory as a single server's: %v", err)
	}
	if got := runOnce(member, false); got != mrev {
		t.Fatalf("the member at revision %d after the refusal, was %d", got, mrev)
	}
}

// freeAddr is a loopback address free a moment ago.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A replicated member with a token file needs a peer token of its own,
// one of role peer there: each refused naming the field.
func TestPeerTokenRequired(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	os.WriteFile(tf, []byte("admin-0123456789abcdef,admin\npeer-0123456789abcdefgh,peer\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "admin.token"), []byte("admin-0123456789abcdef\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "other.token"), []byte("nobody-0123456789abcdef\n"), 0o600)
	for file, want := range map[string]string{
		"":            "needs this member's own token",
		"admin.token": "the token is admin's; a member needs a peer's",
		"other.token": "not in the token file",
	} {
		cfg := testConfig(t, make(logged, 1024))
		cfg.Member, cfg.Peers, cfg.TokensFile = 1, map[uint64]string{1: cfg.Listen}, tf
		if file != "" {
			cfg.PeerTokenFile = filepath.Join(dir, file)
		}
		err := server.Run(context.Background(), cfg)
		var ce *server.ConfigError
		if !errors.As(err, &ce) || ce.Field != "PeerTokenFile" || !strings.Contains(err.Error(), want) {
			t.Errorf("peer token file %q: %v, want PeerTokenFile: %s", file, err, want)
		}
	}
}
