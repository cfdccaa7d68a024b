package agents

import (
	"maps"
	"slices"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/txn"
)

// MachineDown returns the transaction's operations that a machine's death
// takes: the machine put DOWN at the version given, then each of its placed
// tasks (uid → the version the caller knows; those it already reported
// finished left out) set LOST with message, in uid order.
// The store frees each lost task's claim in the same commit. It is pure:
// whichever component learns of the death — the server from the gossip
// membership, the simulated fleet from its failure process — builds the
// same transaction.
func MachineDown(m *txn.Machine, tasks map[uuid.UUID]uint64, message string) []txn.Op {
	pm := m.Proto()
	pm.Status.State = stateDown
	ops := make([]txn.Op, 1, 1+len(tasks))
	ops[0] = txn.PutMachine(pm, m.Version)
	uids := slices.Collect(maps.Keys(tasks))
	slices.SortFunc(uids, compareUIDs) // the map's order never reaches the transaction
	for _, u := range uids {
		ops = append(ops, txn.SetStatus(u, taskLost, tasks[u], message))
	}
	return ops
}

// MachineDownFromView is MachineDown for a component that knows only a view
// of the cell: the tasks placed on the machine are found by a scan of the
// view's tasks (a machine's death is rare; the state keeps no index by
// machine). It reports false if the view has no such machine.
func MachineDownFromView(v *txn.State, machine uuid.UUID, message string) ([]txn.Op, bool) {
	m, ok := v.Machine(machine)
	if !ok {
		return nil, false
	}
	tasks := map[uuid.UUID]uint64{}
	v.RangeTasks(func(t *txn.Task) bool {
		if t.Placed() && t.Machine == machine {
			tasks[t.UID] = t.Version
		}
		return true
	})
	return MachineDown(m, tasks, message), true
}
