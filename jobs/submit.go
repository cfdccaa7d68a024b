package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// A job's life as its submitter sees it: completed from what its file
// said, created with its tasks in one transaction, killed with its tasks in
// another. `omega submit` and `omega kill` only read files, dial the cell
// and print; the rules are here, where a program that submits jobs through
// the client library finds them too.

// MaxReplicas bounds a job's replicas: a job and its tasks are one
// transaction, under the store's size limit.
const MaxReplicas = 50_000

// FieldError is a job refused by Complete: the field (a path such as
// "spec.replicas") and why.
type FieldError struct {
	Path, Why string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Why }

// ErrNameInUse is Submit's error (wrapped, naming the job and its uid)
// when a live job has the name and replace was not asked for.
var ErrNameInUse = errors.New("name in use")

// Complete checks what a submitted job must say and fills in what it may
// leave out: the kind (batch), the scheduler (the kind's name), one
// replica (replicas 0 is proto3's unset field, read as one everywhere:
// txn.Job.Replicas), and the template's restart policy (the kind's,
// txn.DefaultRestartPolicy). The default is made explicit here, on the
// job, rather than by the builder of its tasks (txn.JobTasks copies the
// template verbatim): the live job says what its tasks do, and every task
// built from it, submission's and the MapReduce scheduler's workers alike,
// says the same. The job's name and its scheduler's must be DNS labels
// (txn.CheckLabel: lower-case letters, digits and '-', at most 63 bytes),
// as Kubernetes names its objects: the store takes any name, the cell's
// users name what they submit by this rule. A job that cannot be
// submitted is refused with a *FieldError; the job may then have been
// partly completed.
func Complete(j *omegav1.Job) error {
	bad := func(path, why string) error { return &FieldError{Path: path, Why: why} }
	if j.GetMeta().GetName() == "" {
		return bad("meta.name", "required: jobs are named (uniquely among live jobs)")
	}
	if err := txn.CheckLabel(j.GetMeta().GetName()); err != nil {
		return bad("meta.name", err.Error())
	}
	if j.GetMeta().GetUid() != "" {
		return bad("meta.uid", "the cell gives uids: leave it out")
	}
	if j.Spec == nil {
		j.Spec = &omegav1.JobSpec{}
	}
	sp := j.Spec
	if sp.Kind == omegav1.JobKind_JOB_KIND_UNSPECIFIED {
		sp.Kind = omegav1.JobKind_JOB_KIND_BATCH
	}
	if sp.Scheduler == "" {
		sp.Scheduler = strings.TrimPrefix(strings.ToLower(sp.Kind.String()), "job_kind_")
	}
	if err := txn.CheckLabel(sp.Scheduler); err != nil {
		return bad("spec.scheduler", err.Error())
	}
	if sp.Replicas == 0 { // proto3's unset: a job file refuses an explicit 0 (objfile)
		sp.Replicas = 1
	}
	switch {
	case sp.Replicas < 0 || sp.Replicas > MaxReplicas:
		return bad("spec.replicas", fmt.Sprintf("%d: want 1 to %d (a job and its tasks are one transaction, under the store's size limit)", sp.Replicas, MaxReplicas))
	case sp.GetTemplate().GetResources().GetCpuMillis() <= 0 && sp.GetTemplate().GetResources().GetMemoryBytes() <= 0:
		return bad("spec.template.resources", "required: what each task needs (cpu, memory)")
	}
	if sp.Template.RestartPolicy == omegav1.RestartPolicy_RESTART_POLICY_UNSPECIFIED {
		sp.Template.RestartPolicy = txn.DefaultRestartPolicy(sp.Kind)
	}
	return nil
}

// Submit creates job (completed by Complete; not modified: the job written
// is a copy with its uid and submission time) and its tasks
// (spec.replicas of them, built by txn.JobTasks; none for a MapReduce job,
// whose scheduler makes its workers) in one transaction at time now (Unix
// nanoseconds), after a check that no live job has its name: with replace
// that job is killed (KillOps) in the same transaction, without it Submit
// fails with ErrNameInUse. It returns the job's uid and how many tasks it
// made. Conflicts are retried by the client's loop on a fresh view, the
// name check included; an error leaves nothing written.
func Submit(ctx context.Context, c *client.Client, job *omegav1.Job, replace bool, now int64) (uuid.UUID, int, error) {
	name := job.GetMeta().GetName()
	var uid uuid.UUID
	n := 0
	_, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		tx := c.NewTxn(v)
		tx.UnixNanos = now
		var live []*txn.Job
		v.RangeJobs(func(j *txn.Job) bool {
			if j.Name() == name && !j.Finished() {
				live = append(live, j)
			}
			return true
		})
		if len(live) > 0 && !replace {
			return nil, fmt.Errorf("job %s is live (uid %s): %w", txn.Quote(name), live[0].UID, ErrNameInUse)
		}
		for _, old := range live {
			tx.Ops = append(tx.Ops, KillOps(v, old, "replaced by a new submission", now)...)
		}
		uid = c.NewUID()
		j := proto.Clone(job).(*omegav1.Job)
		j.Meta.Uid = uid.String()
		j.Spec.SubmitUnixNanos = now
		tx.Ops = append(tx.Ops, txn.CreateJob(j))
		n = 0
		if j.Spec.Kind != omegav1.JobKind_JOB_KIND_MAPREDUCE {
			of := txn.NewJobTasks(uid, name, j.Spec) // one spec for all: a spec is never written
			for i := range j.Spec.Replicas {
				tx.Ops = append(tx.Ops, txn.CreateTask(of.Task(c.NewUID(), fmt.Sprintf("%s-%d", name, i))))
				n++
			}
		}
		return tx, nil
	})
	if err != nil {
		return uuid.Nil, 0, fmt.Errorf("submit job %s: %w", txn.Quote(name), err)
	}
	return uid, n, nil
}

// KillOps are the operations that kill the live job j in view v at now
// (Unix nanoseconds): the job KILLED with why, its counts of succeeded and
// failed tasks kept, and each of its tasks not yet ended KILLED, which
// frees its machine (its agent stops the process).
func KillOps(v client.View, j *txn.Job, why string, now int64) []txn.Op {
	p := j.Proto()
	prev := p.Status // the state's, shared: not written
	p.Status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_KILLED, Message: why, FinishUnixNanos: now,
		Succeeded: prev.GetSucceeded(), Failed: prev.GetFailed()}
	ops := []txn.Op{txn.PutJob(p, j.Version)}
	v.RangeTasks(func(t *txn.Task) bool {
		if t.Job == j.UID && !t.Terminal() {
			ops = append(ops, txn.SetStatus(t.UID, omegav1.TaskState_TASK_STATE_KILLED, t.Version, why))
		}
		return true
	})
	return ops
}

// Kill kills the live job that name names — its name, or a prefix of its
// uid — with why, at now (Unix nanoseconds), in one transaction
// (KillOps). An empty name, no live job, or more than one (each listed), is
// an error that writes nothing. It returns the job as it was before the kill.
func Kill(ctx context.Context, c *client.Client, name, why string, now int64) (*txn.Job, error) {
	if name == "" {
		return nil, errors.New("kill: no job named: want a job's name or a prefix of its uid")
	}
	var killed *txn.Job
	_, err := c.Transact(ctx, func(v client.View) (*txn.Txn, error) {
		var hits []*txn.Job
		v.RangeJobs(func(j *txn.Job) bool {
			if !j.Finished() && (j.Name() == name || strings.HasPrefix(j.UID.String(), name)) {
				hits = append(hits, j)
			}
			return true
		})
		switch len(hits) {
		case 0:
			return nil, fmt.Errorf("%s: no live job of that name or uid prefix", txn.Quote(name))
		case 1:
		default:
			var b strings.Builder
			for _, j := range hits {
				fmt.Fprintf(&b, "\n  %s  %s", j.UID, j.Name())
			}
			return nil, fmt.Errorf("%s is ambiguous: %d live jobs match%s", txn.Quote(name), len(hits), b.String())
		}
		killed = hits[0]
		tx := c.NewTxn(v)
		tx.UnixNanos = now
		tx.Ops = KillOps(v, killed, why, now)
		return tx, nil
	})
	if err != nil {
		return nil, err
	}
	return killed, nil
}
