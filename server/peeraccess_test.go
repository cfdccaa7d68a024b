package server_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// The peer role: the peer service is a peer token's alone (any other
// token, or none, is refused before the handler runs); on the cell API a
// peer token may only commit, and only a commit a member marked forwarded,
// which is taken as the member authorized it (its component kept). A
// submitter's commit marked forwarded is checked as any of a submitter's.
func TestPeerRole(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	os.WriteFile(tf, []byte("admin-0123456789abcdef,admin\nsubmit-0123456789abcdef,submitter,alice\npeer-0123456789abcdefgh,peer\n"), 0o600)
	toks, err := server.LoadTokens(tf)
	if err != nil {
		t.Fatal(err)
	}
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	g := grpc.NewServer(append(server.ServerOptions(), toks.ServerOptions()...)...)
	server.New(st).Register(g)
	cellgrpc.RegisterPeerServer(g, cellgrpc.UnimplementedPeerServer{}) // reached: Unimplemented
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	dial := func(tok string) *grpc.ClientConn {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if tok != "" {
			opts = append(opts, remote.WithToken(tok))
		}
		c, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	for tok, want := range map[string]codes.Code{
		"peer-0123456789abcdefgh": codes.Unimplemented, // let through to the (stub) handler
		"admin-0123456789abcdef":  codes.PermissionDenied,
		"submit-0123456789abcdef": codes.PermissionDenied,
		"":                        codes.Unauthenticated,
		"garbage-garbage-garbage": codes.Unauthenticated,
	} {
		_, err := cellgrpc.NewPeerClient(dial(tok)).Join(ctx, &cellgrpc.JoinRequest{})
		if grpcstatus.Code(err) != want {
			t.Errorf("Peer/Join with token %q: %v, want %v", tok, err, want)
		}
	}
	peer := cellgrpc.NewCellClient(dial("peer-0123456789abcdefgh"))
	if _, err := peer.Get(ctx, &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Name: "x"}); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("a peer token's Get: %v, want PermissionDenied", err)
	}
	machine := func(n uint32) *omegav1.Transaction {
		tx := &txn.Txn{Component: "agent/m1", Ops: []txn.Op{txn.CreateMachine(testkit.Machine(testkit.UID('p', n, 0), "m1", testkit.Res(1000, 1<<30)))}}
		return tx.Proto()
	}
	rev := st.Revision()
	if _, err := peer.Commit(ctx, machine(1)); grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "forward") {
		t.Errorf("a peer token's commit not marked forwarded: %v, want PermissionDenied", err)
	}
	fctx := metadata.AppendToOutgoingContext(ctx, server.ForwardedHeader, "1")
	res, err := peer.Commit(fctx, machine(2))
	if err != nil || res.GetRevision() != rev+1 {
		t.Fatalf("a peer's forwarded commit: %+v %v", res, err)
	}
	if m, _ := st.Snapshot().Machine(testkit.UID('p', 2, 0)); m == nil {
		t.Fatal("the forwarded machine is not in the cell")
	}
	sub := cellgrpc.NewCellClient(dial("submit-0123456789abcdef"))
	if _, err := sub.Commit(fctx, machine(3)); grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "may not") {
		t.Errorf("a submitter's machine marked forwarded: %v, want the submitter's PermissionDenied", err)
	}
	if st.Revision() != rev+1 {
		t.Fatalf("revision %d, want %d: a refused commit changed the cell", st.Revision(), rev+1)
	}

	// Changing the servers is an admin's (or a member forwarding an
	// admin's request); a single server says it has none to change.
	change := &cellgrpc.ServerChange{Op: cellgrpc.ServerChange_OP_ADD, Member: 4, Address: "127.0.0.1:1"}
	for _, tc := range []struct {
		tok  string
		ctx  context.Context
		want codes.Code
		says string
	}{
		{"admin-0123456789abcdef", ctx, codes.FailedPrecondition, "single server"},
		{"peer-0123456789abcdefgh", fctx, codes.FailedPrecondition, "single server"},
		{"peer-0123456789abcdefgh", ctx, codes.PermissionDenied, "only an admin's"},
		{"submit-0123456789abcdef", fctx, codes.PermissionDenied, "only an admin's"},
		{"", ctx, codes.Unauthenticated, ""},
	} {
		_, err := cellgrpc.NewCellClient(dial(tc.tok)).ChangeServers(tc.ctx, change)
		if grpcstatus.Code(err) != tc.want || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("ChangeServers with token %q: %v, want %v saying %q", tc.tok, err, tc.want, tc.says)
		}
	}
}
