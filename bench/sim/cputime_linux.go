package sim

import (
	"syscall"
	"time"
)

// threadCPUTime is the calling thread's CPU time (user + system). The
// engine locks its goroutine to one thread while measuring.
func threadCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
