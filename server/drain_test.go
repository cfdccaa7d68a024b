package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	grpcstatus "google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/grpcerr"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// drainServer is a server as `omega server` runs one (a durable store, the
// service with its metrics, gRPC with the service's options) on addr,
// whose Commit calls from the component "held" commit, then wait until
// hold is closed before they answer (held says when one waits): a commit
// in flight, for its client, as long as a test likes.
type drainServer struct {
	addr string
	st   *store.Store
	svc  *server.Service
	g    *grpc.Server
	reg  *prometheus.Registry
	held chan struct{}
	hold chan struct{}
	// closed is closed when the server closes its listener; ended gets a
	// token when a watch stream's handler returns.
	closed chan struct{}
	ended  chan struct{}
}

// closingListener says when it is closed.
type closingListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closingListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func startDrainServer(t *testing.T, dir, addr string) *drainServer {
	t.Helper()
	o := store.DefaultOptions(dir)
	o.Logger = slog.New(slog.DiscardHandler)
	st, err := store.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &drainServer{addr: lis.Addr().String(), st: st, svc: server.New(st), reg: prometheus.NewRegistry(), held: make(chan struct{}, 1), hold: make(chan struct{}),
		closed: make(chan struct{}), ended: make(chan struct{}, 16)}
	s.svc.Metrics = server.NewMetrics(s.reg, st)
	hold := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if tx, ok := req.(*omegav1.Transaction); ok && info.FullMethod == cellgrpc.Cell_Commit_FullMethodName && tx.GetComponent() == "held" {
			// Committed, its answer not sent yet: in flight for the client.
			resp, err := handler(ctx, req)
			s.held <- struct{}{}
			<-s.hold
			return resp, err
		}
		return handler(ctx, req)
	}
	ended := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		if info.FullMethod == cellgrpc.Cell_Watch_FullMethodName {
			s.ended <- struct{}{}
		}
		return err
	}
	s.g = grpc.NewServer(append(server.ServerOptions(), grpc.ChainUnaryInterceptor(hold), grpc.ChainStreamInterceptor(ended))...)
	s.svc.Register(s.g)
	go s.g.Serve(&closingListener{Listener: lis, closed: s.closed})
	t.Cleanup(s.g.Stop)
	return s
}

// await waits, at most within, for ch.
func await[T any](t *testing.T, ch <-chan T, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
	}
}

func machineTxn(component string, n uint32) *txn.Txn {
	return &txn.Txn{Component: component, Conflict: omegav1.ConflictMode_CONFLICT_MODE_FINE, Commit: omegav1.CommitMode_COMMIT_MODE_INCREMENTAL,
		Ops: []txn.Op{txn.CreateMachine(testkit.Machine(testkit.UID('d', n, 0), "m", testkit.Res(1000, 1<<30)))}}
}

// A watch the drain ended resumes after the restart from the last
// revision it delivered, as `omega server`'s drain means it to ("the
// watches end at the last revision there will be and a client resumes
// from it after the restart"): with nothing in flight, and with a commit
// in flight when the drain began, which the drain waits for and
// acknowledges.
//
// The second failed before the drain waited for the commits in flight:
// the watches ended while commits were still served, one acknowledged
// after that moved the store past the revision they ended at, and a
// reopened store retains no history (its oldest watchable revision is the
// one it opens at), so the resumed watch was ErrCompacted and its client
// listed the whole cell again — every watcher of the cell at once, after
// any restart with commits in flight. Now new commits are refused, those
// in flight finish, and every watch sends up to the last revision before
// it ends.
func TestWatchResumesAfterDrain(t *testing.T) {
	for _, inFlight := range []bool{false, true} {
		name := "nothing in flight"
		if inFlight {
			name = "a commit in flight"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := startDrainServer(t, dir, "127.0.0.1:0")
			addr := s.addr
			tr, err := remote.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			ctx := context.Background()
			res, err := tr.Commit(ctx, machineTxn("tester", 1))
			if err != nil || res.Committed != 1 {
				t.Fatalf("commit: %+v %v", res, err)
			}
			w, err := tr.Watch(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(w.Close)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if sets, err := w.Next(wctx, 0); err != nil || len(sets) != 1 || sets[0].Revision != res.Revision {
				t.Fatalf("the watch before the drain: %d sets, %v; want the revision %d", len(sets), err, res.Revision)
			}
			last := res.Revision

			committed := make(chan txn.Result, 1)
			if inFlight {
				go func() {
					r, err := tr.Commit(ctx, machineTxn("held", 2))
					if err != nil {
						t.Errorf("the commit in flight: %v", err)
					}
					committed <- r
				}()
				select {
				case <-s.held:
				case <-time.After(30 * time.Second):
					t.Fatal("the commit did not reach the server within 30 s")
				}
			}

			// The drain, as `omega server` does it: the watches end, the
			// graceful stop waits for the commits in flight. (The graceful
			// stop starts first here, so that no watch opened again reaches
			// this server: with Drain first, it would find it draining and
			// end as well.)
			stopped := make(chan struct{})
			go func() { s.g.GracefulStop(); close(stopped) }()
			await(t, s.closed, 30*time.Second, "the listener closed")
			s.svc.Drain()
			// New commits are refused as unavailable (not evaluated: the
			// client tries again after the restart).
			if _, err := s.svc.Commit(ctx, machineTxn("late", 9).Proto()); !errors.Is(remoteErr(err), transport.ErrUnavailable) {
				t.Fatalf("a commit after the drain: %v, want unavailable", err)
			}
			await(t, s.ended, 30*time.Second, "the watch stream ended")
			if inFlight {
				close(s.hold)
				if r := <-committed; r.Committed != 1 || r.Revision != last+1 {
					t.Fatalf("the commit in flight: %+v, want it acknowledged at %d", r, last+1)
				}
			}
			select {
			case <-stopped:
			case <-time.After(30 * time.Second):
				t.Fatal("the graceful stop did not end within 30 s")
			}
			final := s.st.Revision()
			if err := s.st.Close(); err != nil {
				t.Fatal(err)
			}

			// The restart, on the same data and address: the watch resumes
			// by itself from the last revision it delivered.
			s2 := startDrainServer(t, dir, addr)
			if s2.st.Revision() != final {
				t.Fatalf("reopened at %d, stopped at %d", s2.st.Revision(), final)
			}
			// A commit from a client whose calls wait for its connection to
			// be ready (tr's may still be backing off from the stop, and a
			// fail-fast call is unavailable until it redials), within 30 s.
			tr3, err := remote.Dial(addr, grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr3.Close() })
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			res3, err := tr3.Commit(cctx, machineTxn("tester", 3))
			if err != nil || res3.Committed != 1 {
				t.Fatalf("commit after the restart: %+v %v", res3, err)
			}
			var got []uint64
			for len(got) == 0 || got[len(got)-1] < res3.Revision {
				sets, err := w.Next(wctx, 0)
				if errors.Is(err, transport.ErrCompacted) {
					t.Fatalf("the watch that ended at revision %d when the server drained cannot resume after the restart: %v "+
						"(the commit in flight during the drain was acknowledged at %d, after the watches ended; the reopened store "+
						"resumes watches only from %d, the revision it opened at, so the watch's client must list the whole cell again)", last, err, last+1, final)
				}
				if err != nil {
					t.Fatalf("the watch across the restart: %v", err)
				}
				for _, ws := range sets {
					got = append(got, ws.Revision)
				}
			}
			want := []uint64{res3.Revision}
			if inFlight {
				want = []uint64{last + 1, res3.Revision}
			}
			if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
				t.Fatalf("the watch across the restart delivered revisions %v, want %v", got, want)
			}
		})
	}
}

// remoteErr reads a service error as a client would.
func remoteErr(err error) error { return grpcerr.Error(grpcstatus.Convert(err)) }
