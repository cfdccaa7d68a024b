package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/remote"
)

// peerCerts writes a CA and one certificate for 127.0.0.1 good for both
// ends of TLS (a member serves with it and dials its peers with it):
// dir/ca.pem, dir/server.pem, dir/server.key.
func peerCerts(t *testing.T, dir string) {
	t.Helper()
	write := func(name, kind string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "omega test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "omega server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write("server.pem", "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	write("server.key", "EC PRIVATE KEY", kb)
}

// TestReplicatedCellTokensAndTLS: three members with a token file and TLS
// (client certificates required): they talk to each other over TLS with
// their peer token; a job submitted with a submitter's token through a
// follower is forwarded and committed; after the leader's SIGKILL another
// leads and commits. The peer service refuses a submitter's token and no
// token, saying why, and the cell's revision does not move.
func TestReplicatedCellTokensAndTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	peerCerts(t, dir)
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("admin-0123456789abcdef,admin,ops\nsubmit-0123456789abcdef,submitter,alice\npeer-0123456789abcdefgh,peer,servers\n"), 0o600)
	for name, tok := range map[string]string{"admin": "admin-0123456789abcdef", "submit": "submit-0123456789abcdef", "peer": "peer-0123456789abcdefgh"} {
		os.WriteFile(filepath.Join(dir, name+".token"), []byte(tok+"\n"), 0o600)
	}
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	var ports, peers []string
	for i := range 3 {
		ports = append(ports, freePort(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, ports[i]))
	}
	var srv []*serverProc
	for i := range 3 {
		srv = append(srv, startServerAt(t, t.TempDir(), ports[i], "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1),
			"--tokens", tokens, "--peer-token-file", filepath.Join(dir, "peer.token"), "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca))
	}
	clientTLS := []string{"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}
	leader := func(skip int) int {
		lead := -1
		if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
			for i, s := range srv {
				if _, m, l, ok := health(s.http); ok && i != skip && l != 0 && m == l {
					lead = i
				}
			}
			return lead >= 0
		}) {
			t.Fatalf("no leader within 30 s:\n%s", srv[0].log())
		}
		return lead
	}
	lead := leader(-1)
	job := filepath.Join(dir, "j.yaml")
	submit := func(via int, name string) {
		t.Helper()
		os.WriteFile(job, []byte("meta: {name: "+name+"}\nspec:\n  kind: batch\n  template:\n    resources: {cpu: 100m, memory: 1Mi}\n    command: {path: /bin/true}\n"), 0o644)
		var out, errs string
		var err error
		if !eventually(30*time.Second, 200*time.Millisecond, func() bool {
			out, errs, err = run(t, "", append([]string{"submit", "-f", job, "--server", ports[via], "--token-file", filepath.Join(dir, "submit.token")}, clientTLS...)...)
			return err == nil
		}) {
			t.Fatalf("submit %s through server %d: %v\n%s%s", name, via+1, err, out, errs)
		}
	}
	follower := (lead + 1) % 3
	submit(follower, "through-a-follower")

	// The peer service, called as a client would: refused without a
	// peer's token, nothing changed.
	rev, _, _, _ := health(srv[lead].http)
	for _, tok := range []string{"submit", ""} {
		tc, err := remote.TLSConfig(ca, cert, key, "")
		if err != nil {
			t.Fatal(err)
		}
		opts := []grpc.DialOption{remote.WithTLS(tc)}
		if tok != "" {
			b, _ := os.ReadFile(filepath.Join(dir, tok+".token"))
			opts = append(opts, remote.WithToken(strings.TrimSpace(string(b))))
		}
		conn, err := grpc.NewClient(ports[lead], opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cellgrpc.NewPeerClient(conn).Join(ctx, &cellgrpc.JoinRequest{Cluster: "x", Member: 1, Id: 1<<32 | 7})
		if err == nil {
			stream, serr := cellgrpc.NewPeerClient(conn).Send(ctx)
			if serr == nil {
				stream.Send(&cellgrpc.PeerMessages{Cluster: "x", From: 9, To: 1, Messages: [][]byte{[]byte("garbage")}})
				_, err = stream.CloseAndRecv()
			}
		}
		cancel()
		conn.Close()
		want := map[string]codes.Code{"submit": codes.PermissionDenied, "": codes.Unauthenticated}[tok]
		if status.Code(err) != want || !strings.Contains(status.Convert(err).Message(), map[string]string{"submit": "peer", "": "token"}[tok]) {
			t.Fatalf("the peer service with token %q: %v, want %v saying why", tok, err, want)
		}
	}
	if now, _, _, _ := health(srv[lead].http); now != rev {
		t.Fatalf("the cell moved from revision %d to %d on refused peer calls", rev, now)
	}

	srv[lead].cmd.Process.Signal(syscall.SIGKILL)
	newLead := leader(lead)
	submit(3-lead-newLead, "after-the-kill") // the survivor that does not lead: forwarded again
	out, errs, err := run(t, "", append([]string{"get", "jobs", "-o", "name", "--server", ports[newLead], "--token-file", filepath.Join(dir, "admin.token")}, clientTLS...)...)
	if err != nil || !strings.Contains(out, "job/through-a-follower") || !strings.Contains(out, "job/after-the-kill") {
		t.Fatalf("get jobs: %v\n%s%s", err, out, errs)
	}

	// A member added through the follower (forwarded to the leader over
	// TLS with the follower's peer token): a submitter may not, an admin
	// may; the new server joins over TLS with its peer token.
	via := 3 - lead - newLead
	p4 := freePort(t)
	add := func(token string) (string, string, error) {
		return run(t, "", append([]string{"server", "add", "4", "--address", p4, "--server", ports[via], "--token-file", filepath.Join(dir, token+".token")}, clientTLS...)...)
	}
	if out, errs, err := add("submit"); err == nil || !strings.Contains(errs, "only an admin's") {
		t.Fatalf("omega server add with a submitter's token: %v\n%s%s", err, out, errs)
	}
	if out, errs, err := add("admin"); err != nil || !strings.Contains(out, "member 4 added") {
		t.Fatalf("omega server add with an admin's token, through a follower: %v\n%s%s", err, out, errs)
	}
	s4 := startServerAt(t, t.TempDir(), p4, "--peers", strings.Join(peers, ",")+",4="+p4, "--member", "4", "--join",
		"--tokens", tokens, "--peer-token-file", filepath.Join(dir, "peer.token"), "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca)
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		body, err := healthBody(s4.http)
		return err == nil && strings.Contains(body, fmt.Sprintf("leader %d", newLead+1)) && strings.Contains(body, "reads linearizable")
	}) {
		t.Fatalf("member 4 did not join the TLS cell within 30 s:\n%s", s4.log())
	}
}
