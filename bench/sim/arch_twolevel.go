package sim

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// Two-level: Config.Schedulers run as two-level frameworks under an
// allocator that offers everything unoffered to one of them at a time in
// DRF order, locked in the store while it decides (Mesos as the paper's
// simulator models it, MesosSimulation.scala). Config.AllocatorTime is how
// long the allocator takes to make an offer (the offer reaches its
// framework that much after its resources were locked; the paper's 1 ms),
// Config.OfferInterval how often it makes one while a framework wants
// resources (the paper's simulator batches freed resources into an offer
// a second). Config.Offers, Config.OfferMin and Config.OfferRetry name the
// ways omega's model may depart from the reference's (see their docs); the
// defaults are the reference's.
var _ = RegisterArchitecture(Architecture{
	Name: "two-level",
	Doc:  "Mesos-style offers, each scheduler a framework offered everything unoffered in turn, in DRF order, locked while it decides, with --allocator-time, --offer-interval, --offers, --offer-min, --offer-shares and --offer-retry",
	Rank: 40,
	Days: 1, // the paper's two-level runs simulate a day
	Validate: func(c *Config) error {
		switch {
		case c.AllocatorTime < 0 || c.AllocatorTime > MaxAllocatorTime:
			return ConfigFieldError("AllocatorTime", c.AllocatorTime, "the two-level allocator's time to make an offer, from 0 to %v", MaxAllocatorTime)
		case c.OfferInterval <= 0 || c.OfferInterval > MaxOfferInterval:
			return ConfigFieldError("OfferInterval", c.OfferInterval, "the two-level allocator's interval between offers, above 0 and at most %v", MaxOfferInterval)
		case c.Offers != "" && !slices.Contains(OffersModes(), c.Offers):
			return ConfigFieldError("Offers", strconv.Quote(c.Offers), "how a framework takes its offers: %s", strings.Join(OffersModes(), " or "))
		case c.OfferMin != "" && !slices.Contains(OfferMins(), c.OfferMin):
			return ConfigFieldError("OfferMin", strconv.Quote(c.OfferMin), "the allocator's floor: %s", strings.Join(OfferMins(), " or "))
		case c.OfferShares != "" && !slices.Contains(OfferSharesModes(), c.OfferShares):
			return ConfigFieldError("OfferShares", strconv.Quote(c.OfferShares), "what counts toward a framework's DRF share: %s", strings.Join(OfferSharesModes(), " or "))
		case c.OfferRetry != "" && !slices.Contains(OfferRetries(), c.OfferRetry):
			return ConfigFieldError("OfferRetry", strconv.Quote(c.OfferRetry), "when a job an offer did not place whole is tried again: %s", strings.Join(OfferRetries(), " or "))
		}
		return nil
	},
	Drive: func(d Drive) (*Driving, error) {
		// The allocator's client, made after the others: their random
		// streams stay as they are in the other architectures.
		ac, err := d.NewClient("allocator")
		if err != nil {
			return nil, err
		}
		t := &twoLevel{busy: d.Busy, placing: d.Placing, allocatorTime: d.Config.AllocatorTime, offerInterval: d.Config.OfferInterval,
			serial: d.Config.Offers == OffersSerial, floor: offerFloor(d.Config.OfferMin), retryOnDecision: d.Config.OfferRetry != OfferRetryAnswer}
		names := make([]string, len(d.Runners))
		for i, r := range d.Runners {
			names[i] = r.Name()
			f := schedulers.NewFramework(r)
			f.SetRetryOnDecision(t.retryOnDecision)
			t.fws = append(t.fws, &framework{i: i, f: f})
		}
		t.al = schedulers.NewAllocator(ac, names)
		if d.Config.OfferShares == OfferSharesWithPrefill {
			for i, r := range d.Runners {
				if r.Scheduler().Kind() == "service" {
					t.al.CountAs("submitter", i) // the pre-fill's placements are the submitter's
					break
				}
			}
		}
		// The frameworks are one actor: the intake wakes it.
		return &Driving{Actors: []vtime.Actor{t}, Wakes: make([]int, len(d.Runners)), Observers: []Observer{allocatorObserver{t.al}}}, nil
	},
})

// How a framework takes its offers (Config.Offers).
const (
	// OffersConcurrent, the default, is the paper's simulator's: a
	// framework decides every offer the moment it arrives, each answer
	// landing its decision time later, so a busy framework decides several
	// offers at once and its busyness (decision time per day) can pass 1
	// (MesosScheduler.handleNextResourceOffer marks the framework
	// scheduling and clears it within the same call; only the answer waits).
	OffersConcurrent = "concurrent"
	// OffersSerial decides one offer at a time: an offer that reaches a
	// framework while it decides waits, its resources locked, until the
	// answer to the one before has landed. A framework then behaves as one
	// scheduler thread would; with a slow framework the offers queue behind
	// it holding the cell, and the other framework starves (at t_job 100 s
	// nearly every batch job is left pending: BENCHMARKS.md).
	OffersSerial = "serial"
)

// OffersModes are Config.Offers' values.
func OffersModes() []string { return []string{OffersConcurrent, OffersSerial} }

// The allocator's floor (Config.OfferMin): the least it offers.
const (
	// OfferMinGoogle, the default, is the paper's simulator's: an offer
	// only while at least 100 cores are unoffered in the cell. Its
	// allocator compares both of its floors (100 cpus, 100 of memory) with
	// the free cpus, so memory never stops an offer; so does omega's.
	OfferMinGoogle = "google"
	// OfferMinSmall offers while a tenth of a core or 100 MiB is
	// unoffered: offers of scraps, so a framework is offered (and tries its
	// jobs on) nearly every second even in a full cell, which takes its
	// jobs to the abandonment bounds sooner.
	OfferMinSmall = "small"
)

// When a job an offer did not place whole is tried again (Config.OfferRetry).
const (
	// OfferRetryDecision, the default, is the paper's simulator's: a retry
	// delay (1 s) after the framework decided it, before its answer lands
	// (MesosScheduler re-adds the job a second after handling the offer),
	// its next attempt leaving out what the one in flight claims. At slow
	// decision times a job is tried on many offers while one answer waits,
	// and reaches the 100-attempts-without-placement bound sooner.
	OfferRetryDecision = "decision"
	// OfferRetryAnswer tries it again a retry delay after its answer lands,
	// as a scheduler on its own loop is: one attempt of a job in flight at
	// a time.
	OfferRetryAnswer = "answer"
)

// What counts toward a framework's DRF share (Config.OfferShares).
const (
	// OfferSharesFrameworks, the default, is the paper's simulator's: the
	// tasks each framework placed itself. With the fitted workload's small
	// service jobs the service framework's share stays near 0, so it gets
	// every offer while it has a job queued, and at slow service decisions
	// one long answer can hold most of the cell while the batch framework
	// starves (BENCHMARKS.md, issue 28).
	OfferSharesFrameworks = "frameworks"
	// OfferSharesWithPrefill also counts the pre-fill's long-running
	// services toward the service framework's share, as a real cell's
	// service framework would own them.
	OfferSharesWithPrefill = "with-prefill"
)

// OfferSharesModes are Config.OfferShares' values.
func OfferSharesModes() []string { return []string{OfferSharesFrameworks, OfferSharesWithPrefill} }

// OfferRetries are Config.OfferRetry's values.
func OfferRetries() []string { return []string{OfferRetryDecision, OfferRetryAnswer} }

// OfferMins are Config.OfferMin's values.
func OfferMins() []string { return []string{OfferMinGoogle, OfferMinSmall} }

// offerFloor reports whether what is unoffered is enough for an offer.
func offerFloor(min string) func(free txn.Resources) bool {
	if min == OfferMinSmall {
		return func(free txn.Resources) bool { return free.CPU >= 100 || free.Memory >= 100<<20 }
	}
	return func(free txn.Resources) bool { return free.CPU >= 100_000 } // 100 cores, in millicores
}

// allocatorObserver keeps the allocator's shares from the cell's history.
type allocatorObserver struct{ al *schedulers.Allocator }

func (o allocatorObserver) Start(st *txn.State, _ int64) error { o.al.Relist(st); return nil }
func (o allocatorObserver) Observe(ws *txn.WriteSet) error     { o.al.Observe(ws); return nil }

// twoLevel is the allocator and every framework, as one actor (their
// steps are one component's: each offer's delivery and each answer are
// times of its own, and the engine holds one entry per actor). Nothing in
// it reads a clock: the times are the engine's.
type twoLevel struct {
	busy, placing                func(i int, start time.Time, d time.Duration)
	allocatorTime, offerInterval time.Duration
	serial                       bool                          // Config.Offers: one offer at a time
	retryOnDecision              bool                          // Config.OfferRetry
	floor                        func(free txn.Resources) bool // Config.OfferMin
	al                           *schedulers.Allocator
	fws                          []*framework
	// build is when the allocator next makes an offer (zero: not until a
	// framework wants resources).
	build time.Time
}

// framework is one framework's offers: on their way or waiting (in), and
// decided, its answer due (out). With OffersConcurrent it decides each the
// moment it arrives; with OffersSerial only once the answer before it has
// landed.
type framework struct {
	i   int // the runner's index in Drive.Runners
	f   *schedulers.Framework
	in  []delivery // offers on their way, in the order made
	out []answer   // decided offers, in the order decided
}

type delivery struct {
	o  *txn.Offer
	at time.Time
}

type answer struct {
	dec *schedulers.OfferDecision
	at  time.Time // when it lands
}

func (t *twoLevel) Start(context.Context, time.Time) (vtime.Next, error) { return vtime.Next{}, nil }

// Wake: a framework got work. It asks for resources: the allocator makes
// an offer an interval from now, unless one is due already.
func (t *twoLevel) Wake(_ context.Context, now time.Time) (vtime.Next, error) {
	t.arm(now)
	return t.next(), nil
}

// arm schedules the allocator's next offer, unless one is due: an
// interval after a framework's job is ready (now, or when the earliest
// waiting out a retry delay will be), as the paper's allocator batches the
// resources it offers after a framework asks.
func (t *twoLevel) arm(now time.Time) {
	if !t.build.IsZero() {
		return
	}
	var first time.Time
	for _, fw := range t.fws {
		if at, ok := fw.f.Runner().NextReady(); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if first.IsZero() {
		return
	}
	t.build = later(now, first).Add(t.offerInterval)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (t *twoLevel) Step(ctx context.Context, now time.Time) (vtime.Next, error) {
	// Answers that are due land first (each framework's in the order it
	// decided them); then the allocator's offer, if due; then each
	// framework decides the offers that reached it.
	for _, fw := range t.fws {
		for {
			k := slices.IndexFunc(fw.out, func(a answer) bool { return !a.at.After(now) })
			if k < 0 {
				break
			}
			dec := fw.out[k].dec
			fw.out = slices.Delete(fw.out, k, k+1)
			if err := t.answer(ctx, fw, dec, now); err != nil {
				return vtime.Next{}, err
			}
		}
	}
	if !t.build.IsZero() && !t.build.After(now) {
		t.build = time.Time{}
		if err := t.offer(ctx, now); err != nil {
			return vtime.Next{}, err
		}
		t.arm(now)
	}
	for _, fw := range t.fws {
		for (!t.serial || len(fw.out) == 0) && len(fw.in) > 0 && !fw.in[0].at.After(now) {
			d := fw.in[0]
			fw.in = fw.in[1:]
			dec, err := fw.f.Decide(ctx, d.o, now)
			if err != nil {
				return vtime.Next{}, err
			}
			t.busy(fw.i, now, dec.DecisionTime)
			if dec.DecisionTime == 0 { // declined, or decided in no time
				if err := t.answer(ctx, fw, dec, now); err != nil {
					return vtime.Next{}, err
				}
				continue
			}
			fw.out = append(fw.out, answer{dec, now.Add(dec.DecisionTime)})
		}
	}
	if t.retryOnDecision {
		t.arm(now) // the jobs queued again at the decisions ask for offers
	}
	return t.next(), nil
}

func (t *twoLevel) answer(ctx context.Context, fw *framework, dec *schedulers.OfferDecision, now time.Time) error {
	// Google's busyness counts only the decisions that placed a task: each
	// attempt that lands with a placement books its decision time there.
	landed := func(a *schedulers.Attempt, _ schedulers.Outcome) {
		if a.TasksPlaced() > 0 {
			t.placing(fw.i, a.Started(), a.DecisionTime)
		}
	}
	if err := fw.f.Answer(ctx, dec, now, landed); err != nil {
		return err
	}
	t.arm(now)
	return nil
}

// offer makes one offer of everything unoffered to the framework DRF
// picks among those that want resources.
func (t *twoLevel) offer(ctx context.Context, now time.Time) error {
	wanting := make([]bool, len(t.fws))
	any := false
	for i, fw := range t.fws {
		wanting[i] = fw.f.Wants(now)
		any = any || wanting[i]
	}
	if !any {
		return nil
	}
	v, err := t.al.View(ctx)
	if err != nil {
		return err
	}
	if !t.floor(schedulers.Unoffered(v.State)) {
		return nil // too little to offer; tasks that end free more
	}
	i := t.al.Pick(wanting, v.Capacity())
	o, err := t.al.Offer(ctx, i, now)
	if err != nil {
		return err
	}
	fw := t.fws[i]
	fw.in = append(fw.in, delivery{o: o, at: now.Add(t.allocatorTime)})
	return nil
}

// next is the earliest of the answers due, the next offer of each idle
// framework, and the allocator's next offer.
func (t *twoLevel) next() vtime.Next {
	var at time.Time
	earlier := func(x time.Time) {
		if at.IsZero() || x.Before(at) {
			at = x
		}
	}
	for _, fw := range t.fws {
		for _, a := range fw.out {
			earlier(a.at)
		}
		if len(fw.in) > 0 && (!t.serial || len(fw.out) == 0) { // serial: a busy framework's next offer waits for its answer
			earlier(fw.in[0].at)
		}
	}
	if !t.build.IsZero() {
		earlier(t.build)
	}
	return vtime.Next{At: at, Phase: vtime.PhaseCommit}
}
