package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/transport"
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
	if len(selector) > labels.MaxLen {
		return f, fmt.Errorf("%w: label_selector is %d bytes, over the limit of %d", txn.ErrInvalid, len(selector), labels.MaxLen)
	}
	if f.sel, err = labels.Parse(selector); err != nil {
		var le *labels.Error
		if errors.As(err, &le) {
			return f, fmt.Errorf("%w: label_selector %s: at byte %d: %s", txn.ErrInvalid, txn.Quote(le.Selector), le.Pos, le.Why)
		}
		return f, fmt.Errorf("%w: label_selector: %v", txn.ErrInvalid, err)
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

// checkKind refuses a kind ObjectKind does not have (call names the RPC),
// and UNSPECIFIED unless any is set (a List of every kind).
func checkKind(call string, kind omegav1.ObjectKind, any bool) error {
	switch kind {
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE, omegav1.ObjectKind_OBJECT_KIND_JOB, omegav1.ObjectKind_OBJECT_KIND_TASK,
		omegav1.ObjectKind_OBJECT_KIND_OFFER, omegav1.ObjectKind_OBJECT_KIND_QUOTA, omegav1.ObjectKind_OBJECT_KIND_LEASE:
		return nil
	case omegav1.ObjectKind_OBJECT_KIND_UNSPECIFIED:
		if any {
			return nil
		}
		return fmt.Errorf("%w: %s: kind is unspecified: want a kind of object", txn.ErrInvalid, call)
	}
	return fmt.Errorf("%w: %s: kind %s is not a kind of object", txn.ErrInvalid, call, txn.Quote(kind.String()))
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

// cellOK is an offer's or a quota's filter: they belong to no machine and
// no job.
func (f *filter) cellOK(meta *omegav1.ObjectMeta) bool {
	return f.machine == uuid.Nil && f.job == uuid.Nil && f.sel.Matches(meta.GetLabels())
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
		case c.Lease != nil:
			keep = f.machine == uuid.Nil && f.sel.Matches(c.Lease.Meta.GetLabels())
		}
		if keep {
			out.Changes = append(out.Changes, *c)
		}
	}
	return out
}

// Get returns one object by uid or by name. It refuses a kind ObjectKind
// does not have, a uid that is not a uuid, and a name longer than any
// object holds (the store's MaxStringBytes), quoting them cut (txn.Quote).
func (s *Service) Get(ctx context.Context, req *cellgrpc.GetRequest) (*cellgrpc.GetResponse, error) {
	kind, name := req.GetKind(), req.GetName()
	if err := checkKind("get", kind, false); err != nil {
		return nil, status(err)
	}
	if (req.GetUid() == "") == (name == "") {
		return nil, status(fmt.Errorf("%w: get: give a uid or a name, not both or neither", txn.ErrInvalid))
	}
	if max := s.st.Limits().MaxStringBytes; len(name) > max {
		return nil, status(fmt.Errorf("%w: get: name is %d bytes, over the limit of %d (MaxStringBytes): no object has it", txn.ErrInvalid, len(name), max))
	}
	var uid uuid.UUID
	if req.GetUid() != "" {
		var err error
		if uid, err = txn.ParseUID(req.GetUid(), "uid"); err != nil {
			return nil, status(fmt.Errorf("get: %w", err))
		}
	}
	if err := s.linearize(ctx, req.GetStale()); err != nil {
		return nil, status(err)
	}
	st := s.st.Snapshot()
	resp := &cellgrpc.GetResponse{Revision: st.Revision()}
	var found []string
	// see offers one object: by uid, the one with it; by name, each.
	see := func(u uuid.UUID, n string, put func()) bool {
		if uid != uuid.Nil || n == name {
			found = append(found, u.String())
			put()
		}
		return true
	}
	switch kind {
	case omegav1.ObjectKind_OBJECT_KIND_TASK:
		put := func(t *txn.Task) bool {
			return see(t.UID, t.Name(), func() { resp.Object = &cellgrpc.GetResponse_Task{Task: t.Proto()} })
		}
		if uid == uuid.Nil {
			st.RangeTasks(put)
		} else if t, ok := st.Task(uid); ok {
			put(t)
		}
	case omegav1.ObjectKind_OBJECT_KIND_JOB:
		put := func(j *txn.Job) bool {
			return see(j.UID, j.Name(), func() { resp.Object = &cellgrpc.GetResponse_Job{Job: j.Proto()} })
		}
		if uid == uuid.Nil {
			st.RangeJobs(put)
		} else if j, ok := st.Job(uid); ok {
			put(j)
		}
	case omegav1.ObjectKind_OBJECT_KIND_MACHINE:
		put := func(m *txn.Machine) bool {
			return see(m.UID, m.Name(), func() { resp.Object = &cellgrpc.GetResponse_Machine{Machine: m.Proto()} })
		}
		if uid == uuid.Nil {
			st.RangeMachines(put)
		} else if m, ok := st.Machine(uid); ok {
			put(m)
		}
	case omegav1.ObjectKind_OBJECT_KIND_OFFER:
		st.RangeOffers(func(o *txn.Offer) bool {
			if uid != uuid.Nil && o.UID != uid {
				return true
			}
			return see(o.UID, o.Name(), func() { resp.Object = &cellgrpc.GetResponse_Offer{Offer: o.Proto()} })
		})
	case omegav1.ObjectKind_OBJECT_KIND_QUOTA:
		st.RangeQuotas(func(q *txn.Quota) bool {
			if uid != uuid.Nil && q.UID != uid {
				return true
			}
			return see(q.UID, q.Name(), func() { resp.Object = &cellgrpc.GetResponse_Quota{Quota: q.Proto()} })
		})
	case omegav1.ObjectKind_OBJECT_KIND_LEASE:
		st.RangeLeases(func(l *txn.Lease) bool {
			if uid != uuid.Nil && l.UID != uid {
				return true
			}
			return see(l.UID, l.Name(), func() { resp.Object = &cellgrpc.GetResponse_Lease{Lease: l.Proto()} })
		})
	}
	switch len(found) {
	case 0:
		if uid != uuid.Nil {
			return nil, status(fmt.Errorf("%w: no %s %s", txn.ErrNotFound, kind, uid))
		}
		return nil, status(fmt.Errorf("%w: no %s named %s", txn.ErrNotFound, kind, txn.Quote(name)))
	case 1:
		return resp, nil
	}
	more := ""
	if len(found) > 8 {
		found, more = found[:8], fmt.Sprintf(" and %d more", len(found)-8)
	}
	return nil, status(fmt.Errorf("%w: %d %ss are named %s: %s%s", txn.ErrInvalid, len(found), kind, txn.Quote(name), strings.Join(found, ", "), more))
}

// List streams the matching objects of one revision in chunks of about
// ChunkBytes each (machines, then jobs, tasks, offers and quotas, each
// whole; the last chunk says so), as they are in the state: a listed
// machine's allocation is the store's, whatever tasks the filter left out.
// A kind ObjectKind does not have is refused, as Get refuses it.
func (s *Service) List(req *cellgrpc.ListRequest, stream grpc.ServerStreamingServer[omegav1.SnapshotChunk]) error {
	kind := req.GetKind()
	if err := checkKind("list", kind, true); err != nil {
		return status(err)
	}
	f, err := parseFilter(req.GetLabelSelector(), req.GetMachineUid(), req.GetJobUid())
	if err != nil {
		return status(fmt.Errorf("list: %w", err))
	}
	all := kind == omegav1.ObjectKind_OBJECT_KIND_UNSPECIFIED
	if err := s.linearize(stream.Context(), req.GetStale()); err != nil {
		return status(err)
	}
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
	if serr == nil && (all || kind == omegav1.ObjectKind_OBJECT_KIND_OFFER) {
		st.RangeOffers(func(o *txn.Offer) bool {
			if !f.cellOK(o.Meta) {
				return true
			}
			p := o.Proto()
			if !room(p) {
				return false
			}
			chunk.Offers = append(chunk.Offers, p)
			return true
		})
	}
	if serr == nil && (all || kind == omegav1.ObjectKind_OBJECT_KIND_QUOTA) {
		st.RangeQuotas(func(q *txn.Quota) bool {
			if !f.cellOK(q.Meta) {
				return true
			}
			p := q.Proto()
			if !room(p) {
				return false
			}
			chunk.Quotas = append(chunk.Quotas, p)
			return true
		})
	}
	if serr == nil && (all || kind == omegav1.ObjectKind_OBJECT_KIND_LEASE) {
		st.RangeLeases(func(l *txn.Lease) bool {
			if !f.cellOK(l.Meta) {
				return true
			}
			p := l.Proto()
			if !room(p) {
				return false
			}
			chunk.Leases = append(chunk.Leases, p)
			return true
		})
	}
	if serr != nil {
		return serr
	}
	chunk.Last = true
	return stream.Send(chunk)
}

// linearize waits, in a replicated cell, until this server has applied
// everything committed before the call (Service.ReadBarrier: the leader
// confirms by a read index), unless the request asks for stale data. It
// bounds the wait at 5 s: no leader, and the read is unavailable.
func (s *Service) linearize(ctx context.Context, stale bool) error {
	if s.ReadBarrier == nil || stale {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.ReadBarrier(ctx); err != nil {
		return fmt.Errorf("%w: a linearizable read: %v (ask for stale data to read what this server has)", transport.ErrUnavailable, err)
	}
	return nil
}
