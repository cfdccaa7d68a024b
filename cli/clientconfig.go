package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/omega-cell/omega/txn"
)

// The client configuration, in the manner of kubectl's kubeconfig: named
// contexts, each a cell's servers and the credentials to reach it, and the
// context in use. A command's cell flags are settled from, first to last:
// the flag given, the environment (OMEGA_SERVER, OMEGA_TOKEN_FILE), the
// context (--context, else OMEGA_CONTEXT, else the file's current-context),
// the default.
const (
	envConfig    = "OMEGA_CONFIG"
	envServer    = "OMEGA_SERVER"
	envTokenFile = "OMEGA_TOKEN_FILE"
	envContext   = "OMEGA_CONTEXT"
)

// defaultServer is --server's default: a server on this host with its
// default --listen.
const defaultServer = "127.0.0.1:7070"

// clientConfig is the file's form.
type clientConfig struct {
	CurrentContext string          `json:"current-context,omitempty"`
	Contexts       []clientContext `json:"contexts,omitempty"`
}

// clientContext is one cell as a client reaches it.
type clientContext struct {
	Name string `json:"name"`
	// Servers are the cell's servers' gRPC addresses: a client connects to
	// the first that answers and moves to the next when it fails.
	Servers       []string `json:"servers"`
	TokenFile     string   `json:"token-file,omitempty"`
	TLSCA         string   `json:"tls-ca,omitempty"`
	TLSCert       string   `json:"tls-cert,omitempty"`
	TLSKey        string   `json:"tls-key,omitempty"`
	TLSServerName string   `json:"tls-server-name,omitempty"`
}

// clientConfigPath is where the configuration is read from and written
// to: $OMEGA_CONFIG, else omega/config.yaml in the user's configuration
// directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config on Linux).
func clientConfigPath() (string, error) {
	if p := os.Getenv(envConfig); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("the client configuration: no user configuration directory (set %s): %w", envConfig, err)
	}
	return filepath.Join(dir, "omega", "config.yaml"), nil
}

// loadClientConfig reads the configuration at path; a missing file is an
// empty configuration.
func loadClientConfig(path string) (*clientConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the client configuration: %w", err)
	}
	var c clientConfig
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("the client configuration %s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("the client configuration %s: %w", path, err)
	}
	return &c, nil
}

func (c *clientConfig) validate() error {
	seen := map[string]bool{}
	for i, x := range c.Contexts {
		switch {
		case x.Name == "":
			return fmt.Errorf("contexts[%d]: no name", i)
		case seen[x.Name]:
			return fmt.Errorf("contexts[%d]: the name %s is taken", i, txn.Quote(x.Name))
		case len(x.Servers) == 0:
			return fmt.Errorf("contexts[%d] (%s): servers: none", i, txn.Quote(x.Name))
		}
		seen[x.Name] = true
		for j, s := range x.Servers {
			if err := checkServerAddr(s); err != nil {
				return fmt.Errorf("contexts[%d] (%s): servers[%d]: %w", i, txn.Quote(x.Name), j, err)
			}
		}
	}
	if c.CurrentContext != "" && c.context(c.CurrentContext) == nil {
		return fmt.Errorf("current-context: %s: no context of that name", txn.Quote(c.CurrentContext))
	}
	return nil
}

// context returns the context of that name, or nil.
func (c *clientConfig) context(name string) *clientContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// save writes the configuration to path (its directory made if missing),
// readable by its owner only: it names token files.
func (c *clientConfig) save(path string) error {
	if err := c.validate(); err != nil {
		return err
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("the client configuration: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("the client configuration: %w", err)
	}
	return os.Rename(tmp, path)
}

// checkServerAddr checks a server's address is host:port.
func checkServerAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%s: want host:port", txn.Quote(s))
	}
	return nil
}

// splitServers reads --server's list: addresses separated by commas.
func splitServers(s string) ([]string, error) {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if err := checkServerAddr(a); err != nil {
			return nil, err
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}
