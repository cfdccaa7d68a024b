package workload

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func ids(seed byte) *rand.ChaCha8 { return rand.NewChaCha8([32]byte{seed}) }

func TestObjectsBatchJob(t *testing.T) {
	a := JobArrival{Seq: 7, Name: "batch-7", Kind: KindBatch, Submit: 90 * time.Second, Tasks: 3,
		CPUMillis: 250, MemoryBytes: 1 << 30, Duration: 1500 * time.Millisecond, Priority: 2}
	const epoch = int64(1_700_000_000) * 1e9
	job, tasks, err := a.Objects(ids(1), epoch)
	if err != nil {
		t.Fatal(err)
	}
	jobUID, err := uuid.Parse(job.GetMeta().GetUid())
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := &omegav1.JobSpec{
		Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "batch", Priority: 2,
		Template:        &omegav1.TaskTemplate{Resources: &omegav1.Resources{CpuMillis: 250, MemoryBytes: 1 << 30}, DurationMillis: 1500},
		Replicas:        3,
		SubmitUnixNanos: epoch + 90e9,
	}
	if !proto.Equal(job.GetSpec(), wantSpec) || job.GetMeta().GetName() != "batch-7" {
		t.Errorf("job %v", job)
	}
	if len(tasks) != 3 {
		t.Fatalf("%d tasks", len(tasks))
	}
	seen := map[string]bool{job.GetMeta().GetUid(): true}
	for i, tk := range tasks {
		m := tk.GetMeta()
		if seen[m.GetUid()] {
			t.Errorf("task %d reuses uid %s", i, m.GetUid())
		}
		seen[m.GetUid()] = true
		if _, err := uuid.Parse(m.GetUid()); err != nil {
			t.Errorf("task %d uid: %v", i, err)
		}
		wantOwner := []*omegav1.OwnerReference{{Kind: "Job", Uid: jobUID.String(), Name: "batch-7", Controller: true}}
		if m.GetName() != "batch-7-"+strconv.Itoa(i) || m.GetLabels()[LabelJob] != "batch-7" ||
			len(m.GetOwnerReferences()) != 1 || !proto.Equal(m.GetOwnerReferences()[0], wantOwner[0]) {
			t.Errorf("task %d meta %v", i, m)
		}
		wantTask := &omegav1.TaskSpec{Resources: &omegav1.Resources{CpuMillis: 250, MemoryBytes: 1 << 30}, Priority: 2, DurationMillis: 1500}
		// No status: the store creates every task PENDING.
		if !proto.Equal(tk.GetSpec(), wantTask) || tk.GetStatus() != nil {
			t.Errorf("task %d: %v", i, tk)
		}
	}
	// One spec, labels map and owner slice per job, not one per task: a job
	// of 2,000 tasks makes one of each.
	for _, tk := range tasks[1:] {
		m, m0 := tk.GetMeta(), tasks[0].GetMeta()
		if tk.Spec != tasks[0].Spec || reflect.ValueOf(m.Labels).UnsafePointer() != reflect.ValueOf(m0.Labels).UnsafePointer() ||
			&m.OwnerReferences[0] != &m0.OwnerReferences[0] {
			t.Fatalf("task %s does not share its spec, labels and owner references with %s", m.GetName(), m0.GetName())
		}
	}
	// The same entropy gives the same ids.
	job2, tasks2, _ := a.Objects(ids(1), epoch)
	if !proto.Equal(job, job2) || !proto.Equal(tasks[2], tasks2[2]) {
		t.Error("same id source, different objects")
	}
}

func TestObjectsMapReduceAndService(t *testing.T) {
	mr := JobArrival{Name: "mapreduce-3", Kind: KindMapReduce, Tasks: 4, Workers: 4, MapTasks: 64, CPUMillis: 100, MemoryBytes: 1 << 20, Duration: time.Minute}
	job, tasks, err := mr.Objects(ids(2), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The mapreduce scheduler creates the workers itself.
	if len(tasks) != 0 || job.GetSpec().GetScheduler() != "mapreduce" || job.GetSpec().GetKind() != omegav1.JobKind_JOB_KIND_MAPREDUCE ||
		job.GetSpec().GetReplicas() != 4 || job.GetSpec().GetMapreduce().GetMapTasks() != 64 {
		t.Errorf("mapreduce job %v, %d tasks", job, len(tasks))
	}
	svc := JobArrival{Name: "prefill-1", Kind: KindService, Tasks: 2, CPUMillis: 1, MemoryBytes: 1 << 20, Priority: 9}
	job, tasks, err = svc.Objects(ids(3), 0)
	if err != nil {
		t.Fatal(err)
	}
	if job.GetSpec().GetScheduler() != "service" || job.GetSpec().GetTemplate().GetDurationMillis() != 0 || len(tasks) != 2 {
		t.Errorf("service job %v", job)
	}
}

// TestObjectsCommitThroughTxn: a generated cell's machines, pre-fill and
// first arrivals are objects the transaction layer accepts.
func TestObjectsCommitThroughTxn(t *testing.T) {
	c := Default()
	c.Machines = 50
	c.Days = 0.01
	g := mustNew(t, c)
	src := ids(4)
	var ops []txn.Op
	for _, m := range g.Machines() {
		pm, err := m.Object(src)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, txn.CreateMachine(pm))
	}
	jobs := append(g.Prefill(), drain(t, g)...)
	if len(jobs) < 10 {
		t.Fatalf("only %d jobs", len(jobs))
	}
	for _, a := range jobs {
		job, tasks, err := a.Objects(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, txn.CreateJob(job))
		for _, tk := range tasks {
			ops = append(ops, txn.CreateTask(tk))
		}
	}
	res, _, err := txn.Evaluate(txn.NewState(), &txn.Txn{Ops: ops}, 1, txn.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != len(ops) || res.Conflicts != 0 {
		t.Errorf("%d of %d operations committed, %d conflicts", res.Committed, len(ops), res.Conflicts)
	}
}
