package txn

import (
	"maps"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// The one way a task is built from its job's template: submission (omega
// submit), the MapReduce scheduler's workers, the simulation's workload and
// the replay all build their tasks with JobTasks, so a field of the template
// reaches every task or none.

// LabelJob is the label every task built from a template carries with its
// job's name (tasks belong to jobs by owner reference and labels, never by
// index).
const LabelJob = "job"

// TaskSpecOf returns a new spec for a task of the job whose spec is js:
// every field of js's template, copied verbatim, and js's priority.
//
// The template's messages, slices and maps (resources, command,
// constraints, health check) are shared with the returned spec, not
// cloned: a submitted spec is never written, so the job and its tasks may
// hold the same ones. The spec itself is new and the caller's: it may
// change a field before the task is committed (the MapReduce scheduler sets
// its workers' duration, the replay its tasks' own request).
//
// It fills in no default: a restart policy the template leaves out stays
// UNSPECIFIED (the job kind's default, DefaultRestartPolicy). Submission
// makes the template explicit instead (omega submit completes the job
// before it is created), so a live job and every task built from it, the
// MapReduce workers included, say the same policy; the simulation's and the
// replay's templates leave it out, and their tasks keep it out, as their
// recorded outputs do.
func TaskSpecOf(js *omegav1.JobSpec) *omegav1.TaskSpec {
	t := js.GetTemplate()
	return &omegav1.TaskSpec{
		Resources:          t.GetResources(),
		Command:            t.GetCommand(),
		Constraints:        t.GetConstraints(),
		Priority:           js.GetPriority(),
		DurationMillis:     t.GetDurationMillis(),
		RestartPolicy:      t.GetRestartPolicy(),
		HealthCheck:        t.GetHealthCheck(),
		GracePeriodMillis:  t.GetGracePeriodMillis(),
		RestartDelayMillis: t.GetRestartDelayMillis(),
	}
}

// DefaultRestartPolicy is the restart policy a template that leaves it out
// means for a job of kind: ALWAYS for a service, NEVER otherwise.
func DefaultRestartPolicy(kind omegav1.JobKind) omegav1.RestartPolicy {
	if kind == omegav1.JobKind_JOB_KIND_SERVICE {
		return omegav1.RestartPolicy_RESTART_POLICY_ALWAYS
	}
	return omegav1.RestartPolicy_RESTART_POLICY_NEVER
}

// JobTasks is what the tasks of one job share, made once by NewJobTasks:
// the spec (TaskSpecOf), the labels (the template's, and LabelJob with the
// job's name, which wins over a template label of that key) and the owner
// references (the job, as controller).
//
// A job of 2,000 tasks makes one of each, not 2,000: its tasks share them,
// so neither the fields nor the tasks' spec, labels and owner references
// may be written once a task built from them is committed (the store
// treats them as immutable). Until then they are new and the caller's: the
// MapReduce scheduler sets Spec's duration after building its workers.
type JobTasks struct {
	Spec   *omegav1.TaskSpec
	Labels map[string]string
	Owners []*omegav1.OwnerReference
	job    *omegav1.JobSpec // for TaskWith's specs of their own
}

// NewJobTasks returns what the tasks of the job share: uid and name are
// the job's, spec its spec. It keeps spec's template's messages (see
// TaskSpecOf) and copies its labels.
func NewJobTasks(uid uuid.UUID, name string, spec *omegav1.JobSpec) *JobTasks {
	labels := make(map[string]string, len(spec.GetTemplate().GetLabels())+1)
	maps.Copy(labels, spec.GetTemplate().GetLabels())
	labels[LabelJob] = name
	return &JobTasks{
		Spec:   TaskSpecOf(spec),
		Labels: labels,
		Owners: []*omegav1.OwnerReference{{Kind: "Job", Uid: uid.String(), Name: name, Controller: true}},
		job:    spec,
	}
}

// Task returns a new task of the job, for a CreateTask: uid, name, and the
// shared spec, labels and owner references. Its status, creation time and
// version are left for the store to set (a created task is PENDING).
func (b *JobTasks) Task(uid uuid.UUID, name string) *omegav1.Task {
	return b.task(uid, name, b.Spec)
}

// Override is what a task holds of its own instead of its job's template:
// the replay's tasks, whose trace rows give each its own request and
// priority (a trace job's tasks may differ in both).
type Override struct {
	Resources *omegav1.Resources
	Priority  int32
}

// TaskWith returns a task as Task does but with a spec of its own:
// TaskSpecOf the job's spec (as b.Spec was made, without the caller's
// later changes to it) with o's resources and priority.
func (b *JobTasks) TaskWith(uid uuid.UUID, name string, o Override) *omegav1.Task {
	spec := TaskSpecOf(b.job)
	spec.Resources, spec.Priority = o.Resources, o.Priority
	return b.task(uid, name, spec)
}

func (b *JobTasks) task(uid uuid.UUID, name string, spec *omegav1.TaskSpec) *omegav1.Task {
	return &omegav1.Task{
		Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: name, Labels: b.Labels, OwnerReferences: b.Owners},
		Spec: spec,
	}
}
