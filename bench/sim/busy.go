package sim

import (
	"slices"
	"time"
)

// busyBook is each runner's decision time, by simulated day: what the
// summary's busyness is made of. The actors that drive the runners book
// into it (their own loops, or an architecture's).
type busyBook struct {
	daily  [][]time.Duration // per runner, busy time per simulated day
	busyTo []time.Time       // per runner, the end of its last decision booked
}

func newBusyBook(runners int) *busyBook {
	return &busyBook{daily: make([][]time.Duration, runners), busyTo: make([]time.Time, runners)}
}

// add books runner i's decision time [start, start+d) to the days it
// spans.
func (b *busyBook) add(i int, start time.Time, d time.Duration) {
	book(&b.daily[i], start.Sub(Epoch), d, 1)
	if end := start.Add(d); end.After(b.busyTo[i]) {
		b.busyTo[i] = end
	}
}

// days is runner i's busy time per day within a run of that duration: a
// decision that began before the end and would have ended after it counts
// up to the end. (A runner decides one thing at a time, so only its last
// decision can cross the end.)
func (b *busyBook) days(i int, duration time.Duration) []time.Duration {
	out := slices.Clone(b.daily[i])
	end := Epoch.Add(duration)
	if over := b.busyTo[i].Sub(end); over > 0 {
		book(&out, duration, over, -1)
	}
	return out
}

// book adds sign x the time [off, off+d) from the epoch to the days of
// daily it spans.
func book(daily *[]time.Duration, off, d time.Duration, sign time.Duration) {
	const day = 24 * time.Hour
	for d > 0 {
		k := int(off / day)
		for len(*daily) <= k {
			*daily = append(*daily, 0)
		}
		part := min(d, time.Duration(k+1)*day-off)
		(*daily)[k] += sign * part
		off += part
		d -= part
	}
}
