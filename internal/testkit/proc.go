package testkit

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// WaitGone waits, at most within, for process pid to end — any process,
// not only a child — through a pidfd that becomes readable when it does
// (no polling). It returns nil once the process is gone.
func WaitGone(pid int, within time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil // gone already
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(within)
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return fmt.Errorf("process %d still runs after %v", pid, within)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}
