package storekit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

const gib = int64(1) << 30

// Driver commits a seeded mix of realistic transactions straight to a
// store (or through a transport in front of one, NewDriverOn), each
// decided on the newest state so none conflicts: machines come and go and
// drain, jobs arrive with tasks, tasks are claimed (several per
// transaction), start, finish (SUCCEEDED, FAILED, LOST), get evicted and
// deleted; quotas are created, put and deleted; a two-level offer is made
// to the driver's own component (one at a time), which answers it with
// claims inside it or declines it, while the other claims keep to what it
// does not lock. Every kind of object a Change carries comes, changes and
// goes. It is the randomized history the layers above the store test
// against: a client's synced copy, an agent's tracker, the watch's
// encoders, anything that follows the cell must end up agreeing with the
// store (testkit.DiffStates) whatever the history.
type Driver struct {
	t      testing.TB
	cell   Cell
	rng    *rand.Rand
	g      *testkit.IDs
	n      int
	counts Counts
}

// Cell is what a Driver commits to: a transport.Transport, or a store
// (NewDriver adapts one).
type Cell interface {
	Snapshot(ctx context.Context) (*txn.State, error)
	Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error)
}

// Counts is what a driver's committed transactions did to the kinds the
// rest of the history may leave out: offers made, answered with claims,
// declined (answered with none); quotas and leases created, put, deleted.
type Counts struct {
	Offers, Answers, Declines       int
	Quotas, QuotaPuts, QuotaDeletes int
	Leases, LeasePuts, LeaseDeletes int
}

// Component is the component a Driver commits as, the framework its offers
// are made to and the scheduler its claims are recorded for.
const Component = "driver"

// NewDriver makes a driver of st from seed.
func NewDriver(t testing.TB, st *store.Store, seed uint64) *Driver {
	return NewDriverOn(t, storeCell{st}, seed)
}

// NewDriverOn makes a driver of c from seed: the same history as NewDriver
// makes of a store, committed through c.
func NewDriverOn(t testing.TB, c Cell, seed uint64) *Driver {
	return &Driver{t: t, cell: c, rng: rand.New(rand.NewPCG(seed, 0xd1)), g: testkit.IDsFrom(rand.New(rand.NewPCG(seed^0xabc, 0x1d5)))}
}

type storeCell struct{ st *store.Store }

func (c storeCell) Snapshot(context.Context) (*txn.State, error) { return c.st.Snapshot(), nil }
func (c storeCell) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	return c.st.Commit(ctx, tx)
}

// Counts returns what the driver's transactions did so far. It must not
// be called while TryStep runs on another goroutine.
func (d *Driver) Counts() Counts { return d.counts }

// RequireEveryKind fails the test unless the history so far made,
// answered and declined offers and created, put and deleted quotas and leases: a test
// that holds something to every kind of change calls it to know the
// history had them.
func (d *Driver) RequireEveryKind(t testing.TB) {
	t.Helper()
	c := d.counts
	if c.Offers == 0 || c.Answers == 0 || c.Declines == 0 || c.Quotas == 0 || c.QuotaPuts == 0 || c.QuotaDeletes == 0 ||
		c.Leases == 0 || c.LeasePuts == 0 || c.LeaseDeletes == 0 {
		t.Fatalf("the driver's history left a kind of change out: %+v", c)
	}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// Step commits one transaction and returns its revision; an error fails
// the test.
func (d *Driver) Step() uint64 {
	d.t.Helper()
	rev, err := d.TryStep()
	if err != nil {
		d.t.Fatal(err)
	}
	return rev
}

// TryStep is Step for a goroutine other than the test's.
func (d *Driver) TryStep() (uint64, error) {
	const (
		up       = omegav1.MachineState_MACHINE_STATE_UP
		draining = omegav1.MachineState_MACHINE_STATE_DRAINING
		pending  = omegav1.TaskState_TASK_STATE_PENDING
		assigned = omegav1.TaskState_TASK_STATE_ASSIGNED
		running  = omegav1.TaskState_TASK_STATE_RUNNING
	)
	ctx := context.Background()
	s, err := d.cell.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("driver snapshot: %w", err)
	}
	var upMachines, emptyMachines, allMachines []*txn.Machine
	s.RangeMachines(func(m *txn.Machine) bool {
		allMachines = append(allMachines, m)
		if m.State == up {
			upMachines = append(upMachines, m)
		}
		if m.Tasks == 0 && s.Offered(m).IsZero() { // a machine an offer locks goes after the answer
			emptyMachines = append(emptyMachines, m)
		}
		return true
	})
	var pend, placed, terminal []*txn.Task
	s.RangeTasks(func(t *txn.Task) bool {
		switch {
		case t.State == pending:
			pend = append(pend, t)
		case t.Placed():
			placed = append(placed, t)
		case t.Terminal():
			terminal = append(terminal, t)
		}
		return true
	})
	var quotas []*txn.Quota
	s.RangeQuotas(func(q *txn.Quota) bool { quotas = append(quotas, q); return true })
	var leases []*txn.Lease
	s.RangeLeases(func(l *txn.Lease) bool { leases = append(leases, l); return true })
	var offer *txn.Offer // the driver keeps at most one outstanding
	s.RangeOffers(func(o *txn.Offer) bool { offer = o; return false })
	// claims appends claims of pending tasks on up machines, each fitting
	// room (what the machine has for the claims, less those before).
	claims := func(ops []txn.Op, machines []*txn.Machine, room func(m *txn.Machine) txn.Resources) []txn.Op {
		left := map[uuid.UUID]txn.Resources{}
		for range 1 + d.rng.IntN(3) {
			if len(pend) == 0 || len(machines) == 0 {
				break
			}
			t := pick(d.rng, pend)
			m := pick(d.rng, machines)
			r, seen := left[m.UID]
			if !seen {
				r = room(m)
			}
			if ok, _ := txn.Fits(r, txn.Resources{}, t.Request()); !ok || slices.ContainsFunc(ops, func(o txn.Op) bool { return o.Kind == txn.OpClaim && o.Task == t.UID }) {
				continue
			}
			left[m.UID] = r.Sub(t.Request())
			ops = append(ops, txn.Claim(t.UID, m.UID, t.Request(), t.Version))
		}
		return ops
	}
	var ops []txn.Op
	var did *int // the count the commit adds to
	for len(ops) == 0 {
		did = nil
		switch k := d.rng.IntN(16); {
		case k == 0 || len(allMachines) < 3:
			d.n++
			ops = append(ops, txn.CreateMachine(testkit.Machine(d.g.Next(), fmt.Sprintf("w%03d", d.n), testkit.Res(4000+int64(d.rng.IntN(8))*1000, 16*gib))))
		case k <= 2:
			j := d.g.Next()
			d.n++
			ops = append(ops, txn.CreateJob(testkit.Job(j, fmt.Sprintf("j%03d", d.n), Component)))
			for i := range 1 + d.rng.IntN(4) {
				ops = append(ops, txn.CreateTask(testkit.Task(d.g.Next(), j, fmt.Sprintf("j%03d-%d", d.n, i), testkit.Res(int64(1+d.rng.IntN(3))*500, gib))))
			}
		case k <= 5 && len(pend) > 0 && len(upMachines) > 0:
			// Outside the offer: what no offer locks.
			ops = claims(ops, upMachines, func(m *txn.Machine) txn.Resources {
				return m.Capacity.Sub(m.Allocated).Sub(s.Offered(m))
			})
		case k == 6 && len(placed) > 0:
			t := pick(d.rng, placed)
			if t.State == assigned {
				ops = append(ops, txn.SetStatus(t.UID, running, t.Version, "started"))
			}
		case k == 7 && len(placed) > 0:
			t := pick(d.rng, placed)
			st := pick(d.rng, []omegav1.TaskState{omegav1.TaskState_TASK_STATE_SUCCEEDED, omegav1.TaskState_TASK_STATE_FAILED, omegav1.TaskState_TASK_STATE_LOST})
			ops = append(ops, txn.SetStatus(t.UID, st, t.Version, "finished"))
		case k == 8 && len(placed) > 0:
			t := pick(d.rng, placed)
			ops = append(ops, txn.ForceEvict(t.UID, t.Version, "drain"))
		case k == 9 && len(terminal)+len(pend) > 0:
			t := pick(d.rng, append(terminal, pend...))
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, t.UID, t.Version))
		case k == 10 && len(allMachines) > 0:
			m := pick(d.rng, allMachines)
			p := testkit.Machine(m.UID, m.Name(), m.Capacity)
			p.Status = &omegav1.MachineStatus{State: up}
			if m.State == up {
				p.Status.State = draining
			}
			ops = append(ops, txn.PutMachine(p, m.Version))
		case k == 11 && len(emptyMachines) > 0 && len(allMachines) > 3:
			m := pick(d.rng, emptyMachines)
			ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, m.UID, m.Version))
		case k == 12 && len(quotas) < 3:
			d.n++
			ops = append(ops, txn.CreateQuota(d.quota(d.g.Next(), fmt.Sprintf("q%03d", d.n))))
			did = &d.counts.Quotas
		case k == 13 && len(quotas) > 0:
			q := pick(d.rng, quotas)
			if d.rng.IntN(3) == 0 {
				ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_QUOTA, q.UID, q.Version))
				did = &d.counts.QuotaDeletes
				break
			}
			ops = append(ops, txn.PutQuota(d.quota(q.UID, q.Name()), q.Version))
			did = &d.counts.QuotaPuts
		case k == 12:
			// With quotas enough: a scheduler's lease taken, renewed or
			// given back.
			if len(leases) == 0 || len(leases) < 3 && d.rng.IntN(3) == 0 {
				d.n++
				ops = append(ops, txn.CreateLease(d.lease(fmt.Sprintf("sched-%03d", d.n))))
				did = &d.counts.Leases
				break
			}
			l := pick(d.rng, leases)
			if d.counts.LeaseDeletes <= d.counts.LeasePuts/3 { // renewals mostly, a lease given back now and then
				ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, l.UID, l.Version))
				did = &d.counts.LeaseDeletes
				break
			}
			ops = append(ops, txn.PutLease(d.lease(l.Name()), l.Version))
			did = &d.counts.LeasePuts
		case k == 14 && offer == nil:
			d.n++
			ops = append(ops, txn.CreateOffer(&omegav1.Offer{
				Meta: &omegav1.ObjectMeta{Uid: d.g.Next().String(), Name: fmt.Sprintf("offer%03d", d.n)},
				Spec: &omegav1.OfferSpec{Framework: Component},
			}))
			did = &d.counts.Offers
		case k == 15 && offer != nil:
			// The framework's answer: claims inside the offer, on the
			// machines it locks that are still up, or none (it declines).
			var locked []*txn.Machine
			for _, m := range upMachines {
				if _, ok := offer.Lock(m.UID); ok {
					locked = append(locked, m)
				}
			}
			ops = append(ops, txn.Answer(offer.UID))
			if d.rng.IntN(4) > 0 {
				ops = claims(ops, locked, func(m *txn.Machine) txn.Resources { l, _ := offer.Lock(m.UID); return l })
			}
			did = &d.counts.Declines
			if len(ops) > 1 {
				did = &d.counts.Answers
			}
		}
	}
	res, err := d.cell.Commit(ctx, &txn.Txn{ViewRevision: s.Revision(), Component: Component, Ops: ops})
	if err != nil {
		return 0, fmt.Errorf("driver commit at revision %d: %w", s.Revision(), err)
	}
	if res.Conflicted() {
		return 0, fmt.Errorf("driver commit at revision %d conflicted: %+v", s.Revision(), res.Outcomes)
	}
	if did != nil {
		*did++
	}
	return res.Revision, nil
}

// quota is a quota named name, of the driver's own claims or of another
// scheduler's, with a seeded limit (the raw store enforces none: its use
// is counted all the same).
func (d *Driver) quota(uid uuid.UUID, name string) *omegav1.Quota {
	sched := pick(d.rng, []string{Component, "batch", "service"})
	return &omegav1.Quota{
		Meta: &omegav1.ObjectMeta{Uid: uid.String(), Name: name, Labels: map[string]string{"team": pick(d.rng, []string{"a", "b"})}},
		Spec: &omegav1.QuotaSpec{Scheduler: sched, Limit: testkit.Res(int64(1+d.rng.IntN(20))*1000, int64(1+d.rng.IntN(8))*gib).Proto()},
	}
}

// lease is a scheduler's lease of that name, renewed now (the driver's
// count of steps stands for the time).
func (d *Driver) lease(name string) *omegav1.Lease {
	return &omegav1.Lease{
		Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID(name).String(), Name: name, Labels: map[string]string{"team": pick(d.rng, []string{"a", "b"})}},
		Spec: &omegav1.LeaseSpec{Holder: fmt.Sprintf("host/%d", d.rng.IntN(1000)), Role: "scheduler", SchedulerKind: pick(d.rng, []string{"batch", "service"}),
			DurationMillis: 15_000, AcquireUnixNanos: int64(d.n), RenewUnixNanos: int64(d.n)},
	}
}
