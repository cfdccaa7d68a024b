package schedulers

import (
	"bytes"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Service is the paper's careful service scheduler: for each task it
// samples several feasible machines and picks the best by score — tightest
// fit (Borg's best fit), plus a penalty for every task of the same job
// already in the machine's failure domain, so a job's replicas spread over
// failure domains (a machine that declares none is a domain of its own,
// SpreadDomain) — and honours constraints (attribute equals / not equals,
// different machines). Slow by design: the Omega paper gives it a long
// decision time.
type Service struct {
	// Candidates is how many feasible machines are scored per task; more
	// (within Limit) while the best of them is in a failure domain that
	// already holds a task of the job and some domain holds none. Default 16.
	Candidates int
	// Limit bounds the machines examined per task. Default 2,000.
	Limit int
	// SpreadWeight is the score penalty per task of the job already in a
	// machine's failure domain; a best-fit score lies in [0,1], so a weight
	// of 1 prefers an empty domain over any fit. Default 1.
	SpreadWeight float64
	idx          MachineIndex
	// Placement: PlacementBestFit (the zero value too) is the scored
	// sample above; PlacementRandomFirstFit the paper's simulator's, with
	// no spreading (FirstFit).
	Placement Placement
	ff        FirstFit
}

// NewService returns a service scheduler with the defaults.
func NewService() *Service { return &Service{Candidates: 16, Limit: 2000, SpreadWeight: 1} }

func (s *Service) Kind() string { return "service" }

func (s *Service) Decide(v client.View, req Request, env Env) Decision {
	x := env.index(&s.idx)
	x.Refresh(v)
	p := NewPlacer(v, req.Placed)
	d := Decision{AllOrNothing: req.Job.Gang(), Considered: len(req.Pending)}
	if s.Placement == PlacementRandomFirstFit {
		s.ff.placeAll(x, v, p, env, req.Pending, &d)
		return gangWhole(d)
	}
	for _, class := range Classes(req.Pending) {
		given := false // a task of the class found no machine
		for _, t := range class.Tasks {
			if given {
				// Tasks of a class are interchangeable and a decision's
				// claims only take room: when a scan found no machine for
				// one of them, the next cannot find one either where the
				// scan covers the cell (it is no larger than Limit), and
				// where the cell is larger, Borg's answer is the same —
				// it scores one task per equivalence class. The scan's
				// random draws are made all the same, so a cell within
				// Limit decides exactly as if every task were scanned.
				SkipSample(x, env)
				d.Unplaceable++
				continue
			}
			var best *txn.Machine
			var bestScore float64
			found := 0
			Sample(x, v, p, env, class.Request, class.Constraints, s.Limit, s.Limit, func(m *txn.Machine) bool {
				score := p.BestFitScore(m, class.Request) + s.SpreadWeight*float64(p.OnDomain(m))
				if best == nil || score < bestScore || (score == bestScore && bytes.Compare(m.UID[:], best.UID[:]) < 0) {
					best, bestScore = m, score
				}
				found++
				// Candidates are enough unless the best one is in a domain
				// that already holds a task of the job while some domain
				// holds none: then look on (within Limit) for that domain,
				// or a sample of 16 misses the last empty domains often.
				return found < s.Candidates || (s.SpreadWeight > 0 && p.OnDomain(best) > 0 && p.DomainsUsed() < x.Domains())
			})
			if best == nil {
				d.Unplaceable++
				given = true
				continue
			}
			d.Ops = append(d.Ops, txn.Claim(t.UID, best.UID, class.Request, t.Version))
			p.Take(best, class.Request)
		}
	}
	return gangWhole(d)
}
