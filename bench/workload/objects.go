package workload

import (
	"fmt"
	"io"
	"strconv"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// LabelJob is the label every task carries with its job's name (tasks
// belong to jobs by owner reference and labels, never by index): the
// label txn.JobTasks gives them.
const LabelJob = txn.LabelJob

// Proto returns the API's job kind.
func (k Kind) Proto() omegav1.JobKind {
	switch k {
	case KindBatch:
		return omegav1.JobKind_JOB_KIND_BATCH
	case KindService:
		return omegav1.JobKind_JOB_KIND_SERVICE
	case KindMapReduce:
		return omegav1.JobKind_JOB_KIND_MAPREDUCE
	}
	return omegav1.JobKind_JOB_KIND_UNSPECIFIED
}

// GPU is the name of the extended resource the workload's GPUs are.
const GPU = "gpu"

// Objects returns the job and its PENDING tasks as the store's objects, for
// a submitter to create in one transaction. Uids are drawn from ids with
// uuid.NewRandomFromReader (pass a seeded source for reproducible ids); the
// job takes the first, its tasks the next ones in index order.
// epochUnixNanos is the Unix time of virtual time 0: the job's
// submit_unix_nanos is epochUnixNanos + a.Submit. Creation times and
// versions are left for the store to set.
//
// The job's scheduler field is its kind ("batch", "service", "mapreduce").
// Every task is built from the job's template (txn.JobTasks: resources,
// the job's priority, duration; no restart policy, as the template says
// none); its name is "<job>-<index>", its label "job" the job's name, its
// controlling owner reference the job. A MapReduce job gets no tasks: the
// mapreduce scheduler creates its workers (Replicas of them at least, as
// it decides) when it places the job.
//
// The returned messages are new and the caller owns them; the tasks of one
// job share their labels, owner references and spec, and the spec its
// resources with the job's template, which must therefore be treated as
// immutable (the store does).
func (a JobArrival) Objects(ids io.Reader, epochUnixNanos int64) (*omegav1.Job, []*omegav1.Task, error) {
	if a.Tasks < 0 || a.Tasks > 1<<31-1 {
		return nil, nil, fmt.Errorf("job %s: %d tasks out of range", a.Name, a.Tasks)
	}
	jobUID, err := uuid.NewRandomFromReader(ids)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: uid: %w", a.Name, err)
	}
	res := &omegav1.Resources{CpuMillis: a.CPUMillis, MemoryBytes: a.MemoryBytes}
	if a.GPUs > 0 {
		res.Extended = map[string]int64{GPU: a.GPUs}
	}
	spec := &omegav1.JobSpec{
		Kind:      a.Kind.Proto(),
		Scheduler: a.Kind.String(),
		Priority:  a.Priority,
		Template: &omegav1.TaskTemplate{
			Resources:      res, // the tasks' too
			DurationMillis: a.Duration.Milliseconds(),
		},
		Replicas:        int32(a.Tasks),
		SubmitUnixNanos: epochUnixNanos + a.Submit.Nanoseconds(),
	}
	if a.Kind == KindMapReduce {
		spec.Mapreduce = &omegav1.MapReduceParams{MapTasks: int32(min(a.MapTasks, 1<<31-1))}
	}
	job := &omegav1.Job{
		Meta:   &omegav1.ObjectMeta{Uid: jobUID.String(), Name: a.Name},
		Spec:   spec,
		Status: &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_PENDING},
	}
	if a.Kind == KindMapReduce {
		return job, nil, nil
	}
	tasks := make([]*omegav1.Task, a.Tasks)
	// The tasks of a job share their labels, owner reference and spec
	// (identical, and immutable once submitted): a job of 2,000 tasks makes
	// one of each, not 2,000.
	of := txn.NewJobTasks(jobUID, a.Name, spec)
	for i := range tasks {
		u, err := uuid.NewRandomFromReader(ids)
		if err != nil {
			return nil, nil, fmt.Errorf("job %s: task %d uid: %w", a.Name, i, err)
		}
		tasks[i] = of.Task(u, a.Name+"-"+strconv.Itoa(i))
	}
	job.Status.Pending = int32(a.Tasks)
	return job, tasks, nil
}

// Object returns the machine as the store's object, UP, with a uid drawn
// from ids.
func (m Machine) Object(ids io.Reader) (*omegav1.Machine, error) {
	u, err := uuid.NewRandomFromReader(ids)
	if err != nil {
		return nil, fmt.Errorf("machine %s: uid: %w", m.Name, err)
	}
	return &omegav1.Machine{
		Meta: &omegav1.ObjectMeta{Uid: u.String(), Name: m.Name},
		Spec: &omegav1.MachineSpec{
			Capacity:      &omegav1.Resources{CpuMillis: m.CPUMillis, MemoryBytes: m.MemoryBytes},
			FailureDomain: m.FailureDomain,
		},
		Status: &omegav1.MachineStatus{State: omegav1.MachineState_MACHINE_STATE_UP},
	}, nil
}
