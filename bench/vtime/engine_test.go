package vtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// logActor steps every second from Epoch+first, n times, logging each step.
type logActor struct {
	name  string
	phase Phase
	first time.Duration
	n     int
	log   *[]string
}

func (a *logActor) Start(_ context.Context, now time.Time) (Next, error) {
	return Next{At: now.Add(a.first), Phase: a.phase}, nil
}

func (a *logActor) Step(_ context.Context, now time.Time) (Next, error) {
	*a.log = append(*a.log, fmt.Sprintf("%v %s", now.Sub(Epoch), a.name))
	if a.n--; a.n == 0 {
		return Next{}, nil
	}
	return Next{At: now.Add(time.Second), Phase: a.phase}, nil
}

func newEngine(t *testing.T, o Options) *Engine {
	t.Helper()
	if o.Clock == nil {
		o.Clock = NewClock()
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// At one instant the earlier phase goes first whatever the order the actors
// were added in, and within a phase the order they were scheduled in; an
// actor that asks for nothing is not stepped again; After runs after every
// step, at its time; the clock reads the end after the run.
func TestStepsInTimeThenPhaseThenScheduleOrder(t *testing.T) {
	var log []string
	var after []time.Duration
	e := newEngine(t, Options{Duration: time.Minute, After: func(_ context.Context, now time.Time) error {
		after = append(after, now.Sub(Epoch))
		return nil
	}})
	e.Add(&logActor{name: "late-phase", phase: PhaseSample, first: time.Second, n: 3, log: &log})
	e.Add(&logActor{name: "early-phase", phase: PhaseArrive, first: time.Second, n: 2, log: &log})
	e.Add(&logActor{name: "late-phase-2", phase: PhaseSample, first: time.Second, n: 1, log: &log})
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1s early-phase", "1s late-phase", "1s late-phase-2",
		"2s early-phase", "2s late-phase",
		"3s late-phase",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("steps %q, want %q", log, want)
	}
	if e.Events() != int64(len(want)) || len(after) != len(want) || after[5] != 3*time.Second {
		t.Fatalf("%d events, After at %v: want %d, one per step", e.Events(), after, len(want))
	}
	if got := e.o.Clock.Now(); !got.Equal(Epoch.Add(time.Minute)) {
		t.Fatalf("the clock reads %v after the run, want the end", got.Sub(Epoch))
	}
}

// wakeable sleeps until woken, then asks to act after delay, in PhaseWake.
type wakeable struct {
	delay time.Duration
	steps []time.Duration
	wakes int
}

func (w *wakeable) Start(context.Context, time.Time) (Next, error) { return Next{}, nil }

func (w *wakeable) Step(_ context.Context, now time.Time) (Next, error) {
	w.steps = append(w.steps, now.Sub(Epoch))
	return Next{}, nil
}

func (w *wakeable) Wake(_ context.Context, now time.Time) (Next, error) {
	w.wakes++
	return Next{At: now.Add(w.delay), Phase: PhaseWake}, nil
}

// A Waker woken from After is stepped at the time it then asks for; woken
// again before that, to an earlier time, it is stepped once, at the earlier
// (the later entry is stale); an actor that is not a Waker keeps its time;
// a time in the past is now.
func TestWakeReschedules(t *testing.T) {
	w := &wakeable{delay: 10 * time.Second}
	var log []string
	var e *Engine
	var wi, li int
	woke := map[time.Duration]bool{}
	e = newEngine(t, Options{Duration: time.Minute, After: func(ctx context.Context, now time.Time) error {
		at := now.Sub(Epoch)
		if woke[at] {
			return nil
		}
		woke[at] = true
		switch at {
		case time.Second:
			if err := e.Wake(ctx, wi, now); err != nil { // wants 11s
				return err
			}
			w.delay = -time.Hour        // the next wake asks for the past: now
			return e.Wake(ctx, li, now) // not a Waker: nothing changes
		case 2 * time.Second:
			return e.Wake(ctx, wi, now)
		}
		return nil
	}})
	wi = e.Add(w)
	li = e.Add(&logActor{name: "ticker", phase: PhaseArrive, first: time.Second, n: 3, log: &log})
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.steps, []time.Duration{2 * time.Second}) || w.wakes != 2 {
		t.Fatalf("the waker stepped at %v after %d wakes, want once at 2s after 2", w.steps, w.wakes)
	}
	if !slices.Equal(log, []string{"1s ticker", "2s ticker", "3s ticker"}) {
		t.Fatalf("ticker %q", log)
	}
	if n, ok := e.Queued(wi); ok {
		t.Fatalf("the waker still queued at %v", n)
	}
}

// EndAt moves the end: nothing after it is stepped, an end before now is
// now, and Duration follows. Every with a period of 0 acts once.
func TestEndAtAndEvery(t *testing.T) {
	var ticks, onces []time.Duration
	var e *Engine
	e = newEngine(t, Options{Duration: time.Hour})
	e.Add(Every(0, time.Second, PhaseSample, func(_ context.Context, now time.Time) error {
		ticks = append(ticks, now.Sub(Epoch))
		if now.Sub(Epoch) == 5*time.Second {
			e.EndAt(Epoch.Add(time.Second)) // before now: now
		}
		return nil
	}))
	e.Add(Every(2*time.Second, 0, PhaseArrive, func(_ context.Context, now time.Time) error {
		onces = append(onces, now.Sub(Epoch))
		return nil
	}))
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(ticks) != 6 || ticks[5] != 5*time.Second || !slices.Equal(onces, []time.Duration{2 * time.Second}) {
		t.Fatalf("ticks %v, once %v", ticks, onces)
	}
	if e.Duration() != 5*time.Second || !e.o.Clock.Now().Equal(Epoch.Add(5*time.Second)) {
		t.Fatalf("duration %v, clock %v: want the run to end at 5s", e.Duration(), e.o.Clock.Now().Sub(Epoch))
	}
}

// An actor's error stops the run, naming the time; so does After's; a
// negative duration or a missing clock is refused; the clock refuses to
// sleep.
func TestErrors(t *testing.T) {
	boom := errors.New("boom")
	e := newEngine(t, Options{Duration: time.Minute})
	e.Add(Every(3*time.Second, 0, PhaseCommit, func(context.Context, time.Time) error { return boom }))
	if err := e.Run(context.Background()); !errors.Is(err, boom) || !strings.Contains(err.Error(), "sim at 3s") {
		t.Fatalf("Run: %v", err)
	}
	e = newEngine(t, Options{Duration: time.Minute, After: func(context.Context, time.Time) error { return boom }})
	e.Add(Every(time.Second, 0, PhaseCommit, func(context.Context, time.Time) error { return nil }))
	if err := e.Run(context.Background()); !errors.Is(err, boom) || !strings.Contains(err.Error(), "sim at 1s") {
		t.Fatalf("Run with a failing After: %v", err)
	}
	if _, err := New(Options{Clock: NewClock(), Duration: -1}); err == nil || !strings.Contains(err.Error(), "Duration") {
		t.Fatalf("a negative duration: %v", err)
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Clock") {
		t.Fatalf("no clock: %v", err)
	}
	if err := NewClock().Sleep(context.Background(), time.Second); err == nil {
		t.Fatal("the virtual clock slept")
	}
}

// The queue pops entries in (time, phase, seq) order, whatever the order
// they were pushed in: the model is the entries sorted.
func TestQueueOrderProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 200).Draw(t, "n")
		var q queue
		var model []entry
		for i := range n {
			x := entry{
				at:    Epoch.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "at")) * time.Second),
				phase: Phase(rapid.IntRange(0, int(PhaseWake)).Draw(t, "phase")),
				seq:   uint64(i + 1),
				slot:  i,
			}
			q.push(x)
			model = append(model, x)
			if rapid.Bool().Draw(t, "pop") && q.Len() > 0 {
				slices.SortFunc(model, func(a, b entry) int {
					if a.less(b) {
						return -1
					}
					return 1
				})
				if got := q.pop(); got != model[0] {
					t.Fatalf("popped %+v, want %+v", got, model[0])
				}
				model = model[1:]
			}
		}
		slices.SortFunc(model, func(a, b entry) int {
			if a.less(b) {
				return -1
			}
			return 1
		})
		for _, want := range model {
			if got := q.pop(); got != want {
				t.Fatalf("popped %+v, want %+v", got, want)
			}
		}
		if q.Len() != 0 {
			t.Fatalf("%d left", q.Len())
		}
	})
}
