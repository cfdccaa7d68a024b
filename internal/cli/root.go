package cli

import (
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

func NewRootCmd() *cobra.Command {
	var (
		verbose    bool
		cpuProfile string
		memProfile string
		stopProf   func()
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
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				stopProf = func() { pprof.StopCPUProfile(); f.Close() }
			}
			return nil
		},
		PersistentPostRunE: func(*cobra.Command, []string) error {
			if stopProf != nil {
				stopProf()
			}
			if memProfile != "" {
				f, err := os.Create(memProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				return pprof.Lookup("allocs").WriteTo(f, 0)
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file")
	root.PersistentFlags().StringVar(&memProfile, "memprofile", "", "write an allocation profile (pprof) to this file at exit")
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "debug logging on stderr")
	root.AddCommand(newDemoCmd(), newSimCmd(), newBenchCmd())
	return root
}
