package server_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// A replicated server (one with a ReadBarrier) asked to watch from a
// revision it has not applied yet — a client resuming there after the
// member it watched went away — waits for it and delivers what follows;
// past CatchUpWait it refuses with ErrFutureRevision, saying how far it
// is. A single server refuses such a watch at once.
func TestWatchWaitsForARevisionNotYetApplied(t *testing.T) {
	// entered gets a token when a Watch reaches its handler.
	entered := make(chan struct{}, 1)
	serve := func(t *testing.T, replicated bool) (*store.Store, *remote.Transport) {
		st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
		svc := server.New(st)
		if replicated {
			svc.ReadBarrier = func(context.Context) error { return nil }
		}
		g := grpc.NewServer(append(server.ServerOptions(), grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			select {
			case entered <- struct{}{}:
			default:
			}
			return h(srv, ss)
		}))...)
		svc.Register(g)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		tr, err := remote.Dial(lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return st, tr
	}
	commit := func(t *testing.T, st *store.Store, i uint32) uint64 {
		t.Helper()
		res, err := st.Commit(context.Background(), machineTxn("t", i))
		if err != nil || res.Committed != 1 {
			t.Fatalf("commit %d: %+v %v", i, res, err)
		}
		return res.Revision
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("replicated", func(t *testing.T) {
		st, tr := serve(t, true)
		base := commit(t, st, 1)
		done := make(chan error, 1)
		var got []uint64
		go func() {
			w, err := tr.Watch(ctx, base+2)
			if err != nil {
				done <- err
				return
			}
			defer w.Close()
			for len(got) == 0 || got[len(got)-1] < base+3 {
				sets, err := w.Next(ctx, 0)
				if err != nil {
					done <- err
					return
				}
				for _, ws := range sets {
					got = append(got, ws.Revision)
				}
			}
			done <- nil
		}()
		<-entered // the watch waits (or, refused, has failed) before the commits
		for i := uint32(2); i <= 4; i++ {
			commit(t, st, i)
		}
		if err := <-done; err != nil {
			t.Fatalf("a watch from %d, two revisions ahead of the server: %v", base+2, err)
		}
		if len(got) != 1 || got[0] != base+3 {
			t.Fatalf("watch from %d delivered %v, want [%d]", base+2, got, base+3)
		}
	})

	t.Run("replicated, too far", func(t *testing.T) {
		old := server.CatchUpWait
		server.CatchUpWait = 200 * time.Millisecond
		defer func() { server.CatchUpWait = old }()
		st, tr := serve(t, true)
		base := commit(t, st, 1)
		_, err := tr.Watch(ctx, base+5)
		if !errors.Is(err, txn.ErrFutureRevision) || !strings.Contains(err.Error(), "has applied") {
			t.Fatalf("a watch from %d past the wait: %v, want ErrFutureRevision saying how far the server is", base+5, err)
		}
	})

	t.Run("single", func(t *testing.T) {
		// Were it to wait, it would wait out the call's deadline instead.
		old := server.CatchUpWait
		server.CatchUpWait = time.Hour
		defer func() { server.CatchUpWait = old }()
		st, tr := serve(t, false)
		base := commit(t, st, 1)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		_, err := tr.Watch(wctx, base+1)
		if !errors.Is(err, txn.ErrFutureRevision) {
			t.Fatalf("a single server's watch from %d: %v, want ErrFutureRevision", base+1, err)
		}
	})
}
