package sim

import (
	"encoding/binary"
	"io"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/bench/workload"
)

// genSource adapts a workload generator to the engine.
type genSource struct {
	gen   *workload.Generator
	ids   io.Reader
	route map[string]string
	share map[string]float64
	err   error
}

// Err reports why the source stopped early, if it did.
func (s *genSource) Err() error { return s.err }

func (s *genSource) Next() (Arrival, bool) {
	a, ok := s.gen.Next()
	if !ok {
		return Arrival{}, false
	}
	job, tasks, err := a.Objects(s.ids, Epoch.UnixNano())
	if err != nil {
		s.err = err
		return Arrival{}, false
	}
	job.Spec.Scheduler = RouteJob(s.route, s.share, job.Spec.GetScheduler(), job.Meta.GetUid())
	return Arrival{At: a.Submit, Job: job, Tasks: tasks}, true
}

// RouteJob is the scheduler a job of kind (named for its kind's scheduler)
// goes to under Config.Route and Config.RouteShare: route's, for the share
// of the jobs share gives by their uids (every job when share names no
// share), or its kind's own.
func RouteJob(route map[string]string, share map[string]float64, kind, uid string) string {
	if route[kind] == "" {
		return kind
	}
	if sh, ok := share[kind]; ok && routedShare(uid) >= sh {
		return kind
	}
	return route[kind]
}

// routedShare places a job in [0, 1) by its uid's first 8 bytes (random,
// from the seeded source of uids), for RouteShare.
func routedShare(uid string) float64 {
	u, err := uuid.Parse(uid)
	if err != nil {
		return 0
	}
	return float64(binary.BigEndian.Uint64(u[:8])>>11) / (1 << 53)
}
