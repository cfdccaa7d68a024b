package schedulers

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Intake routes the cell's jobs to the scheduler instances that own them,
// from what the cell's watch delivers — so jobs reach schedulers through
// the cell, as they would reach a scheduler running as its own process:
//
//   - a job created in the cell goes to an instance of the kind its spec
//     names (JobSpec.scheduler), by a hash of its uid over the instances of
//     that kind (Pick, as the paper shares a kind's load);
//   - a task of a routed job that becomes LOST goes to the job's instance
//     (Runner.Lost: its next attempt creates a replacement), and one evicted
//     back to PENDING re-queues the job (Runner.Resubmit);
//   - a deleted job is forgotten.
//
// It is decision code: no clock, no goroutine. The simulation feeds it the
// watch of the whole cell for every runner; a scheduler process feeds it
// its own watch, with only its own instances added (jobs of kinds it does
// not run are then another process's, and ignored); a scheduler that
// starts on a running cell calls Recover with its snapshot first. Still
// to come: instances that announce themselves in the cell, so the set of a
// kind can change and a dead instance's jobs move to the others.
type Intake struct {
	// Strict makes a job of a kind no instance serves an error (the
	// simulation runs every kind its workload submits); otherwise it is
	// left for another process.
	Strict bool
	kinds  map[string][]*Runner
	owner  map[uuid.UUID]*Runner
}

// NewIntake returns an intake with no instances.
func NewIntake() *Intake {
	return &Intake{kinds: map[string][]*Runner{}, owner: map[uuid.UUID]*Runner{}}
}

// Add makes r an instance of its scheduler's kind; instances of a kind are
// numbered in the order added (the order Pick hashes over).
func (in *Intake) Add(r *Runner) {
	k := r.Scheduler().Kind()
	in.kinds[k] = append(in.kinds[k], r)
}

// Owner returns the instance a job was routed to.
func (in *Intake) Owner(job uuid.UUID) (*Runner, bool) {
	r, ok := in.owner[job]
	return r, ok
}

// Recover routes every job of st that an instance here serves and that no
// instance here owns yet, for a scheduler that starts (or restarts) on a
// cell already running, or re-lists after its watch fell behind. Each is
// adopted by its instance with the tasks of it that are placed, so that
// its lost and evicted tasks reach it later and a Grower counts the
// workers it has; a job with PENDING tasks, or one its scheduler wants to
// grow (Grower), is queued. Jobs already owned are left as they are. It
// returns the instances that got work; then Observe takes the watch from
// st's revision on. Jobs are visited in the state's own order, so the same
// state routes the same way.
func (in *Intake) Recover(st *txn.State, now time.Time) []*Runner {
	// The placed tasks by job, in the state's order: one pass, as the
	// state has no index of a job's tasks.
	placed := map[uuid.UUID][]uuid.UUID{}
	st.RangeTasks(func(t *txn.Task) bool {
		if t.Placed() {
			placed[t.Job] = append(placed[t.Job], t.UID)
		}
		return true
	})
	var woken []*Runner
	st.RangeJobs(func(j *txn.Job) bool {
		rs := in.kinds[j.Spec.GetScheduler()]
		if len(rs) == 0 || j.Finished() {
			return true
		}
		if _, owned := in.owner[j.UID]; owned {
			return true
		}
		r := rs[Pick(j.UID, len(rs))]
		in.owner[j.UID] = r
		work := false
		st.RangePendingTasks(j.UID, func(*txn.Task) bool { work = true; return false })
		if g, ok := r.Scheduler().(Grower); ok && !work {
			work = g.WantsMore(j, len(placed[j.UID]))
		}
		r.Adopt(j.UID, placed[j.UID], work, now)
		if work && !slices.Contains(woken, r) {
			woken = append(woken, r)
		}
		return true
	})
	return woken
}

// Observe routes what one revision changed, at now, and returns the
// instances that got work (each once, in the order they got it), for the
// caller to wake.
func (in *Intake) Observe(ws *txn.WriteSet, now time.Time) ([]*Runner, error) {
	var woken []*Runner
	wake := func(r *Runner) {
		if !slices.Contains(woken, r) {
			woken = append(woken, r)
		}
	}
	for i := range ws.Changes {
		c := &ws.Changes[i]
		switch {
		case c.Job != nil && c.Deleted:
			delete(in.owner, c.Job.UID)
		case c.Job != nil && c.Created:
			kind := c.Job.Spec.GetScheduler()
			rs := in.kinds[kind]
			if len(rs) == 0 {
				if in.Strict {
					return woken, fmt.Errorf("job %s asks for scheduler %q, which nothing here runs", c.Job.Meta.GetName(), kind)
				}
				continue
			}
			r := rs[Pick(c.Job.UID, len(rs))]
			in.owner[c.Job.UID] = r
			r.Submit(c.Job.UID, now)
			wake(r)
		case c.Task != nil && !c.Deleted:
			r, ok := in.owner[c.Task.Job]
			if !ok {
				continue
			}
			var queued bool
			switch {
			case c.Task.State == omegav1.TaskState_TASK_STATE_LOST:
				queued = r.Lost(c.Task.Job, c.Task, now)
			case c.Task.State == omegav1.TaskState_TASK_STATE_PENDING && !c.Created:
				queued = r.Resubmit(c.Task.Job, now)
			}
			if queued {
				wake(r)
			}
		}
	}
	return woken, nil
}
