package txn

import (
	"fmt"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Partial changes on the wire (omegav1.Change.partial): a watcher that
// keeps a copy of the whole cell holds every object's previous version, so
// the store need not send what did not change. A task's meta and spec
// never change after it is created, and a machine's derived change (a
// claim's, a release's) is its status only: those go out as the object's
// uid, version and status, and the copy takes the rest from the version it
// holds. It halves the bytes of a claim's revision and spares the watcher
// decoding labels, owner references, commands and capacities it has. Jobs,
// offers and quotas, and every created or deleted object, go whole.
// Which kind goes partial, and how, is its entry in changeCodecs
// (changecodec.go), which every encoder of a Change follows.

// PartialProto is the wire form of ws with partial changes where they
// apply (WatchRequest.partial_changes), as messages: the reference the
// server's hand encoder (AppendChunks) is held to, and the form a reader
// of messages (WriteSetFromProto) takes.
func (ws *WriteSet) PartialProto() *omegav1.RevisionChanges {
	p := &omegav1.RevisionChanges{Revision: ws.Revision, UnixNanos: ws.UnixNanos, Changes: make([]*omegav1.Change, 0, len(ws.Changes))}
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Deleted && c.Created {
			continue // created and deleted by the same transaction: nobody saw it
		}
		p.Changes = append(p.Changes, changeProto(c, true))
	}
	return p
}

// PartialChunks is Chunks of PartialProto.
func (ws *WriteSet) PartialChunks(maxBytes int, send func(*omegav1.RevisionChanges) error) error {
	return chunks(ws.PartialProto(), maxBytes, send)
}

// taskFromPartial reads a task's partial change: uid, version, status.
func taskFromPartial(p *omegav1.Task) (*Task, error) {
	uid, err := ParseUID(p.GetMeta().GetUid(), "task uid")
	if err != nil {
		return nil, err
	}
	t := &Task{UID: uid, Version: p.GetMeta().GetVersion()}
	if err := restoreTaskStatus(t, p.GetStatus()); err != nil {
		return nil, err
	}
	return t, nil
}

// machineFromPartial reads a machine's partial change: uid, version, status
// (its derived fields included).
func machineFromPartial(p *omegav1.Machine) (*Machine, error) {
	uid, err := ParseUID(p.GetMeta().GetUid(), "machine uid")
	if err != nil {
		return nil, err
	}
	st := p.GetStatus()
	m := &Machine{UID: uid, Version: p.GetMeta().GetVersion(), State: st.GetState(), Agent: st.GetAgentAddress(),
		Tasks: st.GetTasks(), Seq: st.GetSeq(), LastClaim: st.GetLastClaim()}
	if _, ok := omegav1.MachineState_name[int32(m.State)]; !ok || m.State == omegav1.MachineState_MACHINE_STATE_UNSPECIFIED {
		return nil, fmt.Errorf("%w: machine %s state %d", ErrInvalid, uid, m.State)
	}
	m.Allocated = ResourcesFromProto(st.GetAllocated())
	if err := m.Allocated.Validate(); err != nil {
		return nil, fmt.Errorf("%w: machine %s allocated: %v", ErrInvalid, uid, err)
	}
	return m, nil
}

// Complete fills ws's partial changes from s, the state ws applies to: each
// takes the meta and spec (and what derives from them) of the version s
// holds. A partial change of an object s does not hold is an error: the
// watch and the copy disagree, and the copy must be listed again.
func (ws *WriteSet) Complete(s *State) error {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if !c.Partial {
			continue
		}
		if k := c.codec(); k != nil && k.complete != nil { // a kind that never goes partial was read whole
			if err := k.complete(c, s, ws.Revision); err != nil {
				return err
			}
		}
		c.Partial = false
	}
	return nil
}
