package sim

import (
	"slices"
	"time"
)

// busyBook is each runner's decision time, by simulated day: what the
// summary's busyness is made of. The actors that drive the runners book
// into it (their own loops, or an architecture's). The summary keeps two:
// every decision's time, and only the decisions that placed a task
// (Google's simulator's busyness: its Mesos framework books no time for a
// job that placed nothing).
type busyBook struct {
	daily [][]time.Duration // per runner, busy time per simulated day
	// open are, per runner, the decisions that may end after the run
	// does: those that end after the latest start booked (the end comes
	// after every start). A runner on its own loop has at most one; a
	// two-level framework deciding offers concurrently may have several.
	open [][]span
}

type span struct{ start, end time.Time }

func newBusyBook(runners int) *busyBook {
	return &busyBook{daily: make([][]time.Duration, runners), open: make([][]span, runners)}
}

// add books runner i's decision time [start, start+d) to the days it
// spans.
func (b *busyBook) add(i int, start time.Time, d time.Duration) {
	book(&b.daily[i], start.Sub(Epoch), d, 1)
	open := b.open[i][:0]
	for _, s := range b.open[i] {
		if s.end.After(start) {
			open = append(open, s)
		}
	}
	b.open[i] = append(open, span{start, start.Add(d)})
}

// days is runner i's busy time per day within a run of that duration: a
// decision that began before the end and would have ended after it counts
// up to the end.
func (b *busyBook) days(i int, duration time.Duration) []time.Duration {
	out := slices.Clone(b.daily[i])
	end := Epoch.Add(duration)
	for _, s := range b.open[i] {
		if over := s.end.Sub(maxTime(s.start, end)); over > 0 {
			book(&out, s.end.Sub(Epoch)-over, over, -1)
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
