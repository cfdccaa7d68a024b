package cli

import (
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	var (
		verbose    bool
		cpuProfile string
		memProfile string
	)
	root := &cobra.Command{
		Use:           "omega",
		Short:         "omega: shared-state cluster scheduling (the Omega design) and its benchmarks",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			// The command about to run, whenever it was added (a program
			// built on cli.NewRootCommand may add its own).
			withProfiles(cmd, &cpuProfile, &memProfile)
			return nil
		},
	}
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file")
	root.PersistentFlags().StringVar(&memProfile, "memprofile", "", "write an allocation profile (pprof) to this file at exit")
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "debug logging on stderr")
	root.AddCommand(newDemoCmd(), newSimCmd(), newBenchCmd(), newReplayCmd(), newServerCmd(), newSchedulerCmd(), newSubmitCmd(), newGetCmd(), newAgentCmd(), newTaskShimCmd(), newKillCmd(), newWatchCmd(), newSnapshotCmd(), newDescribeCmd(), newLogsCmd(), newAuditCmd(), newConfigCmd(), newVersionCmd(), newMachineCmd())
	return root
}

// withProfiles wraps c's RunE in the --cpuprofile and --memprofile files,
// once. The root's PersistentPreRunE calls it for the command that runs, so
// every command has the flags' effect, however it came into the tree.
// RunE comes after the command's PreRunE, which checks its flags: a refused
// run writes no profile either.
func withProfiles(c *cobra.Command, cpuProfile, memProfile *string) {
	if c.Annotations[profiledKey] != "" {
		return
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[profiledKey] = "yes"
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if *cpuProfile != "" {
				f, err := os.Create(*cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					return err
				}
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
			if err := run(cmd, args); err != nil {
				return err
			}
			if *memProfile != "" {
				f, err := os.Create(*memProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				return pprof.Lookup("allocs").WriteTo(f, 0)
			}
			return nil
		}
	}
}

// profiledKey marks a command withProfiles wrapped (cobra's Annotations).
const profiledKey = "omega/profiled"
