package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
)

// cellFlags are how a command reaches a cell's server: its address, the
// token it presents, and TLS.
type cellFlags struct {
	server, tokenFile              string
	tlsCA, tlsCert, tlsKey, tlsSNI string
	// wait is how long to wait at start for a server that is not
	// listening yet (--wait).
	wait time.Duration
}

// register adds the flags of a one-shot command (a server not listening
// yet is waited for 10 s: a script may start the cell and use it at once).
func (f *cellFlags) register(fs *pflag.FlagSet) { f.registerWaiting(fs, 10*time.Second) }

// registerWaiting adds the flags, waiting up to wait by default.
func (f *cellFlags) registerWaiting(fs *pflag.FlagSet, wait time.Duration) {
	fs.DurationVar(&f.wait, "wait", wait, "how long to wait at start for the cell's server to listen (the commands of a cell may start in any order); 0: fail at once")
	fs.StringVar(&f.server, "server", "127.0.0.1:7070", "the cell's server")
	fs.StringVar(&f.tokenFile, "token-file", "", "a file holding this component's token (the server's --tokens names its role)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "connect with TLS, checking the server's certificate against this CA file")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --tls-ca: this client's certificate, for a server that asks for one")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: its key")
	fs.StringVar(&f.tlsSNI, "tls-server-name", "", "with --tls-ca: the name the server's certificate must carry (default: the --server host)")
}

// dial connects to the server.
func (f *cellFlags) dial() (*remote.Transport, error) {
	var opts []grpc.DialOption
	if f.tokenFile != "" {
		tok, err := remote.ReadToken(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		opts = append(opts, remote.WithToken(tok))
	}
	if f.tlsCA != "" || f.tlsCert != "" {
		cfg, err := remote.TLSConfig(f.tlsCA, f.tlsCert, f.tlsKey, f.tlsSNI)
		if err != nil {
			return nil, err
		}
		opts = append(opts, remote.WithTLS(cfg))
	}
	return remote.Dial(f.server, opts...)
}

// connect dials the server and waits for it to listen, for at most
// --wait (waitForServer); what names who waits.
func (f *cellFlags) connect(ctx context.Context, what string) (*remote.Transport, error) {
	tr, err := f.dial()
	if err != nil {
		return nil, err
	}
	if err := waitForServer(ctx, tr, f.server, what, f.wait, slog.Default()); err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}

// dialCell connects a client to the cell, as component.
func dialCell(ctx context.Context, f *cellFlags, component string) (*client.Client, *remote.Transport, error) {
	tr, err := f.connect(ctx, component)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(ctx, tr, client.Config{Component: component, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))})
	if err != nil {
		tr.Close()
		return nil, nil, fmt.Errorf("the cell at %s: %w", f.server, err)
	}
	return c, tr, nil
}
