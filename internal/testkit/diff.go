package testkit

import (
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Compare says what DiffStates compares beyond the fields every layer
// relies on.
type Compare struct {
	// IgnoreSeq leaves out the machines' coarse-conflict sequence numbers
	// and last-claim revisions: a reopened store does not store them and
	// restarts them at the revision it reopened at (txn.Restorer).
	IgnoreSeq bool
	// Protos compares every object's wire form too (meta, spec, status).
	// Leave it off while a store may be encoding the same objects on
	// another goroutine: a message's size cache is not safe for concurrent
	// marshalling.
	Protos bool
}

// MachineFP, TaskFP and JobFP are the comparable parts of the objects,
// without their protobuf messages.
type MachineFP struct {
	Version, Seq, LastClaim uint64
	State                   omegav1.MachineState
	Capacity, Allocated     string
	Tasks                   int32
	Agent                   string
}

type TaskFP struct {
	Version, CreateRev          uint64
	Job, Machine                uuid.UUID
	State                       omegav1.TaskState
	Request, Claimed            string
	Scheduler, Message          string
	Assigned, Started, Finished int64
	Evictions                   int32
	Run                         string // the agent's report, in text form
}

type JobFP struct {
	Version, CreateRev uint64
	Phase              omegav1.JobPhase
}

func machineFP(m *txn.Machine) MachineFP {
	return MachineFP{m.Version, m.Seq, m.LastClaim, m.State, m.Capacity.String(), m.Allocated.String(), m.Tasks, m.Agent}
}

func taskFP(t *txn.Task) TaskFP {
	return TaskFP{t.Version, t.CreateRev, t.Job, t.Machine, t.State, t.Request().String(), t.Claimed.String(), t.Scheduler, t.Message(), t.Assigned, t.Started, t.Finished, t.Evictions, prototext.MarshalOptions{}.Format(t.Run())}
}

func jobFP(j *txn.Job) JobFP { return JobFP{j.Version, j.CreateRev, j.Phase()} }

// DiffStates returns the first difference between want and got, or nil:
// the revision, the object counts, the cell's totals, every machine, task
// and job field by field (and by wire form with Compare.Protos), and the
// pending index (every PENDING task listed under its job, nothing else).
// The state is the store's contract with every layer above it, so one
// comparison serves the store's crash and reopen tests, the client's sync
// tests and the components that follow the cell.
func DiffStates(want, got *txn.State, o Compare) error {
	if want.Revision() != got.Revision() {
		return fmt.Errorf("revision %d, want %d", got.Revision(), want.Revision())
	}
	if want.NumMachines() != got.NumMachines() || want.NumTasks() != got.NumTasks() || want.NumJobs() != got.NumJobs() {
		return fmt.Errorf("holds %d machines %d tasks %d jobs, want %d %d %d",
			got.NumMachines(), got.NumTasks(), got.NumJobs(), want.NumMachines(), want.NumTasks(), want.NumJobs())
	}
	if !want.Capacity().Equal(got.Capacity()) || !want.Allocated().Equal(got.Allocated()) {
		return fmt.Errorf("totals capacity %v allocated %v, want %v %v", got.Capacity(), got.Allocated(), want.Capacity(), want.Allocated())
	}
	var err error
	want.RangeMachines(func(w *txn.Machine) bool {
		g, ok := got.Machine(w.UID)
		if !ok {
			err = fmt.Errorf("machine %s missing", w.UID)
			return false
		}
		gf, wf := machineFP(g), machineFP(w)
		if o.IgnoreSeq {
			gf.Seq, wf.Seq, gf.LastClaim, wf.LastClaim = 0, 0, 0, 0
		}
		if gf != wf {
			err = fmt.Errorf("machine %s is %+v, want %+v", w.UID, gf, wf)
			return false
		}
		if o.Protos {
			pg, pw := g.Proto(), w.Proto()
			if o.IgnoreSeq {
				pg.Status.Seq, pw.Status.Seq, pg.Status.LastClaim, pw.Status.LastClaim = 0, 0, 0, 0
			}
			if !proto.Equal(pg, pw) {
				err = fmt.Errorf("machine %s:\n  %v\nwant\n  %v", w.UID, pg, pw)
			}
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	pending := map[uuid.UUID]int{} // job → PENDING tasks
	want.RangeTasks(func(w *txn.Task) bool {
		g, ok := got.Task(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("task %s missing", w.UID)
		case taskFP(g) != taskFP(w):
			err = fmt.Errorf("task %s is %+v, want %+v", w.UID, taskFP(g), taskFP(w))
		case o.Protos && !proto.Equal(g.Proto(), w.Proto()):
			err = fmt.Errorf("task %s:\n  %v\nwant\n  %v", w.UID, g.Proto(), w.Proto())
		}
		if w.State == omegav1.TaskState_TASK_STATE_PENDING {
			pending[w.Job]++
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	want.RangeJobs(func(w *txn.Job) bool {
		g, ok := got.Job(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("job %s missing", w.UID)
		case jobFP(g) != jobFP(w):
			err = fmt.Errorf("job %s is %+v, want %+v", w.UID, jobFP(g), jobFP(w))
		case o.Protos && !proto.Equal(g.Proto(), w.Proto()):
			err = fmt.Errorf("job %s:\n  %v\nwant\n  %v", w.UID, g.Proto(), w.Proto())
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	// The outstanding offers, whole.
	if want.NumOffers() != got.NumOffers() {
		return fmt.Errorf("holds %d offers, want %d", got.NumOffers(), want.NumOffers())
	}
	want.RangeOffers(func(w *txn.Offer) bool {
		g, ok := got.Offer(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("offer %s missing", w.UID)
		case !proto.Equal(g.Proto(), w.Proto()):
			err = fmt.Errorf("offer %s:\n  %v\nwant\n  %v", w.UID, g.Proto(), w.Proto())
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	// The quotas, and what each one's tasks hold.
	if want.NumQuotas() != got.NumQuotas() {
		return fmt.Errorf("holds %d quotas, want %d", got.NumQuotas(), want.NumQuotas())
	}
	want.RangeQuotas(func(w *txn.Quota) bool {
		g, ok := got.Quota(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("quota %s missing", w.UID)
		case !proto.Equal(g.Proto(), w.Proto()):
			err = fmt.Errorf("quota %s:\n  %v\nwant\n  %v", w.UID, g.Proto(), w.Proto())
		case !got.QuotaUsed(w.UID).Equal(want.QuotaUsed(w.UID)):
			err = fmt.Errorf("quota %s: used %v, want %v", w.UID, got.QuotaUsed(w.UID), want.QuotaUsed(w.UID))
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	// The leases.
	if want.NumLeases() != got.NumLeases() {
		return fmt.Errorf("holds %d leases, want %d", got.NumLeases(), want.NumLeases())
	}
	want.RangeLeases(func(w *txn.Lease) bool {
		g, ok := got.Lease(w.UID)
		switch {
		case !ok:
			err = fmt.Errorf("lease %s missing", w.UID)
		case !proto.Equal(g.Proto(), w.Proto()):
			err = fmt.Errorf("lease %s:\n  %v\nwant\n  %v", w.UID, g.Proto(), w.Proto())
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	// The pending index: got lists exactly want's PENDING tasks by job.
	indexed := 0
	got.RangePendingJobs(func(job uuid.UUID, n int) bool {
		indexed += n
		if pending[job] != n {
			err = fmt.Errorf("pending index lists %d tasks of job %s, want %d", n, job, pending[job])
			return false
		}
		got.RangePendingTasks(job, func(t *txn.Task) bool {
			if t.State != omegav1.TaskState_TASK_STATE_PENDING || t.Job != job {
				err = fmt.Errorf("pending index lists task %s (%s, job %s) under job %s", t.UID, t.State, t.Job, job)
			}
			return err == nil
		})
		return err == nil
	})
	if err == nil {
		total := 0
		for _, n := range pending {
			total += n
		}
		if indexed != total {
			err = fmt.Errorf("pending index holds %d tasks, want %d", indexed, total)
		}
	}
	return err
}

// Fingerprint is a deep copy of what DiffStates compares without protos,
// to check later that a state (a view handed out earlier) has not changed.
type Fingerprint struct {
	rev      uint64
	alloc    string
	machines map[uuid.UUID]MachineFP
	tasks    map[uuid.UUID]TaskFP
	jobs     map[uuid.UUID]JobFP
	offers   map[uuid.UUID]string // an offer's wire form, as text
}

// FingerprintOf takes a state's fingerprint.
func FingerprintOf(s *txn.State) Fingerprint {
	f := Fingerprint{rev: s.Revision(), alloc: s.Allocated().String(),
		machines: map[uuid.UUID]MachineFP{}, tasks: map[uuid.UUID]TaskFP{}, jobs: map[uuid.UUID]JobFP{}}
	s.RangeMachines(func(m *txn.Machine) bool { f.machines[m.UID] = machineFP(m); return true })
	s.RangeTasks(func(t *txn.Task) bool { f.tasks[t.UID] = taskFP(t); return true })
	s.RangeJobs(func(j *txn.Job) bool { f.jobs[j.UID] = jobFP(j); return true })
	s.RangeOffers(func(o *txn.Offer) bool {
		if f.offers == nil {
			f.offers = map[uuid.UUID]string{}
		}
		f.offers[o.UID] = prototext.Format(o.Proto())
		return true
	})
	return f
}

// Diff returns the first difference between f (before) and g (now).
func (f Fingerprint) Diff(g Fingerprint) error {
	if f.rev != g.rev || f.alloc != g.alloc || len(f.machines) != len(g.machines) || len(f.tasks) != len(g.tasks) || len(f.jobs) != len(g.jobs) {
		return fmt.Errorf("revision %d alloc %v sizes %d/%d/%d, was %d %v %d/%d/%d",
			g.rev, g.alloc, len(g.machines), len(g.tasks), len(g.jobs), f.rev, f.alloc, len(f.machines), len(f.tasks), len(f.jobs))
	}
	for k, v := range f.machines {
		if g.machines[k] != v {
			return fmt.Errorf("machine %s is %+v, was %+v", k, g.machines[k], v)
		}
	}
	for k, v := range f.tasks {
		if g.tasks[k] != v {
			return fmt.Errorf("task %s is %+v, was %+v", k, g.tasks[k], v)
		}
	}
	for k, v := range f.jobs {
		if g.jobs[k] != v {
			return fmt.Errorf("job %s is %+v, was %+v", k, g.jobs[k], v)
		}
	}
	if len(f.offers) != len(g.offers) {
		return fmt.Errorf("%d offers, was %d", len(g.offers), len(f.offers))
	}
	for k, v := range f.offers {
		if g.offers[k] != v {
			return fmt.Errorf("offer %s is %s, was %s", k, g.offers[k], v)
		}
	}
	return nil
}
