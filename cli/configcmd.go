package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/omega-cell/omega/txn"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and change the client configuration: the cells' contexts, and the one in use",
		Long: `The client configuration names contexts, as kubectl's kubeconfig does: each a
cell's servers and the credentials that reach it (a token file, TLS files).
It is read from $` + envConfig + `, else omega/config.yaml in the user's
configuration directory (~/.config on Linux).

A command's --server, --token-file and TLS flags are settled from, first to
last: the flag given, the environment ($` + envServer + `, $` + envTokenFile + `),
the context (--context, else $` + envContext + `, else the current context), the
default (--server ` + defaultServer + `).`,
		Args: cobra.NoArgs,
	}
	var (
		set    clientContext
		use    bool
		output string
	)
	setCmd := &cobra.Command{
		Use:   "set-context NAME --server ADDR[,ADDR...] [--token-file F] [--tls-ca F ...] [--use]",
		Short: "Add a context, or change the settings given of one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(func(c *clientConfig) error {
				x := c.context(args[0])
				if x == nil {
					if !cmd.Flags().Changed("server") {
						return fmt.Errorf("context %s is new: --server required", txn.Quote(args[0]))
					}
					c.Contexts = append(c.Contexts, clientContext{Name: args[0]})
					x = &c.Contexts[len(c.Contexts)-1]
				}
				fl := cmd.Flags()
				if fl.Changed("server") {
					servers, err := splitServers(strings.Join(set.Servers, ","))
					if err != nil {
						return fmt.Errorf("--server: %w", err)
					}
					x.Servers = servers
				}
				for _, s := range []struct {
					flag     string
					from, to *string
				}{{"token-file", &set.TokenFile, &x.TokenFile}, {"tls-ca", &set.TLSCA, &x.TLSCA}, {"tls-cert", &set.TLSCert, &x.TLSCert}, {"tls-key", &set.TLSKey, &x.TLSKey}, {"tls-server-name", &set.TLSServerName, &x.TLSServerName}} {
					if fl.Changed(s.flag) {
						*s.to = *s.from
					}
				}
				if use || c.CurrentContext == "" {
					c.CurrentContext = args[0]
				}
				return nil
			})
		},
	}
	sf := setCmd.Flags()
	sf.StringSliceVar(&set.Servers, "server", nil, "the cell's servers' gRPC addresses")
	sf.StringVar(&set.TokenFile, "token-file", "", "the token file")
	sf.StringVar(&set.TLSCA, "tls-ca", "", "the CA of the servers' certificates")
	sf.StringVar(&set.TLSCert, "tls-cert", "", "this client's certificate")
	sf.StringVar(&set.TLSKey, "tls-key", "", "its key")
	sf.StringVar(&set.TLSServerName, "tls-server-name", "", "the name the servers' certificates carry")
	sf.BoolVar(&use, "use", false, "make it the current context")

	useCmd := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(func(c *clientConfig) error {
				if c.context(args[0]) == nil {
					return fmt.Errorf("context %s: no such context (%s)", txn.Quote(args[0]), contextNames(c))
				}
				c.CurrentContext = args[0]
				fmt.Fprintf(cmd.OutOrStdout(), "using context %s\n", args[0])
				return nil
			})
		},
	}
	deleteCmd := &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Remove a context",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(func(c *clientConfig) error {
				for i := range c.Contexts {
					if c.Contexts[i].Name == args[0] {
						c.Contexts = append(c.Contexts[:i], c.Contexts[i+1:]...)
						if c.CurrentContext == args[0] {
							c.CurrentContext = ""
						}
						return nil
					}
				}
				return fmt.Errorf("context %s: no such context (%s)", txn.Quote(args[0]), contextNames(c))
			})
		},
	}
	getCmd := &cobra.Command{
		Use:   "get-contexts [-o table|json|yaml|name]",
		Short: "List the contexts, the current one marked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, path, err := readConfig()
			if err != nil {
				return err
			}
			return printContexts(cmd.OutOrStdout(), c, path, output)
		},
	}
	getCmd.Flags().StringVarP(&output, "output", "o", "table", "table, json, yaml or name")
	currentCmd := &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, path, err := readConfig()
			if err != nil {
				return err
			}
			if c.CurrentContext == "" {
				return fmt.Errorf("no current context in %s (omega config use-context NAME)", path)
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.CurrentContext)
			return nil
		},
	}
	viewCmd := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration file's path and contents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, path, err := readConfig()
			if err != nil {
				return err
			}
			b, err := yaml.Marshal(c)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "# %s\n%s", path, b)
			return nil
		},
	}
	cmd.AddCommand(setCmd, useCmd, deleteCmd, getCmd, currentCmd, viewCmd)
	return cmd
}

// readConfig reads the client configuration and says where it is.
func readConfig() (*clientConfig, string, error) {
	path, err := clientConfigPath()
	if err != nil {
		return nil, "", err
	}
	c, err := loadClientConfig(path)
	return c, path, err
}

// editConfig reads the configuration, lets edit change it, and writes it.
func editConfig(edit func(*clientConfig) error) error {
	c, path, err := readConfig()
	if err != nil {
		return err
	}
	if err := edit(c); err != nil {
		return err
	}
	return c.save(path)
}

func contextNames(c *clientConfig) string {
	if len(c.Contexts) == 0 {
		return "there are none: omega config set-context"
	}
	var names []string
	for _, x := range c.Contexts {
		names = append(names, x.Name)
	}
	return "there are " + strings.Join(names, ", ")
}

func printContexts(w io.Writer, c *clientConfig, path, output string) error {
	switch output {
	case "name":
		for _, x := range c.Contexts {
			fmt.Fprintln(w, x.Name)
		}
		return nil
	case "json", "yaml":
		return printAs(w, output, c)
	case "table":
		if len(c.Contexts) == 0 {
			fmt.Fprintf(w, "no contexts in %s (omega config set-context NAME --server ADDR)\n", path)
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tSERVERS\tTOKEN-FILE\tTLS-CA")
		for _, x := range c.Contexts {
			cur := ""
			if x.Name == c.CurrentContext {
				cur = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cur, x.Name, strings.Join(x.Servers, ","), dash(x.TokenFile), dash(x.TLSCA))
		}
		return tw.Flush()
	}
	return fmt.Errorf("-o %s: want table, json, yaml or name", txn.Quote(output))
}

// printAs prints v as JSON (indented) or YAML.
func printAs(w io.Writer, format string, v any) error {
	var b []byte
	var err error
	if format == "json" {
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// buildVersion is what `omega version` prints.
type buildVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Time      string `json:"commit_time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func readBuildVersion() buildVersion {
	v := buildVersion{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = bi.Main.Version // "(devel)" when built from a checkout
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json|yaml]",
		Short: "Print omega's version: the module version, the commit it was built from, the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readBuildVersion()
			w := cmd.OutOrStdout()
			switch output {
			case "", "text":
				commit := v.Commit
				switch {
				case commit == "":
					commit = "unknown (not built from a git checkout)"
				case v.Modified:
					commit += " (with local changes)"
				}
				fmt.Fprintf(w, "omega %s\ncommit %s\n", v.Version, commit)
				if v.Time != "" {
					fmt.Fprintf(w, "committed %s\n", v.Time)
				}
				fmt.Fprintf(w, "%s %s\n", v.GoVersion, v.Platform)
				return nil
			case "json", "yaml":
				return printAs(w, output, v)
			}
			return fmt.Errorf("-o %s: want text, json or yaml", txn.Quote(output))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, json or yaml")
	return cmd
}
