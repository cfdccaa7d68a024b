package sim

// Multi-path: one monolithic scheduler that takes every job from one queue
// at its kind's decision time (the batch spec's for batch jobs, the
// service spec's for service jobs): fast paths for batch, still blocked
// behind a slow service decision at the head of the queue (the paper's
// Figure 6).
var _ = RegisterArchitecture(Architecture{
	Name:    "multi-path",
	Doc:     "one monolithic scheduler, each job at its kind's decision time, taking --schedulers batch=1,service=1",
	Rank:    20,
	Arrange: func(c Config) (Config, error) { return monolithic(c, "multi-path", true) },
})
