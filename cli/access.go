package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
)

// cellFlags are how a command reaches a cell's server: its address (or
// the addresses of its servers), the token it presents, and TLS. Each is
// settled from the flag, else the environment, else the client
// configuration's context (clientconfig.go), else its default.
type cellFlags struct {
	server, tokenFile              string
	tlsCA, tlsCert, tlsKey, tlsSNI string
	context                        string
	// wait is how long to wait at start for a server that is not
	// listening yet (--wait).
	wait time.Duration
	fs   *pflag.FlagSet
	// servers is --server's list, settled by resolve.
	servers []string
}

// register adds the flags of a one-shot command (a server not listening
// yet is waited for 10 s: a script may start the cell and use it at once).
func (f *cellFlags) register(fs *pflag.FlagSet) { f.registerWaiting(fs, 10*time.Second) }

// registerWaiting adds the flags, waiting up to wait by default.
func (f *cellFlags) registerWaiting(fs *pflag.FlagSet, wait time.Duration) {
	f.fs = fs
	fs.DurationVar(&f.wait, "wait", wait, "how long to wait at start for the cell's server to listen (the commands of a cell may start in any order); 0: fail at once")
	fs.StringVar(&f.server, "server", defaultServer, "the cell's server, or its servers separated by commas (default $"+envServer+", else the context's)")
	fs.StringVar(&f.tokenFile, "token-file", "", "a file holding this component's token (the server's --tokens names its role; default $"+envTokenFile+", else the context's)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "connect with TLS, checking the server's certificate against this CA file")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --tls-ca: this client's certificate, for a server that asks for one")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: its key")
	fs.StringVar(&f.tlsSNI, "tls-server-name", "", "with --tls-ca: the name the server's certificate must carry (default: each server's host)")
	fs.StringVar(&f.context, "context", "", "the client configuration's context to use (default $"+envContext+", else its current-context; `omega config`)")
}

// resolve settles the flags not given from the environment and the client
// configuration's context.
func (f *cellFlags) resolve() error {
	given := func(name string) bool { return f.fs != nil && f.fs.Changed(name) }
	var ctx *clientContext
	name := f.context
	if !given("context") {
		name = os.Getenv(envContext)
	}
	path, perr := clientConfigPath()
	if perr == nil || name != "" {
		if perr != nil {
			return perr
		}
		cfg, err := loadClientConfig(path)
		if err != nil {
			return err
		}
		if name == "" {
			name = cfg.CurrentContext
		}
		if name != "" {
			if ctx = cfg.context(name); ctx == nil {
				return fmt.Errorf("context %s: no such context in %s", quoteClip(name), path)
			}
		}
	}
	pick := func(flag string, v *string, env string, fromCtx func(*clientContext) string) {
		switch {
		case given(flag):
		case env != "" && os.Getenv(env) != "":
			*v = os.Getenv(env)
		case ctx != nil && fromCtx(ctx) != "":
			*v = fromCtx(ctx)
		}
	}
	pick("server", &f.server, envServer, func(c *clientContext) string { return strings.Join(c.Servers, ",") })
	pick("token-file", &f.tokenFile, envTokenFile, func(c *clientContext) string { return c.TokenFile })
	pick("tls-ca", &f.tlsCA, "", func(c *clientContext) string { return c.TLSCA })
	pick("tls-cert", &f.tlsCert, "", func(c *clientContext) string { return c.TLSCert })
	pick("tls-key", &f.tlsKey, "", func(c *clientContext) string { return c.TLSKey })
	pick("tls-server-name", &f.tlsSNI, "", func(c *clientContext) string { return c.TLSServerName })
	servers, err := splitServers(f.server)
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	f.servers = servers
	return nil
}

// dial connects to the server (or to the first of the servers that
// answers, moving on when it fails).
func (f *cellFlags) dial() (*remote.Transport, error) {
	opts, err := f.dialOptions()
	if err != nil {
		return nil, err
	}
	if len(f.servers) == 1 {
		return remote.Dial(f.servers[0], opts...)
	}
	// Several servers: gRPC's first-pick policy over their addresses, each
	// checked against its own host's name under TLS.
	r := manual.NewBuilderWithScheme("omega-servers")
	addrs := make([]resolver.Address, len(f.servers))
	for i, s := range f.servers {
		host, _, _ := net.SplitHostPort(s)
		addrs[i] = resolver.Address{Addr: s, ServerName: host}
	}
	r.InitialState(resolver.State{Addresses: addrs})
	return remote.Dial(r.Scheme()+":///cell", append(opts, grpc.WithResolvers(r))...)
}

// dialAddr connects to the server at addr alone, with the token and TLS
// the flags give.
func (f *cellFlags) dialAddr(addr string) (*remote.Transport, error) {
	opts, err := f.dialOptions()
	if err != nil {
		return nil, err
	}
	return remote.Dial(addr, opts...)
}

// dialOptions resolves the flags and returns the options that present
// their token and TLS.
func (f *cellFlags) dialOptions() ([]grpc.DialOption, error) {
	if err := f.resolve(); err != nil {
		return nil, err
	}
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
	return opts, nil
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
