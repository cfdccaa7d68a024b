package client

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
)

func uidClient(t *testing.T, st *store.Store, seed uint64, uuids *bytes.Reader) *Client {
	t.Helper()
	cfg := Config{Component: "ids", Clock: newFakeClock(), Rand: rand.New(rand.NewPCG(seed, 7))}
	if uuids != nil {
		cfg.UUIDs = uuids
	}
	c, err := New(context.Background(), inproc.New(st), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNewUIDDeterministic: the same seed gives the same ids, in order;
// every id is a distinct random (version 4, RFC 4122) uuid; another seed
// gives other ids.
func TestNewUIDDeterministic(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 0)
	for seed := uint64(1); seed <= 3; seed++ {
		a, b := uidClient(t, st, seed, nil), uidClient(t, st, seed, nil)
		other := uidClient(t, st, seed+100, nil)
		seen := map[uuid.UUID]bool{}
		for i := range 5000 {
			u, v, w := a.NewUID(), b.NewUID(), other.NewUID()
			if u != v {
				t.Fatalf("seed %d: id %d is %s and %s", seed, i, u, v)
			}
			if u == w {
				t.Fatalf("seeds %d and %d both gave %s at %d", seed, seed+100, u, i)
			}
			if u == uuid.Nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
				t.Fatalf("seed %d: id %d %s is not a random uuid (version %d, variant %v)", seed, i, u, u.Version(), u.Variant())
			}
			if seen[u] {
				t.Fatalf("seed %d: id %s repeated at %d", seed, u, i)
			}
			seen[u] = true
		}
	}
}

// TestNewUIDUsesInjectedEntropy: Config.UUIDs, when set, is where ids come
// from.
func TestNewUIDUsesInjectedEntropy(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 0)
	raw := bytes.Repeat([]byte{0xab}, 32)
	c := uidClient(t, st, 1, bytes.NewReader(raw))
	want, err := uuid.NewRandomFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.NewUID(); got != want {
		t.Fatalf("NewUID = %s, want %s from the injected bytes", got, want)
	}
	c.NewUID() // the second 16 bytes
	defer func() {
		if recover() == nil {
			t.Fatalf("NewUID with exhausted entropy did not panic")
		}
	}()
	c.NewUID()
}

// TestRandReaderFollowsTheSource: RandReader is a pure function of the
// source's stream, whatever the read sizes.
func TestRandReaderFollowsTheSource(t *testing.T) {
	whole := make([]byte, 64)
	if _, err := RandReader(rand.New(rand.NewPCG(4, 4))).Read(whole); err != nil {
		t.Fatal(err)
	}
	r := RandReader(rand.New(rand.NewPCG(4, 4)))
	var pieces []byte
	for _, n := range []int{8, 16, 8, 32} {
		p := make([]byte, n)
		if _, err := r.Read(p); err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p...)
	}
	if !bytes.Equal(whole, pieces) {
		t.Fatalf("reads in pieces of whole words differ from one read:\n%x\n%x", whole, pieces)
	}
	if bytes.Equal(whole[:16], make([]byte, 16)) {
		t.Fatalf("reader produced zeros")
	}
}

// TestKitRandReaderIsTheClients: the test kit's reader (which may not
// import the client) gives the very bytes RandReader does, so uids drawn
// in tests through either match.
func TestKitRandReaderIsTheClients(t *testing.T) {
	a, b := make([]byte, 77), make([]byte, 77)
	RandReader(rand.New(rand.NewPCG(3, 4))).Read(a)
	testkit.RandReader(rand.New(rand.NewPCG(3, 4))).Read(b)
	if string(a) != string(b) {
		t.Fatal("the kit's RandReader differs from the client's")
	}
}
