package live

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// fakeMember is a gossip member whose server is gone until it rejoins.
type fakeMember struct {
	alive   atomic.Bool
	rejoins atomic.Int32
}

func (m *fakeMember) Addr() string      { return "127.0.0.1:7946" }
func (m *fakeMember) ServerAlive() bool { return m.alive.Load() }
func (m *fakeMember) Rejoin() error {
	m.rejoins.Add(1)
	m.alive.Store(true)
	return nil
}
func (m *fakeMember) Close() {}

// fakeProber fails every probe but those of hang, which wait for their
// context to end, as a probe of a hung process would until its timeout.
type fakeProber struct {
	hang     uuid.UUID
	inFlight atomic.Int32
}

func (p *fakeProber) Ready() <-chan struct{} { return nil }
func (p *fakeProber) Probe(ctx context.Context, uid uuid.UUID, _ *omegav1.HealthCheck) error {
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	if uid == p.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return errors.New("test: unhealthy")
}

// The live driver, on the wall clock: it rejoins the membership once the
// server is gone from it, runs the probes the core asks for and hands
// their answers to the next step (a task failing its checks is reported
// unhealthy), and when its context ends it returns nil after every probe
// it started has returned.
func TestDriveRejoinsProbesAndStops(t *testing.T) {
	h := newHarness(t)
	u := h.place("web", taskOpts{policy: omegav1.RestartPolicy_RESTART_POLICY_NEVER, check: execCheck(10*time.Millisecond, 2)})
	hung := h.place("hung", taskOpts{check: execCheck(10*time.Millisecond, 2)})
	m, p := &fakeMember{}, &fakeProber{hang: hung}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drive(ctx, h.core, p, m, time.Millisecond, slog.New(slog.DiscardHandler)) }()
	// Wait, at most 30 s, waking on the store's revisions or every 10 ms
	// for what the store does not show.
	w, err := h.st.Watch(h.st.Revision())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := h.st.Snapshot()
		tk, ok := s.Task(u)
		if ok && tk.Message() == "unhealthy: stopping" && m.rejoins.Load() > 0 && p.inFlight.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			msg := ""
			if ok {
				msg = tk.Message()
			}
			t.Fatalf("within 30 s: task %q, rejoins %d, probes in flight %d; want unhealthy, a rejoin, a probe hung", msg, m.rejoins.Load(), p.inFlight.Load())
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		w.Next(wctx, 0)
		wcancel()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("drive: %v, want nil when its context ends", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("drive did not return within 30 s of its context's end")
	}
	if n := p.inFlight.Load(); n != 0 {
		t.Fatalf("drive returned with %d probes still running", n)
	}
	if n := m.rejoins.Load(); n != 1 {
		t.Fatalf("%d rejoins, want 1: the server was back after the first", n)
	}
}
