package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// raceSetup is one configuration of the race between two schedulers.
type raceSetup struct {
	durability store.Durability
	transport  string // "shared", "watch", or "watch-tiny-history"
	seed       uint64
}

// TestTwoClientsRaceForMachines is the race: two clients, each in
// its own goroutine with its own seeded source, place their own job's 60
// tasks onto the same 4 machines (10 tasks each, so only 40 of the 120 fit)
// with Transact. Each attempt claims a batch by first fit on the client's
// view, so both pick the same machines. A barrier makes the contention
// deterministic: both decide on the same view, then both commit, then both
// re-sync — so the second committer of every round where the picks overlap
// conflicts.
//
// Afterwards the store's final state is the judge: every claim committed is
// there exactly once, by the client that made it, and the client's counters
// match what the transport saw.
func TestTwoClientsRaceForMachines(t *testing.T) {
	var setups []raceSetup
	for _, d := range durabilities {
		for _, tp := range []string{"shared", "watch", "watch-tiny-history"} {
			for seed := uint64(1); seed <= 4; seed++ {
				setups = append(setups, raceSetup{d, tp, seed})
			}
		}
	}
	for _, s := range setups {
		t.Run(fmt.Sprintf("%s/%s/seed=%d", s.durability, s.transport, s.seed), func(t *testing.T) {
			logSeed(t, s.seed)
			runRace(t, s)
		})
	}
}

const (
	raceMachines = 4
	racePerJob   = 60
	raceSlots    = 10 // tasks per machine
)

type raceClient struct {
	name   string
	c      *Client
	clk    *fakeClock
	rec    *recorder
	batch  int
	gaveUp int
	err    error
}

func runRace(t *testing.T, s raceSetup) {
	hist := 0
	if s.transport == "watch-tiny-history" {
		hist = 4 // a client that misses a round re-lists
	}
	st, opts := openStoreOpts(t, s.durability, hist)
	g := newIDs(s.seed)
	cl := buildCluster(t, st, g, raceMachines, raceSlots*1000, 64*gib, racePerJob, 1000, "a", "b")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bar := newBarrier(2)
	// The two clients' batch sizes (the seed picks the pair). Both fill the
	// same machine first; as long as the sum of the two batches does not
	// divide a machine's 10 slots, some round's picks overflow a machine,
	// whichever client commits first (pairs summing to 5 or 10 would tile
	// the machines exactly and never conflict).
	pairs := [][2]int{{3, 3}, {4, 4}, {3, 4}, {6, 7}}
	pair := pairs[(s.seed-1)%uint64(len(pairs))]
	retry := RetryPolicy{MaxAttempts: 10, Backoff: ms, MaxBackoff: 8 * ms, Jitter: 0.5}

	clients := make([]*raceClient, 2)
	for i, name := range []string{"a", "b"} {
		var tr Transport = inproc.New(st)
		if s.transport != "shared" {
			tr = inproc.New(st, inproc.WithoutSharing())
		}
		rec, rtr := record(tr)
		// After every commit, wait for the other client's commit, so both
		// re-sync to a state holding both.
		rec.after = func(ctx context.Context, _ attempt) { _ = bar.Wait(ctx) }
		c, clk := newClient(t, rtr, name, s.seed, retry)
		clients[i] = &raceClient{name: name, c: c, clk: clk, rec: rec, batch: pair[i]}
	}

	var wg sync.WaitGroup
	for _, rc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc.err = rc.run(ctx, bar, cl.jobs[rc.name])
		}()
	}
	wg.Wait()
	for _, rc := range clients {
		if rc.err != nil {
			t.Fatalf("client %s: %v", rc.name, rc.err)
		}
	}

	final := st.Snapshot()
	checkRaceOutcome(t, final, cl, clients)

	if s.durability == store.DurabilitySync {
		// An acknowledged claim survives a restart.
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		re, err := store.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer re.Close()
		if err := diffStatesSeq(final, re.Snapshot(), false); err != nil {
			t.Fatalf("after reopening: %v", err)
		}
	}
}

// run places the client's job until nothing more fits in its view.
func (rc *raceClient) run(ctx context.Context, bar *barrier, job uuid.UUID) error {
	left := false
	leave := func() {
		if !left {
			left = true
			bar.Leave()
		}
	}
	defer leave()
	for {
		finished := false
		_, err := rc.c.Transact(ctx, func(v View) (*txn.Txn, error) {
			tx := firstFit(rc.c, v, job, rc.batch)
			if tx == nil {
				finished = true
				leave()
				return nil, nil
			}
			// Both clients decide on the same view before either commits.
			if err := bar.Wait(ctx); err != nil {
				return nil, err
			}
			return tx, nil
		})
		switch {
		case errors.Is(err, ErrGaveUp):
			rc.gaveUp++
			continue
		case err != nil:
			return err
		case finished:
			return nil
		}
	}
}

func checkRaceOutcome(t *testing.T, final *txn.State, cl *cluster, clients []*raceClient) {
	t.Helper()
	if err := txn.CheckInvariants(final); err != nil {
		t.Fatalf("final state: %v", err)
	}
	// Every task is either PENDING or ASSIGNED exactly once, by its own
	// job's client, on one of the machines.
	assignedBy := map[string]int64{}
	perMachine := map[uuid.UUID]int32{}
	for name, tasks := range cl.tasks {
		for _, u := range tasks {
			tk, ok := final.Task(u)
			if !ok {
				t.Fatalf("task %s of %s vanished", u, name)
			}
			switch tk.State {
			case pending:
				if tk.Machine != uuid.Nil || tk.Scheduler != "" {
					t.Fatalf("pending task %s has machine %s, scheduler %q", u, tk.Machine, tk.Scheduler)
				}
			case assigned:
				if tk.Scheduler != name {
					t.Fatalf("task %s of job %s was placed by %q", u, name, tk.Scheduler)
				}
				assignedBy[name]++
				perMachine[tk.Machine]++
			default:
				t.Fatalf("task %s is %s", u, tk.State)
			}
		}
	}
	total := int64(0)
	for _, m := range cl.machines {
		mach, _ := final.Machine(m)
		if mach.Tasks != perMachine[m] {
			t.Fatalf("machine %s counts %d tasks, %d tasks say they are on it", m, mach.Tasks, perMachine[m])
		}
		total += int64(mach.Tasks)
	}
	if total != raceMachines*raceSlots {
		t.Fatalf("%d tasks placed, want the cell full (%d): both clients stopped early", total, raceMachines*raceSlots)
	}

	var sumCommitted, conflicted, claimsConflicted int64
	for _, rc := range clients {
		log := rc.rec.attempts()
		got := rc.c.Counters()
		want := expectedCounters(log)
		want.GaveUp = int64(rc.gaveUp)
		if got != want {
			t.Fatalf("client %s: counters %+v, but the transport saw %+v", rc.name, got, want)
		}
		if got.Errors != 0 {
			t.Fatalf("client %s: %d commit errors", rc.name, got.Errors)
		}
		if got.ClaimsCommitted != assignedBy[rc.name] {
			t.Fatalf("client %s: ClaimsCommitted %d, but the store holds %d tasks it placed", rc.name, got.ClaimsCommitted, assignedBy[rc.name])
		}
		if got.ClaimsAttempted != got.ClaimsCommitted+got.ClaimsConflicted {
			t.Fatalf("client %s: claims attempted %d != committed %d + conflicted %d (no gang here)", rc.name, got.ClaimsAttempted, got.ClaimsCommitted, got.ClaimsConflicted)
		}
		if ok := got.Attempts - got.Conflicted; ok > 0 {
			if f, want := got.ConflictFraction(), float64(got.Conflicted)/float64(ok); f != want {
				t.Fatalf("client %s: conflict fraction %v, want %v", rc.name, f, want)
			}
		}
		if err := checkResync(log); err != nil {
			t.Fatalf("client %s: %v", rc.name, err)
		}
		for _, d := range rc.clk.Sleeps {
			if d < 0 || d > time.Duration(float64(8*ms)*1.5) {
				t.Fatalf("client %s paused %v, outside the policy", rc.name, d)
			}
		}
		sumCommitted += got.ClaimsCommitted
		conflicted += got.Conflicted
		claimsConflicted += got.ClaimsConflicted
		t.Logf("client %s (batch %d): attempts %d conflicted %d partial %d claims committed %d conflicted %d, conflict fraction %.2f, gave up %d, relists %d, pauses %d",
			rc.name, rc.batch, got.Attempts, got.Conflicted, got.Partial, got.ClaimsCommitted, got.ClaimsConflicted, got.ConflictFraction(), got.GaveUp, rc.c.Cell().Relists(), len(rc.clk.Sleeps))
	}
	if sumCommitted != total {
		t.Fatalf("the clients committed %d claims, the store holds %d", sumCommitted, total)
	}
	// The race must really have happened, and in lockstep: then how many
	// attempts and claims conflict does not depend on which client commits
	// first in a round, and a model predicts it.
	if conflicted == 0 || claimsConflicted == 0 {
		t.Fatalf("no conflicts: the race was not exercised")
	}
	wantAttempts, wantClaims := lockstepConflicts(clients[0].batch, clients[1].batch)
	if conflicted != wantAttempts || claimsConflicted != wantClaims {
		t.Fatalf("%d conflicted attempts and %d conflicting claims, the lockstep model predicts %d and %d",
			conflicted, claimsConflicted, wantAttempts, wantClaims)
	}
}

// lockstepConflicts models the race: in each round both clients pick, by
// first fit on the same view, a and b unit tasks; the first committer's
// picks all fit, the second's overflow a machine by
// max(0, demand - free) claims, which conflict (one conflicted attempt per
// round with any overflow). Whoever commits first, the machines end the
// round with min(demand, free) more tasks.
func lockstepConflicts(a, b int) (attempts, claims int64) {
	occ := make([]int, raceMachines)
	pick := func(n int) []int {
		d := make([]int, raceMachines)
		for range n {
			for i := range occ {
				if occ[i]+d[i] < raceSlots {
					d[i]++
					break
				}
			}
		}
		return d
	}
	for {
		da, db := pick(a), pick(b)
		if slices.Max(da) == 0 {
			return attempts, claims
		}
		over := false
		for i := range occ {
			free, dem := raceSlots-occ[i], da[i]+db[i]
			if dem > free {
				over = true
				claims += int64(dem - free)
			}
			occ[i] += min(dem, free)
		}
		if over {
			attempts++
		}
	}
}
