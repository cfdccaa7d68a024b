package store

import (
	"math"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestReopenEdgeValues: whatever the store acknowledges, it reopens. Commits
// of every operation kind carry edge values — empty strings, strings of
// exactly MaxStringBytes (multibyte runes too), every enum value and some no
// enum names, zero and math.MaxInt64 resources (two such machines, so the
// totals pass int64), extended resource names that are empty, non-ASCII or
// maximal, int32 and int64 extremes in priorities, counts and clocks — and
// the reopened state equals the one before, twice over.
func TestReopenEdgeValues(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	lim := txn.DefaultLimits()
	maxStr := strings.Repeat("x", lim.MaxStringBytes)
	maxRunes := strings.Repeat("€", lim.MaxStringBytes/3) + strings.Repeat("é", (lim.MaxStringBytes%3)/2) + strings.Repeat("a", lim.MaxStringBytes%3%2)
	if len(maxRunes) != lim.MaxStringBytes {
		t.Fatalf("maxRunes is %d bytes", len(maxRunes))
	}
	maxRes := func() *omegav1.Resources {
		return &omegav1.Resources{CpuMillis: math.MaxInt64, MemoryBytes: math.MaxInt64,
			Extended: map[string]int64{"": math.MaxInt64, "gpu": 8, "ü-accel": 1, maxStr: math.MaxInt64}}
	}
	meta := func(u uuid.UUID, name string) *omegav1.ObjectMeta {
		return &omegav1.ObjectMeta{Uid: u.String(), Name: name,
			Labels:      map[string]string{"": "", "k": maxRunes, "ключ": "значение"},
			Annotations: map[string]string{maxStr: maxRunes},
		}
	}
	machine := func(u uuid.UUID, r *omegav1.Resources, st omegav1.MachineState, agent string) *omegav1.Machine {
		return &omegav1.Machine{Meta: meta(u, "m"),
			Spec:   &omegav1.MachineSpec{Capacity: r, FailureDomain: maxRunes, Attributes: map[string]string{"": "", "arch": "amd64"}},
			Status: &omegav1.MachineStatus{State: st, AgentAddress: agent}}
	}
	mBig, mBig2, mZero, mDrain, mDown, mUnspec := testUID(uidMachine, 7, 0), testUID(uidMachine, 7, 1), testUID(uidMachine, 7, 2),
		testUID(uidMachine, 7, 3), testUID(uidMachine, 7, 4), testUID(uidMachine, 7, 5)
	ops := []txn.Op{
		txn.CreateMachine(machine(mBig, maxRes(), omegav1.MachineState_MACHINE_STATE_UP, maxStr)),
		txn.CreateMachine(machine(mBig2, maxRes(), omegav1.MachineState_MACHINE_STATE_UP, "")),
		txn.CreateMachine(machine(mZero, &omegav1.Resources{}, omegav1.MachineState_MACHINE_STATE_UP, "[::1]:1")),
		txn.CreateMachine(machine(mDrain, &omegav1.Resources{CpuMillis: 1, MemoryBytes: 1}, omegav1.MachineState_MACHINE_STATE_DRAINING, "")),
		txn.CreateMachine(machine(mDown, nil, omegav1.MachineState_MACHINE_STATE_DOWN, "")),
		txn.CreateMachine(machine(mUnspec, &omegav1.Resources{Extended: map[string]int64{"zero": 0}}, omegav1.MachineState_MACHINE_STATE_UNSPECIFIED, "")),
	}
	// A job of every kind and phase (and a kind and a phase with no name).
	var jobs []uuid.UUID
	kinds := []omegav1.JobKind{0, 1, 2, 3, 99}
	for i, phase := range []omegav1.JobPhase{0, 1, 2, 3, 4, 5, 6, 42} {
		u := testUID(uidJob, 7, uint32(i))
		jobs = append(jobs, u)
		ops = append(ops, txn.CreateJob(&omegav1.Job{Meta: meta(u, maxRunes),
			Spec: &omegav1.JobSpec{Kind: kinds[i%len(kinds)], Scheduler: maxStr, Priority: []int32{math.MinInt32, math.MaxInt32}[i%2],
				Replicas: []int32{0, math.MaxInt32}[i%2], Gang: i%2 == 0, SubmitUnixNanos: []int64{math.MinInt64, math.MaxInt64}[i%2],
				Template: &omegav1.TaskTemplate{Resources: maxRes(), DurationMillis: math.MaxInt64, Labels: map[string]string{"": maxStr},
					Command: &omegav1.Command{Path: "", Args: []string{"", maxRunes}, Env: map[string]string{"": ""}},
					Constraints: []*omegav1.Constraint{
						{Attribute: "a", Operator: 0}, {Attribute: "a", Operator: 1, Value: maxStr}, {Operator: 2}, {Operator: 3}, {Operator: 77},
					}},
				Mapreduce: &omegav1.MapReduceParams{MapTasks: math.MaxInt32, ReduceTasks: math.MinInt32, MaxWorkers: -1}},
			Status: &omegav1.JobStatus{Phase: phase, Pending: math.MaxInt32, Running: math.MinInt32, FinishUnixNanos: []int64{math.MinInt64, math.MaxInt64}[i%2],
				Message: maxRunes},
		}))
	}
	// Tasks: owned by a job (controller), by two (none controlling), by
	// another kind of owner, by nobody.
	task := func(i int, r *omegav1.Resources, owners []*omegav1.OwnerReference) (uuid.UUID, *omegav1.Task) {
		u := testUID(uidTask, 7, uint32(i))
		m := meta(u, []string{"", maxStr, maxRunes}[i%3])
		m.OwnerReferences = owners
		return u, &omegav1.Task{Meta: m, Spec: &omegav1.TaskSpec{Resources: r, Priority: []int32{math.MinInt32, 0, math.MaxInt32}[i%3],
			DurationMillis: []int64{-1, 0, math.MaxInt64}[i%3], Command: &omegav1.Command{Path: maxStr, Args: []string{""}},
			Constraints: []*omegav1.Constraint{{Attribute: maxRunes, Operator: 3}}}}
	}
	ctrl := []*omegav1.OwnerReference{{Kind: "Job", Uid: jobs[0].String(), Name: maxStr, Controller: true}}
	two := []*omegav1.OwnerReference{{Kind: "Job", Uid: jobs[1].String()}, {Kind: "Job", Uid: jobs[2].String()}}
	other := []*omegav1.OwnerReference{{Kind: "ReplicaSet", Uid: maxRunes, Name: ""}}
	var tasks []uuid.UUID
	for i := range 12 {
		var r *omegav1.Resources
		switch i % 4 {
		case 0:
			r = maxRes()
		case 1:
			r = &omegav1.Resources{}
		case 2:
			r = &omegav1.Resources{CpuMillis: 1, MemoryBytes: 1, Extended: map[string]int64{"gpu": 1}}
		}
		u, p := task(i, r, [][]*omegav1.OwnerReference{ctrl, two, other, nil}[i%4])
		if i == 11 {
			// A field this build does not know (a newer client's): kept.
			p.Spec.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), maxRunes))
		}
		tasks = append(tasks, u)
		ops = append(ops, txn.CreateTask(p))
	}
	mustCommitAll(t, s, &txn.Txn{Component: maxRunes, UnixNanos: math.MinInt64, Ops: ops})

	// Claims of everything a machine holds, of nothing, with a zero
	// extended amount; in coarse mode; the component maximal.
	full := txn.ResourcesFromProto(maxRes())
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Conflict: omegav1.ConflictMode_CONFLICT_MODE_COARSE, Component: maxStr,
		UnixNanos: math.MaxInt64, Ops: []txn.Op{
			txn.Claim(tasks[0], mBig, full, version(t, s, tasks[0])),
			txn.Claim(tasks[1], mZero, txn.Resources{}, version(t, s, tasks[1])),
			txn.Claim(tasks[2], mBig2, txn.Resources{CPU: 1, Memory: 1, Ext: map[string]int64{"gpu": 1, "": 0}}, version(t, s, tasks[2])),
			txn.Claim(tasks[3], mBig2, txn.Resources{CPU: 5}, version(t, s, tasks[3])),
			txn.Claim(tasks[5], mBig2, txn.Resources{Memory: 5}, version(t, s, tasks[5])),
			txn.Claim(tasks[6], mBig2, txn.Resources{CPU: 7, Ext: map[string]int64{maxStr: 3}}, version(t, s, tasks[6])),
			txn.Claim(tasks[7], mBig2, txn.Resources{CPU: 1}, version(t, s, tasks[7])),
			txn.Claim(tasks[9], mZero, txn.Resources{}, version(t, s, tasks[9])),
		}})
	// Every state a report may set, messages empty and maximal; evictions
	// by force and by priority; in all-or-nothing mode.
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Commit: omegav1.CommitMode_COMMIT_MODE_ALL_OR_NOTHING, UnixNanos: 0, Ops: []txn.Op{
		txn.SetStatus(tasks[0], omegav1.TaskState_TASK_STATE_RUNNING, 0, ""),
		txn.SetStatus(tasks[1], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, maxRunes),
		txn.SetStatus(tasks[2], omegav1.TaskState_TASK_STATE_FAILED, 0, maxStr),
		txn.SetStatus(tasks[3], omegav1.TaskState_TASK_STATE_LOST, 0, ""),
		txn.SetStatus(tasks[4], omegav1.TaskState_TASK_STATE_KILLED, 0, "never placed"),
		txn.ForceEvict(tasks[5], version(t, s, tasks[5]), maxRunes),
		txn.Evict(tasks[6], version(t, s, tasks[6]), math.MaxInt32, ""), // priority MinInt32 < MaxInt32
	}})
	// Puts, deletes, a task created and claimed, one created and deleted.
	j := jobs[3]
	pj := &omegav1.Job{Meta: meta(j, ""), Spec: &omegav1.JobSpec{Kind: 99}, Status: &omegav1.JobStatus{Phase: 42, Message: maxStr}}
	pm := machine(mDrain, &omegav1.Resources{CpuMillis: math.MaxInt64}, omegav1.MachineState_MACHINE_STATE_DOWN, maxStr)
	cu, ct := task(20, &omegav1.Resources{CpuMillis: 3}, ctrl)
	gu, gt := task(21, nil, nil)
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), UnixNanos: -1, Component: "", Ops: []txn.Op{
		txn.PutJob(pj, 0),
		txn.PutMachine(pm, 0),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tasks[7], 0), // placed: frees its claim
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tasks[4], 0), // terminal
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, jobs[7], 0),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, mDown, 0),
		txn.CreateTask(ct),
		txn.Claim(cu, mBig2, txn.Resources{CPU: 3}, 0),
		txn.CreateTask(gt),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, gu, 0),
	}})

	check := func(round int) {
		t.Helper()
		before := s.Snapshot()
		if err := txn.CheckInvariants(before); err != nil {
			t.Fatal(err)
		}
		if c := before.Capacity(); c.CPU != math.MaxInt64 || c.Memory != math.MaxInt64 {
			t.Errorf("total capacity %v: want saturated", c)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTest(t, dir, nil)
		if d := diffStates(before, s.Snapshot(), true); d != "" {
			t.Fatalf("round %d, after reopen: %s", round, d)
		}
	}
	check(1)
	// After the reopen: the evicted tasks placed again, and a report on a
	// task the reopened store rebuilt from two records.
	mustCommitAll(t, s, &txn.Txn{ViewRevision: s.Revision(), Component: maxRunes, UnixNanos: math.MaxInt64, Ops: []txn.Op{
		txn.Claim(tasks[5], mBig2, txn.Resources{Memory: math.MaxInt64 - 100}, version(t, s, tasks[5])),
		txn.Claim(tasks[6], mBig, txn.Resources{}, version(t, s, tasks[6])),
		txn.SetStatus(tasks[0], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, maxRunes),
		txn.SetStatus(tasks[9], omegav1.TaskState_TASK_STATE_RUNNING, 0, maxStr),
	}})
	check(2)
	s.Close()
}

func version(t *testing.T, s *Store, u uuid.UUID) uint64 {
	t.Helper()
	x, ok := s.Snapshot().Task(u)
	if !ok {
		t.Fatalf("task %s missing", u)
	}
	return x.Version
}
