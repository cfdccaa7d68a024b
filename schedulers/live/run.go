package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/membership"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// Config configures Run: one scheduler instance of a live cell. Start from
// DefaultConfig.
type Config struct {
	// Scheduler is the instance's decision code (schedulers.New of its
	// kind, or a custom one). Required.
	Scheduler schedulers.Scheduler
	// Name is the instance's name, unique among its kind's instances: its
	// component name in the cell and its name in the membership. Required.
	Name string
	// Transport reaches the cell (client/remote's, or an in-process one).
	// Required; the caller closes it after Run returns.
	Transport client.Transport
	// Runner bounds the instance's attempts and models its decision time
	// (schedulers.DefaultRunnerConfig: TJob and TTask 0, so a decision
	// commits as soon as it is made); DefaultConfig sets Runner.Reasons,
	// so a job that waits says why.
	Runner schedulers.RunnerConfig
	// Membership, if set, is how the instance joins the cell's gossip
	// membership (its Join the server's gossip address, its Bind this
	// instance's, its Profile and Key), so that the instances of a kind
	// share its jobs by rendezvous hash and take a dead one's over. Nil:
	// the instance takes every job of its kind.
	Membership *membership.Config
	// Leave is how long the instance waits, when it stops, for the
	// membership to hear that it left (so that the others take its jobs
	// at once). 0: the default, 1 s (memberlist's Leave would wait without
	// a bound).
	Leave time.Duration
	// LeaseDuration is how long the instance's lease (its announcement in
	// the cell, see lease.go) holds after each renewal; it is renewed every
	// third of it. 0: DefaultLeaseDuration.
	LeaseDuration time.Duration
	// Logger says what the instance does. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig is a Config with every default set; Scheduler, Name and
// Transport are left for the caller.
func DefaultConfig() Config {
	r := schedulers.DefaultRunnerConfig()
	r.Reasons = true
	return Config{Runner: r, Leave: time.Second}
}

// Validate reports the first field that cannot run, by name.
func (c *Config) Validate() error {
	switch {
	case c.Scheduler == nil:
		return errors.New("scheduler config: Scheduler is required")
	case c.Name == "":
		return errors.New("scheduler config: Name is required: the instance's name, unique among the kind's instances")
	case txn.CheckLabel(c.Name) != nil:
		return fmt.Errorf("scheduler config: Name: %w", txn.CheckLabel(c.Name))
	case c.Transport == nil:
		return errors.New("scheduler config: Transport is required")
	case c.Runner.TJob < 0 || c.Runner.TTask < 0:
		return fmt.Errorf("scheduler config: Runner.TJob %v, Runner.TTask %v: want 0 or more", c.Runner.TJob, c.Runner.TTask)
	case c.Leave < 0:
		return fmt.Errorf("scheduler config: Leave %v: want 0 or more", c.Leave)
	case c.LeaseDuration < 0 || c.LeaseDuration > 0 && c.LeaseDuration < 30*time.Millisecond:
		return fmt.Errorf("scheduler config: LeaseDuration %v: want 0 (the default, %v) or at least 30ms", c.LeaseDuration, DefaultLeaseDuration)
	}
	return nil
}

// Run is a scheduler instance, live: it lists the cell through a client of
// cfg.Transport, joins the membership (cfg.Membership, if set), and drives
// the instance's Runner and Intake (Driver) until ctx ends, then leaves the
// membership and returns nil. A failure to start (the cell, the
// membership) or of the driver (the watch) returns its error, naming
// what failed. Run blocks; the goroutine that follows the membership has
// ended when it returns.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Leave == 0 {
		cfg.Leave = DefaultConfig().Leave
	}
	kind := cfg.Scheduler.Kind()
	c, err := client.New(ctx, cfg.Transport, client.Config{Component: cfg.Name, Clock: client.RealClock{}, Rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))})
	if err != nil {
		return fmt.Errorf("connect to the cell: %w", err)
	}
	r, err := schedulers.NewRunner(cfg.Scheduler, c, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), cfg.Runner)
	if err != nil {
		return err
	}
	dur := cfg.LeaseDuration
	if dur == 0 {
		dur = DefaultLeaseDuration
	}
	lease := &leaseKeeper{tr: cfg.Transport, name: cfg.Name, kind: kind, holder: newHolder(), duration: dur,
		poll: min(dur/10, 500*time.Millisecond), logger: logger, clock: client.RealClock{}}
	if err := lease.take(ctx, c); err != nil {
		return err
	}
	dctx, stopDriver := context.WithCancel(ctx)
	defer stopDriver()
	var leaseErr error
	kept := make(chan struct{})
	go func() { // live code: the lease renewed beside the driver
		defer close(kept)
		if leaseErr = lease.keep(dctx); leaseErr != nil {
			stopDriver()
		}
	}()
	defer func() {
		stopDriver()
		<-kept
		if leaseErr == nil {
			lease.release(2 * time.Second)
		}
	}()
	in := schedulers.NewIntake()
	if err := in.Add(r); err != nil {
		return err
	}
	var members <-chan []string
	if cfg.Membership != nil {
		m, err := JoinMembership(*cfg.Membership, kind, cfg.Name)
		if err != nil {
			return err
		}
		m.Logger = logger
		mctx, stopMembers := context.WithCancel(ctx)
		followed := make(chan struct{})
		go func() { defer close(followed); m.Run(mctx) }() // live code: memberlist's events to the driver
		defer m.Close(cfg.Leave)                           // after the follower: the others take this one's jobs at once
		defer func() { stopMembers(); <-followed }()
		members = m.Members()
	}
	logger.Info("scheduling", "kind", kind, "name", cfg.Name, "revision", c.View().Revision(), "lease", lease.holder)
	err = (&Driver{Runner: r, Intake: in, Clock: client.RealClock{}, Members: members, Logger: logger}).Run(dctx)
	if dctx.Err() != nil && ctx.Err() == nil {
		stopDriver()
		<-kept
		if leaseErr != nil {
			return leaseErr
		}
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		logger.Info("stopped", "name", cfg.Name, "jobs", len(r.Records()))
		return nil
	}
	return err
}
