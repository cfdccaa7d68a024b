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
//     names (JobSpec.scheduler), by a hash of its uid with the names of the
//     instances of that kind (Pick, as the paper shares a kind's load);
//   - a task of a routed job that becomes LOST goes to the job's instance
//     (Runner.Lost: its next attempt creates a replacement), and one evicted
//     back to PENDING re-queues the job (Runner.Resubmit);
//   - a deleted job is forgotten.
//
// The instances of a kind are those added here (Add) — unless the kind's
// members were set (SetMembers): the names of every instance of the kind in
// the cell, here and in other processes, as the cell's membership lists
// them. A job whose instance is elsewhere is that process's, and left
// alone. When the members change, the jobs whose instance changed move: a
// dead instance's jobs go to the others, a new one takes its share, each
// adopted with its placed tasks from a view of the cell.
//
// It is decision code: no clock, no goroutine. The simulation feeds it the
// watch of the whole cell for every runner; a scheduler process feeds it
// its own watch, with only its own instances added; a scheduler that
// starts on a running cell calls Recover with its snapshot first.
type Intake struct {
	// Strict makes a job of a kind no instance serves an error (the
	// simulation runs every kind its workload submits); otherwise it is
	// left for another process.
	Strict  bool
	local   map[instance]*Runner // the instances here
	members map[string][]string  // kind → the names of its instances (here and elsewhere), sorted
	set     map[string]bool      // kinds whose members SetMembers set
	owner   map[uuid.UUID]*Runner
	// shadows are, by kind, the runners whose scheduler takes that kind's
	// jobs too though none is routed to it (Shadower: a fault).
	shadows map[string][]*Runner
}

// Shadower is a scheduler that also takes every job of another kind,
// though the intake routes none to it: a component with a broken notion of
// what it owns, racing the kind's own scheduler for its jobs (the faulty
// thief of the "don't expose raw state" experiment). No correct scheduler
// is one.
type Shadower interface {
	Shadows() string
}

// instance names an instance of a kind: names are unique within a kind.
type instance struct{ kind, name string }

// NewIntake returns an intake with no instances.
func NewIntake() *Intake {
	return &Intake{local: map[instance]*Runner{}, members: map[string][]string{}, set: map[string]bool{}, owner: map[uuid.UUID]*Runner{}}
}

// Add makes r an instance of its scheduler's kind, named by r.Name(), and
// one of the kind's members unless SetMembers set them (then the
// membership says whether it is one). A second instance of a kind under
// one name is an error.
func (in *Intake) Add(r *Runner) error {
	id := instance{r.Scheduler().Kind(), r.Name()}
	if _, dup := in.local[id]; dup {
		return fmt.Errorf("intake: two %s instances named %q", id.kind, id.name)
	}
	in.local[id] = r
	if sh, ok := r.Scheduler().(Shadower); ok {
		if in.shadows == nil {
			in.shadows = map[string][]*Runner{}
		}
		in.shadows[sh.Shadows()] = append(in.shadows[sh.Shadows()], r)
	}
	if ms := in.members[id.kind]; !in.set[id.kind] && !slices.Contains(ms, id.name) {
		ms = append(ms, id.name)
		slices.Sort(ms)
		in.members[id.kind] = ms
	}
	return nil
}

// route returns the instance a job of kind goes to: nil when it is another
// process's; served is false when no instance of the kind is known.
func (in *Intake) route(job uuid.UUID, kind string) (r *Runner, served bool) {
	ms := in.members[kind]
	if len(ms) == 0 {
		return nil, false
	}
	return in.local[instance{kind, ms[Pick(job, ms)]}], true
}

// Owner returns the instance a job was routed to.
func (in *Intake) Owner(job uuid.UUID) (*Runner, bool) {
	r, ok := in.owner[job]
	return r, ok
}

// SetMembers sets the instances of kind to names — every instance of the
// kind in the cell, here or in other processes, as the membership lists
// them (the order does not matter) — and moves the jobs of st whose
// instance changed: a job that leaves an instance here is released
// (Runner.Release), one that reaches an instance here is adopted with its
// placed tasks, and queued if it has work. An instance added here but not
// named gets no jobs. It returns the instances that got work, each once.
func (in *Intake) SetMembers(kind string, names []string, st *txn.State, now time.Time) ([]*Runner, error) {
	ms := slices.Clone(names)
	slices.Sort(ms)
	for i, n := range ms {
		if n == "" {
			return nil, fmt.Errorf("members of %q: an empty name", kind)
		}
		if i > 0 && ms[i-1] == n {
			return nil, fmt.Errorf("members of %q: %q twice", kind, n)
		}
	}
	in.members[kind], in.set[kind] = ms, true
	facts := jobFacts(st)
	var woken []*Runner
	st.RangeJobs(func(j *txn.Job) bool {
		if j.Scheduler() != kind || j.Finished() {
			return true
		}
		r, _ := in.route(j.UID, kind)
		cur, owned := in.owner[j.UID]
		if owned && cur == r {
			return true
		}
		if owned {
			cur.Release(j.UID)
			delete(in.owner, j.UID)
		}
		if r != nil && in.adopt(r, j, st, facts[j.UID], now) && !slices.Contains(woken, r) {
			woken = append(woken, r)
		}
		return true
	})
	return woken, nil
}

// facts is what a view says of one job's tasks.
type facts struct {
	placed      []uuid.UUID // placed tasks
	lost        []*txn.Task // LOST tasks, in the state's order
	live, ended int         // tasks pending or placed; tasks SUCCEEDED, FAILED or KILLED
}

// jobFacts gathers the facts of every job's tasks in one pass (the state
// has no index of a job's tasks), in the state's order.
func jobFacts(st *txn.State) map[uuid.UUID]*facts {
	out := map[uuid.UUID]*facts{}
	st.RangeTasks(func(t *txn.Task) bool {
		if t.Job == uuid.Nil {
			return true
		}
		f := out[t.Job]
		if f == nil {
			f = &facts{}
			out[t.Job] = f
		}
		switch t.State {
		case omegav1.TaskState_TASK_STATE_PENDING:
			f.live++
		case omegav1.TaskState_TASK_STATE_ASSIGNED, omegav1.TaskState_TASK_STATE_RUNNING:
			f.live++
			f.placed = append(f.placed, t.UID)
		case omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_KILLED:
			f.ended++
		case omegav1.TaskState_TASK_STATE_LOST:
			f.lost = append(f.lost, t)
		}
		return true
	})
	return out
}

// wanted returns the LOST tasks of a job that still want a replacement: as
// many as the job is short of its replicas (tasks pending, placed or ended
// counted), the first in the state's order. The runner's memory of its
// lost tasks does not survive a restart or a move; the view does.
func (f *facts) wanted(j *txn.Job) []*txn.Task {
	if f == nil {
		return nil
	}
	short := int(j.Replicas()) - f.live - f.ended
	if short <= 0 {
		return nil
	}
	return f.lost[:min(short, len(f.lost))]
}

// adopt makes j r's with its placed tasks and the lost ones it still wants
// replaced, queued if it has work (PENDING tasks, replacements to create,
// or a Grower that wants more), and reports whether it has.
func (in *Intake) adopt(r *Runner, j *txn.Job, st *txn.State, f *facts, now time.Time) bool {
	in.owner[j.UID] = r
	var placed []uuid.UUID
	if f != nil {
		placed = f.placed
	}
	lost := f.wanted(j)
	work := len(lost) > 0
	if !work {
		st.RangePendingTasks(j.UID, func(*txn.Task) bool { work = true; return false })
	}
	if g, ok := r.Scheduler().(Grower); ok && !work {
		work = g.WantsMore(j, len(placed))
	}
	r.Adopt(j.UID, placed, lost, work, now)
	r.saw(j.UID, st.Revision(), j.Kind())
	return work
}

// Recover routes every job of st that an instance here serves and that no
// instance here owns yet, for a scheduler that starts (or restarts) on a
// cell already running, or re-lists after its watch fell behind. Each is
// adopted by its instance with the tasks of it that are placed and the
// LOST ones still to replace, so that its lost and evicted tasks reach it
// later and a Grower counts the workers it has; a job with work is queued.
// The jobs it owns already are reconciled with st instead (the changes the
// watch missed: tasks lost or evicted meanwhile reach their runner, jobs
// deleted meanwhile are forgotten). It returns the instances that got
// work; then Observe takes the watch from st's revision on. Jobs are
// visited in the state's own order, so the same state routes the same way.
func (in *Intake) Recover(st *txn.State, now time.Time) []*Runner {
	facts := jobFacts(st)
	var woken []*Runner
	wake := func(r *Runner) {
		if !slices.Contains(woken, r) {
			woken = append(woken, r)
		}
	}
	for job, r := range in.owner { // deletions only: the order does not matter
		if _, ok := st.Job(job); !ok {
			r.Release(job)
			delete(in.owner, job)
		}
	}
	st.RangeJobs(func(j *txn.Job) bool {
		if j.Finished() {
			return true
		}
		if r, owned := in.owner[j.UID]; owned {
			pending := false
			st.RangePendingTasks(j.UID, func(*txn.Task) bool { pending = true; return false })
			r.saw(j.UID, st.Revision(), j.Kind())
			if r.Reconcile(j.UID, facts[j.UID].wanted(j), pending, now) {
				wake(r)
			}
			return true
		}
		r, _ := in.route(j.UID, j.Scheduler())
		if r == nil {
			return true
		}
		if in.adopt(r, j, st, facts[j.UID], now) {
			wake(r)
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
			if r, ok := in.owner[c.Job.UID]; ok {
				r.Gone(c.Job.UID)
				delete(in.owner, c.Job.UID)
			}
			for _, shs := range in.shadows {
				for _, sh := range shs {
					sh.Gone(c.Job.UID)
				}
			}
		case c.Job != nil && c.Created:
			kind := c.Job.Scheduler()
			r, served := in.route(c.Job.UID, kind)
			if !served && in.Strict {
				return woken, fmt.Errorf("job %s asks for scheduler %q, which nothing here runs", c.Job.Name(), kind)
			}
			if r == nil {
				continue // another process's
			}
			in.owner[c.Job.UID] = r
			r.Submit(c.Job.UID, now)
			r.saw(c.Job.UID, ws.Revision, c.Job.Kind())
			wake(r)
			for _, sh := range in.shadows[kind] {
				if sh != r {
					sh.submitShadow(c.Job.UID, now)
					sh.saw(c.Job.UID, ws.Revision, c.Job.Kind())
					wake(sh)
				}
			}
		case c.Task != nil && !c.Deleted:
			r, ok := in.owner[c.Task.Job]
			if !ok {
				continue
			}
			var queued bool
			switch {
			case c.Task.State == omegav1.TaskState_TASK_STATE_LOST:
				queued = r.Lost(c.Task.Job, c.Task, now)
				r.saw(c.Task.Job, ws.Revision, 0)
			case c.Task.State == omegav1.TaskState_TASK_STATE_PENDING && !c.Created:
				queued = r.Resubmit(c.Task.Job, now)
				r.saw(c.Task.Job, ws.Revision, 0)
			}
			if queued {
				wake(r)
			}
		}
	}
	return woken, nil
}
