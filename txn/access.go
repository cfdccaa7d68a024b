package txn

import (
	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// The objects' read API, beside their value fields (UID, Version, Request,
// Capacity, Allocated, State, Machine, ...): what decision code — a
// scheduler's Decide, the agents, the job controller — reads of an object's
// metadata and spec. Meta and Spec (and a job's Status) are the protobuf
// wire form the store encodes; they may leave these structs when the
// store's heap is flattened (fewer pointers per object), and these methods
// stay. Decision code reads through them; internal/lint holds the
// schedulers, agents, jobs and examples to that. Like the objects, what
// they return is shared and must not be modified.

// Name is the machine's name.
func (m *Machine) Name() string { return m.Meta.GetName() }

// FailureDomain is the machine's failure domain (a rack, say).
func (m *Machine) FailureDomain() string { return m.Spec.GetFailureDomain() }

// Attributes are the machine's attributes, for constraints.
func (m *Machine) Attributes() map[string]string { return m.Spec.GetAttributes() }

// CordonAnnotation marks a machine an operator cordoned (`omega machine
// cordon`): it is DRAINING, no claim lands on it, and whoever brings it back
// from DOWN (its agent, the server's membership) makes it DRAINING, not UP,
// until it is uncordoned.
const CordonAnnotation = "omega.io/cordoned"

// Cordoned reports whether an operator cordoned the machine.
func (m *Machine) Cordoned() bool { _, ok := m.Meta.GetAnnotations()[CordonAnnotation]; return ok }

// UpState is the state a machine coming back from DOWN takes: UP, or
// DRAINING when it is cordoned.
func (m *Machine) UpState() omegav1.MachineState {
	if m.Cordoned() {
		return omegav1.MachineState_MACHINE_STATE_DRAINING
	}
	return omegav1.MachineState_MACHINE_STATE_UP
}

// Name is the task's name.
func (t *Task) Name() string {
	if t.name != "" {
		return t.name
	}
	return t.Meta.GetName()
}

// Labels are the task's labels.
func (t *Task) Labels() map[string]string { return t.Meta.GetLabels() }

// Constraints restrict the machines the task may be placed on.
func (t *Task) Constraints() []*omegav1.Constraint { return t.Spec.GetConstraints() }

// Command is what an agent runs for the task (nil: nothing).
func (t *Task) Command() *omegav1.Command { return t.Spec.GetCommand() }

// Priority is the task's priority: evictions need a strictly higher one.
func (t *Task) Priority() int32 { return t.Spec.GetPriority() }

// DurationMillis is the task's expected run time for the simulated fleet;
// 0 runs until stopped.
func (t *Task) DurationMillis() int64 { return t.Spec.GetDurationMillis() }

// Name is the job's name.
func (j *Job) Name() string { return j.Meta.GetName() }

// Kind is the job's kind (batch, service, mapreduce).
func (j *Job) Kind() omegav1.JobKind { return j.Spec.GetKind() }

// Scheduler is the scheduler kind the job is for.
func (j *Job) Scheduler() string { return j.Spec.GetScheduler() }

// Priority is the job's priority.
func (j *Job) Priority() int32 { return j.Spec.GetPriority() }

// Replicas is how many tasks the job asks for (a mapreduce job: the
// workers it requests), at least one: a spec's 0 is protobuf's unset
// field, which the store takes (it refuses only a negative count) and
// every reader reads as one, as jobs.Complete fills it in and the job
// controller counts it — so a scheduler replaces a lost task of such a
// job rather than deeming it complete with none.
func (j *Job) Replicas() int32 { return max(j.Spec.GetReplicas(), 1) }

// Gang says the job's tasks are placed all or none.
func (j *Job) Gang() bool { return j.Spec.GetGang() }

// Template is the task template (a mapreduce job's worker).
func (j *Job) Template() *omegav1.TaskTemplate { return j.Spec.GetTemplate() }

// MapReduce holds a mapreduce job's parameters; nil for other jobs.
func (j *Job) MapReduce() *omegav1.MapReduceParams { return j.Spec.GetMapreduce() }

// Phase is the job's phase as last written.
func (j *Job) Phase() omegav1.JobPhase { return j.Status.GetPhase() }

// StatusProto is the job's status as last written, in wire form (shared:
// do not modify it).
func (j *Job) StatusProto() *omegav1.JobStatus { return j.Status }

// OwnerReferences are the task's owners (its job, by reference).
func (t *Task) OwnerReferences() []*omegav1.OwnerReference { return t.Meta.GetOwnerReferences() }

// PlannedTask is the task p will be once created — PENDING, on no machine,
// requesting request — for a decision that creates a task and claims it in
// the same transaction (a replacement for a lost task, a mapreduce worker)
// and hands it to the placement toolkit as it would a task of the view. It
// does not check p: the create in that transaction does.
func PlannedTask(uid, job uuid.UUID, p *omegav1.Task, request Resources) *Task {
	return &Task{UID: uid, Job: job, Meta: p.GetMeta(), Spec: p.GetSpec(), req: &request, State: omegav1.TaskState_TASK_STATE_PENDING}
}
