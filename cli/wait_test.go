package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/remote"
)

// TestExplainConnReal: what a client meets when it dials the wrong thing —
// each a real connection on loopback — is told as what to do, the raw
// cause kept after a colon.
func TestExplainConnReal(t *testing.T) {
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	web := httptest.NewServer(http.NotFoundHandler()) // an HTTP port, not gRPC
	t.Cleanup(web.Close)
	tlsWeb := httptest.NewTLSServer(http.NotFoundHandler()) // a TLS port
	t.Cleanup(tlsWeb.Close)
	plain := grpc.NewServer() // a gRPC server without TLS
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go plain.Serve(pl)
	t.Cleanup(plain.Stop)

	cases := []struct {
		name, target string
		tls          bool
		advice       string
	}{
		{"nothing listens", closed, false, "nothing listens at --server"},
		{"an HTTP port", strings.TrimPrefix(web.URL, "http://"), false, "that port is not omega's API"},
		{"a TLS port, plain client", strings.TrimPrefix(tlsWeb.URL, "https://"), false, "the server speaks TLS"},
		{"a plain port, TLS client", pl.Addr().String(), true, "the server does not speak TLS"},
		{"an unknown host", "omega-no-such-host.invalid:7070", false, "the host in --server is unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []grpc.DialOption
			if tc.tls {
				opts = append(opts, remote.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}))
			}
			tr, err := remote.Dial(tc.target, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_MACHINE, "", "x")
			if err == nil {
				t.Fatal("Get succeeded")
			}
			got := explainConn(err)
			if !strings.HasPrefix(got.Error(), tc.advice) || !strings.HasSuffix(got.Error(), ": "+err.Error()) {
				t.Fatalf("explained as %q, want %q first and the cause %q after a colon", got, tc.advice, err)
			}
			if !errors.Is(got, err) || explainConn(got) != got {
				t.Fatalf("%v: the cause is lost or explained twice", got)
			}
		})
	}
	if other := errors.New("something else"); explainConn(other) != other {
		t.Fatal("an error of no known cause changed")
	}
}

// TestWaitForServerBounded: with nothing listening, waitForServer tries
// again until --wait is spent, logging one line, and then fails naming the
// server and what to do; with no wait it fails at once, logging nothing.
func TestWaitForServerBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	tr, err := remote.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, limit := range []time.Duration{0, 700 * time.Millisecond} {
		var logged strings.Builder
		log := slog.New(slog.NewTextHandler(&logged, nil))
		err := waitForServer(context.Background(), tr, addr, "agent a1", limit, log)
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "nothing listens at --server") {
			t.Fatalf("limit %v: %v, want an error naming %s and what to do", limit, err, addr)
		}
		lines := strings.Count(logged.String(), "waiting for the cell's server")
		if want := map[bool]int{true: 0, false: 1}[limit == 0]; lines != want || (limit > 0 && !strings.Contains(logged.String(), "for=\"agent a1\"")) {
			t.Fatalf("limit %v: logged %q, want %d waiting line naming the agent", limit, logged.String(), want)
		}
	}
}
