package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/schedulers/live"
	"github.com/omega-cell/omega/txn"
)

func newSchedulerCmd() *cobra.Command {
	var kind, name, join, gossip string
	var gf gossipFlags
	var cf cellFlags
	var params []string
	var tJob, tTask, leaseDur time.Duration
	cmd := &cobra.Command{
		Use:   "scheduler --kind KIND --name NAME --server ADDR",
		Short: "Run one scheduler instance against a cell over gRPC",
		Long: `Runs a scheduler of --kind (batch, service, mapreduce, or one a custom binary
registered) as the instance --name against the cell whose server is at --server:
it lists the cell, takes the jobs of its kind, and places them through the client
library, retrying conflicts, until SIGTERM or an interrupt (then it exits 0).

--t-job and --t-task model the decision time as in the simulation; 0 (the
default) commits as soon as a decision is made.

With --join (the server's --gossip address) the instance joins the cell's gossip
membership, and the instances of a kind share its jobs: each takes the jobs the
rendezvous hash of the job id over the live instances' names gives it, and when
an instance dies (or leaves) the others take its jobs over. Until the membership
has converged, two instances may both work on a job: the store's optimistic
concurrency keeps that safe (one claim of a task commits, the other conflicts).
Without --join an instance takes every job of its kind.

The instance announces itself in the cell with a lease named after it (omega get
schedulers), renewed every third of --lease-duration and given back when it
stops; the server tells a job whose kind has no live lease that no scheduler of
that kind runs. A lease another live process holds under the same --name is
refused (that process renewed it while this one waited); one left by a process
that died is taken over once it expires.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case kind == "":
				return fmt.Errorf("--kind: required, one of %s", strings.Join(schedulers.Kinds(), ", "))
			case name == "":
				return errors.New("--name: required: the instance's name, unique among the kind's instances")
			case txn.CheckLabel(name) != nil:
				return fmt.Errorf("--name: %w", txn.CheckLabel(name))
			case cf.server == "":
				return errors.New("--server: required: the address of `omega server`")
			case !validProfile(gf.profile):
				return fmt.Errorf("--gossip-profile %q: want lan, wan or local", gf.profile)
			case tJob < 0 || tTask < 0:
				return fmt.Errorf("--t-job %v, --t-task %v: want 0 or more", tJob, tTask)
			case leaseDur < 30*time.Millisecond:
				return fmt.Errorf("--lease-duration %v: want at least 30ms", leaseDur)
			}
			p := schedulers.Params{}
			for _, kv := range params {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--param %q: want name=value", kv)
				}
				p[k] = v
			}
			s, err := schedulers.New(kind, p)
			if err != nil {
				return fmt.Errorf("--kind %s: %w", kind, err)
			}
			cfg := live.DefaultConfig()
			cfg.Scheduler, cfg.Name = s, name
			cfg.Runner.TJob, cfg.Runner.TTask = tJob, tTask
			cfg.LeaseDuration = leaseDur
			if join != "" {
				gc, err := gf.config()
				if err != nil {
					return err
				}
				gc.Bind, gc.Join = gossip, joinList(join)
				cfg.Membership = &gc
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			tr, err := cf.dial()
			if err != nil {
				return err
			}
			defer tr.Close()
			if err := waitForServer(ctx, tr, cf.server, "scheduler "+name, cf.wait, slog.Default()); err != nil {
				return err
			}
			cfg.Transport = tr
			if err := live.Run(ctx, cfg); err != nil {
				return fmt.Errorf("scheduler %s (server %s): %w", name, cf.server, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "the scheduler kind")
	f.StringVar(&name, "name", "", "this instance's name (its component name in the cell)")
	cf.registerWaiting(f, time.Minute)
	f.StringVar(&join, "join", "", "the cell's gossip address (the server's --gossip; a replicated cell's, comma-separated): share the kind's jobs with its other instances")
	f.StringVar(&gossip, "gossip", "127.0.0.1:0", "with --join: this instance's gossip address")
	gf.register(f)
	f.StringArrayVar(&params, "param", nil, "a parameter of the kind, name=value (repeatable), e.g. policy=global-cap for mapreduce")
	f.DurationVar(&tJob, "t-job", 0, "modelled decision time per job")
	f.DurationVar(&tTask, "t-task", 0, "modelled decision time per task")
	f.DurationVar(&leaseDur, "lease-duration", live.DefaultLeaseDuration, "how long the instance's lease holds after each renewal (renewed every third of it)")
	return cmd
}

// joinList reads --join: gossip addresses, comma-separated.
func joinList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
