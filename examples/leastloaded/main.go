// Command leastloaded is omega with one more scheduler: a custom placement
// policy, in one Go type, that competes with the built-in ones in `sim`.
//
//	go run ./examples/leastloaded sim --days 0.5 --machines 2000 \
//	    --schedulers leastloaded=1,service=1 --route batch=leastloaded --out /tmp/ll
//
// It places each task on the least-loaded of a few machines sampled at
// random ("power of d choices"), which spreads load instead of packing it.
package main

import (
	"github.com/omega-cell/omega/cli"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// LeastLoaded claims, for every pending task, the feasible machine with the
// lowest CPU allocation among Choices sampled ones.
type LeastLoaded struct {
	Choices int
	idx     schedulers.MachineIndex // machine uids, for random sampling
}

func (s *LeastLoaded) Kind() string { return "leastloaded" }

// Decide sees an immutable view and one job; it returns the claims to
// commit. The Runner commits them through the client library and retries
// the job on a fresh view if another scheduler got there first.
func (s *LeastLoaded) Decide(v client.View, req schedulers.Request, env schedulers.Env) schedulers.Decision {
	s.idx.Refresh(v)
	p := schedulers.NewPlacer(v, req.Placed) // remembers this decision's own claims
	d := schedulers.Decision{Considered: len(req.Pending)}
	for _, t := range req.Pending {
		var best *txn.Machine
		schedulers.Sample(&s.idx, v, p, env, t.Request(), t.Constraints(), s.Choices, 8*s.Choices,
			func(m *txn.Machine) bool {
				if best == nil || p.Used(m).CPU < p.Used(best).CPU {
					best = m
				}
				return true
			})
		if best == nil {
			d.Unplaceable++
			continue
		}
		d.Ops = append(d.Ops, txn.Claim(t.UID, best.UID, t.Request(), t.Version))
		p.Take(best, t.Request())
	}
	return d
}

func main() {
	schedulers.Register("leastloaded", func(p schedulers.Params) (schedulers.Scheduler, error) {
		return &LeastLoaded{Choices: 2}, p.Only("leastloaded")
	})
	cli.Main()
}
