// Package cli is the omega command tree. cmd/omega runs it; a program that
// registers its own scheduler (see examples/) runs it too, so the custom
// scheduler plugs into `sim` like the built-in ones.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs the omega command line with os.Args and exits.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := NewRootCmd().ExecuteContext(ctx); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "omega:", err)
		os.Exit(1)
	}
}
