package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/client/transport"
)

// The backoff between tries while a long-running component waits for the
// cell's server at start: from the first to the last, doubling.
const (
	waitFirstTry = 100 * time.Millisecond
	waitLastTry  = 2 * time.Second
	waitProbe    = 5 * time.Second // one try's bound
)

// waitForServer waits until the cell's server behind tr answers, as the
// components of a cell started together do (the server may still be
// opening its store): while a try finds it unreachable it tries again
// after a backoff that doubles from 100 ms to 2 s, for at most limit.
// It logs one line when it first has to wait, naming the server, what
// waits and why, and one when the server answers. Any answer counts, an
// error included (a refused token is the command's to report); only
// "unreachable" waits, and of that not what waiting will not mend (TLS
// on one side only, an unknown host, a port that is not omega's API:
// explainConn). what names who waits ("agent a1").
func waitForServer(ctx context.Context, tr *remote.Transport, server, what string, limit time.Duration, log *slog.Logger) error {
	start := time.Now()
	backoff := waitFirstTry
	waited := false
	for {
		pctx, cancel := context.WithTimeout(ctx, waitProbe)
		_, err := tr.Get(pctx, omegav1.ObjectKind_OBJECT_KIND_MACHINE, "", "omega-wait-probe")
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil || !errors.Is(err, transport.ErrUnavailable) {
			if waited {
				log.Info("the cell's server answers", "server", server, "after", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		err = explainConn(err)
		var ce *connError
		if errors.As(err, &ce) && !ce.transient {
			return fmt.Errorf("the cell's server at %s: %w", server, err) // a misconfiguration: waiting will not mend it
		}
		if time.Since(start)+backoff > limit {
			if waited {
				return fmt.Errorf("the cell's server at %s did not answer within --wait %v: %w", server, limit, err)
			}
			return fmt.Errorf("the cell's server at %s: %w", server, err)
		}
		if !waited {
			log.Info("waiting for the cell's server", "server", server, "for", what, "up_to", limit, "cause", err.Error())
			waited = true
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, waitLastTry)
	}
}

// connAdvice maps what gRPC and the network say when a connection cannot
// be made to what to do about it, the first that matches.
var connAdvice = []struct {
	cause, advice string
	transient     bool // a server still starting: waited for
}{
	// First: an HTTP server's answer read as a gRPC preface.
	{"http2: frame too large", "that port is not omega's API (an HTTP server, --http?): --server takes the server's gRPC address, its --listen", false},
	{"error reading server preface", "the server speaks TLS (or is not omega's API): connect with --tls-ca, the CA of its certificate", false},
	{"connection closed before server preface received", "the server speaks TLS (or is not omega's API): connect with --tls-ca, the CA of its certificate", false},
	{"first record does not look like a TLS handshake", "the server does not speak TLS: connect without --tls-ca", false},
	{"certificate required", "the server asks for a client certificate: give --tls-cert and --tls-key", false},
	{"broken pipe", "the server closed the connection during the handshake (a TLS server that asks for a client certificate? give --tls-cert and --tls-key)", false},
	{"certificate signed by unknown authority", "the server's certificate is not signed by the CA in --tls-ca", false},
	{"certificate is valid for", "the server's certificate does not name the host in --server: give --tls-server-name, the name it carries", false},
	{"produced zero addresses", "the host in --server is unknown", false},
	{"no such host", "the host in --server is unknown", false},
	{"connection refused", "nothing listens at --server: is `omega server` running there, and is this its --listen address?", true},
}

// explainConn puts what to do before a connection error whose cause it
// knows, keeping the cause after a colon; any other error is returned as
// it is.
func explainConn(err error) error {
	var done *connError
	if err == nil || errors.As(err, &done) {
		return err
	}
	msg := err.Error()
	for _, a := range connAdvice {
		if strings.Contains(msg, a.cause) {
			return &connError{advice: a.advice, transient: a.transient, err: err}
		}
	}
	return err
}

// connError is a connection error with what to do about it.
type connError struct {
	advice    string
	transient bool
	err       error
}

func (e *connError) Error() string { return e.advice + ": " + e.err.Error() }
func (e *connError) Unwrap() error { return e.err }
