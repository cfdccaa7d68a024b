package sim

// Shared state, Omega's: Config.Schedulers run as they are, each deciding
// on its own view of the cell and committing optimistically.
var _ = RegisterArchitecture(Architecture{
	Name: "shared",
	Doc:  "the schedulers on shared state, each deciding on its own view and committing optimistically, as Omega",
	Rank: 30,
})
