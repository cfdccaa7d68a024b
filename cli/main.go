package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs the omega command line with os.Args and exits: 0 on success,
// 1 with the error on stderr otherwise. SIGINT and SIGTERM cancel the
// running command.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "omega:", explainConn(err))
		os.Exit(1)
	}
}
