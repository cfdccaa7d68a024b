package remote_test

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/transporttest"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// serve starts the store's gRPC server on a loopback port and returns its
// address; everything stops when t ends.
func serve(t testing.TB, st *store.Store, small bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(server.ServerOptions()...)
	svc := server.New(st)
	if small {
		svc.ChunkBytes = 512 // many chunks and pieces even for a small cell
	}
	svc.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

func backend(small bool) transporttest.Backend {
	return func(t testing.TB, o store.Options) transport.Transport {
		st := storekit.Open(t, o)
		tr, err := remote.Dial(serve(t, st, small))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
}

// TestConformance: the gRPC transport, talking to the store's server over
// loopback, passes the suite every transport runs — with the default
// chunk size, and with chunks so small that every snapshot and most
// revisions cross the wire in pieces.
func TestConformance(t *testing.T) {
	t.Run("default-chunks", func(t *testing.T) { transporttest.Run(t, backend(false)) })
	t.Run("small-chunks", func(t *testing.T) { transporttest.Run(t, backend(true)) })
}

// TestClientOverGRPC: the client library runs on the gRPC transport as on
// the in-process one: it lists, syncs to its own commits and keeps a copy.
func TestClientOverGRPC(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	tr, err := remote.Dial(serve(t, st, false))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	c, err := client.New(ctx, tr, client.Config{Component: "remote", Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewUID()
	tx := c.NewTxn(c.View())
	tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(m, "m0", testkit.Res(4000, 1<<34)))}
	res, err := c.Commit(ctx, tx)
	if err != nil || res.Committed != 1 {
		t.Fatalf("commit over gRPC: %+v %v", res, err)
	}
	if err := c.SyncTo(ctx, res.Revision); err != nil {
		t.Fatal(err)
	}
	if err := testkit.DiffStates(st.Snapshot(), c.View().State, testkit.Compare{}); err != nil {
		t.Fatalf("the client's copy over gRPC: %v", err)
	}
}
