package txn_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func offerP(id uuid.UUID, framework string) *omegav1.Offer {
	return &omegav1.Offer{Meta: &omegav1.ObjectMeta{Uid: id.String(), Name: "offer-" + id.String()[:4]}, Spec: &omegav1.OfferSpec{Framework: framework}}
}

// as builds a transaction of component at the cell's revision.
func (c *cell) as(component string, ops ...txn.Op) *txn.Txn {
	tx := c.tx(ops...)
	tx.Component = component
	return tx
}

func (c *cell) offer(id uuid.UUID) *txn.Offer {
	c.t.Helper()
	o, ok := c.s.Offer(id)
	if !ok {
		c.t.Fatalf("offer %s not outstanding", id)
	}
	return o
}

func wantLock(t *testing.T, o *txn.Offer, m uuid.UUID, want txn.Resources, has bool) {
	t.Helper()
	got, ok := o.Lock(m)
	if ok != has {
		t.Fatalf("offer %s on machine %s: covered %v, want %v (lock %v)", o.UID, m, ok, has, got)
	}
	if has {
		wantRes(t, fmt.Sprintf("offer %s's lock on %s", o.UID, m), got, want)
	}
}

// TestOfferProtocol walks the two-level protocol through the store's
// semantics: an offer locks everything free and not offered elsewhere;
// nobody else claims what it locks; only its framework answers it, with
// claims inside it; the answer releases the rest.
func TestOfferProtocol(t *testing.T) {
	c := std(t)
	c.place(m1, res(1000, 1000), t1)
	o1, o2, o3 := uid(901), uid(902), uid(903)

	// The first offer takes everything free on every UP machine.
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	wantLock(t, c.offer(o1), m1, res(3000, 3000, "gpu", 2), true)
	wantLock(t, c.offer(o1), m2, res(2000, 2000), true)
	if c.offer(o1).Framework != "fw-a" || c.offer(o1).CreateRev != c.s.Revision() {
		t.Fatalf("offer %+v", c.offer(o1))
	}

	// Nobody else may claim what it locks.
	r := c.commit(c.tx(txn.Claim(t2, m2, res(1000, 1000), c.ver(t2))))
	wantCodes(t, r, cInsufficient)
	if !strings.Contains(r.Outcomes[0].Detail, "offered") {
		t.Errorf("conflict detail %q does not say the resources are offered", r.Outcomes[0].Detail)
	}

	// A second offer finds nothing left to lock; what a task frees later
	// goes to the next offer.
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o2, "fw-b"))))
	if n := c.offer(o2).Len(); n != 0 {
		t.Fatalf("second offer covers %d machines, want none", n)
	}
	c.commit(c.tx(txn.SetStatus(t1, succeeded, c.ver(t1), "")))
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o3, "fw-b"))))
	wantLock(t, c.offer(o3), m1, res(1000, 1000), true)
	wantLock(t, c.offer(o3), m2, txn.Resources{}, false)
	wantRes(t, "m1 offered", c.s.Offered(c.machine(m1)), res(4000, 4000, "gpu", 2))

	// Only the framework answers.
	if err := c.mustErr(c.as("fw-b", txn.Answer(o1)), txn.ErrIllegalState, 0); !strings.Contains(err.Error(), `made to "fw-a", not to "fw-b"`) {
		t.Errorf("error %q does not name the frameworks", err)
	}
	// Its claims must fit what it locks, less its own earlier claims.
	r = c.commit(c.as("fw-a", txn.Answer(o1),
		txn.Claim(t2, m2, res(1000, 1000), c.ver(t2)),
		txn.Claim(t3, m2, res(1000, 1000), c.ver(t3)),
		txn.Claim(t4, m2, res(1000, 1000), c.ver(t4)), // m2's lock is spent
		txn.Claim(t5, m1, res(3500, 1000), c.ver(t5)), // more cpu than the lock, though m1 has it free
	))
	wantCodes(t, r, cCommitted, cCommitted, cCommitted, cInsufficient, cInsufficient)
	if !strings.Contains(r.Outcomes[4].Detail, "outside offer") {
		t.Errorf("detail %q", r.Outcomes[4].Detail)
	}
	if _, ok := c.s.Offer(o1); ok {
		t.Fatal("the answered offer is still outstanding")
	}
	// Answered: what o1 locked and did not take is free for anyone, but
	// what o3 locks still is not.
	r = c.commit(c.tx(txn.Claim(t4, m1, res(3000, 3000), c.ver(t4))))
	wantCodes(t, r, cCommitted)
	r = c.commit(c.tx(txn.Claim(t5, m1, res(1000, 1000), c.ver(t5))))
	wantCodes(t, r, cInsufficient)
	// An answer with no claims declines the offer.
	c.commit(c.as("fw-b", txn.Answer(o3)))
	wantCodes(t, c.commit(c.tx(txn.Claim(t5, m1, res(1000, 1000), c.ver(t5)))), cCommitted)
	if c.s.NumOffers() != 1 {
		t.Fatalf("%d offers outstanding, want o2 alone", c.s.NumOffers())
	}
}

// TestOfferErrors holds the offer's bad input to errors that name it.
func TestOfferErrors(t *testing.T) {
	c := std(t)
	o1 := uid(901)
	withLocks := offerP(o1, "fw-a")
	withLocks.Status = &omegav1.OfferStatus{Locks: []*omegav1.OfferLock{{MachineUid: m1.String(), Resources: res(1, 1).Proto()}}}
	for _, tc := range []struct {
		name string
		tx   *txn.Txn
		want error
		text string
	}{
		{"locks set by the client", c.as("allocator", txn.CreateOffer(withLocks)), txn.ErrInvalid, "store's to fill"},
		{"no framework", c.as("allocator", txn.CreateOffer(offerP(o1, ""))), txn.ErrInvalid, "names no framework"},
		{"an unknown offer answered", c.as("fw-a", txn.Answer(uid(999))), txn.ErrNotFound, "offer"},
		{"an offer deleted", c.as("fw-a", txn.Delete(omegav1.ObjectKind_OBJECT_KIND_OFFER, o1, 0)), txn.ErrInvalid, "answers it"},
		{"an offer put", c.as("fw-a", txn.Op{Kind: txn.OpPut, NewOffer: offerP(o1, "fw-a")}), txn.ErrInvalid, "its answer"},
	} {
		_, _, err := c.eval(tc.tx)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.text)
		}
	}
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	if _, _, err := c.eval(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-b")))); !errors.Is(err, txn.ErrAlreadyExists) {
		t.Errorf("an offer's uid made twice: %v", err)
	}
	o2 := uid(902)
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o2, "fw-a"))))
	if _, _, err := c.eval(c.as("fw-a", txn.Answer(o1), txn.Answer(o2))); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "one offer") {
		t.Errorf("two answers in one transaction: %v", err)
	}
}

// TestOfferView: the framework's view of its offer holds the offered
// machines only, each with what the offer locks as its free resources.
func TestOfferView(t *testing.T) {
	c := std(t)
	c.place(m2, res(2000, 2000), t1)
	o1 := uid(901)
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	v := c.s.OfferView(c.offer(o1))
	if v.NumMachines() != 1 {
		t.Fatalf("offer view holds %d machines, want m1 alone (m2 is full)", v.NumMachines())
	}
	m, _ := v.Machine(m1)
	wantRes(t, "m1 free in the offer view", m.Free(), res(4000, 4000, "gpu", 2))
	wantRes(t, "the view's capacity less allocation", v.Capacity().Sub(v.Allocated()), res(4000, 4000, "gpu", 2))
	if v.NumTasks() != c.s.NumTasks() || v.Revision() != c.s.Revision() {
		t.Fatalf("the offer view's tasks or revision differ from its state's")
	}
}

// TestOfferModel holds the offer semantics to a simple model over random
// histories of offers, answers with claims, claims by others and tasks
// ending on a small cell: the model keeps, per machine, its allocation and
// what each outstanding offer locks, computed afresh (an offer takes what
// is free less the other offers' locks), and predicts every claim's
// outcome.
func TestOfferModel(t *testing.T) {
	var inOffer, outside, refused, taken int // what the histories reached
	defer func() {
		t.Logf("claims: %d in an answer, %d outside the offer, %d refused (offered or full), %d of unoffered resources", inOffer, outside, refused, taken)
		if !t.Failed() && (inOffer < 100 || outside < 20 || refused < 20 || taken < 20) {
			t.Errorf("the histories reach too few of the cases")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		rng := rand.New(rand.NewPCG(seed, 7))
		c := newCell(t)
		c.light = true
		machines := []uuid.UUID{uid(1), uid(2), uid(3)}
		var ops []txn.Op
		for _, m := range machines {
			ops = append(ops, txn.CreateMachine(machineP(m, res(4000, 4000))))
		}
		var tasks []uuid.UUID
		for i := range 24 {
			id := uid(100 + uint64(i))
			tasks = append(tasks, id)
			ops = append(ops, txn.CreateTask(taskP(id, res(1000, 1000), 1)))
		}
		c.commit(c.tx(ops...))

		type mstate struct {
			alloc int64               // cpu and memory move together here
			locks map[uuid.UUID]int64 // offer → cpu locked
			down  bool
		}
		model := map[uuid.UUID]*mstate{}
		for _, m := range machines {
			model[m] = &mstate{locks: map[uuid.UUID]int64{}}
		}
		offers := map[uuid.UUID]string{} // outstanding → framework
		frameworks := []string{"fw-a", "fw-b"}
		next := uint64(1000)
		for step := range 60 {
			switch rng.IntN(6) {
			case 0: // an offer
				next++
				o, fw := uid(next), frameworks[rng.IntN(2)]
				c.commit(c.as("allocator", txn.CreateOffer(offerP(o, fw))))
				offers[o] = fw
				for _, m := range machines {
					ms := model[m]
					free := 4000 - ms.alloc
					for _, l := range ms.locks {
						free -= l
					}
					if free > 0 && !ms.down {
						ms.locks[o] = free
					}
					got, _ := c.offer(o).Lock(m)
					if got.CPU != ms.locks[o] || got.Memory != ms.locks[o] {
						rt.Fatalf("seed %d step %d: offer %s locks %v on %s, the model %d", seed, step, o, got, m, ms.locks[o])
					}
				}
			case 1: // an answer, with claims
				if len(offers) == 0 {
					continue
				}
				var o uuid.UUID
				for _, k := range sortedUIDs(offers) {
					o = k
					if rng.IntN(2) == 0 {
						break
					}
				}
				ops := []txn.Op{txn.Answer(o)}
				used := map[uuid.UUID]int64{}
				var want []bool
				for range rng.IntN(4) {
					task := tasks[rng.IntN(len(tasks))]
					tk := c.task(task)
					if tk.State != pending || claimedIn(ops, task) {
						continue
					}
					m := machines[rng.IntN(len(machines))]
					fits := model[m].locks[o]-used[m] >= 1000 && !model[m].down
					if fits {
						used[m] += 1000
						inOffer++
					} else {
						outside++
					}
					want = append(want, fits)
					ops = append(ops, txn.Claim(task, m, res(1000, 1000), tk.Version))
				}
				r := c.commit(c.as(offers[o], ops...))
				for i, w := range want {
					if r.Outcomes[i+1].Committed() != w {
						rt.Fatalf("seed %d step %d: claim %d in the answer of %s: %+v, the model says committed=%v", seed, step, i, o, r.Outcomes[i+1], w)
					}
				}
				for m, u := range used {
					model[m].alloc += u
				}
				for _, m := range machines {
					delete(model[m].locks, o)
				}
				delete(offers, o)
			case 2: // a claim by someone else
				task := tasks[rng.IntN(len(tasks))]
				tk := c.task(task)
				if tk.State != pending {
					continue
				}
				m := machines[rng.IntN(len(machines))]
				ms := model[m]
				free := 4000 - ms.alloc
				for _, l := range ms.locks {
					free -= l
				}
				r := c.commit(c.tx(txn.Claim(task, m, res(1000, 1000), tk.Version)))
				if r.Outcomes[0].Committed() != (free >= 1000 && !ms.down) {
					rt.Fatalf("seed %d step %d: a claim on %s with %d unoffered (down %v): %+v", seed, step, m, free, ms.down, r.Outcomes[0])
				}
				if free >= 1000 && !ms.down {
					ms.alloc += 1000
					taken++
				} else {
					refused++
				}
			case 3: // a task ends
				for _, task := range tasks {
					tk := c.task(task)
					if tk.Placed() {
						c.commit(c.tx(txn.SetStatus(task, succeeded, tk.Version, "")))
						model[tk.Machine].alloc -= 1000
						break
					}
				}
			case 4: // a machine goes down or comes back up; its locks stay until the answers
				m := machines[rng.IntN(len(machines))]
				ms := model[m]
				st := down
				if ms.down {
					st = up
				}
				c.commit(c.tx(txn.PutMachine(machineState(m, res(4000, 4000), st), c.machine(m).Version)))
				ms.down = !ms.down
			case 5: // a machine joins (the set of machines changes under the offers)
				if len(machines) >= 6 {
					continue
				}
				next++
				m := uid(next)
				c.commit(c.tx(txn.CreateMachine(machineP(m, res(4000, 4000)))))
				machines = append(machines, m)
				model[m] = &mstate{locks: map[uuid.UUID]int64{}}
			}
		}
	})
}

func claimedIn(ops []txn.Op, task uuid.UUID) bool {
	for _, op := range ops {
		if op.Kind == txn.OpClaim && op.Task == task {
			return true
		}
	}
	return false
}

func sortedUIDs[V any](m map[uuid.UUID]V) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// TestOfferMadeAfterAnswer: an offer made after an answer in the same
// transaction locks what the answer released, so a claim later in that
// transaction may not take it, though it fits the answered offer's lock:
// the machine would hold its allocation and the new offer's lock beyond
// its capacity. A claim that fits both still commits.
func TestOfferMadeAfterAnswer(t *testing.T) {
	c := std(t)
	o1, o2 := uid(901), uid(902)
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	r := c.commit(c.as("fw-a", txn.Answer(o1),
		txn.Claim(t1, m1, res(1000, 1000), c.ver(t1)), // before the new offer: it fits o1, and o2 will not lock it
		txn.CreateOffer(offerP(o2, "fw-b")),
		txn.Claim(t2, m2, res(1000, 1000), c.ver(t2)), // inside o1's lock, but o2 locks it now
	))
	wantCodes(t, r, cCommitted, cCommitted, cCommitted, cInsufficient)
	if !strings.Contains(r.Outcomes[3].Detail, "offered") {
		t.Errorf("conflict detail %q does not say the resources are offered", r.Outcomes[3].Detail)
	}
	wantLock(t, c.offer(o2), m1, res(3000, 3000, "gpu", 2), true)
	wantLock(t, c.offer(o2), m2, res(2000, 2000), true)
}

// TestOfferViewQuotas: the offer's view holds the cell's quotas and their
// use (it holds the cell's tasks, which the use counts), so reading them,
// evaluating and applying a transaction on it, and checking it work.
func TestOfferViewQuotas(t *testing.T) {
	c := std(t)
	q, o1 := uid(801), uid(901)
	c.commit(c.tx(txn.CreateQuota(quotaP(q, "test-sched", res(10000, 10000)))))
	c.place(m2, res(1000, 1000), t1)
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	v := c.s.OfferView(c.offer(o1))
	if v.NumQuotas() != 1 {
		t.Fatalf("the offer view holds %d quotas, want 1", v.NumQuotas())
	}
	if _, ok := v.Quota(q); !ok {
		t.Fatal("the offer view lacks the cell's quota")
	}
	wantRes(t, "the quota's use in the offer view", v.QuotaUsed(q), res(1000, 1000))
	tx := &txn.Txn{ViewRevision: v.Revision(), Component: "test-sched", UnixNanos: 1, Ops: []txn.Op{txn.Claim(t2, m1, res(1000, 1000), c.ver(t2))}}
	r, ws, err := txn.Evaluate(v, tx, v.Revision()+1, c.lim)
	if err != nil || r.Committed != 1 {
		t.Fatalf("a claim on the offer view: %+v %v", r, err)
	}
	after := v.Apply(ws)
	wantRes(t, "the quota's use after a claim on the offer view", after.QuotaUsed(q), res(2000, 2000))
	b := v.Builder()
	b.Finish(v.Revision() + 1)
	_ = txn.CheckInvariants(v) // the view leaves out machines the cell's tasks are on: an error, but no panic
}

// TestOfferViewLeases: the offer's view holds the cell's leases (a
// framework deciding on it may read which schedulers are live), and a
// lease renewed on it applies.
func TestOfferViewLeases(t *testing.T) {
	c := std(t)
	o1 := uid(901)
	c.commit(c.tx(txn.CreateLease(leaseP("fw-a", "host/1", 1))))
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	v := c.s.OfferView(c.offer(o1))
	l, ok := v.Lease(txn.LeaseUID("fw-a"))
	if v.NumLeases() != 1 || !ok || l.Holder() != "host/1" {
		t.Fatalf("the offer view holds %d leases (fw-a's: %v)", v.NumLeases(), ok)
	}
	tx := &txn.Txn{ViewRevision: v.Revision(), Component: "fw-a", UnixNanos: 1, Ops: []txn.Op{txn.PutLease(leaseP("fw-a", "host/1", 2), l.Version)}}
	r, ws, err := txn.Evaluate(v, tx, v.Revision()+1, c.lim)
	if err != nil || r.Committed != 1 {
		t.Fatalf("a renewal on the offer view: %+v %v", r, err)
	}
	if got, _ := v.Apply(ws).Lease(l.UID); got.RenewUnixNanos() != 2 {
		t.Fatalf("renewed on the offer view: %+v", got)
	}
}

// TestApplyCheckedOffers: a revision from elsewhere that answers an offer
// with locks other than the stored offer's, makes an offer whose uid is
// outstanding, or changes an offer in place (an offer is only made or
// answered) is refused, naming the offer; otherwise the offer index would
// stop matching the offers (a lock never released, or one taken without
// its capacity checked).
func TestApplyCheckedOffers(t *testing.T) {
	c := std(t)
	c.place(m2, res(1000, 1000), t1)
	o1, o2, o3 := uid(901), uid(902), uid(903)
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o1, "fw-a"))))
	c.commit(c.tx(txn.SetStatus(t1, succeeded, c.ver(t1), "")))
	c.commit(c.as("allocator", txn.CreateOffer(offerP(o2, "fw-b")))) // m2's 1,000 alone
	wantLock(t, c.offer(o2), m2, res(1000, 1000), true)
	as := func(o *txn.Offer, id uuid.UUID) *txn.Offer { // o's locks under id
		x := *o
		x.UID = id
		return &x
	}
	for _, tc := range []struct {
		name string
		c    txn.Change
	}{
		{"an answer carrying other locks", txn.Change{Offer: as(c.offer(o2), o1), Deleted: true}},
		{"an outstanding offer made again", txn.Change{Offer: as(c.offer(o2), o1), Created: true}},
		{"an offer changed in place", txn.Change{Offer: as(c.offer(o2), o1)}},
		{"a new offer not marked created", txn.Change{Offer: as(c.offer(o1), o3)}},
	} {
		tc.c.Kind = omegav1.ObjectKind_OBJECT_KIND_OFFER
		ws := &txn.WriteSet{Revision: c.s.Revision() + 1, Changes: []txn.Change{tc.c}}
		next, err := c.s.ApplyChecked(ws)
		if err == nil {
			t.Errorf("%s: applied (invariants: %v), want refused", tc.name, txn.CheckInvariants(next))
			continue
		}
		if !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "offer "+tc.c.Offer.UID.String()) {
			t.Errorf("%s: %v, want ErrInvalid naming the offer", tc.name, err)
		}
	}
	// The answer the store made is applied.
	_, ws, err := c.eval(c.as("fw-a", txn.Answer(o1)))
	if err != nil {
		t.Fatal(err)
	}
	next, err := c.s.ApplyChecked(ws)
	if err != nil {
		t.Fatalf("the store's answer refused: %v", err)
	}
	if err := txn.CheckInvariants(next); err != nil {
		t.Fatal(err)
	}
}
