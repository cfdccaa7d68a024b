package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

func newAuditCmd() *cobra.Command {
	var data, output, history string
	cmd := &cobra.Command{
		Use:   "audit (--data DIR | --history FILE)",
		Short: "Count the invariant violations in a store's state, by kind, naming the objects",
		Long: `Opens the store in --data (one no server is using: stop the server, or audit
a restored snapshot), reads its state at the newest revision, and counts what
breaks the invariants a correct cell keeps: claims that declare less than
their tasks request, machines whose tasks request more than they have, a
machine's allocation that is not its tasks' claims, tasks reported ended
that were never claimed, tasks claimed by a scheduler of another kind than
their job names. The checker is independent of the store's policies: it
shares no validation code with them. It exits 1 when it finds a violation.

With --history FILE (written by omega sim --history) it audits every revision
of the run instead, from its starting state: each violation counted once when
it begins, with when each kind was first detectable (simulated seconds) —
what a final state no longer shows (a short claim whose task has ended).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			if history != "" {
				if data != "" {
					return fmt.Errorf("--history: give --data or --history, not both")
				}
				return auditHistory(cmd.OutOrStdout(), history, output)
			}
			if data == "" {
				return fmt.Errorf("--data: required, a store directory (or --history FILE)")
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
				if err := writeIndentedJSON(w, r); err != nil {
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
	cmd.Flags().StringVar(&history, "history", "", "a history file (omega sim --history) to audit revision by revision")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// auditHistory audits a history file with an audit.Stream whose times
// count from the simulation's epoch.
func auditHistory(w io.Writer, path, output string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--history: %w", err)
	}
	defer f.Close()
	s := audit.NewStream(sim.Epoch.UnixNano())
	err = sim.ReadHistory(f, func(st *txn.State, at int64) error { s.Start(st, at); return nil },
		func(ws *txn.WriteSet) error { s.Observe(ws); return nil })
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r := s.Report()
	if output == "json" {
		if err := writeIndentedJSON(w, r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "history to revision %d: %d revisions audited, %d violations began\n\n", r.Revision, r.Revisions, r.Total())
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tCOUNT\tFIRST (simulated s)")
		for _, k := range audit.Kinds {
			first := "-"
			if at, ok := r.FirstSeconds[k]; ok {
				first = fmt.Sprintf("%.3f", at)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", k, r.Counts[k], first)
		}
		tw.Flush()
		for i, v := range r.Examples {
			if i == 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s %s: %s\n", v.Kind, v.Object, v.Detail)
		}
	}
	if r.Total() > 0 {
		return errViolations{r.Total()}
	}
	return nil
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

// writeIndentedJSON writes v as indented JSON with a final newline.
func writeIndentedJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
