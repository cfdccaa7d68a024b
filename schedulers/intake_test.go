package schedulers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// intakeFeed feeds an intake what the cell's watch delivered since the
// last call, and returns who got work.
type intakeFeed struct {
	t  *testing.T
	in *Intake
	w  interface {
		Poll(int) ([]*txn.WriteSet, <-chan struct{}, error)
	}
}

func (f *intakeFeed) feed() ([]*Runner, error) {
	f.t.Helper()
	sets, _, err := f.w.Poll(0)
	if err != nil {
		f.t.Fatal(err)
	}
	var all []*Runner
	for _, ws := range sets {
		rs, err := f.in.Observe(ws, t0)
		if err != nil {
			return all, err
		}
		for _, r := range rs {
			if !slices.Contains(all, r) {
				all = append(all, r)
			}
		}
	}
	return all, nil
}

// TestIntakeRoutesThroughTheCell: jobs reach the instance of their kind
// that the hash of their uid picks, once each, from the cell's changes
// alone; a job of a kind nothing here runs is an error when strict and
// left alone otherwise; tasks created PENDING wake nobody, a LOST task or
// one evicted back to PENDING re-queues its job's instance; a deleted job
// is forgotten.
func TestIntakeRoutesThroughTheCell(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(4, 4000, 16*gib, 0)...)
	b0 := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
	b1 := c.runner(NewBatch(), "batch-1", 2, testConfig(), nil)
	sv := c.runner(NewService(), "service-0", 3, testConfig(), nil)
	in := NewIntake()
	in.Strict = true
	for _, r := range []*Runner{b0, b1, sv} {
		in.Add(r)
	}
	w, err := c.st.Watch(c.state().Revision())
	if err != nil {
		t.Fatal(err)
	}
	f := &intakeFeed{t: t, in: in, w: w}

	var jobs []uuid.UUID
	for range 8 {
		j, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 100, mem: gib})
		jobs = append(jobs, j)
	}
	svc, svcTasks := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 100, mem: gib})
	woken, err := f.feed()
	if err != nil {
		t.Fatal(err)
	}
	batch, batchNames := []*Runner{b0, b1}, []string{"batch-0", "batch-1"}
	for _, j := range jobs {
		r, ok := in.Owner(j)
		if !ok || r != batch[Pick(j, batchNames)] {
			t.Fatalf("job %s routed to %v, want batch-%d", j, r, Pick(j, batchNames))
		}
	}
	if r, _ := in.Owner(svc); r != sv {
		t.Fatal("the service job did not reach the service scheduler")
	}
	if got := b0.Queued() + b1.Queued() + sv.Queued(); got != 9 || len(woken) != 3 {
		t.Fatalf("%d jobs queued, %d runners woken", got, len(woken))
	}

	// Nothing new: nobody wakes.
	if woken, _ := f.feed(); len(woken) != 0 {
		t.Fatalf("woken %d with nothing new", len(woken))
	}

	// The service job's task placed, then lost with its machine: its
	// scheduler hears of it. (The runner's own record of it starts when it
	// places it; here the cell places it directly, so mark it done first.)
	for sv.Queued() > 0 {
		a := begin(t, sv, t0)
		finish(t, sv, a, t0)
	}
	f.feed()
	placed := c.task(svcTasks[0])
	if !placed.Placed() {
		t.Fatal("the service task was not placed")
	}
	if _, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.state().Revision(), Ops: []txn.Op{
		txn.SetStatus(svcTasks[0], omegav1.TaskState_TASK_STATE_LOST, placed.Version, "machine failed"),
	}}); err != nil {
		t.Fatal(err)
	}
	woken, _ = f.feed()
	if len(woken) != 1 || woken[0] != sv || sv.Queued() != 1 {
		t.Fatalf("after the loss: woken %v, service queued %d", woken, sv.Queued())
	}

	// A batch job placed, then one of its tasks evicted back to PENDING:
	// its instance re-queues it.
	owner := batch[Pick(jobs[1], batchNames)]
	for owner.Queued() > 0 {
		a := begin(t, owner, t0)
		finish(t, owner, a, t0)
	}
	f.feed()
	var victim *txn.Task
	c.state().RangeTasks(func(x *txn.Task) bool {
		if x.Job == jobs[1] && x.Placed() {
			victim = x
			return false
		}
		return true
	})
	if victim == nil {
		t.Fatal("job 1 was not placed")
	}
	if _, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.state().Revision(), Ops: []txn.Op{
		txn.ForceEvict(victim.UID, victim.Version, "drain"),
	}}); err != nil {
		t.Fatal(err)
	}
	woken, _ = f.feed()
	if len(woken) != 1 || woken[0] != owner || owner.Queued() != 1 {
		t.Fatalf("after the eviction: woken %v, queued %d", woken, owner.Queued())
	}

	// Strictness: a job for a scheduler nothing here runs.
	c.addJob("x", jobSpec{kind: batchKind, scheduler: "nobody", tasks: 1, cpu: 1, mem: 1})
	if _, err := f.feed(); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("strict intake: %v", err)
	}
	lax := NewIntake()
	lax.Add(b0)
	w2, _ := c.st.Watch(c.state().Revision())
	f2 := &intakeFeed{t: t, in: lax, w: w2}
	j, _ := c.addJob("y", jobSpec{kind: batchKind, scheduler: "service", tasks: 1, cpu: 1, mem: 1})
	if woken, err := f2.feed(); err != nil || len(woken) != 0 {
		t.Fatalf("a process without the kind: %v %v", woken, err)
	}
	if _, ok := lax.Owner(j); ok {
		t.Fatal("a job of another process's kind was taken")
	}

	// A deleted job is forgotten.
	if _, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.state().Revision(), Ops: []txn.Op{
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, jobs[0], 0),
	}}); err != nil {
		t.Fatal(err)
	}
	f.in.Strict = false
	f.feed()
	if _, ok := in.Owner(jobs[0]); ok {
		t.Fatal("a deleted job still has an owner")
	}
}

// TestIntakeRecovers: a scheduler that starts on a running cell takes its
// jobs from a snapshot: one with PENDING tasks is queued at its instance,
// a placed one adopted (its lost task then reaches the instance), one of
// another kind left alone.
func TestIntakeRecovers(t *testing.T) {
	c := newCell(t, 2)
	ms := c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	waiting, _ := c.addJob("w", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 100, mem: gib})
	running, tasks := c.addJob("r", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
	other, _ := c.addJob("o", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 100, mem: gib})
	c.commit(txn.Claim(tasks[0], ms[0], txn.Resources{CPU: 100, Memory: gib}, c.task(tasks[0]).Version))

	r := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
	in := NewIntake()
	in.Add(r)
	st := c.state()
	woken := in.Recover(st, t0)
	if len(woken) != 1 || woken[0] != r || r.Queued() != 1 {
		t.Fatalf("recover: woken %d, queued %d; want the waiting job queued", len(woken), r.Queued())
	}
	if o, ok := in.Owner(running); !ok || o != r {
		t.Fatal("the placed job was not adopted")
	}
	if _, ok := in.Owner(other); ok {
		t.Fatal("a job of a kind this process does not run was taken")
	}
	if rec := record(t, r, waiting); !rec.Placed.IsZero() {
		t.Fatalf("the waiting job is recorded placed: %+v", rec)
	}

	// The adopted job's task is lost: the watch from the snapshot brings it
	// to the instance.
	w, err := c.st.Watch(st.Revision())
	if err != nil {
		t.Fatal(err)
	}
	lostTask := c.task(tasks[0])
	if _, err := c.st.Commit(context.Background(), &txn.Txn{ViewRevision: c.state().Revision(), Ops: []txn.Op{
		txn.SetStatus(tasks[0], omegav1.TaskState_TASK_STATE_LOST, lostTask.Version, "machine failed"),
	}}); err != nil {
		t.Fatal(err)
	}
	f := &intakeFeed{t: t, in: in, w: w}
	if woken, err := f.feed(); err != nil || len(woken) != 1 || r.Queued() != 2 {
		t.Fatalf("after the loss: %v %v, queued %d", woken, err, r.Queued())
	}
	if rec := record(t, r, running); rec.Lost != 1 {
		t.Fatalf("the adopted job's record: %+v", rec)
	}
}

// A restarted MapReduce scheduler counts the workers its jobs already have:
// a job with all its workers is adopted, not queued; one short of workers
// gets only the missing ones. Recovering again (a re-list after the watch
// fell behind) leaves the jobs it owns as they are.
func TestIntakeRecoversMapReduce(t *testing.T) {
	c := newCell(t, 3)
	ms := c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	full, fullTasks := c.addJob("full", jobSpec{kind: mapreduceKind, scheduler: "mapreduce", tasks: 2, replicas: 2, cpu: 1000, mem: gib})
	short, shortTasks := c.addJob("short", jobSpec{kind: mapreduceKind, scheduler: "mapreduce", tasks: 1, replicas: 3, cpu: 1000, mem: gib})
	for i, tk := range append(fullTasks, shortTasks...) {
		c.commit(txn.Claim(tk, ms[i%2], txn.Resources{CPU: 1000, Memory: gib}, c.task(tk).Version))
	}
	placedOf := func(job uuid.UUID) int {
		n := 0
		c.state().RangeTasks(func(t *txn.Task) bool {
			if t.Job == job && t.Placed() {
				n++
			}
			return true
		})
		return n
	}

	mr := NewMapReduce(RelativeSize)
	mr.RelativeFactor = 1 // exactly the workers requested
	r := c.runner(mr, "mapreduce-0", 1, testConfig(), nil)
	in := NewIntake()
	in.Add(r)
	woken := in.Recover(c.state(), t0)
	if len(woken) != 1 || r.Queued() != 1 {
		t.Fatalf("recover: woken %d, queued %d; want only the short job queued", len(woken), r.Queued())
	}
	if rec := record(t, r, full); rec.Placed.IsZero() {
		t.Fatalf("the full job is not recorded placed: %+v", rec)
	}
	a := begin(t, r, t0)
	if a.Job != short {
		t.Fatalf("attempt for %v, want the short job", a.Job)
	}
	finish(t, r, a, t0)
	if n := placedOf(short); n != 3 {
		t.Fatalf("the short job has %d workers placed, want its 3", n)
	}
	if n := placedOf(full); n != 2 {
		t.Fatalf("the full job has %d workers placed, want its 2", n)
	}
	if woken := in.Recover(c.state(), t0.Add(time.Second)); len(woken) != 0 || r.Queued() != 0 {
		t.Fatalf("recover again: woken %d, queued %d; want the owned jobs left as they are", len(woken), r.Queued())
	}
}

// TestIntakeMembersChange: instances of a kind announce themselves in the
// cell's membership and the intake follows. Two processes run batch, this
// one batch-0 and batch-1, another batch-9: a new job hashing to batch-9 is
// left alone (strict or not); when batch-1 dies, each of its jobs — placed,
// or with an attempt in flight — moves to the survivor the hash picks
// (adopted here with its placed tasks, queued if it has work, or left to
// batch-9) and no other job moves; when batch-9 dies too, its jobs come
// here.
func TestIntakeMembersChange(t *testing.T) {
	c := newCell(t, 4)
	c.addMachines(uniform(4, 4000, 16*gib, 0)...)
	b0 := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
	b1 := c.runner(NewBatch(), "batch-1", 2, testConfig(), nil)
	in := NewIntake()
	in.Strict = true
	in.Add(b0)
	in.Add(b1)
	all, survivors := []string{"batch-0", "batch-1", "batch-9"}, []string{"batch-0", "batch-9"}
	if woken, err := in.SetMembers("batch", all, c.state(), t0); err != nil || len(woken) != 0 {
		t.Fatalf("members on an empty cell: %v %v", woken, err)
	}
	if _, err := in.SetMembers("batch", []string{"batch-0", "batch-0"}, c.state(), t0); err == nil {
		t.Fatal("a name twice was accepted")
	}
	w, err := c.st.Watch(c.state().Revision())
	if err != nil {
		t.Fatal(err)
	}
	f := &intakeFeed{t: t, in: in, w: w}
	// Jobs until each member has some, and batch-1's go both ways on its
	// death.
	byMember := map[string][]uuid.UUID{}
	dest := map[uuid.UUID]string{} // batch-1's jobs → where they go when it dies
	toB0 := func() (n int) {
		for _, d := range dest {
			if d == "batch-0" {
				n++
			}
		}
		return n
	}
	for i := 0; len(byMember["batch-0"]) < 2 || len(byMember["batch-9"]) < 1 || toB0() < 2 || len(dest)-toB0() < 1; i++ {
		j, _ := c.addJob(fmt.Sprintf("j%d", i), jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
		name := all[Pick(j, all)]
		byMember[name] = append(byMember[name], j)
		if name == "batch-1" {
			dest[j] = survivors[Pick(j, survivors)]
		}
	}
	if _, err := f.feed(); err != nil {
		t.Fatalf("a job of a remote instance, strict: %v", err)
	}
	for name, js := range byMember {
		for _, j := range js {
			r, ok := in.Owner(j)
			switch {
			case name == "batch-9" && ok:
				t.Fatalf("job %s of the remote batch-9 was taken by %s", j, r.Name())
			case name != "batch-9" && (!ok || r.Name() != name):
				t.Fatalf("job %s routed to %v, want %s", j, r, name)
			}
		}
	}
	// batch-1 places all its jobs but the last, which is in flight.
	for b1.Queued() > 1 {
		a := begin(t, b1, t0)
		if o, _ := finish(t, b1, a, t0); o != OutcomePlaced {
			t.Fatalf("setup: batch-1's job %s: %v", a.Job, o)
		}
	}
	inFlight := begin(t, b1, t0)
	b0Before := b0.Queued()

	woken, err := in.SetMembers("batch", survivors, c.state(), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var placedHere uuid.UUID
	for j, d := range dest {
		r, ok := in.Owner(j)
		switch {
		case d == "batch-0" && (!ok || r != b0):
			t.Fatalf("job %s of the dead batch-1 is owned by %v, want batch-0", j, r)
		case d == "batch-9" && ok:
			t.Fatalf("job %s of the dead batch-1, now batch-9's, is owned here by %s", j, r.Name())
		}
		if d == "batch-0" && j != inFlight.Job {
			placedHere = j
		}
	}
	for _, j := range byMember["batch-0"] {
		if r, _ := in.Owner(j); r != b0 {
			t.Fatal("a job of batch-0, which stayed, moved")
		}
	}
	// Of the moved jobs only the in-flight one has work (its attempt had
	// not committed): batch-0 queues it if it came here.
	wantQueued := b0Before
	if dest[inFlight.Job] == "batch-0" {
		wantQueued++
	}
	if b0.Queued() != wantQueued || (len(woken) == 1) != (wantQueued > b0Before) {
		t.Fatalf("woken %v, batch-0 queued %d → %d, want %d", woken, b0Before, b0.Queued(), wantQueued)
	}
	if b1.Queued() != 0 {
		t.Fatalf("the dead batch-1 still queues %d jobs", b1.Queued())
	}
	if o, _ := finish(t, b1, inFlight, t0); o != OutcomeMoved {
		t.Fatalf("the in-flight attempt of a moved job ended %v, want OutcomeMoved", o)
	}
	for _, rec := range b1.Records() {
		t.Fatalf("batch-1 still records job %s after its jobs moved", rec.UID)
	}
	// A placed job that came here: adopted with its task, whose loss now
	// reaches batch-0.
	var placedTask uuid.UUID
	c.state().RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == placedHere && tk.Placed() {
			placedTask = tk.UID
		}
		return true
	})
	if placedTask == uuid.Nil {
		t.Fatalf("the moved job %s has no placed task", placedHere)
	}
	c.commit(txn.SetStatus(placedTask, omegav1.TaskState_TASK_STATE_LOST, c.task(placedTask).Version, "machine failed"))
	if _, err := f.feed(); err != nil {
		t.Fatal(err)
	}
	if rec := record(t, b0, placedHere); rec.Lost != 1 {
		t.Fatalf("the moved job's lost task did not reach batch-0: %+v", rec)
	}

	// batch-9 dies too: its jobs, and those it took from batch-1, come here.
	if _, err := in.SetMembers("batch", []string{"batch-0"}, c.state(), t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	var theirs []uuid.UUID
	theirs = append(theirs, byMember["batch-9"]...)
	for j, d := range dest {
		if d == "batch-9" {
			theirs = append(theirs, j)
		}
	}
	for _, j := range theirs {
		if r, ok := in.Owner(j); !ok || r != b0 {
			t.Fatalf("job %s of the dead batch-9 is owned by %v, want batch-0", j, r)
		}
	}
}

// A job that moves away and straight back while an attempt is in flight
// is the runner's again: the attempt lands as usual and a later loss
// reaches it. A loss that comes while it is away is ignored, and the
// attempt of a job that stayed away is dropped, not committed.
func TestRunnerReleaseEdges(t *testing.T) {
	c := newCell(t, 5)
	ms := c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	a := c.runner(NewBatch(), "batch-a", 1, testConfig(), nil)
	in := NewIntake()
	if err := in.Add(a); err != nil {
		t.Fatal(err)
	}
	job, tasks := c.addJob("flap", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
	if _, err := in.SetMembers("batch", []string{"batch-a"}, c.state(), t0); err != nil {
		t.Fatal(err)
	}
	att := begin(t, a, t0)
	// Away (to a remote batch-b that wins the hash, if it does) and back.
	away := []string{"batch-a", "batch-b"}
	for Pick(job, away) != 1 {
		away[1] += "x"
	}
	if _, err := in.SetMembers("batch", away, c.state(), t0); err != nil {
		t.Fatal(err)
	}
	if _, owned := in.Owner(job); owned {
		t.Fatal("the job stayed here though batch-b won it")
	}
	if a.Lost(job, c.task(tasks[0]), t0) {
		t.Fatal("a loss reached a runner the job moved away from")
	}
	if _, err := in.SetMembers("batch", []string{"batch-a"}, c.state(), t0); err != nil {
		t.Fatal(err)
	}
	if o, _ := finish(t, a, att, t0); o != OutcomePlaced {
		t.Fatalf("the attempt of a job back home ended %v, want placed", o)
	}
	if rec := record(t, a, job); rec.TasksPlaced != 1 {
		t.Fatalf("record after the flap: %+v", rec)
	}
	c.commit(txn.SetStatus(tasks[0], omegav1.TaskState_TASK_STATE_LOST, c.task(tasks[0]).Version, "machine failed"))
	if !a.Lost(job, c.task(tasks[0]), t0) {
		t.Fatal("a loss after the flap did not reach the runner")
	}

	// Away for good while in flight: dropped, and nothing committed.
	other, _ := c.addJob("gone", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
	if _, err := in.SetMembers("batch", []string{"batch-a"}, c.state(), t0); err != nil { // batch-a alone again: it owns both
		t.Fatal(err)
	}
	if r, _ := in.Owner(other); r != a {
		t.Fatalf("setup: the second job is owned by %v", r)
	}
	for {
		at := begin(t, a, t0)
		if at.Job != other {
			finish(t, a, at, t0)
			continue
		}
		rev := c.state().Revision()
		for Pick(other, away) != 1 {
			away[1] += "y"
		}
		if _, err := in.SetMembers("batch", away, c.state(), t0); err != nil {
			t.Fatal(err)
		}
		if o, _ := finish(t, a, at, t0); o != OutcomeMoved {
			t.Fatalf("the attempt of a job that moved away ended %v", o)
		}
		if c.state().Revision() != rev {
			t.Fatal("the dropped attempt committed")
		}
		break
	}
	_ = ms
}

// A job with a LOST task not yet replaced keeps wanting its replacement
// when it moves: its new owner queues it and the replacement is created.
// After a re-list, a loss the watch missed reaches the owner the same way,
// and a job deleted meanwhile is forgotten.
func TestIntakeHandsOverLostTasks(t *testing.T) {
	c := newCell(t, 6)
	c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	a := c.runner(NewBatch(), "batch-a", 1, testConfig(), nil)
	b := c.runner(NewBatch(), "batch-b", 2, testConfig(), nil)
	in := NewIntake()
	for _, r := range []*Runner{a, b} {
		if err := in.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	both := []string{"batch-a", "batch-b"}
	var job uuid.UUID
	var tasks []uuid.UUID
	for i := 0; ; i++ { // a job batch-a owns
		job, tasks = c.addJob(fmt.Sprintf("j%d", i), jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 100, mem: gib})
		if both[Pick(job, both)] == "batch-a" {
			break
		}
	}
	in.Recover(c.state(), t0)
	for a.Queued() > 0 {
		at := begin(t, a, t0)
		finish(t, a, at, t0)
	}
	lost := c.task(tasks[0])
	c.commit(txn.SetStatus(tasks[0], omegav1.TaskState_TASK_STATE_LOST, lost.Version, "machine failed"))
	a.Lost(job, c.task(tasks[0]), t0) // batch-a knows; batch-a then dies before replacing it
	if _, err := in.SetMembers("batch", []string{"batch-b"}, c.state(), t0); err != nil {
		t.Fatal(err)
	}
	if r, _ := in.Owner(job); r != b || b.Queued() == 0 {
		t.Fatalf("owner %v, batch-b queued %d: the job with a task to replace was not queued at its new owner", r, b.Queued())
	}
	replaced := func() int {
		n := 0
		c.state().RangeTasks(func(tk *txn.Task) bool {
			if tk.Job == job && tk.Placed() {
				n++
			}
			return true
		})
		return n
	}
	for b.Queued() > 0 {
		finish(t, b, begin(t, b, t0), t0)
	}
	if n := replaced(); n != 2 {
		t.Fatalf("%d tasks of the job placed after the move, want 2 (the survivor and a replacement)", n)
	}

	// A loss the watch missed (a re-list brings the view instead), and a
	// job deleted meanwhile.
	gone, _ := c.addJob("gone", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
	in.Recover(c.state(), t0) // someone owns gone now
	for _, r := range []*Runner{a, b} {
		for r.Queued() > 0 {
			finish(t, r, begin(t, r, t0), t0)
		}
	}
	var victim *txn.Task
	c.state().RangeTasks(func(tk *txn.Task) bool {
		if tk.Job == job && tk.Placed() {
			victim = tk
			return false
		}
		return true
	})
	c.commit(txn.SetStatus(victim.UID, omegav1.TaskState_TASK_STATE_LOST, victim.Version, "machine failed"))
	gj, _ := c.state().Job(gone)
	c.commit(txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, gone, gj.Version))
	woken := in.Recover(c.state(), t0)
	if !slices.Contains(woken, b) {
		t.Fatalf("the re-list woke %v, want batch-b for the missed loss", woken)
	}
	for b.Queued() > 0 {
		finish(t, b, begin(t, b, t0), t0)
	}
	if n := replaced(); n != 2 {
		t.Fatalf("%d tasks placed after the missed loss, want 2", n)
	}
	if _, owned := in.Owner(gone); owned {
		t.Fatal("a job deleted while the watch was behind is still owned")
	}
}

// Instance names are unique within a kind, not across kinds: a batch and
// a service instance may share one, each routed its own jobs; two of one
// kind may not.
func TestIntakeNamesPerKind(t *testing.T) {
	c := newCell(t, 7)
	c.addMachines(uniform(2, 4000, 16*gib, 0)...)
	bt := c.runner(NewBatch(), "s0", 1, testConfig(), nil)
	sv := c.runner(NewService(), "s0", 2, testConfig(), nil)
	in := NewIntake()
	in.Strict = true
	if err := in.Add(bt); err != nil {
		t.Fatal(err)
	}
	if err := in.Add(sv); err != nil {
		t.Fatalf("a service instance named like a batch one: %v", err)
	}
	if err := in.Add(c.runner(NewBatch(), "s0", 3, testConfig(), nil)); err == nil {
		t.Fatal("two batch instances under one name were accepted")
	}
	bj, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1, cpu: 100, mem: gib})
	sj, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 1, cpu: 100, mem: gib})
	in.Recover(c.state(), t0)
	if r, _ := in.Owner(bj); r != bt {
		t.Fatalf("the batch job went to %v", r)
	}
	if r, _ := in.Owner(sj); r != sv {
		t.Fatalf("the service job went to %v", r)
	}
}

// A job the intake routes from a revision the runner's own copy has not
// reached (their watches apart, as over gRPC) is decided on a view that
// holds it: the runner syncs to that revision instead of taking the job
// for deleted and dropping it.
func TestIntakeJobNewerThanTheRunnersView(t *testing.T) {
	c := newCell(t, 8)
	c.addMachines(machineSpec{cpu: 4000, mem: 16 * gib})
	r := c.runner(NewBatch(), "batch-0", 1, testConfig(), func(tr client.Transport) client.Transport { return laggingTransport{tr} })
	in := NewIntake()
	if err := in.Add(r); err != nil {
		t.Fatal(err)
	}
	w, err := c.st.Watch(c.state().Revision())
	if err != nil {
		t.Fatal(err)
	}
	job, _ := c.addJob("late", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 100, mem: gib})
	f := &intakeFeed{t: t, in: in, w: w}
	if _, err := f.feed(); err != nil {
		t.Fatal(err)
	}
	if r.Client().View().Revision() >= c.state().Revision() {
		t.Fatal("setup: the runner's copy is not behind")
	}
	a := begin(t, r, t0)
	if a.Job != job || len(a.Txn.Ops) != 2 {
		t.Fatalf("attempt for %v with %d ops, want the late job's 2 claims", a.Job, len(a.Txn.Ops))
	}
	if o, _ := finish(t, r, a, t0); o != OutcomePlaced {
		t.Fatalf("outcome %v", o)
	}
}

// A job's deletion, watched, reaches the runner that owned it: the runner
// lets go of what it kept to schedule the job, and the intake of the owner.
func TestIntakeTellsTheOwnerAJobLeft(t *testing.T) {
	c := newCell(t, 1)
	c.addMachines(uniform(4, 4000, 16*gib, 0)...)
	r := c.runner(NewBatch(), "batch-0", 1, testConfig(), nil)
	in := NewIntake()
	in.Add(r)
	w, err := c.st.Watch(c.state().Revision())
	if err != nil {
		t.Fatal(err)
	}
	f := &intakeFeed{t: t, in: in, w: w}
	job, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 2, cpu: 100, mem: gib})
	if _, err := f.feed(); err != nil {
		t.Fatal(err)
	}
	if o, _ := finish(t, r, begin(t, r, t0), t0); o != OutcomePlaced || len(r.jobs[job].placed) != 2 {
		t.Fatalf("outcome %v, placed %v", o, r.jobs[job].placed)
	}
	c.commit(txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, job, 0))
	if _, err := f.feed(); err != nil {
		t.Fatal(err)
	}
	if _, owned := in.Owner(job); owned || r.jobs[job].placed != nil {
		t.Fatalf("after the job's deletion: owned %v, the runner's placed set %v", owned, r.jobs[job].placed)
	}
}
