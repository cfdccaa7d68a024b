package live

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/omega-cell/omega/membership"
)

// The bridge on the in-memory network: each instance of a kind is
// delivered the kind's live instances (not another kind's), the newest
// list replacing one not taken, and an instance that closes drops out of
// the others' lists.
func TestMembershipBridge(t *testing.T) {
	net := membership.NewMemNetwork(membership.ServerName, "scheduler/batch/a", "scheduler/batch/b", "scheduler/batch/c", "scheduler/service/s")
	t.Cleanup(net.Close)
	cfg := func(name string, join ...string) membership.Config {
		return membership.Config{Profile: "local", Transport: net.Transport(name), Join: join, Tune: membership.Fast}
	}
	srvCfg := cfg(membership.ServerName)
	srvCfg.Name, srvCfg.Meta = membership.ServerName, membership.Server()
	srv, err := membership.Start(srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	join := func(kind, instance string) *Membership {
		m, err := JoinMembership(cfg("scheduler/"+kind+"/"+instance, membership.Addr(srv)), kind, instance)
		if err != nil {
			t.Fatal(err)
		}
		m.Logger = slog.New(slog.DiscardHandler)
		done := make(chan struct{})
		go func() { defer close(done); m.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done; m.Close(0) })
		return m
	}
	// awaitList takes lists from m until one is want, at most within.
	awaitList := func(m *Membership, want ...string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		var last []string
		for {
			select {
			case last = <-m.Members():
				if slices.Equal(last, want) {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no list %v within 30 s; last %v", m.instance, want, last)
			}
		}
	}

	a := join("batch", "a")
	awaitList(a, "a")
	b := join("batch", "b")
	s := join("service", "s")
	awaitList(a, "a", "b")
	awaitList(b, "a", "b")
	awaitList(s, "s")

	c := join("batch", "c")
	awaitList(a, "a", "b", "c")
	awaitList(c, "a", "b", "c")
	if err := b.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	awaitList(a, "a", "c")
	awaitList(c, "a", "c")
	select {
	case got := <-s.Members():
		t.Fatalf("the service instance was told of the batch instances: %v", got)
	default:
	}
}

// The bridge never waits for its Driver: a list not taken is replaced by
// the newest, and the one pending is always the newest.
func TestMembershipBridgeNewestReplaces(t *testing.T) {
	var mu sync.Mutex
	current := []string{"a"}
	called := make(chan struct{})
	m := &Membership{changes: membership.NewChanges(), kind: "batch", instance: "a", members: make(chan []string, 1), Logger: slog.New(slog.DiscardHandler),
		list: func() []string {
			mu.Lock()
			defer mu.Unlock()
			called <- struct{}{}
			return slices.Clone(current)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	await := func(what string) {
		t.Helper()
		select {
		case <-called:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the bridge did not read the membership within 30 s (stuck delivering?)", what)
		}
	}
	await("the first list")
	// Each change, untaken; a second read of the same list after each
	// means the change's delivery is done (Run reads again only then).
	for _, names := range [][]string{{"a", "b"}, {"a", "b", "c"}, {"a", "c"}} {
		mu.Lock()
		current = names
		mu.Unlock()
		m.changes.Poke()
		await(fmt.Sprint(names))
		m.changes.Poke()
		await(fmt.Sprint(names, " again"))
	}
	if got := <-m.Members(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("the list pending %v, want the newest [a c]", got)
	}
	select {
	case got := <-m.Members():
		t.Fatalf("a second list pending: %v", got)
	default:
	}
	// A list without this instance (not gossiped to itself yet) has it.
	mu.Lock()
	current = []string{"b"}
	mu.Unlock()
	m.changes.Poke()
	await("a list without a")
	if got := <-m.Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a list without the instance itself delivered as %v, want [a b]", got)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run after its context's cancel: %v", err)
	}
	done <- nil
}
