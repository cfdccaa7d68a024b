package sim

// aheadSource generates a Source's arrivals on a goroutine of its own, a
// batch ahead of the engine: the workload generator's job and task objects
// (3% of the engine's thread on a day of 10,000 machines) are made on the
// other core while the engine commits. The source is read in its own order
// by one goroutine at a time, so the arrivals, and the run, are the same.
// Close stops the generator; an engine that stops early must call it.
type aheadSource struct {
	batches chan []Arrival
	stop    chan struct{}
	done    chan struct{}
	cur     []Arrival
	err     error // the source's Err, read after done
	src     Source
}

// aheadBatch is how many arrivals go over the channel at a time; aheadDepth
// how many batches wait. 4 × 64 arrivals is a few minutes of a 10,000-machine
// cell's submissions and a few megabytes of objects.
const (
	aheadBatch = 64
	aheadDepth = 4
)

func newAheadSource(src Source) *aheadSource {
	s := &aheadSource{batches: make(chan []Arrival, aheadDepth), stop: make(chan struct{}), done: make(chan struct{}), src: src}
	go s.run()
	return s
}

func (s *aheadSource) run() {
	defer close(s.done)
	defer close(s.batches)
	for {
		b := make([]Arrival, 0, aheadBatch)
		for len(b) < aheadBatch {
			a, ok := s.src.Next()
			if !ok {
				break
			}
			b = append(b, a)
		}
		if len(b) > 0 {
			select {
			case s.batches <- b:
			case <-s.stop:
				return
			}
		}
		if len(b) < aheadBatch {
			if e, ok := s.src.(interface{ Err() error }); ok {
				s.err = e.Err()
			}
			return
		}
	}
}

// Next returns the next arrival, waiting for the generator if it is behind.
func (s *aheadSource) Next() (Arrival, bool) {
	for len(s.cur) == 0 {
		b, ok := <-s.batches
		if !ok {
			<-s.done // the source's Err is set
			return Arrival{}, false
		}
		s.cur = b
	}
	a := s.cur[0]
	s.cur[0] = Arrival{}
	s.cur = s.cur[1:]
	return a, true
}

// Err reports why the source stopped early, if it did; it is meaningful
// once Next has reported false.
func (s *aheadSource) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close stops the generator and waits for it. Idempotent.
func (s *aheadSource) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}
