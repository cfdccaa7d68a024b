package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/omega-cell/omega/membership"
)

// gossipFlags are how a member joins the cell's gossip membership
// (package membership).
type gossipFlags struct{ profile, keyFile string }

func (g *gossipFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.profile, "gossip-profile", "lan", membership.ProfileHelp)
	fs.StringVar(&g.keyFile, "gossip-key-file", "", membership.KeyHelp)
}

// config is the flags as a member's configuration, its key read.
func (g gossipFlags) config() (membership.Config, error) {
	c := membership.Config{Profile: g.profile}
	if _, err := membership.Profile(g.profile); err != nil {
		return c, fmt.Errorf("--gossip-profile: %w", err)
	}
	if g.keyFile != "" {
		k, err := membership.ReadKey(g.keyFile)
		if err != nil {
			return c, fmt.Errorf("--gossip-key-file: %w", err)
		}
		c.Key = k
	}
	return c, nil
}

func validProfile(p string) bool { _, err := membership.Profile(p); return err == nil }
