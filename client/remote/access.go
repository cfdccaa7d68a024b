package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// WithToken presents token on every call (gRPC metadata "authorization:
// Bearer TOKEN"), as the server's token file names it. It is sent over a
// plaintext connection too (a cell on loopback): use TLS beyond one host.
func WithToken(token string) grpc.DialOption { return grpc.WithPerRPCCredentials(bearer(token)) }

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// ReadToken reads a token file: the token, surrounding whitespace trimmed.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("token file %s: want one token on one line", path)
	}
	return tok, nil
}

// TLSConfig is a client's TLS: the server's certificate checked against
// caFile (empty: the host's roots), and — for a server that asks for
// client certificates — certFile and keyFile presented.
func TLSConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pool, err := certPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func certPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// WithTLS dials with TLS.
func WithTLS(cfg *tls.Config) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}
