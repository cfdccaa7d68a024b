package txn_test

// What a remote client is handed by a hostile or broken server: watched
// revisions (WriteSetFromProto, then ApplyChecked) and listings
// (SnapshotReader) are refused, or yield a state whose invariants hold.

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// onePlacedOnePending: machine m1 (10/10), task t1 placed on it claiming
// 3/3, task t2 pending, owned by job j1.
func onePlacedOnePending(t *testing.T) *txn.State {
	t.Helper()
	c := newCell(t)
	c.commit(c.tx(
		txn.CreateMachine(machineP(m1, res(10, 10))),
		txn.CreateJob(jobP(j1)),
		txn.CreateTask(taskP(t1, res(3, 3), 0)),
		txn.CreateTask(ownedTaskP(t2, j1, res(1, 1))),
		txn.Claim(t1, m1, res(3, 3), 0),
	))
	if err := txn.CheckInvariants(c.s); err != nil {
		t.Fatal(err)
	}
	return c.s
}

func wireMachine(st *txn.State, u uuid.UUID) *omegav1.Machine {
	m, _ := st.Machine(u)
	return proto.Clone(m.Proto()).(*omegav1.Machine)
}

func wireTask(st *txn.State, u uuid.UUID) *omegav1.Task {
	x, _ := st.Task(u)
	return proto.Clone(x.Proto()).(*omegav1.Task)
}

// applyWatched is what a remote client does with a watched revision:
// decode, convert, apply. It returns "refused: ..." if the converter
// refused it, "" if the result satisfies the invariants, or the violation.
func applyWatched(st *txn.State, p *omegav1.RevisionChanges) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("PANIC: %v", r)
		}
	}()
	b, err := proto.Marshal(p)
	if err != nil {
		return "refused (marshal): " + err.Error()
	}
	q := &omegav1.RevisionChanges{}
	if err := proto.Unmarshal(b, q); err != nil {
		return "refused (unmarshal): " + err.Error()
	}
	ws, err := txn.WriteSetFromProto(q)
	if err != nil {
		return "refused: " + err.Error()
	}
	// As a remote client applies a watched revision (client.Cell).
	next, err := st.ApplyChecked(ws)
	if err != nil {
		return "refused (ApplyChecked): " + err.Error()
	}
	if err := txn.CheckInvariants(next); err != nil {
		return err.Error()
	}
	// The pending index (what a scheduler walks) must agree with the tasks.
	var bad string
	next.RangePendingJobs(func(job uuid.UUID, _ int) bool {
		next.RangePendingTasks(job, func(x *txn.Task) bool {
			if x.Job != job || x.State != pending {
				bad = fmt.Sprintf("pending index: task %s (job %s, %s) listed under job %s", x.UID, x.Job, x.State, job)
			}
			return bad == ""
		})
		return bad == ""
	})
	return bad
}

// TestWriteSetFromProtoHostile: a remote client applying hostile watch data
// (a malicious or buggy server): WriteSetFromProto and ApplyChecked refuse
// it, or produce a state that satisfies CheckInvariants and whose pending
// index agrees with its tasks; changes that do not fit together (a machine's
// allocation or task count against its tasks) are among them.
func TestWriteSetFromProtoHostile(t *testing.T) {
	base := onePlacedOnePending(t)
	rev := base.Revision() + 1
	chg := func(cs ...*omegav1.Change) *omegav1.RevisionChanges {
		return &omegav1.RevisionChanges{Revision: rev, Changes: cs}
	}
	mch := func(m *omegav1.Machine, del bool) *omegav1.Change {
		return &omegav1.Change{Object: &omegav1.Change_Machine{Machine: m}, Deleted: del}
	}
	tch := func(x *omegav1.Task, del bool) *omegav1.Change {
		return &omegav1.Change{Object: &omegav1.Change_Task{Task: x}, Deleted: del}
	}
	cases := []struct {
		name string
		p    func() *omegav1.RevisionChanges
	}{
		{"machine allocated over capacity", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.Allocated = &omegav1.Resources{CpuMillis: 50, MemoryBytes: 3}
			return chg(mch(m, false))
		}},
		{"machine task count wrong", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.Tasks = -7
			return chg(mch(m, false))
		}},
		{"machine deleted under its placed task", func() *omegav1.RevisionChanges {
			return chg(mch(wireMachine(base, m1), true))
		}},
		{"placed task deleted, machine untouched", func() *omegav1.RevisionChanges {
			return chg(tch(wireTask(base, t1), true))
		}},
		{"task placed on a machine that does not exist", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Status.State = assigned
			x.Status.MachineUid = m3.String()
			x.Status.Claimed = &omegav1.Resources{CpuMillis: 1}
			return chg(tch(x, false))
		}},
		{"pending task with a machine", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Status.MachineUid = m1.String()
			return chg(tch(x, false))
		}},
		{"placed task's claim grown, machine untouched", func() *omegav1.RevisionChanges {
			x := wireTask(base, t1)
			x.Status.Claimed = &omegav1.Resources{CpuMillis: 9, MemoryBytes: 9}
			return chg(tch(x, false))
		}},
		{"pending task moved to another job", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Meta.OwnerReferences = nil
			return chg(tch(x, false))
		}},
		// These the converter refuses (or they are harmless): held.
		{"negative claim", func() *omegav1.RevisionChanges {
			x := wireTask(base, t1)
			x.Status.Claimed = &omegav1.Resources{CpuMillis: -1}
			return chg(tch(x, false))
		}},
		{"task state 99", func() *omegav1.RevisionChanges {
			x := wireTask(base, t1)
			x.Status.State = 99
			return chg(tch(x, false))
		}},
		{"machine state 99", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.State = 99
			return chg(mch(m, false))
		}},
		{"negative allocation", func() *omegav1.RevisionChanges {
			m := wireMachine(base, m1)
			m.Status.Allocated.Extended = map[string]int64{"gpu": -1}
			return chg(mch(m, false))
		}},
		{"delete of what does not exist", func() *omegav1.RevisionChanges {
			x := wireTask(base, t2)
			x.Meta.Uid = t5.String()
			return chg(tch(x, true))
		}},
		{"empty change", func() *omegav1.RevisionChanges { return chg(&omegav1.Change{}) }},
		{"nil object", func() *omegav1.RevisionChanges {
			return chg(&omegav1.Change{Object: &omegav1.Change_Task{}})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := applyWatched(base, tc.p())
			switch {
			case out == "":
				t.Logf("held: applied, invariants hold")
			case strings.HasPrefix(out, "refused"):
				t.Logf("held: %s", out)
			default:
				t.Errorf("hostile write set accepted silently; the client's state now violates: %s", out)
			}
		})
	}
}

// TestSnapshotReaderHostile: SnapshotReader refuses a hostile listing (a
// task listed twice, a pending task with a machine, chunks out of order, of
// two revisions or after the last, nil elements), or Finish yields a state
// whose invariants hold; it never panics.
func TestSnapshotReaderHostile(t *testing.T) {
	base := onePlacedOnePending(t)
	listing := func(mutate func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk) string {
		var chunks []*omegav1.SnapshotChunk
		txn.SnapshotChunks(base, 1<<20, func(c *omegav1.SnapshotChunk) error {
			chunks = append(chunks, proto.Clone(c).(*omegav1.SnapshotChunk))
			return nil
		})
		if len(chunks) != 1 {
			t.Fatalf("%d chunks", len(chunks))
		}
		var r txn.SnapshotReader
		for _, c := range mutate(chunks[0]) {
			if err := r.Add(c); err != nil {
				return "refused: " + err.Error()
			}
		}
		st, err := r.Finish()
		if err != nil {
			return "refused: " + err.Error()
		}
		if err := txn.CheckInvariants(st); err != nil {
			return err.Error()
		}
		return ""
	}
	find := func(c *omegav1.SnapshotChunk, u uuid.UUID) *omegav1.Task {
		for _, x := range c.Tasks {
			if x.GetMeta().GetUid() == u.String() {
				return x
			}
		}
		t.Fatalf("no task %s", u)
		return nil
	}
	for _, tc := range []struct {
		name string
		f    func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk
	}{
		{"placed task listed twice", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Tasks = append(c.Tasks, proto.Clone(find(c, t1)).(*omegav1.Task))
			return []*omegav1.SnapshotChunk{c}
		}},
		{"placed task listed twice, in two chunks, the second copy pending", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			d := proto.Clone(find(c, t1)).(*omegav1.Task)
			d.Status = &omegav1.TaskStatus{State: pending}
			c.Last = false
			return []*omegav1.SnapshotChunk{c, {Revision: c.Revision, Tasks: []*omegav1.Task{d}, Last: true}}
		}},
		{"pending task with a machine", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			find(c, t2).Status.MachineUid = m1.String()
			return []*omegav1.SnapshotChunk{c}
		}},
		// Held (refused):
		{"machine listed twice", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Machines = append(c.Machines, c.Machines[0])
			return []*omegav1.SnapshotChunk{c}
		}},
		{"chunk after the last", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			return []*omegav1.SnapshotChunk{c, c}
		}},
		{"chunks of two revisions", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Last = false
			return []*omegav1.SnapshotChunk{c, {Revision: c.Revision + 1, Last: true}}
		}},
		{"tasks before machines (out of order)", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			ms := c.Machines
			c.Machines, c.Last = nil, false
			return []*omegav1.SnapshotChunk{c, {Revision: c.Revision, Machines: ms, Last: true}}
		}},
		{"nil elements", func(c *omegav1.SnapshotChunk) []*omegav1.SnapshotChunk {
			c.Tasks = append(c.Tasks, nil)
			return []*omegav1.SnapshotChunk{c}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			func() {
				defer func() {
					if r := recover(); r != nil {
						out = fmt.Sprintf("PANIC %v", r)
					}
				}()
				out = listing(tc.f)
			}()
			if out == "" || strings.HasPrefix(out, "refused") {
				t.Logf("held: %q", out)
			} else {
				t.Errorf("hostile listing accepted; the state violates: %s", out)
			}
		})
	}
}

// TestClaimSumPastInt64Refused: three tasks claiming MaxInt64, MaxInt64 and
// 2 cpu on a machine of capacity 0 sum to 2^64, which in int64 wraps to 0;
// SnapshotReader's Finish or CheckInvariants refuses such a listing, and a
// watched revision placing them is refused or fails the invariants: a sum
// past int64 is never read as room.
func TestClaimSumPastInt64Refused(t *testing.T) {
	mw := &omegav1.Machine{Meta: &omegav1.ObjectMeta{Uid: m1.String(), Version: 1, CreateRevision: 1},
		Spec: &omegav1.MachineSpec{Capacity: &omegav1.Resources{}}, Status: &omegav1.MachineStatus{Tasks: 3}}
	var tasks []*omegav1.Task
	for i, cpu := range []int64{math.MaxInt64, math.MaxInt64, 2} {
		u := uid(uint64(100 + i))
		tasks = append(tasks, &omegav1.Task{
			Meta:   &omegav1.ObjectMeta{Uid: u.String(), Version: 1, CreateRevision: 1},
			Spec:   &omegav1.TaskSpec{},
			Status: &omegav1.TaskStatus{State: assigned, MachineUid: m1.String(), Claimed: &omegav1.Resources{CpuMillis: cpu}},
		})
	}
	t.Run("listing", func(t *testing.T) {
		var r txn.SnapshotReader
		if err := r.Add(&omegav1.SnapshotChunk{Revision: 1, Machines: []*omegav1.Machine{mw}, Tasks: tasks, Last: true}); err != nil {
			t.Logf("held: %v", err)
			return
		}
		st, err := r.Finish()
		if err != nil {
			t.Logf("held: %v", err)
			return
		}
		if err := txn.CheckInvariants(st); err != nil {
			t.Logf("held: %v", err)
			return
		}
		m, _ := st.Machine(m1)
		t.Errorf("machine of capacity %v holds 3 tasks claiming 2^64 cpu in all (allocation reads %v); Finish and CheckInvariants both pass", m.Capacity, m.Allocated)
	})
	t.Run("watched revision", func(t *testing.T) {
		p := &omegav1.RevisionChanges{Revision: 1, Changes: []*omegav1.Change{{Object: &omegav1.Change_Machine{Machine: mw}, Created: true}}}
		for _, x := range tasks {
			p.Changes = append(p.Changes, &omegav1.Change{Object: &omegav1.Change_Task{Task: x}, Created: true})
		}
		if out := applyWatched(txn.NewState(), p); out == "" {
			t.Errorf("a revision placing 2^64 cpu of claims on a 0-cpu machine passes CheckInvariants")
		} else {
			t.Logf("held: %s", out)
		}
	})
}
