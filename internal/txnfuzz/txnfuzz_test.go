package txnfuzz

import (
	"strings"
	"testing"

	"github.com/omega-cell/omega/txn"
)

// TestSeedsDoWhatTheySay: each seed's first transaction, on the Setup cell,
// does what the seed is named for — a change of the byte layout that
// turned a seed into noise fails here.
func TestSeedsDoWhatTheySay(t *testing.T) {
	for _, sp := range SeedPrograms() {
		t.Run(sp.Name, func(t *testing.T) {
			st := txn.NewState()
			for _, tx := range Setup() {
				res, ws, err := txn.Evaluate(st, tx, st.Revision()+1, txn.DefaultLimits())
				if err != nil || res.Committed != len(tx.Ops) {
					t.Fatalf("setup: %v %+v", err, res.Outcomes)
				}
				st = st.Apply(ws)
			}
			d := NewDecoder(sp.Program, Limits())
			if a := d.Action(); a == ActExpire {
				t.Fatal("the seed starts with an expiry")
			}
			tx := d.Txn(st)
			res, _, err := txn.Evaluate(st, tx, st.Revision()+1, Limits())
			switch sp.Want {
			case "":
				if err != nil || res.Committed != len(tx.Ops) {
					t.Fatalf("want every operation committed: %v %+v", err, res.Outcomes)
				}
			case "conflict":
				if err != nil || !res.Conflicted() {
					t.Fatalf("want a conflict: %v %+v", err, res.Outcomes)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), sp.Want) {
					t.Fatalf("error %v, want one saying %q", err, sp.Want)
				}
			}
		})
	}
}

// TestRandomProgramsDoWork: the short random runs stand in for the fuzzer
// only if their transactions mostly get past validation and commit.
func TestRandomProgramsDoWork(t *testing.T) {
	var x uint32 = 12345
	next := func() uint32 { x = x*1664525 + 1013904223; return x }
	txns, committed := 0, 0
	for range 200 {
		st := txn.NewState()
		for _, tx := range Setup() {
			_, ws, _ := txn.Evaluate(st, tx, st.Revision()+1, txn.DefaultLimits())
			st = st.Apply(ws)
		}
		d := NewDecoder(RandomProgram(next, 300), Limits())
		for step := 0; d.More() && step < 32; step++ {
			if d.Action() == ActExpire {
				d.Int()
				continue
			}
			tx := d.Txn(st)
			txns++
			if _, ws, err := txn.Evaluate(st, tx, st.Revision()+1, Limits()); err == nil && ws != nil {
				committed++
				st = st.Apply(ws)
			}
		}
	}
	t.Logf("%d transactions, %d committed", txns, committed)
	if committed*10 < txns {
		t.Fatalf("only %d of %d random transactions committed", committed, txns)
	}
}
