package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/omega-cell/omega/bench/sim"
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

// peakRSSMb reads the process's peak resident set size (Linux).
func peakRSSMb() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
