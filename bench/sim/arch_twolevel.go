package sim

import (
	"context"
	"slices"
	"time"

	"github.com/omega-cell/omega/bench/vtime"
	"github.com/omega-cell/omega/schedulers"
	"github.com/omega-cell/omega/txn"
)

// Two-level: Config.Schedulers run as two-level frameworks under an
// allocator that offers everything unoffered to one of them at a time in
// DRF order, locked in the store while it decides (Mesos as the paper
// modelled it). Config.AllocatorTime is how long the allocator takes to
// make an offer (the offer reaches its framework that much after its
// resources were locked; the paper's 1 ms), Config.OfferInterval how often
// it makes one while a framework wants resources (the paper's simulator
// batches freed resources into an offer a second).
var _ = RegisterArchitecture(Architecture{
	Name: "two-level",
	Doc:  "Mesos-style offers, each scheduler a framework offered everything unoffered in turn, in DRF order, locked while it decides, with --allocator-time and --offer-interval",
	Rank: 40,
	Days: 1, // the paper's two-level runs simulate a day
	Validate: func(c *Config) error {
		switch {
		case c.AllocatorTime < 0 || c.AllocatorTime > MaxAllocatorTime:
			return ConfigFieldError("AllocatorTime", c.AllocatorTime, "the two-level allocator's time to make an offer, from 0 to %v", MaxAllocatorTime)
		case c.OfferInterval <= 0 || c.OfferInterval > MaxOfferInterval:
			return ConfigFieldError("OfferInterval", c.OfferInterval, "the two-level allocator's interval between offers, above 0 and at most %v", MaxOfferInterval)
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
		t := &twoLevel{busy: d.Busy, allocatorTime: d.Config.AllocatorTime, offerInterval: d.Config.OfferInterval}
		names := make([]string, len(d.Runners))
		for i, r := range d.Runners {
			names[i] = r.Name()
			t.fws = append(t.fws, &framework{i: i, f: schedulers.NewFramework(r)})
		}
		t.al = schedulers.NewAllocator(ac, names)
		// The frameworks are one actor: the intake wakes it.
		return &Driving{Actors: []vtime.Actor{t}, Wakes: make([]int, len(d.Runners)), Observers: []Observer{allocatorObserver{t.al}}}, nil
	},
})

// allocatorObserver keeps the allocator's shares from the cell's history.
type allocatorObserver struct{ al *schedulers.Allocator }

func (o allocatorObserver) Start(st *txn.State, _ int64) error { o.al.Relist(st); return nil }
func (o allocatorObserver) Observe(ws *txn.WriteSet) error     { o.al.Observe(ws); return nil }

// twoLevel is the allocator and every framework, as one actor (their
// steps are one component's: each offer's delivery and each answer are
// times of its own, and the engine holds one entry per actor). Nothing in
// it reads a clock: the times are the engine's.
type twoLevel struct {
	busy                         func(i int, start time.Time, d time.Duration)
	allocatorTime, offerInterval time.Duration
	al                           *schedulers.Allocator
	fws                          []*framework
	// build is when the allocator next makes an offer (zero: not until a
	// framework wants resources).
	build time.Time
}

// framework is one framework's offers: on their way or waiting (in), and
// decided, its answer due (out). As in the paper's simulator (its
// MesosScheduler handles the next queued offer only when it is not
// scheduling), a framework decides one offer at a time: an offer that
// reaches it while it decides waits, its resources locked, until the
// answer to the one before has landed. (Until 2026-12-04 a framework
// decided every offer the moment it arrived, so a busy one decided several
// at once and its busyness could pass 1.)
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

// minOffer: the allocator makes no offer of less than a tenth of a core
// or 100 MiB in all (the paper's simulator has such a floor).
var minOffer = txn.Resources{CPU: 100, Memory: 100 << 20}

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
		for len(fw.out) == 0 && len(fw.in) > 0 && !fw.in[0].at.After(now) {
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
	return t.next(), nil
}

func (t *twoLevel) answer(ctx context.Context, fw *framework, dec *schedulers.OfferDecision, now time.Time) error {
	if err := fw.f.Answer(ctx, dec, now, nil); err != nil {
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
	if free := schedulers.Unoffered(v.State); free.CPU < minOffer.CPU && free.Memory < minOffer.Memory {
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
		if len(fw.out) == 0 && len(fw.in) > 0 { // a busy framework's next offer waits for its answer
			earlier(fw.in[0].at)
		}
	}
	if !t.build.IsZero() {
		earlier(t.build)
	}
	return vtime.Next{At: at, Phase: vtime.PhaseCommit}
}
