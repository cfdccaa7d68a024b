package audit

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Stream audits a cell's history, revision by revision, with the same
// invariants as Check: it finds the violations that a final state no longer
// shows (a short claim whose task has since ended, a machine over-committed
// for an hour), and when each kind first became detectable. A violation is
// counted once when it begins: a task's claim when the task is placed, a
// machine's over-commitment or drift when it starts (not again until it
// has ended), a report of a task that never ran when it is made.
//
// Feed it the cell's starting state (Start) and then every write set in
// revision order (Observe); a watcher that fell behind and re-listed calls
// Start again with the fresh state, and what it missed in between is not
// seen. It keeps a record of every placed task (its machine, request and
// claim) and of every machine: memory in proportion to the live cell.
type Stream struct {
	epoch  int64 // the unix nanoseconds that First counts from
	jobs   map[uuid.UUID]string
	placed map[uuid.UUID]placement
	mach   map[uuid.UUID]*machineAudit
	// touched are the machines the current write set changed.
	touched map[uuid.UUID]struct{}
	rep     HistoryReport
}

type placement struct {
	machine    uuid.UUID
	assigned   int64
	req, claim dims
}

type machineAudit struct {
	name                string
	capacity, allocated dims
	requested, claimed  dims
	over, drift         bool
}

// HistoryReport is what a Stream found.
type HistoryReport struct {
	// Revisions audited, the last of them, and the write sets missed (the
	// revisions between a Start and the write set before it).
	Revisions int    `json:"revisions"`
	Revision  uint64 `json:"revision"`
	// Counts are the violations that began, by kind (every kind, zero
	// included).
	Counts map[string]int `json:"counts"`
	// FirstSeconds is, by kind, the time after the epoch at which the
	// first violation of that kind became detectable (kinds never seen are
	// absent).
	FirstSeconds map[string]float64 `json:"first_s"`
	// Examples are the first violations of each kind, up to MaxExamples
	// each.
	Examples []Violation `json:"examples"`
}

// Total is the number of violations that began.
func (r HistoryReport) Total() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// MaxExamples bounds the examples a HistoryReport keeps of each kind.
const MaxExamples = 5

// NewStream returns a Stream whose FirstSeconds count from epochUnixNanos
// (a simulation's time 0).
func NewStream(epochUnixNanos int64) *Stream {
	s := &Stream{epoch: epochUnixNanos, jobs: map[uuid.UUID]string{}, placed: map[uuid.UUID]placement{},
		mach: map[uuid.UUID]*machineAudit{}, touched: map[uuid.UUID]struct{}{}}
	s.rep.Counts = map[string]int{}
	for _, k := range Kinds {
		s.rep.Counts[k] = 0
	}
	s.rep.FirstSeconds = map[string]float64{}
	return s
}

// Report returns what the stream has found so far.
func (s *Stream) Report() HistoryReport { return s.rep }

func (s *Stream) found(kind string, obj uuid.UUID, nanos int64, format string, args ...any) {
	s.rep.Counts[kind]++
	if _, ok := s.rep.FirstSeconds[kind]; !ok {
		s.rep.FirstSeconds[kind] = float64(nanos-s.epoch) / 1e9
	}
	if s.rep.Counts[kind] <= MaxExamples {
		s.rep.Examples = append(s.rep.Examples, Violation{Kind: kind, Object: obj, Detail: fmt.Sprintf(format, args...)})
	}
}

// Start takes the cell's state as it stands at unixNanos: the first one,
// or a fresh one after the watch fell behind. Violations it holds that the
// stream had not seen begin now; those it had seen go on.
func (s *Stream) Start(st *txn.State, unixNanos int64) {
	old := s.placed
	s.jobs, s.placed = map[uuid.UUID]string{}, map[uuid.UUID]placement{}
	oldMach := s.mach
	s.mach = map[uuid.UUID]*machineAudit{}
	st.RangeJobs(func(j *txn.Job) bool { s.jobs[j.UID] = j.Scheduler(); return true })
	st.RangeMachines(func(m *txn.Machine) bool {
		s.setMachine(m)
		if o := oldMach[m.UID]; o != nil {
			s.mach[m.UID].over, s.mach[m.UID].drift = o.over, o.drift
		}
		return true
	})
	st.RangeTasks(func(t *txn.Task) bool {
		if placed(t.State) {
			if p, ok := old[t.UID]; ok && p.machine == t.Machine && p.assigned == t.Assigned {
				s.placed[t.UID] = p
				s.add(p)
			} else {
				s.place(t, unixNanos)
			}
		}
		return true
	})
	s.checkMachines(unixNanos)
	s.rep.Revision = st.Revision()
}

// Observe audits one write set, the next in revision order.
func (s *Stream) Observe(ws *txn.WriteSet) {
	s.rep.Revisions++
	s.rep.Revision = ws.Revision
	now := ws.UnixNanos
	for i := range ws.Changes {
		c := &ws.Changes[i]
		switch {
		case c.Machine != nil && c.Deleted:
			delete(s.mach, c.Machine.UID)
		case c.Machine != nil:
			s.setMachine(c.Machine)
			s.touched[c.Machine.UID] = struct{}{}
		case c.Job != nil && c.Deleted:
			delete(s.jobs, c.Job.UID)
		case c.Job != nil:
			s.jobs[c.Job.UID] = c.Job.Scheduler()
		case c.Task != nil:
			s.task(c, now)
		}
	}
	s.checkMachines(now)
}

func (s *Stream) task(c *txn.Change, now int64) {
	t := c.Task
	old, was := s.placed[t.UID]
	if c.Deleted {
		if was {
			s.remove(t.UID, old)
		}
		return
	}
	is := placed(t.State)
	if was && (!is || t.Machine != old.machine || t.Assigned != old.assigned) {
		s.remove(t.UID, old)
		was = false
	}
	if is && !was {
		s.place(t, now)
	}
	if (t.State == omegav1.TaskState_TASK_STATE_SUCCEEDED || t.State == omegav1.TaskState_TASK_STATE_FAILED) && c.PrevState != t.State && t.Assigned == 0 {
		s.found(NeverRan, t.UID, now, "task %s reported %s (it was %s) but was never claimed", t.Name(), t.State, c.PrevState)
	}
}

// place records a task placed at now and checks its claim.
func (s *Stream) place(t *txn.Task, now int64) {
	p := placement{machine: t.Machine, assigned: t.Assigned, req: taskRequest(t), claim: vec(t.Claimed.CPU, t.Claimed.Memory, t.Claimed.Ext)}
	s.placed[t.UID] = p
	s.add(p)
	if short := p.claim.short(p.req); len(short) > 0 {
		s.found(ClaimShort, t.UID, now, "task %s was placed on a claim short of its request: %s", t.Name(), strings.Join(short, ", "))
	}
	if kind, ok := schedulerKind(t.Scheduler); ok && t.Job != uuid.Nil {
		if owner, ok := s.jobs[t.Job]; ok && owner != kind {
			s.found(ForeignClaim, t.UID, now, "task %s of a job for %s was claimed by %s", t.Name(), owner, t.Scheduler)
		}
	}
}

func (s *Stream) add(p placement) {
	if m := s.mach[p.machine]; m != nil {
		m.requested.add(p.req)
		m.claimed.add(p.claim)
	}
	s.touched[p.machine] = struct{}{}
}

func (s *Stream) remove(task uuid.UUID, p placement) {
	delete(s.placed, task)
	if m := s.mach[p.machine]; m != nil {
		m.requested.sub(p.req)
		m.claimed.sub(p.claim)
	}
	s.touched[p.machine] = struct{}{}
}

func (s *Stream) setMachine(m *txn.Machine) {
	a := s.mach[m.UID]
	if a == nil {
		a = &machineAudit{}
		s.mach[m.UID] = a
	}
	cp := m.Spec.GetCapacity()
	a.name = m.Meta.GetName()
	a.capacity = vec(cp.GetCpuMillis(), cp.GetMemoryBytes(), cp.GetExtended())
	a.allocated = vec(m.Allocated.CPU, m.Allocated.Memory, m.Allocated.Ext)
}

// checkMachines checks the machines the write set touched, once it is
// wholly applied (a claim and its machine's allocation change together).
func (s *Stream) checkMachines(now int64) {
	// In uid order: the examples are the same for the same history.
	uids := make([]uuid.UUID, 0, len(s.touched))
	for uid := range s.touched {
		uids = append(uids, uid)
	}
	slices.SortFunc(uids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, uid := range uids {
		m := s.mach[uid]
		if m == nil {
			continue
		}
		over := m.capacity.short(m.requested)
		if len(over) > 0 && !m.over {
			s.found(OverCommitted, uid, now, "machine %s: its tasks request more than it has: %s", m.name, strings.Join(over, ", "))
		}
		m.over = len(over) > 0
		drift := !m.allocated.equal(m.claimed)
		if drift && !m.drift {
			s.found(AllocationDrift, uid, now, "machine %s records %v allocated, its tasks claim %v", m.name, m.allocated, m.claimed)
		}
		m.drift = drift
	}
	clear(s.touched)
}
