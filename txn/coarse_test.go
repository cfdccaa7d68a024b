package txn_test

import (
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// coarseTx is an incremental coarse transaction built against view.
func coarseTx(c *cell, view uint64, ops ...txn.Op) *txn.Txn {
	tx := c.tx(ops...)
	tx.ViewRevision = view
	tx.Conflict = coarse
	return tx
}

func TestCoarseMachineChangedAfterView(t *testing.T) {
	// Each of these changes to m1 after the view makes a coarse claim on m1
	// built against the view conflict, though it fits; fine mode commits it.
	changes := []struct {
		name string
		do   func(c *cell)
	}{
		{"claim by another", func(c *cell) { c.place(m1, res(1, 1), t2) }},
		{"eviction by another", func(c *cell) {
			c.commit(c.tx(txn.ForceEvict(t4, c.ver(t4), "")))
		}},
		{"release by a terminal status", func(c *cell) {
			c.commit(c.tx(txn.SetStatus(t4, succeeded, 0, "")))
		}},
		{"delete of a placed task", func(c *cell) {
			c.commit(c.tx(txn.Delete(kindTask, t4, 0)))
		}},
		{"machine state change", func(c *cell) {
			c.commit(c.tx(txn.PutMachine(machineState(m1, res(4000, 4000, "gpu", 2), up), 0)))
		}},
	}
	for _, ch := range changes {
		for _, mode := range []omegav1.ConflictMode{fine, coarse} {
			t.Run(ch.name+"/"+mode.String(), func(t *testing.T) {
				c := std(t)
				c.place(m1, res(100, 100), t4) // something to evict or release
				view := c.s.Revision()
				ver := c.ver(t1)
				ch.do(c)
				if seq := c.machine(m1).Seq; seq <= view {
					t.Fatalf("machine seq %d after a change past view %d", seq, view)
				}
				tx := coarseTx(c, view, txn.Claim(t1, m1, res(100, 100), ver))
				tx.Conflict = mode
				r := c.commit(tx)
				if mode == coarse {
					wantCodes(t, r, cMachChanged)
					if c.task(t1).State != pending {
						t.Fatal("conflicting claim placed its task")
					}
				} else {
					wantCodes(t, r, cCommitted)
				}
			})
		}
	}
}

func TestCoarseSeqBumpsOnlyItsMachine(t *testing.T) {
	c := std(t)
	view := c.s.Revision()
	c.place(m2, res(1, 1), t2)
	r := c.commit(coarseTx(c, view, txn.Claim(t1, m1, res(1, 1), c.ver(t1))))
	wantCodes(t, r, cCommitted)
}

func TestCoarseViewAtChangeRevisionIsCurrent(t *testing.T) {
	// A view taken at the revision of the machine's last change saw it.
	c := std(t)
	c.place(m1, res(1, 1), t2)
	view := c.s.Revision()
	if c.machine(m1).Seq != view {
		t.Fatalf("seq %d, want %d", c.machine(m1).Seq, view)
	}
	r := c.commit(coarseTx(c, view, txn.Claim(t1, m1, res(1, 1), c.ver(t1))))
	wantCodes(t, r, cCommitted)
}

func TestCoarseOwnClaimsNeverCount(t *testing.T) {
	c := std(t)
	view := c.s.Revision()
	// Machine unchanged since the view: every claim that fits commits, even
	// though the first one changes the machine.
	r := c.commit(coarseTx(c, view,
		txn.Claim(t1, m2, res(800, 800), c.ver(t1)),
		txn.Claim(t2, m2, res(800, 800), c.ver(t2)),
		txn.Claim(t3, m2, res(800, 800), c.ver(t3)), // does not fit: fit still applies
		txn.Claim(t4, m2, res(400, 400), c.ver(t4)),
	))
	wantCodes(t, r, cCommitted, cCommitted, cInsufficient, cCommitted)
	m := c.machine(m2)
	wantRes(t, "allocated", m.Allocated, res(2000, 2000))
	if m.Tasks != 3 || m.Seq != r.Revision {
		t.Fatalf("machine %+v", m)
	}
	// The next transaction against the old view sees the change.
	r = c.commit(coarseTx(c, view, txn.Claim(t3, m1, res(1, 1), c.ver(t3)), txn.Claim(t5, m2, res(0, 0), c.ver(t5))))
	wantCodes(t, r, cCommitted, cMachChanged)
}

func TestCoarseOwnEvictionNeverCounts(t *testing.T) {
	c := std(t)
	c.place(m2, res(2000, 2000), t1)
	view := c.s.Revision()
	r := c.commit(coarseTx(c, view,
		txn.ForceEvict(t1, c.ver(t1), "make room"),
		txn.Claim(t2, m2, res(2000, 2000), c.ver(t2)),
	))
	wantCodes(t, r, cCommitted, cCommitted)
	if c.task(t2).Machine != m2 || c.task(t1).State != pending {
		t.Fatal("evict-then-claim did not take effect")
	}
}

// The Google simulator bug: once a coarse claim on a machine conflicts, the
// claims after it on the same machine must conflict too, not slip through
// because the first (conflicting) claim "refreshed" the machine.
func TestCoarseChangedMachineConflictsEveryClaim(t *testing.T) {
	for _, commit := range []omegav1.CommitMode{incremental, allOrNone} {
		t.Run(commit.String(), func(t *testing.T) {
			c := std(t)
			view := c.s.Revision()
			vers := map[uuid.UUID]uint64{}
			for _, id := range []uuid.UUID{t1, t2, t3, t4, t5} {
				vers[id] = c.ver(id)
			}
			// Another scheduler takes most of m2 after the view.
			c.place(m2, res(1500, 1500), t5)
			tx := coarseTx(c, view,
				txn.Claim(t1, m2, res(400, 400), vers[t1]), // would fit
				txn.Claim(t2, m2, res(100, 100), vers[t2]), // would fit after a conflicting claim
				txn.Claim(t3, m1, res(100, 100), vers[t3]), // m1 is unchanged
				txn.Claim(t4, m2, res(1, 1), vers[t4]),
			)
			tx.Commit = commit
			r := c.commit(tx)
			if commit == incremental {
				wantCodes(t, r, cMachChanged, cMachChanged, cCommitted, cMachChanged)
				if !r.Partial() || r.ClaimsConflicted != 3 || r.Committed != 1 {
					t.Fatalf("result %+v", r)
				}
			} else {
				wantCodes(t, r, cMachChanged, cMachChanged, cAborted, cMachChanged)
				if r.Revision != 0 || r.ClaimsConflicted != 3 || r.Committed != 0 {
					t.Fatalf("result %+v", r)
				}
			}
			m := c.machine(m2)
			wantRes(t, "m2 allocated", m.Allocated, res(1500, 1500))
			if m.Tasks != 1 {
				t.Fatalf("m2 tasks %d", m.Tasks)
			}
		})
	}
}

// In coarse mode, a claim that fails the fit conflicts; the claims after it on
// the same unchanged machine are judged on their own.
func TestCoarseNoOverCommit(t *testing.T) {
	c := std(t)
	view := c.s.Revision()
	r := c.commit(coarseTx(c, view,
		txn.Claim(t1, m2, res(1500, 100), c.ver(t1)),
		txn.Claim(t2, m2, res(1500, 100), c.ver(t2)),
		txn.Claim(t3, m2, res(500, 100), c.ver(t3)),
		txn.Claim(t4, m2, res(1, 100), c.ver(t4)),
	))
	wantCodes(t, r, cCommitted, cInsufficient, cCommitted, cInsufficient)
	m := c.machine(m2)
	if !m.Allocated.LessEq(m.Capacity) {
		t.Fatalf("over-commit: %v of %v", m.Allocated, m.Capacity)
	}
	wantRes(t, "allocated", m.Allocated, res(2000, 200))
}

func TestCoarseMachineNotUpBeforeChanged(t *testing.T) {
	c := std(t)
	view := c.s.Revision()
	c.commit(c.tx(txn.PutMachine(machineState(m2, res(2000, 2000), draining), 0)))
	r := c.commit(coarseTx(c, view, txn.Claim(t1, m2, res(1, 1), c.ver(t1))))
	// Either reason is a conflict that commits nothing.
	if code := r.Outcomes[0].Code; code != cNotUp && code != cMachChanged {
		t.Fatalf("outcome %s", code)
	}
}
