package txn_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestEvaluateMatchesModel holds Evaluate + State.Apply against a model in
// plain maps, over random sequences of transactions on a small cell (three
// machines, so conflicts are frequent) with cpu, memory and a "gpu" extended
// dimension. Transactions mix creates, claims (several per machine, expect
// versions from older views), evictions, status reports, deletes and machine
// puts, in every conflict and commit mode, against views that are often
// behind the state.
//
// rapid prints the seed and writes a fail file under testdata/rapid on a
// failure; rerun with -rapid.seed=N (or the fail file) to reproduce it. All
// uids come from counters and every choice is drawn from rapid, so a seed
// replays exactly. -rapid.checks=N runs more cases (default 100).
func TestEvaluateMatchesModel(t *testing.T) {
	var stats propStats
	// Several rounds of rapid's checks (100 each by default, -rapid.checks),
	// each with a fresh seed: a few seconds, about 10 s under -race. A round
	// that fails prints the -run pattern and the -rapid.seed (or
	// -rapid.failfile) that replay it.
	rounds := 8
	if testing.Short() {
		rounds = 1
	}
	for round := range rounds {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { runModel(rt, &stats) })
		})
		if t.Failed() {
			return
		}
	}
	t.Logf("%d transactions: %d rejected with an error (%s), %d committed, %d partial, %d aborted; outcomes%s",
		stats.txns.Load(), stats.errs.Load(), stats.errCounts(), stats.commits.Load(), stats.partial.Load(), stats.aborted.Load(), stats.codeCounts())
	// When the run was big enough, the generator must have reached every
	// interesting outcome, or the property proves little.
	if stats.txns.Load() >= 1000 {
		for code := range omegav1.OutcomeCode_name {
			if omegav1.OutcomeCode(code) == omegav1.OutcomeCode_OUTCOME_CODE_REJECTED {
				continue // the model has no policy rules (rules_test.go covers them)
			}
			if stats.codes[code].Load() == 0 {
				t.Errorf("no operation had outcome %s", omegav1.OutcomeCode(code))
			}
		}
		if stats.errs.Load() == 0 || stats.partial.Load() == 0 {
			t.Errorf("generator never produced an error or a partial commit")
		}
	}
}

type propStats struct {
	txns, errs, commits, partial, aborted atomic.Int64
	codes                                 [10]atomic.Int64
	errKinds                              sync.Map // error sentinel text → *atomic.Int64
}

func (s *propStats) countErr(err error) {
	v, _ := s.errKinds.LoadOrStore(err.Error(), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *propStats) errCounts() string {
	var out []string
	s.errKinds.Range(func(k, v any) bool {
		out = append(out, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(out)
	return strings.Join(out, " ")
}

func (s *propStats) codeCounts() string {
	out := ""
	for i := range s.codes {
		out += fmt.Sprintf(" %s=%d", omegav1.OutcomeCode(i), s.codes[i].Load())
	}
	return out
}

// --- the generator and the checks --------------------------------------------

var propMachines = []uuid.UUID{uid(1), uid(2), uid(3)}

func runModel(t *rapid.T, stats *propStats) {
	// Amounts come from rapid's ranges, which lean towards their ends (good
	// for boundaries). Choices — which op, which task, whether something
	// unusual happens — come from a mixed 64-bit draw instead, so that their
	// percentages hold; a draw shrunk to 0 picks the first candidate and
	// makes no unusual choice.
	draw := func(label string, lo, hi int) int { return rapid.IntRange(lo, hi).Draw(t, label) }
	choose := func(label string, n int) int { return int(mix64(rapid.Uint64().Draw(t, label)) % uint64(n)) }
	chance := func(label string, pct int) bool { return 99-choose(label, 100) < pct }
	rare := func(label string) bool { return chance(label, 3) }
	nextID := uint64(1000)
	newID := func() uuid.UUID { nextID++; return uid(nextID) }

	// The cell: three machines and a few tasks, created at revision 1.
	setup := &txn.Txn{UnixNanos: 1}
	for _, id := range propMachines {
		capacity := res(int64(draw("cpu", 2, 8)*500), int64(draw("mem", 2, 8)*500))
		if g := draw("gpus", 0, 3); g > 0 {
			capacity = res(capacity.CPU, capacity.Memory, "gpu", g)
		}
		setup.Ops = append(setup.Ops, txn.CreateMachine(machineP(id, capacity)))
	}
	for range draw("tasks", 2, 8) {
		setup.Ops = append(setup.Ops, txn.CreateTask(taskP(newID(), res(100, 100), int32(draw("prio", 0, 3)))))
	}
	s := txn.NewState()
	_, ws, err := txn.Evaluate(s, setup, 1, txn.DefaultLimits())
	if err != nil || ws == nil {
		t.Fatalf("setup: %v", err)
	}
	s = s.Apply(ws)
	mod := &model{rev: 1, machines: map[uuid.UUID]*mMachine{}, tasks: map[uuid.UUID]*mTask{}}
	for _, op := range setup.Ops {
		if op.NewMachine != nil {
			id := uuid.MustParse(op.NewMachine.Meta.Uid)
			mod.machines[id] = &mMachine{capacity: vecOf(txn.ResourcesFromProto(op.NewMachine.Spec.Capacity)), state: up, seq: 1, version: 1}
		} else {
			id := uuid.MustParse(op.NewTask.Meta.Uid)
			mod.tasks[id] = &mTask{state: pending, version: 1, priority: op.NewTask.Spec.Priority}
		}
	}
	if d := mod.matches(s); d != "" {
		t.Fatalf("after setup: %s", d)
	}
	// Every committed state and its model, for views and for checking later
	// that old states never change.
	states := []*txn.State{s}
	models := []*model{mod}

	steps := draw("txns", 1, 80)
	for step := range steps {
		// The view: the latest state, or one a few commits behind.
		vi := len(models) - 1
		if chance("old view", 40) {
			vi = max(0, vi-1-choose("behind", 5))
		}
		view := models[vi]
		viewTasks := sortedIDs(view.tasks)
		tx := &txn.Txn{
			ViewRevision: view.rev,
			Component:    "prop",
			UnixNanos:    int64(step + 2),
		}
		if chance("coarse", 50) {
			tx.Conflict = coarse
		}
		if chance("gang", 30) {
			tx.Commit = allOrNone
		}
		var createdHere []uuid.UUID
		used := map[uuid.UUID]bool{}
		// pickTask draws a task of the view that satisfies want, preferring
		// one not yet used by this transaction.
		pickTask := func(label string, want func(*mTask) bool) (uuid.UUID, bool) {
			var cands []uuid.UUID
			for _, id := range viewTasks {
				if want(view.tasks[id]) && (!used[id] || rare(label+" reuse")) {
					cands = append(cands, id)
				}
			}
			if len(cands) == 0 {
				return uuid.Nil, false
			}
			id := cands[choose(label, len(cands))]
			used[id] = true
			return id, true
		}
		anyTask := func(*mTask) bool { return true }
		isPending := func(mt *mTask) bool { return mt.state == pending }
		claimRes := func() txn.Resources {
			r := res(int64(draw("claim cpu", 0, 12)*100), int64(draw("claim mem", 0, 12)*100))
			switch g := draw("claim gpu", -1, 2); {
			case g > 0:
				r = res(r.CPU, r.Memory, "gpu", g)
			case g == 0:
				r.Ext = map[string]int64{"gpu": 0} // an explicit zero is no gpu
			}
			return r
		}
		machine := func() uuid.UUID {
			if chance("unknown machine", 1) {
				return uid(999)
			}
			return propMachines[choose("machine", len(propMachines))]
		}
		version := func(id uuid.UUID) uint64 {
			if rare("garbage version") {
				return uint64(draw("version", 0, int(view.rev)+3))
			}
			return view.tasks[id].version
		}

		for range draw("ops", 1, 8) {
			switch k := choose("kind", 100); {
			case k < 10: // create
				id := newID()
				tx.Ops = append(tx.Ops, txn.CreateTask(taskP(id, res(100, 100), int32(draw("prio", 0, 3)))))
				createdHere = append(createdHere, id)
			case k < 30 && len(createdHere) > 0: // claim a task created in this txn
				id := createdHere[choose("created", len(createdHere))]
				if !used[id] || rare("claim created again") {
					used[id] = true
					tx.Ops = append(tx.Ops, txn.Claim(id, machine(), claimRes(), 0))
				}
			case k < 40: // several claims on one machine
				m := machine()
				for range draw("burst", 2, 4) {
					if id, ok := pickTask("burst task", isPending); ok {
						tx.Ops = append(tx.Ops, txn.Claim(id, m, claimRes(), version(id)))
					}
				}
			case k < 60: // claim
				want := isPending
				if rare("claim non-pending") {
					want = anyTask
				}
				if id, ok := pickTask("claim task", want); ok {
					tx.Ops = append(tx.Ops, txn.Claim(id, machine(), claimRes(), version(id)))
				}
			case k < 72: // evict
				want := (*mTask).placed
				if rare("evict unplaced") {
					want = anyTask
				}
				if id, ok := pickTask("evict task", want); ok {
					prio := int32(draw("for prio", 0, 4))
					if chance("force", 30) {
						tx.Ops = append(tx.Ops, txn.ForceEvict(id, version(id), "force"))
					} else {
						tx.Ops = append(tx.Ops, txn.Evict(id, version(id), prio, "prio"))
					}
				}
			case k < 88: // set status
				states := []omegav1.TaskState{running, succeeded, failed, lost, killed}
				target := states[choose("target", len(states))]
				if rare("bad target") {
					target = assigned
				}
				want := func(mt *mTask) bool { return !isTerminal(mt.state) }
				if target == running {
					want = (*mTask).placed
				}
				if chance("any status task", 10) {
					want = anyTask
				}
				id, ok := pickTask("status task", want)
				if len(createdHere) > 0 && chance("status of created", 15) {
					id, ok = createdHere[choose("created", len(createdHere))], true
				}
				if ok {
					var v uint64
					if !slices.Contains(createdHere, id) && chance("versioned", 50) {
						v = version(id)
					}
					tx.Ops = append(tx.Ops, txn.SetStatus(id, target, v, ""))
				}
			case k < 94: // delete a task
				if id, ok := pickTask("delete task", anyTask); ok {
					var v uint64
					if chance("versioned", 50) {
						v = version(id)
					}
					tx.Ops = append(tx.Ops, txn.Delete(kindTask, id, v))
				}
			default: // put a machine: new capacity or state
				id := propMachines[choose("put machine", len(propMachines))]
				vm := view.machines[id]
				capacity := res(max(0, vm.capacity[dCPU]+int64(draw("dcpu", -4, 4)*250)),
					max(0, vm.capacity[dMem]+int64(draw("dmem", -4, 4)*250)))
				if g := max(0, int(vm.capacity[dGPU])+draw("dgpu", -1, 1)); g > 0 {
					capacity = res(capacity.CPU, capacity.Memory, "gpu", g)
				}
				st := up
				if chance("drain", 25) {
					st = draining
				}
				var v uint64
				if chance("versioned", 50) {
					v = vm.version
				}
				tx.Ops = append(tx.Ops, txn.PutMachine(machineState(id, capacity, st), v))
			}
		}

		cur, curModel := states[len(states)-1], models[len(models)-1]
		rev := cur.Revision() + 1
		want := curModel.predict(tx, rev)
		r, ws, err := txn.Evaluate(cur, tx, rev, txn.DefaultLimits())
		stats.txns.Add(1)

		if want.errAt >= 0 {
			stats.errs.Add(1)
			stats.countErr(want.err)
			var oe *txn.OpError
			if !errors.Is(err, want.err) || !errors.As(err, &oe) || oe.Index != want.errAt {
				t.Fatalf("txn %d: error %v, model says %v at op %d\nops: %s", step, err, want.err, want.errAt, opsString(tx))
			}
			if ws != nil || r.Outcomes != nil {
				t.Fatalf("txn %d: error with a result", step)
			}
			if d := curModel.matches(cur); d != "" {
				t.Fatalf("txn %d: a rejected transaction changed the state: %s", step, d)
			}
			continue
		}
		if err != nil {
			t.Fatalf("txn %d: unexpected error %v\nops: %s", step, err, opsString(tx))
		}
		checkResultShape(t, tx, r, ws, rev)
		if got := codes(r); !slices.Equal(got, want.codes) {
			t.Fatalf("txn %d (view %d, state %d, %s, %s): outcomes\n got %v\nwant %v\nops: %s\ndetails: %+v",
				step, tx.ViewRevision, cur.Revision(), tx.Conflict, tx.Commit, got, want.codes, opsString(tx), r.Outcomes)
		}
		for _, c := range codes(r) {
			stats.codes[c].Add(1)
		}
		checkNoDoublePlacement(t, cur, tx, r)
		checkCoarse(t, cur, tx, r)

		if want.next == nil {
			if ws != nil || r.Revision != 0 {
				t.Fatalf("txn %d: nothing should commit, got revision %d", step, r.Revision)
			}
			if r.Conflicts > 0 && tx.Commit == allOrNone {
				stats.aborted.Add(1)
			}
			continue
		}
		if ws == nil || r.Revision != rev {
			t.Fatalf("txn %d: should commit at %d, got revision %d", step, rev, r.Revision)
		}
		stats.commits.Add(1)
		if r.Partial() {
			stats.partial.Add(1)
		}
		checkPrevStates(t, step, curModel, ws)
		next := cur.Apply(ws)
		if next.Revision() != cur.Revision()+1 {
			t.Fatalf("txn %d: revision %d after %d", step, next.Revision(), cur.Revision())
		}
		if d := want.next.matches(next); d != "" {
			t.Fatalf("txn %d: state differs from the model: %s\nops: %s\noutcomes %v", step, d, opsString(tx), codes(r))
		}
		if err := txn.CheckInvariants(next); err != nil {
			t.Fatalf("txn %d: invariants: %v", step, err)
		}
		if err := checkPendingIndex(next); err != nil {
			t.Fatalf("txn %d: pending index: %v\nops: %s", step, err, opsString(tx))
		}
		next.RangeMachines(func(m *txn.Machine) bool {
			if !m.Allocated.LessEq(m.Capacity) {
				t.Fatalf("txn %d: machine %s over capacity: %v of %v", step, m.UID, m.Allocated, m.Capacity)
			}
			return true
		})
		states = append(states, next)
		models = append(models, want.next)
	}
	// Old states are persistent: every one still equals its model.
	for i := range states {
		if d := models[i].matches(states[i]); d != "" {
			t.Fatalf("state at revision %d changed after later commits: %s", states[i].Revision(), d)
		}
	}
}

// checkNoDoublePlacement walks the committed operations in order and fails
// if a claim committed for a task that was placed (or terminal, or gone) at
// that point, independently of the model.
func checkNoDoublePlacement(t *rapid.T, base *txn.State, tx *txn.Txn, r txn.Result) {
	type st struct {
		placed, terminal, gone bool
	}
	cur := map[uuid.UUID]st{}
	get := func(id uuid.UUID) st {
		if s, ok := cur[id]; ok {
			return s
		}
		tk, ok := base.Task(id)
		if !ok {
			return st{}
		}
		return st{placed: tk.Placed(), terminal: tk.Terminal()}
	}
	for i := range tx.Ops {
		op := &tx.Ops[i]
		if !r.Outcomes[i].Committed() {
			continue
		}
		switch op.Kind {
		case txn.OpClaim:
			s := get(op.Task)
			if s.placed || s.terminal || s.gone {
				t.Fatalf("op %d: claim committed for task %s in state %+v", i, op.Task, s)
			}
			s.placed = true
			cur[op.Task] = s
		case txn.OpEvict:
			s := get(op.Task)
			s.placed = false
			cur[op.Task] = s
		case txn.OpSetStatus:
			if isTerminal(op.State) {
				cur[op.Task] = st{terminal: true}
			}
		case txn.OpDelete:
			cur[op.DeleteUID] = st{gone: true}
		}
	}
}

// checkCoarse checks, independently of the model, that in coarse mode no
// claim commits on a machine changed after the view, and that once a claim
// on a machine conflicts with MACHINE_CHANGED, no later claim on it commits
// (the simulator bug where the claim after a conflicting one slips through).
func checkCoarse(t *rapid.T, base *txn.State, tx *txn.Txn, r txn.Result) {
	if tx.Conflict != coarse {
		return
	}
	changed := map[uuid.UUID]bool{}
	for i := range tx.Ops {
		op := &tx.Ops[i]
		if op.Kind != txn.OpClaim {
			continue
		}
		var seq uint64
		if m, ok := base.Machine(op.Machine); ok {
			seq = m.Seq
		}
		stale := seq > tx.ViewRevision
		code := r.Outcomes[i].Code
		if (stale || changed[op.Machine]) && (code == cCommitted || code == cAborted) {
			t.Fatalf("op %d: coarse claim on machine %s (seq %d, view %d) has outcome %s", i, op.Machine, seq, tx.ViewRevision, code)
		}
		if code == cMachChanged {
			if !stale {
				t.Fatalf("op %d: MACHINE_CHANGED on machine %s at seq %d, view %d", i, op.Machine, seq, tx.ViewRevision)
			}
			changed[op.Machine] = true
		}
	}
}

func opsString(tx *txn.Txn) string {
	s := ""
	for i, op := range tx.Ops {
		short := func(u uuid.UUID) string { return u.String()[:8] }
		switch op.Kind {
		case txn.OpCreate:
			s += fmt.Sprintf("\n  %d create %s", i, op.NewTask.GetMeta().GetUid()[:8])
		case txn.OpClaim:
			s += fmt.Sprintf("\n  %d claim %s on %s {%v} @%d", i, short(op.Task), short(op.Machine), op.Resources, op.ExpectVersion)
		case txn.OpEvict:
			s += fmt.Sprintf("\n  %d evict %s @%d for %d force %v", i, short(op.Task), op.ExpectVersion, op.ForPriority, op.Force)
		case txn.OpSetStatus:
			s += fmt.Sprintf("\n  %d status %s %s @%d", i, short(op.Task), op.State, op.ExpectVersion)
		case txn.OpDelete:
			s += fmt.Sprintf("\n  %d delete %s @%d", i, short(op.DeleteUID), op.ExpectVersion)
		case txn.OpPut:
			s += fmt.Sprintf("\n  %d put %s {%v} %s @%d", i, op.NewMachine.GetMeta().GetUid()[:8],
				txn.ResourcesFromProto(op.NewMachine.GetSpec().GetCapacity()), op.NewMachine.GetStatus().GetState(), op.ExpectVersion)
		}
	}
	return s
}

// mix64 is a bijective 64-bit mix (murmur3's finalizer): mix64(0) == 0.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// checkPrevStates: every task change carries the task's state before the
// transaction (the model's), UNSPECIFIED for one the transaction created,
// and the wire form carries it too.
func checkPrevStates(t *rapid.T, step int, before *model, ws *txn.WriteSet) {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Task == nil {
			if c.PrevState != omegav1.TaskState_TASK_STATE_UNSPECIFIED {
				t.Fatalf("txn %d: a change of a %v has prev state %v", step, c.Kind, c.PrevState)
			}
			continue
		}
		want := omegav1.TaskState_TASK_STATE_UNSPECIFIED
		if mt, ok := before.tasks[c.Task.UID]; ok {
			want = mt.state
		}
		if c.PrevState != want {
			t.Fatalf("txn %d: task %s changed from %v, the model says from %v", step, c.Task.UID, c.PrevState, want)
		}
	}
	back, err := txn.WriteSetFromProto(ws.Proto())
	if err != nil {
		t.Fatalf("txn %d: the write set's wire form: %v", step, err)
	}
	var sent []*txn.Change
	for i := range ws.Changes {
		if c := &ws.Changes[i]; !(c.Deleted && c.Created) {
			sent = append(sent, c)
		}
	}
	for i, c := range back.Changes {
		if c.PrevState != sent[i].PrevState {
			t.Fatalf("txn %d: change %d's prev state %v crossed the wire as %v", step, i, sent[i].PrevState, c.PrevState)
		}
	}
}
