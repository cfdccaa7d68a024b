package sim

import (
	"context"
	"fmt"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// The cell's built-in actors: the arrivals, and a runner on a loop of its
// own (how shared state and the monolithic architectures drive their
// schedulers). The fleet, the job controller, expiry and sampling are
// vtime.Every; an architecture may drive the runners with actors of its own
// (two-level's allocator and frameworks).

// Arrival is one job submission: the job and its tasks (none for a
// mapreduce job, whose scheduler creates its workers), at a virtual offset.
type Arrival struct {
	At    time.Duration
	Job   *omegav1.Job
	Tasks []*omegav1.Task
}

// Source yields arrivals in time order.
type Source interface {
	Next() (Arrival, bool)
}

// Fleet is the simulated fleet as the cell drives it.
type Fleet interface {
	// Tick reports what finished or failed by now, in one transaction.
	Tick(ctx context.Context, now time.Time) (txn.Result, error)
}

// arrivals submits the workload's jobs at their times: each job and its
// tasks in one transaction. The job reaches its scheduler through the
// cell: the intake reads it from the watch, as a scheduler process would.
type arrivals struct {
	src  Source
	sub  *client.Client
	next Arrival
}

func (a *arrivals) Start(context.Context, time.Time) (vtime.Next, error) { return a.load(), nil }

func (a *arrivals) load() vtime.Next {
	x, ok := a.src.Next()
	if !ok {
		return vtime.Next{}
	}
	a.next = x
	return vtime.Next{At: Epoch.Add(x.At), Phase: vtime.PhaseArrive}
}

func (a *arrivals) Step(ctx context.Context, _ time.Time) (vtime.Next, error) {
	c := a.sub
	if err := c.Sync(ctx); err != nil {
		return vtime.Next{}, err
	}
	tx := c.NewTxn(c.View())
	tx.Ops = make([]txn.Op, 0, 1+len(a.next.Tasks))
	tx.Ops = append(tx.Ops, txn.CreateJob(a.next.Job))
	for _, t := range a.next.Tasks {
		tx.Ops = append(tx.Ops, txn.CreateTask(t))
	}
	if _, err := c.Commit(ctx, tx); err != nil {
		return vtime.Next{}, fmt.Errorf("submit job %s: %w", a.next.Job.GetMeta().GetName(), err)
	}
	return a.load(), nil
}

// runnerActor drives one scheduler's Runner: idle until the intake gives
// it work, then an attempt at a time, each landing (PhaseCommit) after its
// decision time; with work that is not ready yet it asks to look again
// then (PhaseWake).
type runnerActor struct {
	s  *Sim
	i  int // the runner's index in Options.Runners
	r  *schedulers.Runner
	a  *schedulers.Attempt // in flight
	at time.Time           // when it lands
}

func (ra *runnerActor) Start(context.Context, time.Time) (vtime.Next, error) {
	return vtime.Next{}, nil
}

func (ra *runnerActor) Step(ctx context.Context, now time.Time) (vtime.Next, error) {
	if a := ra.a; a != nil {
		if now.Before(ra.at) {
			return vtime.Next{At: ra.at, Phase: vtime.PhaseCommit}, nil
		}
		ra.a = nil
		o, err := ra.r.Finish(ctx, a, now)
		if err != nil {
			return vtime.Next{}, err
		}
		if a.TasksPlaced() > 0 {
			ra.s.placing.add(ra.i, a.Started(), a.DecisionTime)
		}
		if on := ra.s.o.OnCommit; on != nil {
			on(ra.r.Name(), now, a, o)
		}
	}
	return ra.begin(ctx, now)
}

func (ra *runnerActor) Wake(ctx context.Context, now time.Time) (vtime.Next, error) {
	if ra.a != nil {
		return vtime.Next{At: ra.at, Phase: vtime.PhaseCommit}, nil // busy: the work waits for the attempt to land
	}
	return ra.begin(ctx, now)
}

func (ra *runnerActor) begin(ctx context.Context, now time.Time) (vtime.Next, error) {
	a, ok, err := ra.r.Begin(ctx, now)
	if err != nil {
		return vtime.Next{}, err
	}
	if ok {
		ra.a, ra.at = a, now.Add(a.DecisionTime)
		ra.s.busy.add(ra.i, now, a.DecisionTime)
		return vtime.Next{At: ra.at, Phase: vtime.PhaseCommit}, nil
	}
	if at, ok := ra.r.NextReady(); ok {
		return vtime.Next{At: at, Phase: vtime.PhaseWake}, nil
	}
	return vtime.Next{}, nil
}
