package sim

import (
	"context"
	"fmt"
	"github.com/omega-cell/omega/bench/vtime"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// FaultyAgentPeriod is how often the faulty agent lies.
const FaultyAgentPeriod = time.Minute

// faultyAgent is fault (d) of the "don't expose raw state" experiment: an
// agent that reports what did not happen. Every FaultyAgentPeriod it
// commits, as agent/<its machine>, two reports: a task that was never
// placed (the first pending one of the view) SUCCEEDED, and a task placed
// on another machine (the first of the view; the simulated fleet reports
// no RUNNING, so placed tasks are ASSIGNED) SUCCEEDED. The raw store takes
// both; the mediated one refuses both (the agent reports only on its own
// machine's placed tasks). The first leaves a task that ended without
// running (the audit's never-ran); the second ends another machine's task
// early, which neither the state nor its history can tell from a true
// report (they do not record who reported), so only the policy's
// rejections count it.
type faultyAgent struct {
	c       *client.Client
	machine uuid.UUID
	s       FaultyAgentSummary
}

// FaultyAgentSummary is what the faulty agent did (summary.json's
// faulty_agent).
type FaultyAgentSummary struct {
	Component string `json:"component"`
	// Reports it made, those the store committed, and those its policy
	// rejected; conflicts (the task moved on meanwhile) are the rest.
	Reports   int64 `json:"reports"`
	Committed int64 `json:"committed"`
	Rejected  int64 `json:"rejected"`
}

func (a *faultyAgent) Start(_ context.Context, now time.Time) (vtime.Next, error) {
	return vtime.Next{At: now.Add(FaultyAgentPeriod), Phase: vtime.PhaseReport}, nil
}

func (a *faultyAgent) Step(ctx context.Context, now time.Time) (vtime.Next, error) {
	next := vtime.Next{At: now.Add(FaultyAgentPeriod), Phase: vtime.PhaseReport}
	if err := a.c.Sync(ctx); err != nil {
		return next, err
	}
	v := a.c.View()
	var lies []*txn.Task
	v.RangePendingJobs(func(job uuid.UUID, _ int) bool {
		v.RangePendingTasks(job, func(t *txn.Task) bool { lies = append(lies, t); return false })
		return false
	})
	v.RangeTasks(func(t *txn.Task) bool {
		if t.Placed() && t.Machine != a.machine {
			lies = append(lies, t)
			return false
		}
		return true
	})
	if len(lies) == 0 {
		return next, nil
	}
	tx := a.c.NewTxn(v)
	tx.UnixNanos = now.UnixNano()
	for _, t := range lies {
		tx.Ops = append(tx.Ops, txn.SetStatus(t.UID, omegav1.TaskState_TASK_STATE_SUCCEEDED, t.Version, "done (the faulty agent)"))
	}
	res, err := a.c.Commit(ctx, tx)
	if err != nil {
		return next, fmt.Errorf("the faulty agent: %w", err)
	}
	a.s.Reports += int64(len(tx.Ops))
	a.s.Committed += int64(res.Committed)
	a.s.Rejected += int64(res.Rejected)
	return next, nil
}
