package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/omega-cell/omega/bench/sim"
	"github.com/omega-cell/omega/internal/hostinfo"
)

func printSchedulerTable(w io.Writer, s sim.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scheduler\tjobs\tabandoned\ttasks placed\ttxns\tconflicted\tconflict fraction\tbusyness\twait mean s\twait p90 s\tplaced wait s\t")
	for _, x := range s.Schedulers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.3f\t%.3f ± %.3f\t%.2f\t%.2f\t%.2f\t\n", x.Name, x.JobsScheduled, x.JobsAbandoned, x.TasksPlaced,
			x.Transactions, x.Conflicts, x.ConflictFraction, x.BusynessMedian, x.BusynessMAD, x.WaitMeanS, x.WaitP90S, x.PlacedWaitMeanS)
	}
	tw.Flush()
}

// peakRSSMb is the process's peak resident set size.
func peakRSSMb() float64 {
	_, peak := hostinfo.RSS()
	return peak
}
