package schedulers

import (
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Batch is the paper's fast batch scheduler: randomized first fit. For each
// pending task it examines machines in random order and claims the first
// that fits.
type Batch struct {
	// Tries bounds the machines examined per task before the task is left
	// pending for a later attempt. Default 64.
	Tries int
	// Placement: PlacementBestFit (the zero value too) is the bounded
	// randomized first fit above; PlacementRandomFirstFit the paper's
	// simulator's, unbounded (FirstFit).
	Placement Placement
	idx       MachineIndex
	ff        FirstFit
}

// NewBatch returns a batch scheduler with the defaults.
func NewBatch() *Batch { return &Batch{Tries: 64} }

func (b *Batch) Kind() string { return "batch" }

func (b *Batch) Decide(v client.View, req Request, env Env) Decision {
	x := env.index(&b.idx)
	x.Refresh(v)
	p := NewPlacer(v, req.Placed)
	d := Decision{AllOrNothing: req.Job.Gang(), Considered: len(req.Pending), Ops: make([]txn.Op, 0, len(req.Pending))}
	if b.Placement == PlacementRandomFirstFit {
		b.ff.placeAll(x, v, p, env, req.Pending, &d)
		return gangWhole(d)
	}
	for _, t := range req.Pending {
		placed := false
		Sample(x, v, p, env, t.Request(), t.Constraints(), 1, b.Tries, func(m *txn.Machine) bool {
			d.Ops = append(d.Ops, txn.Claim(t.UID, m.UID, t.Request(), t.Version))
			p.Take(m, t.Request())
			placed = true
			return false
		})
		if !placed {
			d.Unplaceable++
		}
	}
	return gangWhole(d)
}

// readsPlaced: the job's placed tasks matter to a batch decision only
// through a DIFFERENT_MACHINES constraint (the batch scheduler does not
// spread).
func (b *Batch) readsPlaced(req Request) bool {
	for _, t := range req.Pending {
		for _, c := range t.Constraints() {
			if c.GetOperator() == omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES {
				return true
			}
		}
	}
	return false
}
