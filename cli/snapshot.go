package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// omega snapshot save and restore (etcdctl's habit): the cell of a running
// server to a file, and a file to a new store a server then opens.

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot save|restore",
		Short: "Save a running cell to a file, or build a new store from one",
		Long: `save writes the cell of a running server to a file; restore builds a new store
from such a file, for omega server --data to open. The file carries the cell's
revision and every object, closed by a SHA-256 checksum: restore refuses a file
that is truncated or corrupt. It does not depend on the store's on-disk format,
so it also carries a cell from one omega version to another.`,
	}
	cmd.AddCommand(newSnapshotSaveCmd(), newSnapshotRestoreCmd())
	return cmd
}

func newSnapshotSaveCmd() *cobra.Command {
	var cf cellFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "save FILE [--server ADDR]",
		Short: "Write the cell of a running server to FILE",
		Long: `Lists the whole cell from the server (its gRPC Snapshot call, in chunks,
checked as a client's copy is) at its newest durable revision and writes it to
FILE atomically: into a temporary file beside it, synced, then renamed over FILE
(mode 0600: it holds the whole cell). Prints the revision and the objects'
counts; a listing that takes long says so on stderr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			if fi, err := os.Stat(filepath.Dir(file)); err != nil {
				return fmt.Errorf("save snapshot %s: %w", file, err)
			} else if !fi.IsDir() {
				return fmt.Errorf("save snapshot %s: %s is not a directory", file, filepath.Dir(file))
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %v: want a positive duration", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, err := listCell(ctx, &cf, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			info, err := store.SaveSnapshotFile(file, st)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "saved %s: revision %d, %d machines, %d jobs, %d tasks (%d bytes, sha256 %x)\n",
				file, info.Revision, info.Machines, info.Jobs, info.Tasks, info.Bytes, info.SHA256)
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long the listing may take")
	return cmd
}

// listCell lists the whole cell from the server at addr through the
// client's gRPC transport (chunk by chunk, checked as a client's copy is:
// txn.SnapshotReader), saying on stderr when it takes long.
func listCell(ctx context.Context, cf *cellFlags, stderr io.Writer) (*txn.State, error) {
	tr, err := cf.connect(ctx, "snapshot")
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	start, done, said := time.Now(), make(chan struct{}), make(chan bool, 1)
	go func() {
		select {
		case <-done:
			said <- false
		case <-time.After(time.Second):
			fmt.Fprintf(stderr, "snapshot: listing the cell at %s…\n", cf.server)
			<-done
			said <- true
		}
	}()
	st, err := tr.Snapshot(ctx)
	close(done)
	if <-said {
		fmt.Fprintf(stderr, "snapshot: listed in %.1f s\n", time.Since(start).Seconds())
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot of the cell at %s: %w", cf.server, err)
	}
	return st, nil
}

func newSnapshotRestoreCmd() *cobra.Command {
	var data string
	var bump uint64
	cmd := &cobra.Command{
		Use:   "restore FILE --data DIR [--bump-revision N]",
		Short: "Build a new store in DIR from the snapshot FILE",
		Long: `Checks FILE (its magic, version and checksum, and every object as a store checks
its own on reopen) and builds a new store in DIR holding the cell at the
snapshot's revision; omega server --data DIR then serves the same objects at the
same revision. DIR must not exist or be empty: a DIR that holds a store (or
anything) is refused. The store is built beside DIR and renamed to it once
complete, so an error leaves DIR as it was.

The restored store keeps no history: a client watching from an older revision
is told its revision is compacted and lists the cell again. A client of the old
server that had seen revisions after the snapshot's cannot be told so by the
revision alone: if the old server went on committing after the save, restore
with --bump-revision N (more than the revisions it may have committed since),
so every revision a client saw there is older than the restored store's first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			if data == "" {
				return errors.New("--data: required: the directory of the new store")
			}
			opts := store.Options{Dir: data}
			if err := store.CheckRestoreDir(opts); err != nil { // before reading a large file
				return err
			}
			st, info, err := store.LoadSnapshotFile(file)
			if err != nil {
				return err
			}
			if bump > math.MaxUint64-info.Revision {
				return fmt.Errorf("--bump-revision %d: the snapshot's revision %d plus it overflows", bump, info.Revision)
			}
			rev := info.Revision + bump
			if err := store.Restore(opts, st, rev); err != nil {
				return err
			}
			how := ""
			if bump > 0 {
				how = fmt.Sprintf(" (the snapshot's %d bumped by %d)", info.Revision, bump)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: revision %d%s, %d machines, %d jobs, %d tasks\n",
				file, data, rev, how, info.Machines, info.Jobs, info.Tasks)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the new store's directory (must not exist or be empty)")
	cmd.Flags().Uint64Var(&bump, "bump-revision", 0, "restore at the snapshot's revision plus N, past any revision the old server committed after the save")
	return cmd
}
