package txn_test

import (
	"math"
	"strings"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func TestFits(t *testing.T) {
	const max = math.MaxInt64
	cases := []struct {
		name                string
		capacity, used, req txn.Resources
		fit                 bool
		dim                 string
	}{
		{"empty", res(0, 0), res(0, 0), res(0, 0), true, ""},
		{"exact", res(10, 10, "gpu", 2), res(5, 5, "gpu", 1), res(5, 5, "gpu", 1), true, ""},
		{"cpu", res(10, 10), res(5, 5), res(6, 1), false, "cpu"},
		{"memory", res(10, 10), res(5, 5), res(1, 6), false, "memory"},
		{"cpu named first", res(10, 10), res(5, 5), res(6, 6), false, "cpu"},
		{"gpu", res(10, 10, "gpu", 2), res(0, 0, "gpu", 2), res(1, 1, "gpu", 1), false, "gpu"},
		{"gpu absent from capacity", res(10, 10), res(0, 0), res(1, 1, "gpu", 1), false, "gpu"},
		{"first extended dimension by name", res(10, 10), res(0, 0), res(1, 1, "b", 1, "a", 1, "c", 1), false, "a"},
		{"zero of an absent dimension", res(10, 10), res(0, 0), res(1, 1, "gpu", 0), true, ""},
		// A huge declared amount must not wrap around and "fit".
		{"cpu overflow", res(4000, 10), res(1000, 0), res(max, 1), false, "cpu"},
		{"cpu overflow, not quite max", res(4000, 10), res(1000, 0), res(max-500, 1), false, "cpu"},
		{"memory overflow", res(10, 4000), res(0, 1), res(1, max), false, "memory"},
		{"gpu overflow", res(10, 10, "gpu", 4), res(0, 0, "gpu", 1), res(1, 1, "gpu", max), false, "gpu"},
		{"huge capacity", res(max, max, "gpu", max), res(max-1, max-1, "gpu", max-1), res(1, 1, "gpu", 1), true, ""},
		{"huge capacity, full", res(max, max), res(max, 0), res(1, 0), false, "cpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fit, dim := txn.Fits(tc.capacity, tc.used, tc.req)
			if fit != tc.fit || dim != tc.dim {
				t.Fatalf("Fits(%v, %v, %v) = %v %q, want %v %q", tc.capacity, tc.used, tc.req, fit, dim, tc.fit, tc.dim)
			}
		})
	}
}

// A claim declaring an absurd amount must conflict, not wrap the machine's
// allocation around and over-commit it.
func TestClaimOverflowDoesNotOverCommit(t *testing.T) {
	c := std(t)
	c.place(m2, res(1000, 1000), t1)
	r := c.commit(c.tx(
		txn.Claim(t2, m2, res(math.MaxInt64-500, 1), c.ver(t2)),
		txn.Claim(t3, m2, res(1000, 1000), c.ver(t3)),
		txn.Claim(t4, m2, res(1000, 1000), c.ver(t4)),
	))
	wantCodes(t, r, cInsufficient, cCommitted, cInsufficient)
	m := c.machine(m2)
	wantRes(t, "allocated", m.Allocated, res(2000, 2000))
	if !m.Allocated.LessEq(m.Capacity) || m.Allocated.CPU < 0 {
		t.Fatalf("over-committed: %v of %v", m.Allocated, m.Capacity)
	}
}

func TestResourcesArithmetic(t *testing.T) {
	a := res(10, 20, "gpu", 2)
	b := res(1, 2, "gpu", 2, "ssd", 5)
	sum := a.Add(b)
	wantRes(t, "sum", sum, res(11, 22, "gpu", 4, "ssd", 5))
	back := sum.Sub(b)
	wantRes(t, "difference", back, a)
	if _, ok := back.Ext["ssd"]; ok {
		t.Fatalf("zero dimension kept: %v", back.Ext)
	}
	// Add and Sub never write their operands (Ext maps are shared).
	wantRes(t, "a", a, res(10, 20, "gpu", 2))
	wantRes(t, "b", b, res(1, 2, "gpu", 2, "ssd", 5))
	if z := a.Sub(a); !z.IsZero() || z.Ext != nil {
		t.Fatalf("a-a = %#v", z)
	}
	if !res(1, 1).Equal(res(1, 1, "gpu", 0)) || res(1, 1).Equal(res(1, 1, "gpu", 1)) {
		t.Fatal("Equal with absent dimensions")
	}
	if !res(1, 1).LessEq(res(1, 1, "gpu", 1)) || res(1, 1, "gpu", 1).LessEq(res(1, 1)) {
		t.Fatal("LessEq with absent dimensions")
	}
	if err := res(1, 1, "gpu", -1).Validate(); err == nil {
		t.Fatal("negative gpu validated")
	}
	if err := res(1, 1, "gpu", 1, "ssd", 0).Validate(); err != nil {
		t.Fatalf("non-negative extended resources: %v", err)
	}
	// Of several negative dimensions the first in order is named, every time.
	for range 20 {
		err := res(1, 1, "zz", -1, "gpu", 2, "bb", -3, "aa", 4).Validate()
		if err == nil || !strings.Contains(err.Error(), `"bb"`) {
			t.Fatalf("two negative dimensions: %v, want bb named", err)
		}
	}
	p := &omegav1.Resources{CpuMillis: 5, MemoryBytes: 6, Extended: map[string]int64{"gpu": 1, "none": 0}}
	r := txn.ResourcesFromProto(p)
	if _, ok := r.Ext["none"]; ok || !r.Equal(res(5, 6, "gpu", 1)) {
		t.Fatalf("from proto %v", r)
	}
	if back := txn.ResourcesFromProto(r.Proto()); !back.Equal(r) {
		t.Fatalf("round trip %v", back)
	}
	if !txn.ResourcesFromProto(nil).IsZero() {
		t.Fatal("nil proto not zero")
	}
}

// TestResourcesEqualNegativeExt: Resources.Equal (which CheckInvariants
// uses to find a drift) tells a negative extended amount from an absent one,
// either way round.
func TestResourcesEqualNegativeExt(t *testing.T) {
	a := txn.Resources{Ext: map[string]int64{"gpu": -999}}
	if a.Equal(txn.Resources{}) {
		t.Errorf("Resources{gpu:-999}.Equal(Resources{}) = true")
	}
	if (txn.Resources{}).Equal(a) {
		t.Errorf("Resources{}.Equal(Resources{gpu:-999}) = true")
	}
}
