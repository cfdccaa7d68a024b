// Package cli is omega's command line as a library. A program that
// registers its own scheduler (schedulers.Register) and calls Main gets
// every omega command, with its scheduler plugged into `omega sim` like the
// built-in ones; cmd/omega is that program with no scheduler of its own.
// This is the supported entry point for a custom-scheduler binary in a
// module of its own. The command tree is this package's unexported code:
// it turns flags into the configs of the packages below it (server.Run,
// agents/live.Run, schedulers/live.Run, jobs, the bench) and prints.
package cli

import "github.com/spf13/cobra"

// NewRootCommand returns the omega command tree, for a program that adds
// commands of its own or runs it with other arguments.
func NewRootCommand() *cobra.Command { return newRootCmd() }
