package txn

import (
	"fmt"
	"maps"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// The in-memory forms of the cell's objects. They are immutable once they
// are part of a State: every change makes a new value (a shallow copy of a
// few hundred bytes), and the proto messages they point to (Meta, Spec) are
// shared between versions and never written. Proto() builds the wire form.

// Machine is one machine of the cell.
type Machine struct {
	UID       uuid.UUID
	Version   uint64 // revision of the last change to the machine object
	CreateRev uint64
	Created   int64 // Unix nanoseconds
	Meta      *omegav1.ObjectMeta
	Spec      *omegav1.MachineSpec
	Capacity  Resources // parsed from Spec.Capacity
	State     omegav1.MachineState
	Agent     string // agent address
	// Allocated is the sum of Claimed over the non-terminal tasks placed on
	// the machine, maintained by Evaluate; no client writes it.
	Allocated Resources
	Tasks     int32  // non-terminal tasks placed on the machine
	Seq       uint64 // coarse conflict sequence: revision of the last change of anything on the machine
	// LastClaim is the revision of the last claim on the machine (on
	// reopen, the revision reopened at): a delete from a view older than it
	// may not have seen the tasks it holds.
	LastClaim uint64
}

// Free returns Capacity - Allocated.
func (m *Machine) Free() Resources { return m.Capacity.Sub(m.Allocated) }

// Task is one task.
type Task struct {
	UID       uuid.UUID
	Job       uuid.UUID // the controlling owner job; zero if none
	Version   uint64
	CreateRev uint64
	Created   int64
	Meta      *omegav1.ObjectMeta
	Spec      *omegav1.TaskSpec
	// req is Spec.Resources parsed, shared by the tasks that share their
	// spec (a job's): read it as Request().
	req       *Resources
	State     omegav1.TaskState
	Evictions int32     // beside State: the two share a word (the struct is 192 bytes, a size class of whole cache lines)
	Machine   uuid.UUID // where it is (or was, once terminal) placed; zero while PENDING
	Claimed   Resources // what the claim declared; held on Machine while not terminal
	Scheduler string
	Assigned  int64
	Started   int64
	Finished  int64
	// rare holds what most tasks never have (none in the simulation or
	// the benchmark): a status message, and the agent's report on running
	// it (shared, never written). nil while both are empty. Read them as
	// Message() and Run(), set them with SetMessage and SetRun.
	rare *taskRare
	// name is the task's name when Meta is shared with other tasks (made
	// from one template) and so cannot hold it; else Meta has it. Read it
	// as Name().
	name string
}

// Request is what the task asks for: its spec's resources, parsed.
func (t *Task) Request() Resources {
	if t.req == nil {
		return Resources{}
	}
	return *t.req
}

// taskRare is a task's rarely set fields, behind one pointer.
type taskRare struct {
	message string
	report  *omegav1.TaskRun
}

// Message is the task's status message ("" if none).
func (t *Task) Message() string {
	if t.rare == nil {
		return ""
	}
	return t.rare.message
}

// SetMessage sets the task's status message. Like SetRun, it is for a
// task being built (a state's tasks are immutable), and it never changes a
// copy shared with another version of the task.
func (t *Task) SetMessage(m string) { t.setRare(m, t.Run()) }

// SetRun sets the agent's report on running the task.
func (t *Task) SetRun(r *omegav1.TaskRun) { t.setRare(t.Message(), r) }

func (t *Task) setRare(m string, r *omegav1.TaskRun) {
	switch {
	case m == "" && r == nil:
		t.rare = nil
	case t.rare != nil && t.rare.message == m && t.rare.report == r:
		// Unchanged (an agent's report repeats its message): the shared
		// copy serves, since none is ever written.
	default:
		t.rare = &taskRare{message: m, report: r}
	}
}

// Placed reports whether the task holds resources on a machine.
func (t *Task) Placed() bool {
	return t.State == omegav1.TaskState_TASK_STATE_ASSIGNED || t.State == omegav1.TaskState_TASK_STATE_RUNNING
}

// Terminal reports whether the task reached a final state.
func (t *Task) Terminal() bool { return IsTerminal(t.State) }

// IsTerminal reports whether s is SUCCEEDED, FAILED, LOST, KILLED or
// ABANDONED.
func IsTerminal(s omegav1.TaskState) bool {
	switch s {
	case omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED,
		omegav1.TaskState_TASK_STATE_LOST, omegav1.TaskState_TASK_STATE_KILLED,
		omegav1.TaskState_TASK_STATE_ABANDONED:
		return true
	}
	return false
}

// Job is one job.
type Job struct {
	UID       uuid.UUID
	Version   uint64
	CreateRev uint64
	Created   int64
	Meta      *omegav1.ObjectMeta
	Spec      *omegav1.JobSpec
	Status    *omegav1.JobStatus
}

// Finished reports whether the job reached a terminal phase.
func (j *Job) Finished() bool {
	switch j.Status.GetPhase() {
	case omegav1.JobPhase_JOB_PHASE_SUCCEEDED, omegav1.JobPhase_JOB_PHASE_FAILED,
		omegav1.JobPhase_JOB_PHASE_ABANDONED, omegav1.JobPhase_JOB_PHASE_KILLED:
		return true
	}
	return false
}

func exportMeta(m *omegav1.ObjectMeta, uid uuid.UUID, version, createRev uint64, created int64) *omegav1.ObjectMeta {
	out := &omegav1.ObjectMeta{
		Uid:               uid.String(),
		Version:           version,
		CreateRevision:    createRev,
		CreationUnixNanos: created,
	}
	if m != nil {
		out.Name = m.Name
		out.Labels = m.Labels
		out.Annotations = m.Annotations
		out.OwnerReferences = m.OwnerReferences
	}
	return out
}

// exportMeta is the task's wire meta, its name in it.
func (t *Task) exportMeta() *omegav1.ObjectMeta {
	m := exportMeta(t.Meta, t.UID, t.Version, t.CreateRev, t.Created)
	if t.name != "" {
		m.Name = t.name
	}
	return m
}

func uidString(u uuid.UUID) string {
	if u == uuid.Nil {
		return ""
	}
	return u.String()
}

// Proto returns the wire form. It shares the maps and nested messages of the
// immutable Meta and Spec: treat it as read-only.
func (m *Machine) Proto() *omegav1.Machine {
	return &omegav1.Machine{
		Meta: exportMeta(m.Meta, m.UID, m.Version, m.CreateRev, m.Created),
		Spec: m.Spec,
		Status: &omegav1.MachineStatus{
			State:        m.State,
			Allocated:    m.Allocated.Proto(),
			AgentAddress: m.Agent,
			Tasks:        m.Tasks,
			Seq:          m.Seq,
			LastClaim:    m.LastClaim,
		},
	}
}

// Proto returns the wire form; see Machine.Proto.
func (t *Task) Proto() *omegav1.Task {
	p := t.SpecProto()
	p.Status = t.StatusProto()
	return p
}

// SpecProto returns the wire form without the status: meta and spec, what
// never changes after creation (but the meta's version).
func (t *Task) SpecProto() *omegav1.Task {
	return &omegav1.Task{
		Meta: t.exportMeta(),
		Spec: t.Spec,
	}
}

// StatusProto returns the task's status in wire form.
func (t *Task) StatusProto() *omegav1.TaskStatus {
	s := &omegav1.TaskStatus{
		State:           t.State,
		MachineUid:      uidString(t.Machine),
		Scheduler:       t.Scheduler,
		AssignUnixNanos: t.Assigned,
		StartUnixNanos:  t.Started,
		FinishUnixNanos: t.Finished,
		Evictions:       t.Evictions,
		Message:         t.Message(),
		Run:             t.Run(),
	}
	if !t.Claimed.IsZero() {
		s.Claimed = t.Claimed.Proto()
	}
	return s
}

// Proto returns the wire form; see Machine.Proto.
func (j *Job) Proto() *omegav1.Job {
	return &omegav1.Job{
		Meta:   exportMeta(j.Meta, j.UID, j.Version, j.CreateRev, j.Created),
		Spec:   j.Spec,
		Status: j.Status,
	}
}

// ParseUID parses a non-nil uuid; what names the field in the error (an
// empty string, the nil uuid and anything else that is not a uuid are
// ErrInvalid, the string quoted cut: Quote).
func ParseUID(s, what string) (uuid.UUID, error) {
	if s == "" {
		return uuid.Nil, fmt.Errorf("%w: %s is empty: want a uuid", ErrInvalid, what)
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: %s %s is not a uuid: %v", ErrInvalid, what, Quote(s), err)
	}
	if u == uuid.Nil {
		return uuid.Nil, fmt.Errorf("%w: %s is the nil uuid", ErrInvalid, what)
	}
	return u, nil
}

// ownerJob returns the uid of the controlling Job owner reference, if any.
func ownerJob(m *omegav1.ObjectMeta) (uuid.UUID, error) {
	for _, o := range m.GetOwnerReferences() {
		if o.GetKind() != "Job" {
			continue
		}
		if !o.GetController() && len(m.GetOwnerReferences()) > 1 {
			continue
		}
		return ParseUID(o.GetUid(), "owner reference uid")
	}
	return uuid.Nil, nil
}

// NewTask builds the in-memory form of a task to be created (PENDING). It is
// used by Evaluate and by code that rebuilds state from storage.
func newTask(p *omegav1.Task, ms *metaShare) (*Task, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: task has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "task uid")
	if err != nil {
		return nil, err
	}
	job, err := ownerJob(p.GetMeta())
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", uid, err)
	}
	spec := p.GetSpec()
	if spec == nil {
		spec = &omegav1.TaskSpec{}
	}
	req, err := ms.request(uid, spec)
	if err != nil {
		return nil, err
	}
	meta, name := ms.share(p.GetMeta())
	return &Task{UID: uid, Job: job, Meta: meta, name: name, Spec: spec, req: req, State: omegav1.TaskState_TASK_STATE_PENDING}, nil
}

func newMachine(p *omegav1.Machine) (*Machine, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: machine has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "machine uid")
	if err != nil {
		return nil, err
	}
	spec := p.GetSpec()
	if spec == nil {
		return nil, fmt.Errorf("%w: machine %s has no spec", ErrInvalid, uid)
	}
	capacity := ResourcesFromProto(spec.GetCapacity())
	if err := capacity.Validate(); err != nil {
		return nil, fmt.Errorf("%w: machine %s capacity: %v", ErrInvalid, uid, err)
	}
	st := p.GetStatus().GetState()
	if st == omegav1.MachineState_MACHINE_STATE_UNSPECIFIED {
		st = omegav1.MachineState_MACHINE_STATE_UP
	}
	if _, ok := omegav1.MachineState_name[int32(st)]; !ok {
		return nil, fmt.Errorf("%w: machine %s state %d is not a MachineState", ErrInvalid, uid, st)
	}
	return &Machine{UID: uid, Meta: p.GetMeta(), Spec: spec, Capacity: capacity, State: st, Agent: p.GetStatus().GetAgentAddress()}, nil
}

func newJob(p *omegav1.Job) (*Job, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: job has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "job uid")
	if err != nil {
		return nil, err
	}
	spec := p.GetSpec()
	if spec == nil {
		return nil, fmt.Errorf("%w: job %s has no spec", ErrInvalid, uid)
	}
	if err := ResourcesFromProto(spec.GetTemplate().GetResources()).Validate(); err != nil {
		return nil, fmt.Errorf("%w: job %s template resources: %v", ErrInvalid, uid, err)
	}
	if spec.GetReplicas() < 0 {
		return nil, fmt.Errorf("%w: job %s replicas %d is negative", ErrInvalid, uid, spec.GetReplicas())
	}
	if tp := spec.GetTemplate(); tp != nil {
		if err := ValidateLifecycle("job "+uid.String()+" template", tp.GetRestartPolicy(), tp.GetHealthCheck(), tp.GetGracePeriodMillis(), tp.GetRestartDelayMillis(), tp.GetCommand()); err != nil {
			return nil, err
		}
	}
	status := p.GetStatus()
	if status == nil {
		status = &omegav1.JobStatus{Phase: omegav1.JobPhase_JOB_PHASE_PENDING}
	}
	return &Job{UID: uid, Meta: p.GetMeta(), Spec: spec, Status: status}, nil
}

// metaShare lets the tasks made from one template share one stored meta:
// a job's tasks, created in one transaction, carry metas equal but for
// their names (labels, annotations, owner references), and each would
// otherwise keep its own message — about 190 bytes a task, and its uid
// string, which the Task holds already. A task whose meta equals the last
// one's but for the name shares a copy of it without the name, the uid and
// the versions (which the Task holds, and exportMeta takes from it), and
// keeps its name beside it; the first task of a run keeps its own meta.
type metaShare struct {
	last   *omegav1.ObjectMeta // the last meta seen
	shared *omegav1.ObjectMeta // its stripped copy, once a second task matched it
	// spec and req: the last spec checked and its resources, parsed: the
	// tasks that share a spec share them.
	spec *omegav1.TaskSpec
	req  *Resources
}

// request returns a spec's resources, parsed and checked with its
// lifecycle: the same *Resources for the tasks that share the spec (a nil
// share parses every time).
func (s *metaShare) request(uid uuid.UUID, spec *omegav1.TaskSpec) (*Resources, error) {
	if s != nil && s.spec == spec && s.req != nil {
		return s.req, nil
	}
	req := ResourcesFromProto(spec.GetResources())
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("%w: task %s resources: %v", ErrInvalid, uid, err)
	}
	if hasLifecycle(spec.GetRestartPolicy(), spec.GetHealthCheck(), spec.GetGracePeriodMillis(), spec.GetRestartDelayMillis(), spec.GetCommand()) {
		if err := ValidateLifecycle("task "+uid.String(), spec.GetRestartPolicy(), spec.GetHealthCheck(), spec.GetGracePeriodMillis(), spec.GetRestartDelayMillis(), spec.GetCommand()); err != nil {
			return nil, err
		}
	}
	if s != nil {
		s.spec, s.req = spec, &req
	}
	return &req, nil
}

// share returns the meta to store and, when it is a shared one, the
// task's name.
func (s *metaShare) share(m *omegav1.ObjectMeta) (*omegav1.ObjectMeta, string) {
	if s == nil {
		return m, ""
	}
	if l := s.last; l != nil && maps.Equal(l.Labels, m.Labels) && maps.Equal(l.Annotations, m.Annotations) && sameOwners(l.OwnerReferences, m.OwnerReferences) {
		if s.shared == nil {
			s.shared = &omegav1.ObjectMeta{Labels: l.Labels, Annotations: l.Annotations, OwnerReferences: l.OwnerReferences}
		}
		return s.shared, m.GetName()
	}
	s.last, s.shared = m, nil
	return m, ""
}

func sameOwners(a, b []*omegav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == y && len(x.ProtoReflect().GetUnknown()) == 0 {
			continue
		}
		// A nil entry reads as an empty reference (as proto.Marshal writes
		// it); one with fields of a later schema (kept as stored, see
		// validate.go) is never shared, so each task keeps its own.
		if len(x.ProtoReflect().GetUnknown()) > 0 || len(y.ProtoReflect().GetUnknown()) > 0 ||
			x.GetKind() != y.GetKind() || x.GetUid() != y.GetUid() || x.GetName() != y.GetName() || x.GetController() != y.GetController() {
			return false
		}
	}
	return true
}
