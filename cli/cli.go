// Package cli is omega's command line as a library. A program that
// registers its own scheduler (schedulers.Register) and calls Main gets
// every omega command, with its scheduler plugged into `omega sim` like the
// built-in ones; cmd/omega is that program with no scheduler of its own.
// This is the supported entry point for a custom-scheduler binary in a
// module of its own (the command tree itself lives in internal/cli).
package cli

import (
	"github.com/spf13/cobra"

	internal "github.com/omega-cell/omega/internal/cli"
)

// Main runs the omega command line with os.Args and exits: 0 on success,
// 1 with the error on stderr otherwise. SIGINT and SIGTERM cancel the
// running command.
func Main() { internal.Main() }

// NewRootCommand returns the omega command tree, for a program that adds
// commands of its own or runs it with other arguments.
func NewRootCommand() *cobra.Command { return internal.NewRootCmd() }
