package audit

import (
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// streamed starts a stream on c's state: every commit after is audited.
// Revisions are stamped with their number in nanoseconds, so FirstSeconds
// says at which revision a kind began.
func streamed(c *cell) *Stream {
	c.stream = NewStream(0)
	c.stream.Start(c.s, int64(c.s.Revision()))
	return c.stream
}

func wantHistory(t *testing.T, r HistoryReport, counts map[string]int, first map[string]uint64) {
	t.Helper()
	for _, k := range Kinds {
		if r.Counts[k] != counts[k] {
			t.Fatalf("%s: %d began, want %d (all: %v; %+v)", k, r.Counts[k], counts[k], r.Counts, r.Examples)
		}
		at, ok := r.FirstSeconds[k]
		switch w, want := first[k]; {
		case want != ok:
			t.Fatalf("%s first seen %v (%v), want at revision %d (%v)", k, at, ok, w, want)
		case ok && at != float64(w)/1e9:
			t.Fatalf("%s first seen at %v s, want revision %d", k, at, w)
		}
	}
	if len(r.Examples) > MaxExamples*len(Kinds) {
		t.Fatalf("%d examples", len(r.Examples))
	}
	for _, v := range r.Examples {
		if v.Object == uuid.Nil || v.Detail == "" {
			t.Fatalf("a violation that names nothing: %+v", v)
		}
	}
}

// The history finds what the final state hides: a short claim whose task
// has since ended, and a report of a task that never ran whose task was
// deleted. Check on the final state finds neither (only the foreign claim,
// which an ended task still records).
func TestStreamFindsWhatTheStateHides(t *testing.T) {
	c, m, ts := setup(t)
	s := streamed(c)
	c.commit("batch-0", txn.Claim(ts[0], m, testkit.Res(1000, 1024), c.ver(ts[0]))) // revision 2: short
	c.commit("service-0", txn.Claim(ts[2], m, testkit.Res(1000, gib, "gpu", 1), c.ver(ts[2])))
	c.commit("agent/m0", txn.SetStatus(ts[1], omegav1.TaskState_TASK_STATE_SUCCEEDED, c.ver(ts[1]), "done"))
	c.commit("fleet", txn.SetStatus(ts[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, c.ver(ts[0]), ""),
		txn.SetStatus(ts[2], omegav1.TaskState_TASK_STATE_FAILED, c.ver(ts[2]), ""))
	c.commit("submitter", txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, ts[1], c.ver(ts[1])))
	want(t, Check(c.s), map[string]int{ForeignClaim: 1})
	wantHistory(t, s.Report(), map[string]int{ClaimShort: 1, ForeignClaim: 1, NeverRan: 1}, map[string]uint64{ClaimShort: 2, ForeignClaim: 3, NeverRan: 4})
	if r := s.Report(); r.Revisions != 5 || r.Revision != c.s.Revision() {
		t.Errorf("audited %d revisions to %d, want 5 to %d", r.Revisions, r.Revision, c.s.Revision())
	}
}

// A machine's over-commitment is one violation while it lasts, and a new
// one when it begins again; every task placed short is one each.
func TestStreamCountsEpisodes(t *testing.T) {
	c, m, _ := setup(t)
	job := c.ids.Next()
	ops := []txn.Op{txn.CreateJob(testkit.Job(job, "big", "batch"))}
	var big []uuid.UUID
	for range 6 {
		u := c.ids.Next()
		big = append(big, u)
		ops = append(ops, txn.CreateTask(testkit.Task(u, job, "b", testkit.Res(100, gib))))
	}
	c.commit("submitter", ops...) // revision 2
	s := streamed(c)
	short := func(u uuid.UUID) txn.Op { return txn.Claim(u, m, testkit.Res(100, 1024), c.ver(u)) }
	c.commit("batch-0", short(big[0]), short(big[1]), short(big[2]), short(big[3]))                     // 3: 4 GiB of 4: not over
	c.commit("batch-0", short(big[4]))                                                                  // 4: over
	c.commit("fleet", txn.SetStatus(big[0], omegav1.TaskState_TASK_STATE_RUNNING, c.ver(big[0]), ""))   // 5: still over, not again
	c.commit("fleet", txn.SetStatus(big[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, c.ver(big[0]), "")) // 6: back to 4 GiB
	c.commit("batch-0", short(big[5]))                                                                  // 7: over again
	want(t, Check(c.s), map[string]int{ClaimShort: 5, OverCommitted: 1})
	wantHistory(t, s.Report(), map[string]int{ClaimShort: 6, OverCommitted: 2}, map[string]uint64{ClaimShort: 3, OverCommitted: 4})
}

// A machine whose allocation drifts from its tasks' claims (a state no
// store evaluation makes) is found when the write set says so; a drift that
// is there when the stream starts begins then.
func TestStreamAllocationDrift(t *testing.T) {
	c, m, ts := setup(t)
	s := streamed(c)
	c.commit("batch-0", txn.Claim(ts[0], m, testkit.Res(1000, gib), c.ver(ts[0])))
	mm, _ := c.s.Machine(m)
	bad := *mm
	bad.Allocated = testkit.Res(10, 10)
	ws := &txn.WriteSet{Revision: c.s.Revision() + 1, UnixNanos: int64(c.s.Revision() + 1), Changes: []txn.Change{{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Machine: &bad}}}
	c.s = c.s.Apply(ws)
	s.Observe(ws)
	wantHistory(t, s.Report(), map[string]int{AllocationDrift: 1}, map[string]uint64{AllocationDrift: 3})
	// Started afresh on the drifted state: the drift goes on, not again.
	s.Start(c.s, 99)
	if s.Report().Counts[AllocationDrift] != 1 {
		t.Errorf("a restart on the same drift counted it again: %v", s.Report().Counts)
	}
	fresh := NewStream(0)
	fresh.Start(c.s, 7)
	wantHistory(t, fresh.Report(), map[string]int{AllocationDrift: 1}, map[string]uint64{AllocationDrift: 7})
}

// On every scenario of Check's tests the stream, started on the setup's
// state and fed each commit, ends with at least what Check finds in the
// final state, kind by kind.
func TestStreamCoversCheck(t *testing.T) {
	c, m, ts := setup(t)
	s := streamed(c)
	c.commit("batch-0", txn.Claim(ts[0], m, testkit.Res(1000, 1024), c.ver(ts[0])), txn.Claim(ts[2], m, testkit.Res(1000, gib), c.ver(ts[2])))
	c.commit("faulty-thief-0", txn.Claim(ts[1], m, testkit.Res(1000, gib), c.ver(ts[1])))
	r, h := Check(c.s), s.Report()
	for _, k := range Kinds {
		if h.Counts[k] < r.Counts[k] {
			t.Errorf("%s: the stream found %d, the final state holds %d", k, h.Counts[k], r.Counts[k])
		}
	}
	if h.Counts[ClaimShort] != 2 || h.Counts[ForeignClaim] != 1 {
		t.Errorf("%v", h.Counts)
	}
}
