package sim

import (
	"errors"
	"testing"
	"time"
)

// countSource yields n arrivals at 1s, 2s, ... and then fails with err.
type countSource struct {
	n, i int
	err  error
}

func (s *countSource) Next() (Arrival, bool) {
	if s.i >= s.n {
		return Arrival{}, false
	}
	s.i++
	return Arrival{At: time.Duration(s.i) * time.Second}, true
}

func (s *countSource) Err() error { return s.err }

// TestAheadSourceSameArrivals: the arrivals come through in the source's
// order, across batch boundaries, and its Err after them.
func TestAheadSourceSameArrivals(t *testing.T) {
	for _, n := range []int{0, 1, aheadBatch - 1, aheadBatch, aheadBatch + 1, aheadBatch*aheadDepth*3 + 7} {
		boom := errors.New("boom")
		s := newAheadSource(&countSource{n: n, err: boom})
		for i := 1; i <= n; i++ {
			a, ok := s.Next()
			if !ok || a.At != time.Duration(i)*time.Second {
				t.Fatalf("n=%d: arrival %d = %v, %v; want %v", n, i, a.At, ok, time.Duration(i)*time.Second)
			}
		}
		if _, ok := s.Next(); ok {
			t.Fatalf("n=%d: an arrival after the last", n)
		}
		if err := s.Err(); !errors.Is(err, boom) {
			t.Fatalf("n=%d: Err() = %v, want the source's", n, err)
		}
		s.Close()
		s.Close() // idempotent
	}
}

// TestAheadSourceCloseEarly: closing before the arrivals are read stops the
// generator (Close returns) and reads no further than its buffer.
func TestAheadSourceCloseEarly(t *testing.T) {
	src := &countSource{n: 1 << 20}
	s := newAheadSource(src)
	if a, ok := s.Next(); !ok || a.At != time.Second {
		t.Fatalf("first arrival = %v, %v", a.At, ok)
	}
	s.Close()
	if max := aheadBatch * (aheadDepth + 3); src.i > max {
		t.Fatalf("the generator read %d arrivals after Close, want at most %d", src.i, max)
	}
}
