package schedulers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// The two-level baseline (the Omega paper's §4.2, Mesos 0.9 as its
// simulator modelled it; DESIGN.md "Two-level offers"): an allocator
// offers everything unoffered in the cell to one framework at a time, the
// one with the lowest dominant share among those that want resources
// (DRF); the offer's resources are locked in the store while that
// framework decides (txn.Offer); the framework decides the jobs of its
// queue in turn on the offer's private view and answers with their claims
// once its decision time has passed. A framework is a Runner driven by
// offers instead of by its own loop: the same schedulers, the same
// bounds, the same records.

// Framework drives a Runner as a two-level framework.
type Framework struct {
	r *Runner
	// views makes each offer's private view from the last one's.
	views txn.OfferViews
	// retryOnDecision: a job left with tasks no machine of the offer took
	// is queued again a retry delay after the decision, not after the
	// answer lands (SetRetryOnDecision).
	retryOnDecision bool
}

// SetRetryOnDecision makes the framework queue a job it could not place
// whole again RunnerConfig.RetryDelay after deciding it, before its answer
// lands, as the paper's simulator's MesosScheduler does (it re-adds the job
// a second after handling the offer); the next attempt leaves out what the
// one in flight claims (Runner.RequeueEarly). Off, the job is tried again
// a retry delay after its answer lands, as a scheduler on its own loop is.
func (f *Framework) SetRetryOnDecision(on bool) { f.retryOnDecision = on }

// NewFramework makes r a framework.
func NewFramework(r *Runner) *Framework { return &Framework{r: r} }

// Runner returns the framework's runner.
func (f *Framework) Runner() *Runner { return f.r }

// Wants reports whether the framework wants resources at now: a job of its
// queue is ready (not waiting out a retry delay), as the paper's framework
// asks for offers while its pending queue holds a job.
func (f *Framework) Wants(now time.Time) bool {
	at, ok := f.r.NextReady()
	return ok && !at.After(now)
}

// OfferDecision is what a framework decided on one offer: the attempts at
// its jobs, and the answer that commits them once DecisionTime (theirs
// together) has passed.
type OfferDecision struct {
	Offer        uuid.UUID
	Attempts     []*Attempt
	Txn          *txn.Txn // the answer: Answer(offer), then each attempt's operations
	DecisionTime time.Duration
	spans        [][2]int // each attempt's operations in Txn.Ops
}

// Decide takes offer o, made to the framework, and decides on its private
// view (txn.State.OfferView) the jobs of the queue that are ready at now,
// one after another, each seeing what the ones before it claimed, until
// the offer has no cpu or memory left or no job is ready (the paper's
// MesosScheduler). A decision with no attempt declines the offer.
func (f *Framework) Decide(ctx context.Context, o *txn.Offer, now time.Time) (*OfferDecision, error) {
	r := f.r
	if o.Framework != r.Name() {
		return nil, fmt.Errorf("%s: offer %s is made to %s", r.Name(), o.UID, o.Framework)
	}
	if err := r.c.Sync(ctx); err != nil {
		return nil, err
	}
	cell := r.c.View()
	priv := f.views.View(cell.State, o)
	view := func(client.View) client.View { return client.View{State: priv} }
	d := &OfferDecision{Offer: o.UID}
	ops := []txn.Op{txn.Answer(o.UID)}
	for {
		if free := priv.Capacity().Sub(priv.Allocated()); free.CPU <= 0 || free.Memory <= 0 {
			break
		}
		a, ok, err := r.BeginOn(ctx, now, view)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		d.spans = append(d.spans, [2]int{len(ops), len(ops) + len(a.Txn.Ops)})
		ops = append(ops, a.Txn.Ops...)
		d.Attempts = append(d.Attempts, a)
		d.DecisionTime += a.DecisionTime
		if f.retryOnDecision {
			r.RequeueEarly(a, now.Add(r.cfg.RetryDelay))
		}
		// The private view takes the attempt's claims (the paper's offer
		// cell state), so the next job sees what is left of the offer.
		priv = priv.WithTaken(a.Txn.Ops)
	}
	d.Txn = r.c.NewTxn(cell)
	d.Txn.Ops = ops
	return d, nil
}

// Answer commits d's answer at now and lands each attempt with its share
// of the result (Runner.FinishWith), calling landed for each.
func (f *Framework) Answer(ctx context.Context, d *OfferDecision, now time.Time, landed func(*Attempt, Outcome)) error {
	r := f.r
	d.Txn.UnixNanos = now.UnixNano()
	res, err := r.c.Commit(ctx, d.Txn)
	if err != nil {
		return fmt.Errorf("%s: answer to offer %s: %w", r.Name(), d.Offer, err)
	}
	for k, a := range d.Attempts {
		part := partOf(res, d.Txn.Ops, d.spans[k])
		out, err := r.FinishWith(ctx, a, part, now)
		if err != nil {
			return err
		}
		if landed != nil {
			landed(a, out)
		}
	}
	return nil
}

// partOf is the result of the operations ops[span] as if committed alone:
// their outcomes and counts, and the revision if one of them committed.
func partOf(res txn.Result, ops []txn.Op, span [2]int) txn.Result {
	out := txn.Result{Base: res.Base, Outcomes: res.Outcomes[span[0]:span[1]]}
	for i, o := range out.Outcomes {
		switch o.Code {
		case omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED:
			out.Committed++
		case omegav1.OutcomeCode_OUTCOME_CODE_ABORTED:
		case omegav1.OutcomeCode_OUTCOME_CODE_REJECTED:
			out.Rejected++
		default:
			out.Conflicts++
			if ops[span[0]+i].Kind == txn.OpClaim {
				out.ClaimsConflicted++
			}
		}
	}
	if out.Committed > 0 {
		out.Revision = res.Revision
	}
	return out
}

// Allocator is the two-level allocator's policy: which framework gets the
// next offer (the lowest dominant share among those that want resources,
// DRF), and making it through the store. It keeps each framework's share
// from the cell's changes (Observe), not by scanning the cell.
type Allocator struct {
	c          *client.Client
	frameworks []string
	index      map[string]int  // a framework's, or another component's CountAs, index
	used       []txn.Resources // by framework: what its placed tasks claim
	tasks      map[uuid.UUID]claimBy
}

type claimBy struct {
	framework int
	claimed   txn.Resources
}

// NewAllocator makes the allocator for frameworks (their component names),
// committing its offers through c.
func NewAllocator(c *client.Client, frameworks []string) *Allocator {
	al := &Allocator{c: c, frameworks: slices.Clone(frameworks), index: map[string]int{}, used: make([]txn.Resources, len(frameworks)), tasks: map[uuid.UUID]claimBy{}}
	for i, f := range frameworks {
		al.index[f] = i
	}
	return al
}

// CountAs counts the tasks component placed toward framework i's share
// (by index) — the simulation's pre-fill, whose long-running services a
// real cell's service framework would own. Call it before the first
// Relist. The paper's simulator counts a framework's own tasks only.
func (al *Allocator) CountAs(component string, i int) {
	if _, own := al.index[component]; !own && i >= 0 && i < len(al.frameworks) {
		al.index[component] = i
	}
}

// Relist recounts every framework's share from a state (the first view,
// or a fresh one after the watch fell behind).
func (al *Allocator) Relist(st *txn.State) {
	clear(al.tasks)
	clear(al.used)
	st.RangeTasks(func(t *txn.Task) bool {
		al.note(t)
		return true
	})
}

// Observe follows one revision of the cell.
func (al *Allocator) Observe(ws *txn.WriteSet) {
	for i := range ws.Changes {
		c := &ws.Changes[i]
		if c.Task == nil {
			continue
		}
		if old, ok := al.tasks[c.Task.UID]; ok {
			delete(al.tasks, c.Task.UID)
			al.used[old.framework] = al.used[old.framework].Sub(old.claimed)
		}
		if !c.Deleted {
			al.note(c.Task)
		}
	}
}

func (al *Allocator) note(t *txn.Task) {
	if !t.Placed() {
		return
	}
	if i, ok := al.index[t.Scheduler]; ok {
		al.tasks[t.UID] = claimBy{i, t.Claimed}
		al.used[i] = al.used[i].Add(t.Claimed)
	}
}

// Share is framework i's dominant share of capacity: the larger of its
// cpu and memory shares.
func (al *Allocator) Share(i int, capacity txn.Resources) float64 {
	u := al.used[i]
	return max(frac(u.CPU, capacity.CPU), frac(u.Memory, capacity.Memory))
}

func frac(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Pick returns the framework the next offer goes to among those wanting
// (by index): the lowest dominant share, ties to the lower index; -1 if
// none wants.
func (al *Allocator) Pick(wanting []bool, capacity txn.Resources) int {
	best, bestShare := -1, 0.0
	for i, w := range wanting {
		if !w {
			continue
		}
		if s := al.Share(i, capacity); best < 0 || s < bestShare {
			best, bestShare = i, s
		}
	}
	return best
}

// Unoffered is what the cell has free that no outstanding offer locks, in
// total (machines that are not UP included: a gate for making an offer,
// not its content).
func Unoffered(st *txn.State) txn.Resources {
	return st.Capacity().Sub(st.Allocated()).Sub(st.OfferedTotal())
}

// Offer makes an offer to framework i at now, through the store, and
// returns it as the store made it.
func (al *Allocator) Offer(ctx context.Context, i int, now time.Time) (*txn.Offer, error) {
	c := al.c
	if err := c.Sync(ctx); err != nil {
		return nil, err
	}
	uid := c.NewUID()
	tx := c.NewTxn(c.View())
	tx.UnixNanos = now.UnixNano()
	tx.Ops = []txn.Op{txn.CreateOffer(&omegav1.Offer{
		Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: "offer-" + uid.String()[:8]},
		Spec: &omegav1.OfferSpec{Framework: al.frameworks[i]},
	})}
	res, err := c.Commit(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("allocator: offer to %s: %w", al.frameworks[i], err)
	}
	if err := c.SyncTo(ctx, res.Revision); err != nil {
		return nil, err
	}
	o, ok := c.View().Offer(uid)
	if !ok {
		return nil, fmt.Errorf("allocator: offer %s to %s is not in the cell after its commit at revision %d", uid, al.frameworks[i], res.Revision)
	}
	return o, nil
}

// View is the allocator's view of the cell, up to date.
func (al *Allocator) View(ctx context.Context) (client.View, error) {
	if err := al.c.Sync(ctx); err != nil {
		return client.View{}, err
	}
	return al.c.View(), nil
}
