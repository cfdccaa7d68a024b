package schedulers

import (
	"github.com/google/uuid"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// The faulty schedulers of the "don't expose raw state" experiment (issue
// 10): each is the batch scheduler with one small, named bug, the kind a
// store that takes raw state at its word lets persist. The simulation's
// registry (bench/sim: sim.NewScheduler) runs each under its name, beside
// the correct ones (route the batch jobs to it: omega sim --schedulers
// faulty-units=1,service=1 --route batch=faulty-units); the production
// registry (New, Kinds), which `omega scheduler --kind` asks, does not
// have them.

// UnitBug declares its claims' memory in MiB where the store counts bytes:
// every claim declares 1/1,048,576 of the memory its task requests, so a
// raw store charges the machine almost nothing and over-commits it.
type UnitBug struct{ batch *Batch }

// Outdated predates the "gpu" resource dimension: it places as the batch
// scheduler does, but its claims reserve only the dimensions it knows (cpu
// and memory), never a GPU, so GPU machines' GPUs are handed out again.
type Outdated struct{ batch *Batch }

// Thief does not know what it owns: it takes every batch job as its own
// (Shadows), racing the batch scheduler the job was routed to, and also
// claims, in each attempt, a pending task of another job (the first other
// job of the view with a pending task that fits on the machine it chose
// for its own job's first task). Where it wins the race, a task of a job
// another scheduler owns carries its claim.
type Thief struct{ batch *Batch }

// Shadows is the kind whose jobs the thief takes though none is routed to
// it.
func (*Thief) Shadows() string { return "batch" }

// NewUnitBug, NewOutdated and NewThief return the faulty schedulers, each
// over the batch scheduler's defaults.
func NewUnitBug() *UnitBug   { return &UnitBug{batch: NewBatch()} }
func NewOutdated() *Outdated { return &Outdated{batch: NewBatch()} }
func NewThief() *Thief       { return &Thief{batch: NewBatch()} }

// Kind is the name the simulation's registry runs each under.
func (*UnitBug) Kind() string  { return "faulty-units" }
func (*Outdated) Kind() string { return "faulty-outdated" }
func (*Thief) Kind() string    { return "faulty-thief" }

// Decide is the batch scheduler's decision with the fault's bug.

func (s *UnitBug) Decide(v client.View, req Request, env Env) Decision {
	d := s.batch.Decide(v, req, env)
	for i := range d.Ops {
		if d.Ops[i].Kind == txn.OpClaim {
			d.Ops[i].Resources.Memory >>= 20
		}
	}
	return d
}

func (s *Outdated) Decide(v client.View, req Request, env Env) Decision {
	d := s.batch.Decide(v, req, env)
	for i := range d.Ops {
		if d.Ops[i].Kind == txn.OpClaim {
			d.Ops[i].Resources.Ext = nil
		}
	}
	return d
}

func (s *Thief) Decide(v client.View, req Request, env Env) Decision {
	d := s.batch.Decide(v, req, env)
	var machine uuid.UUID
	for _, op := range d.Ops {
		if op.Kind == txn.OpClaim {
			machine = op.Machine
			break
		}
	}
	if machine == uuid.Nil || req.Job == nil {
		return d
	}
	m, ok := v.Machine(machine)
	if !ok {
		return d
	}
	p := NewPlacer(v, nil)
	for _, op := range d.Ops {
		if op.Kind == txn.OpClaim {
			if mm, ok := v.Machine(op.Machine); ok {
				p.Take(mm, op.Resources)
			}
		}
	}
	// The view's jobs in its range order, which depends only on the set of
	// uids: the same view steals the same task.
	var stolen *txn.Task
	v.RangeJobs(func(j *txn.Job) bool {
		if j.UID == req.Job.UID {
			return true
		}
		v.RangePendingTasks(j.UID, func(t *txn.Task) bool {
			if p.Feasible(m, t.Request(), nil) {
				stolen = t
				return false
			}
			return true
		})
		return stolen == nil
	})
	if stolen != nil {
		d.Ops = append(d.Ops, txn.Claim(stolen.UID, m.UID, stolen.Request(), stolen.Version))
	}
	return d
}
