package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// offerWatch checks the two-level protocol on the cell's history as the
// engine delivers it: the frameworks' claims come only in the transaction
// that answers one of their offers, each within what that offer locks on
// its machine; every offer is made to a framework and answered by it. (The
// store's own invariants, checked after every commit, hold that nobody
// else claims what an outstanding offer locks.)
type offerWatch struct {
	t                      *testing.T
	frameworks             map[string]bool
	offers                 map[uuid.UUID]*txn.Offer // outstanding
	st                     *txn.State
	made, answered, claims int
}

func (w *offerWatch) Start(st *txn.State, _ int64) error {
	w.st = st
	return nil
}

func (w *offerWatch) Observe(ws *txn.WriteSet) error {
	var answered *txn.Offer
	for _, c := range ws.Changes {
		if c.Offer == nil {
			continue
		}
		switch {
		case c.Created:
			if !w.frameworks[c.Offer.Framework] {
				w.t.Fatalf("revision %d: an offer to %q, no framework", ws.Revision, c.Offer.Framework)
			}
			w.offers[c.Offer.UID] = c.Offer
			w.made++
		case c.Deleted:
			if answered != nil {
				w.t.Fatalf("revision %d answers two offers", ws.Revision)
			}
			answered = w.offers[c.Offer.UID]
			delete(w.offers, c.Offer.UID)
			w.answered++
		}
	}
	use := map[uuid.UUID]txn.Resources{}
	for _, c := range ws.Changes {
		t := c.Task
		if t == nil || c.Deleted || !w.frameworks[t.Scheduler] || t.State != omegav1.TaskState_TASK_STATE_ASSIGNED {
			continue
		}
		if old, ok := w.st.Task(t.UID); ok && old.Placed() {
			continue // placed before: a report, not a claim
		}
		w.claims++
		if answered == nil || answered.Framework != t.Scheduler {
			w.t.Fatalf("revision %d: %s claimed task %s outside the answer to one of its offers", ws.Revision, t.Scheduler, t.UID)
		}
		lock, _ := answered.Lock(t.Machine)
		use[t.Machine] = use[t.Machine].Add(t.Claimed)
		if !use[t.Machine].LessEq(lock) {
			w.t.Fatalf("revision %d: %s claimed %v on machine %s, its offer %s locks %v there", ws.Revision, t.Scheduler, use[t.Machine], t.Machine, answered.UID, lock)
		}
	}
	w.st = w.st.Apply(ws)
	return nil
}

// TestTwoLevelProtocol runs the two-level baseline on a small loaded cell,
// the store checking its invariants after every commit: the frameworks
// claim only inside their offers, their answers never conflict, both get
// offers and place their jobs, and the run is deterministic.
func TestTwoLevelProtocol(t *testing.T) {
	run := func() (Summary, []byte, *offerWatch) {
		cfg, err := archConfig(5 * time.Second).WithArchitecture("two-level")
		if err != nil {
			t.Fatal(err)
		}
		cfg.CheckInvariants = true
		w := &offerWatch{t: t, frameworks: map[string]bool{"batch-0": true, "service-0": true}, offers: map[uuid.UUID]*txn.Offer{}}
		cfg.History = w
		sum, jobs := runConfig(t, cfg)
		return sum, jobs, w
	}
	sum, jobs, w := run()
	if w.made == 0 || w.answered == 0 || w.claims == 0 || w.answered > w.made {
		t.Fatalf("%d offers made, %d answered, %d claims in answers", w.made, w.answered, w.claims)
	}
	if len(sum.Schedulers) != 2 {
		t.Fatalf("schedulers %+v", sum.Schedulers)
	}
	for _, s := range sum.Schedulers {
		if s.TasksPlaced == 0 || s.Conflicts != 0 || s.ClaimsConflicted != 0 {
			t.Errorf("framework %s: %d tasks placed, %d conflicted answers, %d conflicting claims", s.Name, s.TasksPlaced, s.Conflicts, s.ClaimsConflicted)
		}
		// Counting only the decisions that placed a task never counts
		// more than every decision.
		if s.BusynessPlacingMedian > s.BusynessMedian+1e-9 || s.BusynessPlacingMedian <= 0 {
			t.Errorf("framework %s: busyness %v, placing %v", s.Name, s.BusynessMedian, s.BusynessPlacingMedian)
		}
		// A job waits for an offer: at least the allocator's time.
		if s.WaitMeanS < 0.001 {
			t.Errorf("framework %s: mean wait %v s, less than the allocator's time", s.Name, s.WaitMeanS)
		}
	}
	checkJobKinds(t, sum, "batch", "service")
	sum2, jobs2, _ := run()
	var a, b bytes.Buffer
	sum.WriteJSON(&a)
	sum2.WriteJSON(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.Equal(jobs, jobs2) {
		t.Fatal("two runs of one seed differ")
	}
}

// With the offer interval at a minute, the frameworks' jobs wait for the
// next offer: their mean wait grows with the interval.
func TestTwoLevelOfferInterval(t *testing.T) {
	wait := func(every time.Duration) float64 {
		cfg, err := archConfig(100 * time.Millisecond).WithArchitecture("two-level")
		if err != nil {
			t.Fatal(err)
		}
		cfg.OfferInterval = every
		sum, _ := runConfig(t, cfg)
		return sum.Schedulers[0].WaitMeanS
	}
	fast, slow := wait(time.Second), wait(time.Minute)
	if !(slow > 10*fast) || fast < 0.5 {
		t.Fatalf("batch mean wait %v s with an offer a second, %v s with one a minute", fast, slow)
	}
}

// Offers at t_job(service) 100 s, service jobs arriving faster than that:
// with the default (OffersConcurrent, the paper's simulator's) the service
// framework decides every offer as it arrives, several at once, so its
// busyness passes 1 and the batch framework still gets offers and places
// its jobs; with OffersSerial the framework decides one offer at a time
// (never busy more than all the time) while the offers that reach it wait
// with the cell locked, and far more of the batch framework's jobs are
// left pending.
func TestTwoLevelOffersConcurrentAndSerial(t *testing.T) {
	run := func(offers string) Summary {
		cfg, err := archConfig(100 * time.Second).WithArchitecture("two-level")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Workload.Machines, cfg.Workload.Days = 1000, 0.1
		cfg.Offers = offers
		sum, _ := runConfig(t, cfg)
		return sum
	}
	pending := func(s Summary, kind string) float64 {
		for _, k := range s.JobKinds {
			if k.Kind == kind {
				return float64(k.JobsPending) / float64(max(k.JobsSubmitted, 1))
			}
		}
		t.Fatalf("no %s jobs in %+v", kind, s.JobKinds)
		return 0
	}
	byKind := func(s Summary, kind string) SchedulerSummary {
		for _, x := range s.Schedulers {
			if x.Kind == kind {
				return x
			}
		}
		t.Fatalf("no %s framework", kind)
		return SchedulerSummary{}
	}
	conc, serial := run(OffersConcurrent), run(OffersSerial)
	if b := byKind(conc, "service").BusynessMedian; b <= 1 {
		t.Errorf("concurrent: service busyness %v, want above 1 (offers decided at once)", b)
	}
	for _, x := range serial.Schedulers {
		if x.BusynessMedian > 1+1e-9 {
			t.Errorf("serial: framework %s busyness %v, more than 1", x.Name, x.BusynessMedian)
		}
	}
	if b := byKind(serial, "service").BusynessMedian; b < 0.9 {
		t.Errorf("serial: service busyness %v; want it saturated by 100 s decisions", b)
	}
	// (This cell is loaded ten times the trace's rate: some batch jobs
	// wait at the end either way.)
	if c, s := pending(conc, "batch"), pending(serial, "batch"); !(4*c < s && s > 0.3) {
		t.Errorf("batch jobs pending at the end: %.0f%% concurrent, %.0f%% serial; want serial's above 30%% and over four times concurrent's", 100*c, 100*s)
	}
}

// The allocator's floor: with OfferMinGoogle no offer is made while less
// than 100 cores are unoffered, so a cell of 50 cores gets none and nothing
// is placed; with OfferMinSmall it gets offers and its jobs are placed.
func TestTwoLevelOfferMin(t *testing.T) {
	run := func(min string) Summary {
		cfg, err := archConfig(100 * time.Millisecond).WithArchitecture("two-level")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Workload.Machines = 10 // a few cores each: far under 100 cores in all
		cfg.OfferMin = min
		sum, _ := runConfig(t, cfg)
		return sum
	}
	google, small := run(OfferMinGoogle), run(OfferMinSmall)
	if google.TasksPlaced != 0 || small.TasksPlaced == 0 {
		t.Fatalf("tasks placed: %d with the google floor, %d with the small one", google.TasksPlaced, small.TasksPlaced)
	}
	bad := archConfig(time.Second)
	bad.Architecture, bad.OfferMin = "two-level", "tiny"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "sim.Config.OfferMin") {
		t.Errorf("Validate of an unknown floor: %v", err)
	}
	bad.OfferMin, bad.Offers = "", "parallel"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "sim.Config.Offers") {
		t.Errorf("Validate of an unknown offers mode: %v", err)
	}
}
