//go:build !linux

package sim

import "time"

var start = time.Now()

// threadCPUTime falls back to wall time where thread CPU time is not
// available.
func threadCPUTime() time.Duration { return time.Since(start) }
