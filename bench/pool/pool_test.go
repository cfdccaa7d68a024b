package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRunCallsEveryKOnceWithinTheBound(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 100} {
		const n = 50
		var running, peak atomic.Int32
		calls := make([]int, n)
		k, err := Run(context.Background(), n, workers, func(ctx context.Context, k int) error {
			r := running.Add(1)
			for {
				p := peak.Load()
				if r <= p || peak.CompareAndSwap(p, r) {
					break
				}
			}
			calls[k]++
			running.Add(-1)
			return nil
		})
		if k != -1 || err != nil {
			t.Fatalf("workers %d: Run = %d, %v; want -1, nil", workers, k, err)
		}
		for k, c := range calls {
			if c != 1 {
				t.Fatalf("workers %d: k %d called %d times", workers, k, c)
			}
		}
		if bound := int32(max(1, min(workers, n))); peak.Load() > bound {
			t.Fatalf("workers %d: %d calls at once, bound %d", workers, peak.Load(), bound)
		}
	}
}

func TestRunStartsInOrderOfK(t *testing.T) {
	var mu sync.Mutex
	var started []int
	Run(context.Background(), 20, 1, func(ctx context.Context, k int) error {
		mu.Lock()
		started = append(started, k)
		mu.Unlock()
		return nil
	})
	for i, k := range started {
		if i != k {
			t.Fatalf("started %v, want 0..19 in order", started)
		}
	}
}

func TestFirstFailureCancelsTheRest(t *testing.T) {
	boom := errors.New("boom")
	// k 0 waits for its context's end, so it returns a cancellation after
	// k 1 fails: Run names k 1's failure, not k 0's lower-k cancellation,
	// and starts nothing after k 1.
	var started atomic.Int32
	k, err := Run(context.Background(), 10, 2, func(ctx context.Context, k int) error {
		started.Add(1)
		switch k {
		case 0:
			<-ctx.Done()
			return ctx.Err()
		case 1:
			return boom
		}
		return nil
	})
	if k != 1 || !errors.Is(err, boom) {
		t.Fatalf("Run = %d, %v; want 1, boom", k, err)
	}
	if s := started.Load(); s != 2 {
		t.Fatalf("%d calls started, want 2 (none after the failure)", s)
	}
}

func TestCanceledContextStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	k, err := Run(ctx, 5, 2, func(ctx context.Context, k int) error { called = true; return nil })
	if called || k != -1 || err != nil {
		t.Fatalf("Run on a canceled context: called %v, returned %d, %v", called, k, err)
	}
}

func TestOnlyCancellationsReportTheLowest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	k, err := Run(ctx, 3, 3, func(ctx context.Context, k int) error {
		if k == 2 {
			cancel()
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if k != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %d, %v; want 0, context.Canceled", k, err)
	}
}
