package schedulers

import (
	"fmt"
	"strconv"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// MapReducePolicy is how the mapreduce scheduler decides how many workers a
// job gets beyond those it asked for (the Omega paper, §6.2).
type MapReducePolicy int

const (
	// MaxParallelism gives a job as many workers as the idle resources
	// allow (bounded by the job's max_workers, if set).
	MaxParallelism MapReducePolicy = iota
	// GlobalCap adds workers only while the cell's utilisation stays under
	// GlobalCap (60% in the paper).
	GlobalCap
	// RelativeSize gives a job at most RelativeFactor times the workers it
	// asked for (4x in the paper).
	RelativeSize
	// NoExtra gives a job the workers it asked for and no more: the
	// paper's baseline, against which the others' speedups are measured.
	NoExtra
)

func (p MapReducePolicy) String() string {
	switch p {
	case MaxParallelism:
		return "max-parallelism"
	case GlobalCap:
		return "global-cap"
	case RelativeSize:
		return "relative-size"
	case NoExtra:
		return "none"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// ParseMapReducePolicy parses a policy name.
func ParseMapReducePolicy(s string) (MapReducePolicy, error) {
	for _, p := range []MapReducePolicy{MaxParallelism, GlobalCap, RelativeSize, NoExtra} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("mapreduce policy %q: want max-parallelism, global-cap, relative-size or none", s)
}

// MapReduce is the paper's MapReduce-aware scheduler: when the cell has idle
// resources it gives a MapReduce job more workers than requested, creating
// the extra worker tasks and claiming them in one transaction. A job's work
// is fixed, so its runtime shrinks with its workers (linear speedup, as in
// the paper): each of W workers of a job that asked for R runs for
// duration × R / W.
//
// A MapReduce job is submitted without tasks (Spec.Replicas workers
// requested, Spec.Template the worker); the scheduler creates all of them,
// each built from the template as submission builds a job's tasks
// (txn.JobTasks: every field of the template, its labels and job=NAME, the
// job's priority), the linear speedup's duration set on top.
type MapReduce struct {
	Policy MapReducePolicy
	// GlobalCap is the utilisation above which GlobalCap adds no worker.
	// Default 0.6.
	GlobalCap float64
	// RelativeFactor bounds RelativeSize's workers to this multiple of the
	// request. Default 4.
	RelativeFactor int
	// Tries bounds the machines examined per worker. Default 64.
	Tries int
	// Placement: PlacementBestFit (the zero value too) is the bounded
	// randomized first fit above; PlacementRandomFirstFit the paper's
	// simulator's, unbounded, over the job's workers (FirstFit).
	Placement Placement
	idx       MachineIndex
	ff        FirstFit
}

// NewMapReduce returns a mapreduce scheduler with policy and the paper's
// parameters.
func NewMapReduce(policy MapReducePolicy) *MapReduce {
	return &MapReduce{Policy: policy, GlobalCap: 0.6, RelativeFactor: 4, Tries: 64}
}

func (s *MapReduce) Kind() string { return "mapreduce" }

// WantsMore: a MapReduce job is attempted, even with no pending task, until
// the scheduler placed as many workers as it requests (Grower).
func (s *MapReduce) WantsMore(job *txn.Job, placed int) bool {
	return job.Kind() == omegav1.JobKind_JOB_KIND_MAPREDUCE && placed < int(job.Replicas())
}

// Workers returns how many workers the policy gives a job that asked for
// requested workers of size req and can use at most useful, on a cell with
// free resources free out of capacity. It is at least requested.
func (s *MapReduce) Workers(requested, useful int, req, free, capacity txn.Resources) int {
	fit := func(avail txn.Resources) int {
		n := useful
		if req.CPU > 0 {
			n = min(n, int(max(avail.CPU, 0)/req.CPU))
		}
		if req.Memory > 0 {
			n = min(n, int(max(avail.Memory, 0)/req.Memory))
		}
		return n
	}
	switch s.Policy {
	case MaxParallelism:
		return max(requested, fit(free))
	case GlobalCap:
		// Room under the cap: cap × capacity − used, per dimension.
		used := capacity.Sub(free)
		room := txn.Resources{
			CPU:    int64(s.GlobalCap*float64(capacity.CPU)) - used.CPU,
			Memory: int64(s.GlobalCap*float64(capacity.Memory)) - used.Memory,
		}
		return max(requested, min(fit(room), fit(free)))
	case RelativeSize:
		return max(requested, min(s.RelativeFactor*requested, fit(free)))
	}
	return requested
}

// useful is how many workers a job can use: its max_workers, else its map
// task count (a worker per map task at most), else 16 times its request.
func useful(job *txn.Job) int {
	mr := job.MapReduce()
	switch {
	case mr.GetMaxWorkers() > 0:
		return int(mr.GetMaxWorkers())
	case mr.GetMapTasks() > 0:
		return int(mr.GetMapTasks())
	}
	return 16 * int(max(job.Replicas(), 1))
}

func (s *MapReduce) Decide(v client.View, req Request, env Env) Decision {
	x := env.index(&s.idx)
	x.Refresh(v)
	p := NewPlacer(v, req.Placed)
	job := req.Job
	tmpl := job.Template()
	want := txn.ResourcesFromProto(tmpl.GetResources())
	requested := int(job.Replicas())
	// Workers it has: pending, and every one placed so far (finished ones
	// did their share of the work and are not made again).
	have := max(len(req.Placed), req.PlacedTotal) + len(req.Pending)
	free := v.Capacity().Sub(v.Allocated())
	workers := s.Workers(requested, max(useful(job), requested), want, free, v.Capacity())
	d := Decision{Considered: len(req.Pending) + max(workers-have, 0)}

	if s.Placement == PlacementRandomFirstFit {
		s.ff.Start(x) // the workers are identical: one run of first fit
	}
	claim := func(t *txn.Task, version uint64) bool {
		if s.Placement == PlacementRandomFirstFit {
			m := s.ff.Next(x, v, p, env, t.Request(), t.Constraints())
			if m == nil {
				return false
			}
			d.Ops = append(d.Ops, txn.Claim(t.UID, m.UID, t.Request(), version))
			p.Take(m, t.Request())
			return true
		}
		ok := false
		Sample(x, v, p, env, t.Request(), t.Constraints(), 1, s.Tries, func(m *txn.Machine) bool {
			d.Ops = append(d.Ops, txn.Claim(t.UID, m.UID, t.Request(), version))
			p.Take(m, t.Request())
			ok = true
			return false
		})
		return ok
	}
	// Workers left pending by an earlier attempt first.
	for _, t := range req.Pending {
		if !claim(t, t.Version) {
			d.Unplaceable++
		}
	}
	// Then the new workers, each created and claimed in this transaction;
	// a worker that finds no machine is not created. They are built from
	// the job's template (every field of it, the job's priority) and share
	// one spec, labels and owner references.
	var workerOf *txn.JobTasks
	created := 0
	for i := have; i < workers; i++ {
		if workerOf == nil {
			workerOf = txn.NewJobTasks(job.UID, job.Name(), job.Spec)
		}
		uid := env.NewUID()
		pt := workerOf.Task(uid, job.Name()+"-w"+strconv.Itoa(i))
		t := txn.PlannedTask(uid, job.UID, pt, want)
		at := len(d.Ops)
		d.Ops = append(d.Ops, txn.CreateTask(pt))
		if !claim(t, 0) {
			d.Ops = d.Ops[:at] // no machine: do not create it
			if i < requested {
				d.Unplaceable++
			}
			break // the cell is full for this shape; later workers won't fit either
		}
		created++
	}
	// Linear speedup over the workers the job really gets: the job's work
	// (duration × requested) shared by them, not by the count the policy
	// hoped for (fragmentation or sampling can place fewer), and never
	// longer than the template's duration. The workers' shared spec is
	// still this decision's: it is set on the created ones at once.
	if duration := tmpl.GetDurationMillis(); duration > 0 && created > 0 {
		workerOf.Spec.DurationMillis = max(1, duration*int64(requested)/int64(max(have+created, requested, 1)))
	}
	return d
}
