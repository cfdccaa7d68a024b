package schedulers

import (
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
)

// Monolithic is one scheduler for every job, the Omega paper's monolithic
// baselines (section 4.1): jobs wait in one queue and are decided one at a
// time, each placed by the policy of its kind (a service job as the
// service scheduler places it, any other as the batch scheduler does).
// Which baseline it is, the decision times of its Runner say: one time for
// every job is the single-path scheduler; a time per job kind
// (RunnerConfig.ByKind) the multi-path one, whose fast batch decisions
// still wait behind a slow service decision at the head of the queue.
type Monolithic struct {
	batch   *Batch
	service *Service
}

// NewMonolithic returns the monolithic scheduler with the batch and service
// policies' defaults.
func NewMonolithic() *Monolithic { return &Monolithic{batch: NewBatch(), service: NewService()} }

// SetPlacement places every job by pl: each kind's own policy
// (PlacementBestFit), or the paper's simulator's randomized first fit.
func (m *Monolithic) SetPlacement(pl Placement) { m.batch.Placement, m.service.Placement = pl, pl }

// Kind is "monolithic".
func (m *Monolithic) Kind() string { return "monolithic" }

// Decide places the job by its kind's policy.
func (m *Monolithic) Decide(v client.View, req Request, env Env) Decision {
	if req.Job != nil && req.Job.Kind() == omegav1.JobKind_JOB_KIND_SERVICE {
		return m.service.Decide(v, req, env)
	}
	return m.batch.Decide(v, req, env)
}

// readsPlaced: a service job's decision spreads over its placed tasks; any
// other is the batch scheduler's.
func (m *Monolithic) readsPlaced(req Request) bool {
	if req.Job != nil && req.Job.Kind() == omegav1.JobKind_JOB_KIND_SERVICE {
		return true
	}
	return m.batch.readsPlaced(req)
}
