package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/labels"
	"github.com/omega-cell/omega/txn"
)

// filter is what a Watch or a List keeps.
type filter struct {
	sel     labels.Selector
	machine uuid.UUID // zero: any
	job     uuid.UUID // zero: any (List only)
}

func parseFilter(selector, machine, job string) (filter, error) {
	var f filter
	var err error
	if f.sel, err = labels.Parse(selector); err != nil {
		return f, fmt.Errorf("%w: %v", txn.ErrInvalid, err)
	}
	if machine != "" {
		if f.machine, err = txn.ParseUID(machine, "machine_uid"); err != nil {
			return f, err
		}
	}
	if job != "" {
		if f.job, err = txn.ParseUID(job, "job_uid"); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (f *filter) none() bool { return f.sel.Empty() && f.machine == uuid.Nil && f.job == uuid.Nil }

func (f *filter) task(t *txn.Task) bool {
	return (f.machine == uuid.Nil || t.Machine == f.machine) && (f.job == uuid.Nil || t.Job == f.job) && f.sel.Matches(t.Labels())
}

func (f *filter) machineOK(m *txn.Machine) bool {
	return (f.machine == uuid.Nil || m.UID == f.machine) && f.job == uuid.Nil && f.sel.Matches(m.Meta.GetLabels())
}

func (f *filter) jobOK(j *txn.Job) bool {
	return f.machine == uuid.Nil && (f.job == uuid.Nil || j.UID == f.job) && f.sel.Matches(j.Meta.GetLabels())
}

// changes keeps what a watch filter lets through of one revision: the
// machine's own changes and those of the tasks placed on it before or
// after the revision (a task that left it — evicted, moved by an eviction
// and a claim in one transaction, deleted — is seen leaving), when machine
// is set; the objects whose labels match.
func (f *filter) changes(ws *txn.WriteSet) *txn.WriteSet {
	out := &txn.WriteSet{Revision: ws.Revision, UnixNanos: ws.UnixNanos}
	for i := range ws.Changes {
		c := &ws.Changes[i]
		keep := false
		switch {
		case c.Task != nil:
			t := c.Task
			keep = (f.machine == uuid.Nil || t.Machine == f.machine || c.PrevMachine == f.machine) && f.sel.Matches(t.Labels())
		case c.Machine != nil:
			keep = (f.machine == uuid.Nil || c.Machine.UID == f.machine) && f.sel.Matches(c.Machine.Meta.GetLabels())
		case c.Job != nil:
			keep = f.machine == uuid.Nil && f.sel.Matches(c.Job.Meta.GetLabels())
		case c.Offer != nil: // a two-level allocator's: for the cell's watchers, not a machine's
			keep = f.machine == uuid.Nil && f.sel.Matches(c.Offer.Meta.GetLabels())
		case c.Quota != nil:
			keep = f.machine == uuid.Nil && f.sel.Matches(c.Quota.Meta.GetLabels())
		}
		if keep {
			out.Changes = append(out.Changes, *c)
		}
	}
	return out
}

// Get returns one object by uid or by name.
func (s *Service) Get(_ context.Context, req *cellgrpc.GetRequest) (*cellgrpc.GetResponse, error) {
	st := s.st.Snapshot()
	resp := &cellgrpc.GetResponse{Revision: st.Revision()}
	if (req.GetUid() == "") == (req.GetName() == "") {
		return nil, status(fmt.Errorf("%w: get: give a uid or a name, not both or neither", txn.ErrInvalid))
	}
	var found []string
	set := func(uid uuid.UUID, name string, put func()) {
		if req.GetUid() != "" || name == req.GetName() {
			found = append(found, uid.String())
			put()
		}
	}
	var uid uuid.UUID
	if req.GetUid() != "" {
		var err error
		if uid, err = txn.ParseUID(req.GetUid(), "uid"); err != nil {
			return nil, status(err)
		}
	}
	switch req.GetKind() {
	case omegav1.ObjectKind_OBJECT_KIND_TASK:
		if uid != uuid.Nil {
			if t, ok := st.Task(uid); ok {
				set(t.UID, t.Name(), func() { resp.Object = &cellgrpc.GetResponse_Task{Task: t.Proto()} })
			}
		} else {
			st.RangeTasks(func(t *txn.Task) bool {
				set(t.UID, t.Name(), func() { resp.Object = &cellgrpc.GetResponse_Task{Task: t.Proto()} })
				return true
			})
		}
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		if uid != uuid.Nil {
			if j, ok := st.Job(uid); ok {
				set(j.UID, j.Name(), func() { resp.Object = &cellgrpc.GetResponse_Job{Job: j.Proto()} })
			}
		} else {
			st.RangeJobs(func(j *txn.Job) bool {
				set(j.UID, j.Name(), func() { resp.Object = &cellgrpc.GetResponse_Job{Job: j.Proto()} })
				return true
			})
		}
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		if uid != uuid.Nil {
			if m, ok := st.Machine(uid); ok {
				set(m.UID, m.Name(), func() { resp.Object = &cellgrpc.GetResponse_Machine{Machine: m.Proto()} })
			}
		} else {
			st.RangeMachines(func(m *txn.Machine) bool {
				set(m.UID, m.Name(), func() { resp.Object = &cellgrpc.GetResponse_Machine{Machine: m.Proto()} })
				return true
			})
		}
	default:
		return nil, status(fmt.Errorf("%w: get: kind %s", txn.ErrInvalid, req.GetKind()))
	}
	switch len(found) {
	case 0:
		return nil, status(fmt.Errorf("%w: no %s %s", txn.ErrNotFound, req.GetKind(), req.GetUid()+req.GetName()))
	case 1:
		return resp, nil
	}
	return nil, status(fmt.Errorf("%w: %d %ss are named %q: %s", txn.ErrInvalid, len(found), req.GetKind(), req.GetName(), strings.Join(found, ", ")))
}

// List streams the matching objects of one revision in chunks of about
// ChunkBytes each (machines, then jobs, then tasks, each whole; the last
// chunk says so), as they are in the state: a listed machine's allocation
// is the store's, whatever tasks the filter left out.
func (s *Service) List(req *cellgrpc.ListRequest, stream grpc.ServerStreamingServer[omegav1.SnapshotChunk]) error {
	f, err := parseFilter(req.GetLabelSelector(), req.GetMachineUid(), req.GetJobUid())
	if err != nil {
		return status(err)
	}
	kind := req.GetKind()
	all := kind == omegav1.ObjectKind_OBJECT_KIND_UNSPECIFIED
	st := s.st.Snapshot()
	max := s.ChunkBytes
	if max <= 0 {
		max = txn.DefaultSnapshotChunkBytes
	}
	chunk := &omegav1.SnapshotChunk{Revision: st.Revision()}
	size := 0
	var serr error
	flush := func() bool {
		if serr = stream.Send(chunk); serr != nil {
			return false
		}
		chunk, size = &omegav1.SnapshotChunk{Revision: st.Revision()}, 0
		return true
	}
	room := func(m proto.Message) bool {
		n := proto.Size(m) + 8
		if size > 0 && size+n > max && !flush() {
			return false
		}
		size += n
		return true
	}
	if all || kind == omegav1.ObjectKind_OBJECT_KIND_MACHINE {
		st.RangeMachines(func(m *txn.Machine) bool {
			if !f.machineOK(m) {
				return true
			}
			p := m.Proto()
			if !room(p) {
				return false
			}
			chunk.Machines = append(chunk.Machines, p)
			return true
		})
	}
	if serr == nil && (all || kind == omegav1.ObjectKind_OBJECT_KIND_JOB) {
		st.RangeJobs(func(j *txn.Job) bool {
			if !f.jobOK(j) {
				return true
			}
			p := j.Proto()
			if !room(p) {
				return false
			}
			chunk.Jobs = append(chunk.Jobs, p)
			return true
		})
	}
	if serr == nil && (all || kind == omegav1.ObjectKind_OBJECT_KIND_TASK) {
		st.RangeTasks(func(t *txn.Task) bool {
			if !f.task(t) {
				return true
			}
			p := t.Proto()
			if !room(p) {
				return false
			}
			chunk.Tasks = append(chunk.Tasks, p)
			return true
		})
	}
	if serr != nil {
		return serr
	}
	chunk.Last = true
	return stream.Send(chunk)
}
