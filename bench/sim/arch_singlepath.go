package sim

// Single-path: one monolithic scheduler that takes every job from one
// queue at one decision time, the service scheduler's (the paper's Figure
// 5 sweeps it).
var _ = RegisterArchitecture(Architecture{
	Name:    "single-path",
	Doc:     "one monolithic scheduler, every job at the service scheduler's decision time, taking --schedulers batch=1,service=1",
	Rank:    10,
	Arrange: func(c Config) (Config, error) { return monolithic(c, "single-path", false) },
})
