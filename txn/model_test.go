package txn_test

// The model TestEvaluateMatchesModel holds Evaluate and State.Apply to: the
// cell in plain maps (machines with capacity and allocation in three
// dimensions, tasks with their state, placement and version), and what a
// transaction must do to it, operation by operation, in every conflict
// and commit mode (property_test.go drives it).

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

const (
	dCPU = iota
	dMem
	dGPU
	nDims
)

var dimNames = [nDims]string{"cpu", "memory", "gpu"}

type vec [nDims]int64

func vecOf(r txn.Resources) vec { return vec{r.CPU, r.Memory, r.Ext["gpu"]} }

type mMachine struct {
	capacity, alloc vec
	state           omegav1.MachineState
	tasks           int32
	seq, version    uint64
}

type mTask struct {
	state     omegav1.TaskState
	machine   uuid.UUID
	claimed   vec
	version   uint64
	priority  int32
	evictions int32
}

func (t *mTask) placed() bool { return t.state == assigned || t.state == running }

func isTerminal(s omegav1.TaskState) bool {
	return s == succeeded || s == failed || s == lost || s == killed
}

type model struct {
	rev      uint64
	machines map[uuid.UUID]*mMachine
	tasks    map[uuid.UUID]*mTask
	// lastDelete is the newest revision that deleted something; a view
	// older than it naming an absent object conflicts (NOT_FOUND) instead of
	// erring.
	lastDelete uint64
	// deletedHere: objects the transaction being predicted deleted.
	deletedHere map[uuid.UUID]bool
}

// missing is what naming an absent object means.
func (ov *model) missing(base *model, tx *txn.Txn, id uuid.UUID) (omegav1.OutcomeCode, error) {
	if !ov.deletedHere[id] && tx.ViewRevision < base.lastDelete {
		return omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND, nil
	}
	return 0, txn.ErrNotFound
}

func (m *model) clone() *model {
	out := &model{rev: m.rev, lastDelete: m.lastDelete, machines: map[uuid.UUID]*mMachine{}, tasks: map[uuid.UUID]*mTask{}}
	for k, v := range m.machines {
		c := *v
		out.machines[k] = &c
	}
	for k, v := range m.tasks {
		c := *v
		out.tasks[k] = &c
	}
	return out
}

func sortedIDs[V any](m map[uuid.UUID]V) []uuid.UUID {
	return slices.SortedFunc(maps.Keys(m), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
}

// prediction is what the model says a transaction does.
type prediction struct {
	errAt  int   // index of the op that makes it an error, or -1
	err    error // the sentinel
	codes  []omegav1.OutcomeCode
	next   *model // the state after, nil if nothing commits
	nConfl int
}

// predict evaluates tx on base at revision rev, from the rules in DESIGN.md
// "Transactions", in plain maps.
func (base *model) predict(tx *txn.Txn, rev uint64) prediction {
	ov := base.clone()
	ov.deletedHere = map[uuid.UUID]bool{}
	created := map[uuid.UUID]bool{}
	p := prediction{errAt: -1, codes: make([]omegav1.OutcomeCode, len(tx.Ops))}
	for i := range tx.Ops {
		code, err := ov.op(base, created, tx, &tx.Ops[i], rev)
		if err != nil {
			return prediction{errAt: i, err: err}
		}
		p.codes[i] = code
	}
	committed := 0
	for _, c := range p.codes {
		if c == cCommitted {
			committed++
		} else {
			p.nConfl++
		}
	}
	if p.nConfl > 0 && tx.Commit == allOrNone {
		for i, c := range p.codes {
			if c == cCommitted {
				p.codes[i] = cAborted
			}
		}
		committed = 0
	}
	if committed > 0 {
		ov.rev = rev
		for i, c := range p.codes {
			if c == cCommitted && tx.Ops[i].Kind == txn.OpDelete {
				ov.lastDelete = rev
			}
		}
		ov.deletedHere = nil
		p.next = ov
	}
	return p
}

// baseVersion is the version of a task in the state the transaction runs
// against (0 for a task the transaction created).
func (base *model) baseVersion(created map[uuid.UUID]bool, id uuid.UUID) uint64 {
	if created[id] {
		return 0
	}
	return base.tasks[id].version
}

func (ov *model) release(t *mTask, rev uint64) {
	m := ov.machines[t.machine]
	for d := range nDims {
		m.alloc[d] -= t.claimed[d]
	}
	m.tasks--
	m.seq = rev
}

// op applies one operation to the overlay ov if it commits. A conflict
// leaves ov unchanged.
func (ov *model) op(base *model, created map[uuid.UUID]bool, tx *txn.Txn, op *txn.Op, rev uint64) (omegav1.OutcomeCode, error) {
	switch op.Kind {
	case txn.OpCreate:
		id := uuid.MustParse(op.NewTask.GetMeta().GetUid())
		if _, ok := ov.tasks[id]; ok {
			return 0, txn.ErrAlreadyExists
		}
		ov.tasks[id] = &mTask{state: pending, version: rev, priority: op.NewTask.GetSpec().GetPriority()}
		created[id] = true
		return cCommitted, nil

	case txn.OpClaim:
		req := vecOf(op.Resources)
		for _, v := range req {
			if v < 0 {
				return 0, txn.ErrInvalid
			}
		}
		t, ok := ov.tasks[op.Task]
		if !ok {
			return ov.missing(base, tx, op.Task)
		}
		m, ok := ov.machines[op.Machine]
		if !ok {
			return ov.missing(base, tx, op.Machine)
		}
		if op.ExpectVersion != base.baseVersion(created, op.Task) {
			return cTaskChanged, nil
		}
		if t.state != pending {
			return 0, txn.ErrNotPending
		}
		if m.state != up {
			return cNotUp, nil
		}
		if tx.Conflict == coarse && base.machines[op.Machine].seq > tx.ViewRevision {
			return cMachChanged, nil
		}
		for d := range nDims {
			if m.alloc[d]+req[d] > m.capacity[d] {
				return cInsufficient, nil
			}
		}
		for d := range nDims {
			m.alloc[d] += req[d]
		}
		m.tasks++
		m.seq = rev
		t.state, t.machine, t.claimed, t.version = assigned, op.Machine, req, rev
		return cCommitted, nil

	case txn.OpEvict:
		t, ok := ov.tasks[op.Task]
		if !ok {
			return ov.missing(base, tx, op.Task)
		}
		if op.ExpectVersion != base.baseVersion(created, op.Task) {
			return cTaskChanged, nil
		}
		if !t.placed() {
			return 0, txn.ErrIllegalState
		}
		if !op.Force && t.priority >= op.ForPriority {
			return cPriority, nil
		}
		ov.release(t, rev)
		t.state, t.machine, t.claimed, t.version = pending, uuid.Nil, vec{}, rev
		t.evictions++
		return cCommitted, nil

	case txn.OpSetStatus:
		if op.State != running && !isTerminal(op.State) {
			return 0, txn.ErrInvalid
		}
		t, ok := ov.tasks[op.Task]
		if !ok {
			return ov.missing(base, tx, op.Task)
		}
		blind := op.ExpectVersion == 0
		if !blind && op.ExpectVersion != base.baseVersion(created, op.Task) {
			return cTaskChanged, nil
		}
		if isTerminal(t.state) || (op.State == running && !t.placed()) {
			if blind {
				return cTaskChanged, nil
			}
			return 0, txn.ErrIllegalState
		}
		if isTerminal(op.State) && t.placed() {
			ov.release(t, rev)
		}
		t.state, t.version = op.State, rev
		return cCommitted, nil

	case txn.OpDelete:
		t, ok := ov.tasks[op.DeleteUID]
		if !ok {
			return ov.missing(base, tx, op.DeleteUID)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != base.baseVersion(created, op.DeleteUID) {
			return cVersion, nil
		}
		if t.placed() {
			ov.release(t, rev)
		}
		delete(ov.tasks, op.DeleteUID)
		ov.deletedHere[op.DeleteUID] = true
		return cCommitted, nil

	case txn.OpPut:
		id := uuid.MustParse(op.NewMachine.GetMeta().GetUid())
		m, ok := ov.machines[id]
		if !ok {
			return ov.missing(base, tx, id)
		}
		if op.ExpectVersion != 0 && op.ExpectVersion != base.machines[id].version {
			return cVersion, nil
		}
		capacity := vecOf(txn.ResourcesFromProto(op.NewMachine.GetSpec().GetCapacity()))
		for d := range nDims {
			if m.alloc[d] > capacity[d] {
				return cInsufficient, nil
			}
		}
		m.capacity, m.state, m.version, m.seq = capacity, op.NewMachine.GetStatus().GetState(), rev, rev
		return cCommitted, nil
	}
	panic(fmt.Sprintf("model: op kind %s", op.Kind))
}

// matches reports how the real state differs from the model, or "".
func (m *model) matches(s *txn.State) string {
	if s.Revision() != m.rev {
		return fmt.Sprintf("revision %d, model %d", s.Revision(), m.rev)
	}
	if s.NumMachines() != len(m.machines) || s.NumTasks() != len(m.tasks) {
		return fmt.Sprintf("%d machines %d tasks, model %d and %d", s.NumMachines(), s.NumTasks(), len(m.machines), len(m.tasks))
	}
	for _, id := range sortedIDs(m.machines) {
		want := m.machines[id]
		got, ok := s.Machine(id)
		if !ok {
			return fmt.Sprintf("machine %s missing", id)
		}
		if vecOf(got.Capacity) != want.capacity || vecOf(got.Allocated) != want.alloc || got.Tasks != want.tasks ||
			got.Seq != want.seq || got.Version != want.version || got.State != want.state {
			return fmt.Sprintf("machine %s: cap %v alloc %v tasks %d seq %d v%d %s; model %+v",
				id, got.Capacity, got.Allocated, got.Tasks, got.Seq, got.Version, got.State, *want)
		}
	}
	for _, id := range sortedIDs(m.tasks) {
		want := m.tasks[id]
		got, ok := s.Task(id)
		if !ok {
			return fmt.Sprintf("task %s missing", id)
		}
		if got.State != want.state || got.Version != want.version || got.Evictions != want.evictions ||
			vecOf(got.Claimed) != want.claimed || got.Machine != want.machine {
			return fmt.Sprintf("task %s: %s on %s claimed %v v%d ev%d; model %+v",
				id, got.State, got.Machine, got.Claimed, got.Version, got.Evictions, *want)
		}
	}
	return ""
}
