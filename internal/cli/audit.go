package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/bench/audit"
	"github.com/omega-cell/omega/store"
)

func newAuditCmd() *cobra.Command {
	var data, output string
	cmd := &cobra.Command{
		Use:   "audit --data DIR",
		Short: "Count the invariant violations in a store's state, by kind, naming the objects",
		Long: `Opens the store in --data (one no server is using: stop the server, or audit
a restored snapshot), reads its state at the newest revision, and counts what
breaks the invariants a correct cell keeps: claims that declare less than
their tasks request, machines whose tasks request more than they have, a
machine's allocation that is not its tasks' claims, tasks reported ended
that were never claimed, tasks claimed by a scheduler of another kind than
their job names. The checker is independent of the store's policies: it
shares no validation code with them. It exits 1 when it finds a violation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			if data == "" {
				return fmt.Errorf("--data: required, a store directory")
			}
			if fi, err := os.Stat(data); err != nil || !fi.IsDir() {
				return fmt.Errorf("--data %s: not a store directory (%v)", data, err)
			}
			opts := store.DefaultOptions(data)
			opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			st, err := store.Open(opts)
			if err != nil {
				return fmt.Errorf("open the store in %s: %w", data, err)
			}
			r := audit.Check(st.Snapshot())
			if err := st.Close(); err != nil {
				return fmt.Errorf("close the store: %w", err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				e := json.NewEncoder(w)
				e.SetIndent("", "  ")
				if err := e.Encode(r); err != nil {
					return err
				}
			} else {
				printAudit(w, r)
			}
			if r.Total() > 0 {
				return errViolations{r.Total()}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the store directory to audit")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// errViolations makes the command exit 1 after its report.
type errViolations struct{ n int }

func (e errViolations) Error() string { return fmt.Sprintf("%d violations", e.n) }

func printAudit(w io.Writer, r audit.Report) {
	fmt.Fprintf(w, "revision %d: %d tasks, %d machines, %d violations\n\n", r.Revision, r.Tasks, r.Machines, r.Total())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tCOUNT")
	for _, k := range audit.Kinds {
		fmt.Fprintf(tw, "%s\t%d\n", k, r.Counts[k])
	}
	tw.Flush()
	const shown = 20
	for i, v := range r.Violations {
		if i == shown {
			fmt.Fprintf(w, "... and %d more (-o json lists them all)\n", len(r.Violations)-shown)
			break
		}
		if i == 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s %s: %s\n", v.Kind, v.Object, v.Detail)
	}
}
