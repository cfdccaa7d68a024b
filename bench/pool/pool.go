// Package pool runs independent jobs on a bounded number of goroutines:
// the one worker pool of the bench's sweeps and of `omega sim --seeds`.
package pool

import (
	"context"
	"errors"
	"sync"
)

// Run calls fn(ctx, k) for every k in [0, n), at most workers at a time
// (at least one), starting them in order of k. The results are the
// caller's to keep by k (fn may write its own slot of a slice: no two
// calls share a k).
//
// The first call to fail cancels the context the others were given, and
// no k is started after that, nor after ctx ends; Run blocks until every
// call it started has returned. It returns the failure with the lowest k
// that is not a cancellation (context.Canceled), else the lowest-k
// cancellation, with that k; -1 and nil when every started call
// succeeded (when ctx ended first, some k may not have been started).
func Run(ctx context.Context, n, workers int, fn func(ctx context.Context, k int) error) (int, error) {
	if n <= 0 {
		return -1, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				if errs[k] = fn(ctx, k); errs[k] != nil {
					cancel()
				}
			}
		}()
	}
feed:
	for k := range n {
		// A canceled context starts nothing more, even when a worker is
		// also free.
		if ctx.Err() != nil {
			break
		}
		select {
		case next <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, canceled := range []bool{false, true} {
		for k, err := range errs {
			if err != nil && errors.Is(err, context.Canceled) == canceled {
				return k, err
			}
		}
	}
	return -1, nil
}
