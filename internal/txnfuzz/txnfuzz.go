// Package txnfuzz builds transactions from a fuzzer's bytes, for the fuzz
// targets of txn (Evaluate) and store (Commit, reopen). Every field of every
// operation is drawn from the bytes, strings as raw bytes (so invalid UTF-8
// is as likely as any other string), integers biased towards their edges,
// uids and expected versions mostly from a small pool of objects that a
// fixed Setup creates, so that operations hit real objects and conflict as
// often as they fail.
//
// The byte layout is a contract between Decoder and Seed: each choice is
// one byte, a string is a length byte and that many bytes (or one of a few
// special lengths), an integer is a selector byte (and eight more bytes for
// a raw value). Past the end every byte reads as 0, so a short input is a
// short program, and the seeds of the fuzz targets are written with Seed,
// choice by choice.
package txnfuzz

import (
	"fmt"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Limits are small limits for fuzzing, so a short input reaches every bound.
func Limits() txn.Limits {
	return txn.Limits{MaxOps: 24, MaxStringBytes: 64, MaxObjectBytes: 1024, MaxTxnBytes: 4096}
}

// The pool: Setup creates machines 0-2, jobs 0-1 and tasks 0-7; the others
// exist only as names (for creates, and for operations on what is absent).
const (
	NumMachines = 4
	NumJobs     = 3
	NumTasks    = 12
	NumOffers   = 3
	NumQuotas   = 2
	NumLeases   = 2
)

func poolUID(kind byte, i int) uuid.UUID {
	var u uuid.UUID
	u[0], u[1] = kind, byte(i)
	u[2] = 0x5a
	u[6] = 0x40
	u[8] = 0x80
	u[15] = 1
	return u
}

// Machine, Job and Task return the pool's uids.
func Machine(i int) uuid.UUID { return poolUID('M', i) }
func Job(i int) uuid.UUID     { return poolUID('J', i) }
func Task(i int) uuid.UUID    { return poolUID('T', i) }

// SetupNanos is the committer clock of Setup's transactions.
const SetupNanos = 1_700_000_000_000_000_000

// Setup returns the transactions that create the starting cell: machine 0
// (4 cores, 4 GiB), machine 1 (2 cores, 2 GiB), machine 2 (4 cores, 4 GiB, 4
// gpus); jobs 0 and 1; tasks 0-3 of job 0 and 4-7 of job 1 (100 millicores,
// 100 bytes each; task 5 also a gpu); tasks 0 and 1 on machine 0, 2 on
// machine 1, 5 on machine 2; task 1 running; task 3 succeeded. Each must
// commit whole.
func Setup() []*txn.Txn {
	var ops []txn.Op
	caps := []*omegav1.Resources{
		{CpuMillis: 4000, MemoryBytes: 4000},
		{CpuMillis: 2000, MemoryBytes: 2000},
		{CpuMillis: 4000, MemoryBytes: 4000, Extended: map[string]int64{"gpu": 4}},
	}
	for i, c := range caps {
		ops = append(ops, txn.CreateMachine(&omegav1.Machine{
			Meta:   &omegav1.ObjectMeta{Uid: Machine(i).String(), Name: fmt.Sprintf("m%d", i), Labels: map[string]string{"rack": "r1"}},
			Spec:   &omegav1.MachineSpec{Capacity: c, FailureDomain: "fd", Attributes: map[string]string{"arch": "amd64"}},
			Status: &omegav1.MachineStatus{AgentAddress: "127.0.0.1:7946"},
		}))
	}
	for j := range 2 {
		ops = append(ops, txn.CreateJob(&omegav1.Job{
			Meta: &omegav1.ObjectMeta{Uid: Job(j).String(), Name: fmt.Sprintf("j%d", j)},
			Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "batch", Replicas: 4, Priority: 10,
				Template: &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 100, MemoryBytes: 100}}},
		}))
	}
	for i := range 8 {
		r := &omegav1.Resources{CpuMillis: 100, MemoryBytes: 100}
		if i == 5 {
			r.Extended = map[string]int64{"gpu": 1}
		}
		ops = append(ops, txn.CreateTask(&omegav1.Task{
			Meta: &omegav1.ObjectMeta{Uid: Task(i).String(), Name: fmt.Sprintf("t%d", i),
				OwnerReferences: []*omegav1.OwnerReference{{Kind: "Job", Uid: Job(i / 4).String(), Controller: true}}},
			Spec: &omegav1.TaskSpec{Resources: r, Priority: int32(i), Command: &omegav1.Command{Path: "/bin/true"}},
		}))
	}
	claim := func(task, machine int) txn.Op {
		r := txn.Resources{CPU: 100, Memory: 100}
		if task == 5 {
			r.Ext = map[string]int64{"gpu": 1}
		}
		return txn.Claim(Task(task), Machine(machine), r, 0)
	}
	ops = append(ops, claim(0, 0), claim(1, 0), claim(2, 1), claim(5, 2))
	first := &txn.Txn{Component: "setup", UnixNanos: SetupNanos, Ops: ops}
	second := &txn.Txn{ViewRevision: 1, Component: "setup", UnixNanos: SetupNanos + 1, Ops: []txn.Op{
		txn.SetStatus(Task(1), omegav1.TaskState_TASK_STATE_RUNNING, 0, "started"),
		txn.SetStatus(Task(3), omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "done"),
	}}
	return []*txn.Txn{first, second}
}
