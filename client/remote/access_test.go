package remote_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// serveWith starts the server with extra options (tokens, TLS).
func serveWith(t *testing.T, st *store.Store, extra ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(server.ServerOptions(), extra...)...)
	server.New(st).Register(g)
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return lis.Addr().String()
}

const (
	agentToken = "agent-token-0123456789"
	schedToken = "sched-token-0123456789"
)

func tokens(t *testing.T) *server.Tokens {
	p := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(p, []byte(agentToken+",agent,a1\n"+schedToken+",scheduler,batch-0\n"), 0o600)
	toks, err := server.LoadTokens(p)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// TestTokens: over the wire, a call without a token or with an unknown one
// is Unauthenticated, reads and writes included; an agent's token may
// register a machine (recorded under its component whatever the
// transaction said) and may not claim; a scheduler's may claim.
func TestTokens(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	addr := serveWith(t, st, tokens(t).ServerOptions()...)
	ctx := context.Background()
	dial := func(opts ...grpc.DialOption) *remote.Transport {
		tr, err := remote.Dial(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	m := testkit.UID('m', 1, 0)
	register := &txn.Txn{Component: "agent/a1", Ops: []txn.Op{txn.CreateMachine(testkit.Machine(m, "a1", testkit.Res(1000, 1<<30)))}}
	for name, tr := range map[string]*remote.Transport{"no token": dial(), "unknown token": dial(remote.WithToken("nope-0123456789abcdef"))} {
		if _, err := tr.Commit(ctx, register); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("%s: commit: %v, want Unauthenticated", name, err)
		}
		if _, err := tr.List(ctx, nil); status.Code(err) != codes.Unauthenticated && !strings.Contains(err.Error(), "token") {
			t.Fatalf("%s: list: %v, want Unauthenticated", name, err)
		}
	}
	agent := dial(remote.WithToken(agentToken))
	register.Component = ""
	if res, err := agent.Commit(ctx, register); err != nil || res.Committed != 1 {
		t.Fatalf("agent registers its machine: %+v %v", res, err)
	}
	task := testkit.UID('t', 1, 0)
	create := &txn.Txn{Ops: []txn.Op{txn.CreateTask(testkit.Task(task, uuid.Nil, "t", testkit.Res(10, 10)))}}
	if _, err := agent.Commit(ctx, create); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "agent a1 may not create a task") {
		t.Fatalf("agent creates a task: %v", err)
	}
	sched := dial(remote.WithToken(schedToken))
	if res, err := sched.Commit(ctx, create); err != nil || res.Committed != 1 {
		t.Fatalf("scheduler creates a task: %+v %v", res, err)
	}
	claim := &txn.Txn{Component: "batch-0", ViewRevision: st.Revision(), Ops: []txn.Op{txn.Claim(task, m, testkit.Res(10, 10), st.Revision())}}
	if _, err := agent.Commit(ctx, claim); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("agent claims: %v", err)
	}
	if res, err := sched.Commit(ctx, claim); err != nil || res.Committed != 1 {
		t.Fatalf("scheduler claims: %+v %v", res, err)
	}
	s := st.Snapshot()
	mm, _ := s.Machine(m)
	tk, _ := s.Task(task)
	if mm.State != omegav1.MachineState_MACHINE_STATE_UP || tk.Scheduler != "batch-0" {
		t.Fatalf("machine %v, task scheduler %q", mm.State, tk.Scheduler)
	}
}

// TestTLS: with the server's certificate, a client that trusts its CA
// connects; one that trusts another CA, or dials in plaintext, does not;
// with client certificates required, a client without one is refused.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCA(t, dir, "ca")
	newCert(t, dir, "server", ca, caKey, true)
	newCert(t, dir, "client", ca, caKey, false)
	other, _ := newCA(t, dir, "other")
	_ = other
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	creds, err := server.TLS(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveWith(t, st, creds)
	try := func(caFile, cert, key string) error {
		cfg, err := remote.TLSConfig(caFile, cert, key, "")
		if err != nil {
			return err
		}
		tr, err := remote.Dial(addr, remote.WithTLS(cfg))
		if err != nil {
			return err
		}
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = tr.List(ctx, nil)
		return err
	}
	pem := func(n string) string { return filepath.Join(dir, n) }
	if err := try(pem("ca.pem"), pem("client.pem"), pem("client.key")); err != nil {
		t.Fatalf("a trusted client: %v", err)
	}
	if err := try(pem("other.pem"), pem("client.pem"), pem("client.key")); err == nil {
		t.Fatal("a client that trusts another CA connected")
	}
	if err := try(pem("ca.pem"), "", ""); err == nil {
		t.Fatal("a client without a certificate connected to a server that requires one")
	}
	tr, _ := remote.Dial(addr)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tr.List(ctx, nil); err == nil {
		t.Fatal("a plaintext client got an answer from a TLS server")
	}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newCA(t *testing.T, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func newCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, isServer bool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if isServer {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
}

// lowerBearer sends the token with the scheme in lower case.
type lowerBearer string

func (b lowerBearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "bearer " + string(b)}, nil
}
func (lowerBearer) RequireTransportSecurity() bool { return false }

// TestTokenSchemeCaseInsensitive: "bearer" is the Bearer scheme (RFC 7235:
// schemes are case-insensitive).
func TestTokenSchemeCaseInsensitive(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	addr := serveWith(t, st, tokens(t).ServerOptions()...)
	tr, err := remote.Dial(addr, grpc.WithPerRPCCredentials(lowerBearer(agentToken)))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.List(context.Background(), nil); err != nil {
		t.Fatalf("a lower-case scheme: %v", err)
	}
}
