// Package storekit is the store helpers the tests of the layers above the
// store share (client, schedulers, agents, the bench): a store opened for a
// test, closed by the test's cleanup, its close error reported.
package storekit

import (
	"log/slog"
	"testing"

	"github.com/omega-cell/omega/store"
)

// Options returns test options: in memory (DurabilityNone) or durable in a
// temporary directory of t's (DurabilitySync), invariants checked after
// every commit (a broken one panics the commit path), logs dropped.
func Options(t testing.TB, d store.Durability) store.Options {
	o := store.Options{Durability: store.DurabilityNone}
	if d == store.DurabilitySync {
		o = store.DefaultOptions(t.TempDir())
	}
	o.CheckInvariants = true
	o.Logger = slog.New(slog.DiscardHandler)
	return o
}

// Open opens a store with o and closes it when t ends, failing t if the
// close fails.
func Open(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(o)
	if err != nil {
		t.Fatalf("open store (%s): %v", o.Durability, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}
