package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// A history file (omega sim --history FILE) is the cell's history as the
// engine's watch saw it: length-delimited omega.v1.RevisionChanges
// messages (protodelim: a varint length, then the message). The first is
// the starting state, every object a created change at the state's
// revision; each after it is one revision's write set, in order.
type HistoryWriter struct {
	w   *bufio.Writer
	err error
	n   int
}

// NewHistoryWriter writes a history to w; Flush when the run is done.
func NewHistoryWriter(w io.Writer) *HistoryWriter {
	return &HistoryWriter{w: bufio.NewWriterSize(w, 1<<20)}
}

func (h *HistoryWriter) write(p *omegav1.RevisionChanges) error {
	if h.err != nil {
		return h.err
	}
	if _, err := protodelim.MarshalTo(h.w, p); err != nil {
		h.err = fmt.Errorf("history: %w", err)
	}
	h.n++
	return h.err
}

// Start writes a state as one record of created objects: the first. A
// second (the watch fell behind and re-listed, which a simulation's does
// not) is an error: the history would have a gap.
func (h *HistoryWriter) Start(st *txn.State, unixNanos int64) error {
	if h.n > 0 {
		return fmt.Errorf("history: the watch re-listed at revision %d: the history would have a gap", st.Revision())
	}
	return h.write(StateWriteSet(st, unixNanos).Proto())
}

// Observe writes a write set.
func (h *HistoryWriter) Observe(ws *txn.WriteSet) error { return h.write(ws.Proto()) }

// Flush writes out what is buffered.
func (h *HistoryWriter) Flush() error {
	if h.err != nil {
		return h.err
	}
	return h.w.Flush()
}

// Records is how many records were written.
func (h *HistoryWriter) Records() int { return h.n }

// StateWriteSet is a state as a write set that creates each of its
// objects (machines, quotas, leases, jobs, tasks, then offers) at the state's
// revision: txn.NewState().ApplyChecked of it is the state again.
func StateWriteSet(st *txn.State, unixNanos int64) *txn.WriteSet {
	ws := &txn.WriteSet{Revision: st.Revision(), UnixNanos: unixNanos}
	st.RangeMachines(func(m *txn.Machine) bool {
		ws.Changes = append(ws.Changes, txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: m, Created: true})
		return true
	})
	st.RangeQuotas(func(q *txn.Quota) bool {
		ws.Changes = append(ws.Changes, txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Quota: q, Created: true})
		return true
	})
	st.RangeLeases(func(l *txn.Lease) bool {
		ws.Changes = append(ws.Changes, txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_LEASE, Lease: l, Created: true})
		return true
	})
	st.RangeJobs(func(j *txn.Job) bool {
		ws.Changes = append(ws.Changes, txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_JOB, Job: j, Created: true})
		return true
	})
	st.RangeTasks(func(t *txn.Task) bool {
		ws.Changes = append(ws.Changes, txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, Task: t, Created: true})
		return true
	})
	// Offers last: what each locks is checked against its machine's
	// allocation, which the tasks make.
	st.RangeOffers(func(o *txn.Offer) bool {
		ws.Changes = append(ws.Changes, txn.Change{Kind: omegav1.ObjectKind_OBJECT_KIND_OFFER, Offer: o, Created: true})
		return true
	})
	return ws
}

// ReadHistory reads a history file: the starting state (built from its
// first record) to start, then each write set to observe, in order. A
// record out of revision order, or one that does not decode, is an error
// naming its position.
func ReadHistory(r io.Reader, start func(st *txn.State, unixNanos int64) error, observe func(ws *txn.WriteSet) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var st *txn.State
	var last uint64
	for n := 1; ; n++ {
		p := &omegav1.RevisionChanges{}
		if err := (protodelim.UnmarshalOptions{MaxSize: 1 << 30}).UnmarshalFrom(br, p); err != nil {
			if errors.Is(err, io.EOF) && n > 1 {
				return nil
			}
			return fmt.Errorf("history record %d: %w", n, err)
		}
		ws, err := txn.WriteSetFromProto(p)
		if err != nil {
			return fmt.Errorf("history record %d (revision %d): %w", n, p.GetRevision(), err)
		}
		if n > 1 && ws.Revision <= last {
			return fmt.Errorf("history record %d: revision %d after %d", n, ws.Revision, last)
		}
		last = ws.Revision
		if st == nil {
			st, err = txn.NewState().ApplyChecked(ws)
			if err != nil {
				return fmt.Errorf("history record 1 (the starting state): %w", err)
			}
			if err := start(st, ws.UnixNanos); err != nil {
				return err
			}
			continue
		}
		if err := observe(ws); err != nil {
			return fmt.Errorf("history record %d (revision %d): %w", n, ws.Revision, err)
		}
	}
}
