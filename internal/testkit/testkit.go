// Package testkit is the builders every package's tests share: objects of
// the cell (machines, jobs, tasks) in their wire form, resources,
// deterministic uids, and a virtual clock. It imports only the schema and
// txn, so the tests of every layer can use it (internal/testkit/storekit
// holds the store helpers, for the layers above the store).
//
// The builders make the smallest valid object; a test adds what it needs
// to the message it gets back (labels, a failure domain, constraints).
package testkit

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Res builds Resources; ext is name, amount pairs ("gpu", 2).
func Res(cpu, mem int64, ext ...any) txn.Resources {
	r := txn.Resources{CPU: cpu, Memory: mem}
	for i := 0; i+1 < len(ext); i += 2 {
		if r.Ext == nil {
			r.Ext = map[string]int64{}
		}
		switch v := ext[i+1].(type) {
		case int:
			r.Ext[ext[i].(string)] = int64(v)
		case int64:
			r.Ext[ext[i].(string)] = v
		}
	}
	return r
}

// UID returns a deterministic, non-nil uid for (kind, a, b), a < 2^24.
// All three go into the first 8 bytes: the state's maps hash only those
// (internal/pmap), so uids that differ only further on would all land in
// one collision list.
func UID(kind byte, a, b uint32) uuid.UUID {
	var u uuid.UUID
	u[0] = kind
	u[1], u[2], u[3] = byte(a>>16), byte(a>>8), byte(a)
	binary.BigEndian.PutUint32(u[4:], b)
	u[15] = 1
	return u
}

// Machine is a machine of capacity, UP.
func Machine(uid uuid.UUID, name string, capacity txn.Resources) *omegav1.Machine {
	return &omegav1.Machine{
		Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: name},
		Spec: &omegav1.MachineSpec{Capacity: capacity.Proto()},
	}
}

// Task is a task requesting request, owned by job (no owner if job is the
// nil uid).
func Task(uid, job uuid.UUID, name string, request txn.Resources) *omegav1.Task {
	meta := &omegav1.ObjectMeta{Uid: uid.String(), Name: name}
	if job != uuid.Nil {
		meta.OwnerReferences = []*omegav1.OwnerReference{{Kind: "Job", Uid: job.String(), Controller: true}}
	}
	return &omegav1.Task{Meta: meta, Spec: &omegav1.TaskSpec{Resources: request.Proto()}}
}

// Job is a batch job for scheduler.
func Job(uid uuid.UUID, name, scheduler string) *omegav1.Job {
	return &omegav1.Job{
		Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: name},
		Spec: &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: scheduler},
	}
}

// IDs hands out deterministic uids from a seed and a stream (so two
// packages' tests with the same seed need not share their uids).
type IDs struct{ r *rand.Rand }

// NewIDs starts the uids of seed and stream.
func NewIDs(seed, stream uint64) *IDs { return &IDs{rand.New(rand.NewPCG(seed, stream))} }

// IDsFrom draws the uids from r (which the caller may draw from too).
func IDsFrom(r *rand.Rand) *IDs { return &IDs{r} }

// Next returns the next uid.
func (g *IDs) Next() uuid.UUID {
	u, err := uuid.NewRandomFromReader(RandReader(g.r))
	if err != nil {
		panic(err)
	}
	return u
}

// Seed returns the seed of a randomized test: the environment variable
// name if set, else a fresh one. It logs it, with how to run the test again
// on it, so a failure can be reproduced.
func Seed(t testing.TB, name string) uint64 {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		t.Logf("seed %d (from %s)", seed, name)
		return seed
	}
	seed := rand.Uint64()
	t.Logf("seed %d (rerun with %s=%d)", seed, name, seed)
	return seed
}

// RandReader adapts a seeded source to an io.Reader, eight bytes of each
// Uint64, little end first: the bytes client.RandReader gives (a test in
// client holds the two equal), without importing the client.
func RandReader(r *rand.Rand) io.Reader { return randReader{r} }

type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	for i := 0; i < len(p); i += 8 {
		v := r.r.Uint64()
		for j := 0; j < 8 && i+j < len(p); j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	return len(p), nil
}

// Clock is a virtual clock (client.Clock): Now is what the test set, and
// Sleep records the pause, advances the time by it and returns at once
// (the context's error if it has ended). One goroutine uses it.
type Clock struct {
	T      time.Time
	Sleeps []time.Duration
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{T: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return c.T }

// Sleep advances the clock by d (nothing if d is negative).
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Sleeps = append(c.Sleeps, d)
	c.T = c.T.Add(max(d, 0))
	return nil
}
