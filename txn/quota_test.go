package txn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func quotaP(id uuid.UUID, scheduler string, limit txn.Resources) *omegav1.Quota {
	return &omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: id.String(), Name: "quota-" + id.String()[:4]},
		Spec: &omegav1.QuotaSpec{Scheduler: scheduler, Limit: limit.Proto()}}
}

// newQuota builds a quota as the state would hold it.
func newQuota(t *testing.T, limit txn.Resources) *txn.Quota {
	t.Helper()
	c := newCell(t)
	q := uid(801)
	c.commit(c.tx(txn.CreateQuota(quotaP(q, "batch", limit))))
	got, ok := c.s.Quota(q)
	if !ok {
		t.Fatal("quota not created")
	}
	return got
}

// TestQuotaExceedsNoWrap: used plus a request is summed without wrapping:
// a huge request does not wrap around below the limit.
func TestQuotaExceedsNoWrap(t *testing.T) {
	q := newQuota(t, res(1000, 0, "gpu", 4))
	for _, tc := range []struct {
		name      string
		used, req txn.Resources
	}{
		{"cpu", res(500, 0), res(math.MaxInt64-100, 0)},
		{"gpu", res(0, 0, "gpu", 2), res(0, 0, "gpu", math.MaxInt64)},
	} {
		if over, why := q.Exceeds(tc.used, tc.req); !over || why == "" {
			t.Errorf("%s: used %v and request %v against limit %v: exceeded %v %q, want exceeded", tc.name, tc.used, tc.req, q.Limit, over, why)
		}
	}
	if over, why := q.Exceeds(res(500, math.MaxInt64), res(500, math.MaxInt64)); over {
		t.Errorf("within the cpu limit, memory uncapped: exceeded %q", why)
	}
}

// TestQuotaUseNoWrap: a quota's use is summed without wrapping, moved by
// the tasks that come and go exactly as a recount finds it, and read
// saturated: two tasks of math.MaxInt64 cpu hold math.MaxInt64 (not -2),
// and once one ends the other still holds math.MaxInt64, whether the use
// was moved task by task or counted afresh when the quota was put.
func TestQuotaUseNoWrap(t *testing.T) {
	c := newCell(t)
	q := uid(801)
	huge := res(math.MaxInt64, 0)
	c.commit(c.tx(
		txn.CreateMachine(machineP(m1, huge)),
		txn.CreateMachine(machineP(m2, huge)),
		txn.CreateTask(taskP(t1, txn.Resources{}, 1)),
		txn.CreateTask(taskP(t2, txn.Resources{}, 1)),
		txn.CreateTask(taskP(t3, txn.Resources{}, 1)),
		txn.CreateQuota(quotaP(q, "test-sched", res(1000, 0))),
	))
	c.commit(c.tx(txn.Claim(t1, m1, huge, c.ver(t1)), txn.Claim(t2, m2, huge, c.ver(t2))))
	wantRes(t, "two huge tasks' use, moved", c.s.QuotaUsed(q), huge)
	c.commit(c.tx(txn.PutQuota(quotaP(q, "test-sched", res(2000, 0)), 0)))
	wantRes(t, "two huge tasks' use, counted afresh", c.s.QuotaUsed(q), huge)
	c.commit(c.tx(txn.SetStatus(t1, succeeded, c.ver(t1), "")))
	wantRes(t, "one huge task's use", c.s.QuotaUsed(q), huge)
	c.commit(c.tx(txn.SetStatus(t2, succeeded, c.ver(t2), "")))
	wantRes(t, "no task's use", c.s.QuotaUsed(q), txn.Resources{})
}

// quotaRules records what Overlay.QuotasOf shows each claim.
type quotaRules struct{ used []txn.Resources }

func (r *quotaRules) Check(o txn.Overlay, _ int, op *txn.Op) *txn.Rejection {
	if op.Kind == txn.OpClaim {
		o.QuotasOf(o.Txn().Component, func(_ *txn.Quota, used txn.Resources) bool {
			r.used = append(r.used, used)
			return true
		})
	}
	return nil
}

// TestQuotasOfNoWrap: what the overlay shows a quota holding, its use and
// the transaction's earlier claims, is summed without wrapping: after two
// claims of math.MaxInt64 memory (a dimension the quota leaves uncapped)
// it is math.MaxInt64, not -2.
func TestQuotasOfNoWrap(t *testing.T) {
	c := newCell(t)
	q := uid(801)
	huge := res(0, math.MaxInt64)
	c.commit(c.tx(
		txn.CreateMachine(machineP(m1, huge)),
		txn.CreateMachine(machineP(m2, huge)),
		txn.CreateMachine(machineP(m3, huge)),
		txn.CreateTask(taskP(t1, txn.Resources{}, 1)),
		txn.CreateTask(taskP(t2, txn.Resources{}, 1)),
		txn.CreateTask(taskP(t3, txn.Resources{}, 1)),
		txn.CreateQuota(quotaP(q, "test-sched", res(1000, 0))),
	))
	var rules quotaRules
	var s txn.Scratch
	tx := c.tx(txn.Claim(t1, m1, huge, c.ver(t1)), txn.Claim(t2, m2, huge, c.ver(t2)), txn.Claim(t3, m3, huge, c.ver(t3)))
	r, _, err := s.EvaluateRules(c.s, tx, c.s.Revision()+1, c.lim, &rules)
	if err != nil || r.Committed != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	if len(rules.used) != 3 {
		t.Fatalf("the rules saw %d quota uses, want 3", len(rules.used))
	}
	for i, want := range []txn.Resources{{}, huge, huge} {
		wantRes(t, fmt.Sprintf("the quota's use before claim %d", i), rules.used[i], want)
	}
}

// TestQuotaExceedsNamesFirstInOrder: with several extended dimensions
// over, Exceeds names the first in order, every time (as Fits does), after
// cpu and memory.
func TestQuotaExceedsNamesFirstInOrder(t *testing.T) {
	q := newQuota(t, res(1000, 1000, "a", 1, "b", 1, "c", 1, "d", 1, "e", 1, "f", 1, "g", 1, "h", 1))
	req := res(0, 0, "a", 2, "b", 2, "c", 2, "d", 2, "e", 2, "f", 2, "g", 2, "h", 2)
	for range 50 {
		if over, why := q.Exceeds(txn.Resources{}, req); !over || why != "a 2 of 1" {
			t.Fatalf("exceeded %v %q, want the first extended dimension, a", over, why)
		}
	}
	if over, why := q.Exceeds(txn.Resources{}, req.Add(res(0, 2000))); !over || why != "memory 2000 of 1000" {
		t.Fatalf("exceeded %v %q, want memory first", over, why)
	}
}
