// Package audit is omega's independent checker of a cell's state: it
// counts the violations of the invariants a correct cell keeps, by kind,
// naming the objects. It shares no validation code with the store's
// policies (store.Mediated) or with txn's evaluation — it reads the state's
// objects and does its own arithmetic — so that a bug in a policy cannot
// hide the violations that policy lets through. The "don't expose raw
// state" experiment (issue 10) counts with it what each policy persisted.
package audit

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// The kinds of violation.
const (
	// ClaimShort: a placed task's claim declares less than its spec
	// requests in some dimension.
	ClaimShort = "claim-short"
	// OverCommitted: the placed tasks of a machine request more than it
	// has in some dimension.
	OverCommitted = "over-committed"
	// AllocationDrift: a machine's recorded allocation is not the sum of
	// the claims of the tasks placed on it.
	AllocationDrift = "allocation-drift"
	// NeverRan: a task that ended SUCCEEDED or FAILED was never claimed.
	NeverRan = "never-ran"
	// ForeignClaim: a task was claimed by a scheduler instance ("kind-N")
	// of another kind than its job names.
	ForeignClaim = "foreign-claim"
)

// Kinds lists the kinds of violation, in report order.
var Kinds = []string{ClaimShort, OverCommitted, AllocationDrift, NeverRan, ForeignClaim}

// Violation is one broken invariant.
type Violation struct {
	Kind   string    `json:"kind"`
	Object uuid.UUID `json:"object"` // the task, or for a machine's kinds the machine
	Detail string    `json:"detail"`
}

// Report is what Check found.
type Report struct {
	Revision   uint64         `json:"revision"`
	Tasks      int            `json:"tasks"`
	Machines   int            `json:"machines"`
	Counts     map[string]int `json:"counts"` // every kind, zero included
	Violations []Violation    `json:"violations"`
}

// Total is the number of violations.
func (r Report) Total() int { return len(r.Violations) }

// dims is a resource vector: cpu, memory, and the extended dimensions by
// name (nil when there are none) — the auditor's own arithmetic.
type dims struct {
	cpu, mem int64
	ext      map[string]int64
}

func vec(cpu, mem int64, ext map[string]int64) dims {
	d := dims{cpu: cpu, mem: mem}
	for k, v := range ext {
		if v != 0 {
			if d.ext == nil {
				d.ext = map[string]int64{}
			}
			d.ext[k] += v
		}
	}
	return d
}

func (d *dims) add(o dims) {
	d.cpu += o.cpu
	d.mem += o.mem
	for k, v := range o.ext {
		if d.ext == nil {
			d.ext = map[string]int64{}
		}
		d.ext[k] += v
	}
}

func (d *dims) sub(o dims) {
	d.cpu -= o.cpu
	d.mem -= o.mem
	for k, v := range o.ext {
		if d.ext == nil {
			d.ext = map[string]int64{}
		}
		d.ext[k] -= v
	}
}

// short names the dimensions in which d is below want.
func (d dims) short(want dims) []string {
	var out []string
	if d.cpu < want.cpu {
		out = append(out, fmt.Sprintf("cpu %d < %d", d.cpu, want.cpu))
	}
	if d.mem < want.mem {
		out = append(out, fmt.Sprintf("memory %d < %d", d.mem, want.mem))
	}
	for _, k := range slices.Sorted(maps.Keys(want.ext)) {
		if d.ext[k] < want.ext[k] {
			out = append(out, fmt.Sprintf("%s %d < %d", k, d.ext[k], want.ext[k]))
		}
	}
	return out
}

func (d dims) equal(o dims) bool {
	if d.cpu != o.cpu || d.mem != o.mem {
		return false
	}
	for k, v := range d.ext {
		if o.ext[k] != v {
			return false
		}
	}
	for k, v := range o.ext {
		if d.ext[k] != v {
			return false
		}
	}
	return true
}

func (d dims) String() string {
	s := fmt.Sprintf("cpu %d memory %d", d.cpu, d.mem)
	for _, k := range slices.Sorted(maps.Keys(d.ext)) {
		s += fmt.Sprintf(" %s %d", k, d.ext[k])
	}
	return s
}

func taskRequest(t *txn.Task) dims {
	r := t.Spec.GetResources()
	return vec(r.GetCpuMillis(), r.GetMemoryBytes(), r.GetExtended())
}

func placed(s omegav1.TaskState) bool {
	return s == omegav1.TaskState_TASK_STATE_ASSIGNED || s == omegav1.TaskState_TASK_STATE_RUNNING
}

// schedulerKind is the kind of a scheduler instance's component name
// ("batch-0" → "batch"), and false for a name that is not one (no
// "-<number>" instance suffix: the submitter placing the pre-fill, an
// operator's tool).
func schedulerKind(component string) (string, bool) {
	i := strings.LastIndexByte(component, '-')
	if i <= 0 || i+1 == len(component) {
		return "", false
	}
	for _, c := range component[i+1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return component[:i], true
}

// Check audits a state. The violations come in a fixed order: by kind in
// Kinds' order, then by object uid.
func Check(s *txn.State) Report {
	r := Report{Revision: s.Revision(), Tasks: s.NumTasks(), Machines: s.NumMachines(), Counts: map[string]int{}}
	for _, k := range Kinds {
		r.Counts[k] = 0
	}
	requested := map[uuid.UUID]*dims{}
	claimed := map[uuid.UUID]*dims{}
	add := func(kind string, obj uuid.UUID, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{Kind: kind, Object: obj, Detail: fmt.Sprintf(format, args...)})
	}
	s.RangeTasks(func(t *txn.Task) bool {
		req := taskRequest(t)
		if placed(t.State) {
			c := vec(t.Claimed.CPU, t.Claimed.Memory, t.Claimed.Ext)
			if short := c.short(req); len(short) > 0 {
				add(ClaimShort, t.UID, "task %s claims less than it requests: %s", t.Name(), strings.Join(short, ", "))
			}
			if requested[t.Machine] == nil {
				requested[t.Machine], claimed[t.Machine] = &dims{}, &dims{}
			}
			requested[t.Machine].add(req)
			claimed[t.Machine].add(c)
		}
		if (t.State == omegav1.TaskState_TASK_STATE_SUCCEEDED || t.State == omegav1.TaskState_TASK_STATE_FAILED) && t.Assigned == 0 {
			add(NeverRan, t.UID, "task %s is %s but was never claimed", t.Name(), t.State)
		}
		if kind, ok := schedulerKind(t.Scheduler); ok && t.Job != uuid.Nil {
			if j, ok := s.Job(t.Job); ok && kind != j.Scheduler() {
				add(ForeignClaim, t.UID, "task %s of job %s (for %s) was claimed by %s", t.Name(), j.Name(), j.Scheduler(), t.Scheduler)
			}
		}
		return true
	})
	s.RangeMachines(func(m *txn.Machine) bool {
		cp := m.Spec.GetCapacity()
		capacity := vec(cp.GetCpuMillis(), cp.GetMemoryBytes(), cp.GetExtended())
		if req := requested[m.UID]; req != nil {
			if over := capacity.short(*req); len(over) > 0 {
				add(OverCommitted, m.UID, "machine %s: its tasks request more than it has: %s", m.Meta.GetName(), strings.Join(over, ", "))
			}
		}
		got := vec(m.Allocated.CPU, m.Allocated.Memory, m.Allocated.Ext)
		want := dims{}
		if c := claimed[m.UID]; c != nil {
			want = *c
		}
		if !got.equal(want) {
			add(AllocationDrift, m.UID, "machine %s records %v allocated, its tasks claim %v", m.Meta.GetName(), got, want)
		}
		return true
	})
	order := map[string]int{}
	for i, k := range Kinds {
		order[k] = i
	}
	slices.SortFunc(r.Violations, func(a, b Violation) int {
		if c := order[a.Kind] - order[b.Kind]; c != 0 {
			return c
		}
		return bytes.Compare(a.Object[:], b.Object[:])
	})
	for _, v := range r.Violations {
		r.Counts[v.Kind]++
	}
	return r
}
