package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCellFlagsResolve: each setting comes from the flag given, else the
// environment, else the context (--context, else OMEGA_CONTEXT, else the
// current one), else the default.
func TestCellFlagsResolve(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := &clientConfig{CurrentContext: "lab", Contexts: []clientContext{
		{Name: "lab", Servers: []string{"10.0.0.1:7070", "10.0.0.2:7070"}, TokenFile: "/lab/token", TLSCA: "/lab/ca"},
		{Name: "prod", Servers: []string{"prod:7070"}, TokenFile: "/prod/token"},
	}}
	if err := cfg.save(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode: %v %v, want 0600", fi.Mode(), err)
	}
	cases := []struct {
		name       string
		config     string // OMEGA_CONFIG
		env        map[string]string
		args       []string
		server     string
		token, tca string
		err        string
	}{
		{name: "no file: the default", config: filepath.Join(dir, "none.yaml"), server: "127.0.0.1:7070"},
		{name: "the current context", config: path, server: "10.0.0.1:7070,10.0.0.2:7070", token: "/lab/token", tca: "/lab/ca"},
		{name: "OMEGA_CONTEXT", config: path, env: map[string]string{envContext: "prod"}, server: "prod:7070", token: "/prod/token"},
		{name: "--context over OMEGA_CONTEXT", config: path, env: map[string]string{envContext: "lab"}, args: []string{"--context", "prod"}, server: "prod:7070", token: "/prod/token"},
		{name: "the environment over the context", config: path, env: map[string]string{envServer: "env:1", envTokenFile: "/env/token"}, server: "env:1", token: "/env/token", tca: "/lab/ca"},
		{name: "flags over all", config: path, env: map[string]string{envServer: "env:1"}, args: []string{"--server", "flag:2", "--token-file", "/flag/token"}, server: "flag:2", token: "/flag/token", tca: "/lab/ca"},
		{name: "an unknown context", config: path, args: []string{"--context", "nope"}, err: `context "nope": no such context`},
		{name: "a bad address", config: path, args: []string{"--server", "nocolon"}, err: `--server: "nocolon": want host:port`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envConfig, tc.config)
			for _, k := range []string{envServer, envTokenFile, envContext} {
				t.Setenv(k, tc.env[k])
			}
			var f cellFlags
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := f.resolve()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("resolve: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.server != tc.server || f.tokenFile != tc.token || f.tlsCA != tc.tca || strings.Join(f.servers, ",") != tc.server {
				t.Fatalf("server %q (%v) token %q ca %q, want %q %q %q", f.server, f.servers, f.tokenFile, f.tlsCA, tc.server, tc.token, tc.tca)
			}
		})
	}
}

// TestClientConfigRefused: a file with an unknown field, a context without
// servers or a current context that names none is refused, naming it.
func TestClientConfigRefused(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"contexts: [{name: a, servers: [h:1], token: x}]", `unknown field "token"`},
		{"contexts: [{name: a}]", `contexts[0] ("a"): servers: none`},
		{"contexts: [{name: a, servers: [h]}]", `servers[0]: "h": want host:port`},
		{"current-context: b\ncontexts: [{name: a, servers: [h:1]}]", `current-context: "b": no context of that name`},
		{"contexts: [{name: a, servers: [h:1]}, {name: a, servers: [h:2]}]", `contexts[1]: the name "a" is taken`},
	} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(p, []byte(tc.body), 0o600)
		if _, err := loadClientConfig(p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want %q and the path", tc.body, err, tc.want)
		}
	}
}
