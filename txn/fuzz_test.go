package txn_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/txnfuzz"
	"github.com/omega-cell/omega/txn"
)

// FuzzEvaluate runs programs of transactions built from the fuzzer's bytes
// (internal/txnfuzz: every field of every operation, strings as raw bytes)
// through Evaluate on the txnfuzz setup cell, and checks what the store
// relies on: bad input is a typed error and nothing else; a transaction
// that evaluates yields a write set whose every object encodes, decodes and
// restores to the same state (so a store that installs it can write it and
// reopen it); the invariants hold; WireSize is the size of the wire form.
//
//	go test ./txn -run '^$' -fuzz FuzzEvaluate -fuzztime 5m
func FuzzEvaluate(f *testing.F) {
	for _, s := range txnfuzz.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runProgram(t, data) })
}

// TestEvaluateRandomPrograms is the short run of FuzzEvaluate that stays in
// the test suite: random programs from a printed seed.
func TestEvaluateRandomPrograms(t *testing.T) {
	seed := testkit.Seed(t, "OMEGA_TXN_FUZZ_SEED")
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := range n {
		data := txnfuzz.RandomProgram(rng.Uint32, rng.IntN(400))
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("seed %d, program %d: %x", seed, i, data)
				}
			}()
			runProgram(t, data)
		})
		if t.Failed() {
			return
		}
	}
}

// sentinels are the errors Evaluate may return for bad input.
var sentinels = []error{txn.ErrInvalid, txn.ErrNotFound, txn.ErrAlreadyExists, txn.ErrTooLarge, txn.ErrNotPending,
	txn.ErrIllegalState, txn.ErrInUse, txn.ErrFutureRevision}

func setupState(t testing.TB) *txn.State {
	st := txn.NewState()
	for _, tx := range txnfuzz.Setup() {
		res, ws, err := txn.Evaluate(st, tx, st.Revision()+1, txn.DefaultLimits())
		if err != nil || res.Committed != len(tx.Ops) {
			t.Fatalf("setup: %v, %d of %d committed: %+v", err, res.Committed, len(tx.Ops), res.Outcomes)
		}
		st = st.Apply(ws)
	}
	return st
}

func runProgram(t *testing.T, data []byte) {
	lim := txnfuzz.Limits()
	st := setupState(t)
	d := txnfuzz.NewDecoder(data, lim)
	for step := 0; d.More() && step < 64; step++ {
		if d.Action() == txnfuzz.ActExpire {
			d.Int() // the store's business
			continue
		}
		tx := d.Txn(st)
		if got, want := tx.WireSize(), proto.Size(tx.Proto()); got != want {
			t.Fatalf("step %d: WireSize %d, proto.Size of the wire form %d", step, got, want)
		}
		for i := range tx.Ops {
			op := &tx.Ops[i]
			for _, m := range []proto.Message{op.NewTask, op.NewJob, op.NewMachine} {
				if !reflect.ValueOf(m).IsNil() {
					one := txn.Op{Kind: op.Kind}
					switch m := m.(type) {
					case *omegav1.Task:
						one.NewTask = m
					case *omegav1.Job:
						one.NewJob = m
					case *omegav1.Machine:
						one.NewMachine = m
					}
					if b, n := txn.ObjectSizeBound(&one), proto.Size(m); b < n {
						t.Fatalf("step %d, op %d: size bound %d below the object's wire size %d", step, i, b, n)
					}
				}
			}
		}
		res, ws, err := txn.Evaluate(st, tx, st.Revision()+1, lim)
		if err != nil {
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("step %d: error %v is none of the sentinels", step, err)
			}
			if ws != nil || res.Revision != 0 || res.Committed != 0 || res.Outcomes != nil {
				t.Fatalf("step %d: error %v with a result %+v / write set", step, err, res)
			}
			continue
		}
		if len(res.Outcomes) != len(tx.Ops) {
			t.Fatalf("step %d: %d outcomes for %d operations", step, len(res.Outcomes), len(tx.Ops))
		}
		if ws == nil {
			if res.Committed != 0 || res.Revision != 0 {
				t.Fatalf("step %d: no write set, but %d committed at %d", step, res.Committed, res.Revision)
			}
			continue
		}
		if res.Committed == 0 || res.Revision != st.Revision()+1 {
			t.Fatalf("step %d: write set with %d committed at revision %d", step, res.Committed, res.Revision)
		}
		next := st.Apply(ws)
		if err := txn.CheckInvariants(next); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if _, err := st.ApplyChecked(ws); err != nil {
			t.Fatalf("step %d: the write set fails the remote client's check: %v", step, err)
		}
		checkRestores(t, next)
		st = next
	}
}

// checkRestores encodes every object of st as the store does, decodes it,
// and rebuilds the state with a Restorer: each object must come back equal.
func checkRestores(t *testing.T, st *txn.State) {
	t.Helper()
	round := func(what string, m, into proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("revision %d: %s does not encode: %v", st.Revision(), what, err)
		}
		if err := proto.Unmarshal(b, into); err != nil {
			t.Fatalf("revision %d: %s does not decode: %v", st.Revision(), what, err)
		}
	}
	r := txn.NewRestorer(st.Revision())
	st.RangeMachines(func(m *txn.Machine) bool {
		p := m.Proto()
		p.Status = &omegav1.MachineStatus{State: m.State, AgentAddress: m.Agent}
		q := &omegav1.Machine{}
		round("machine "+m.UID.String(), p, q)
		if err := r.Machine(q); err != nil {
			t.Fatalf("restore machine %s: %v", m.UID, err)
		}
		return true
	})
	st.RangeJobs(func(j *txn.Job) bool {
		q := &omegav1.Job{}
		round("job "+j.UID.String(), j.Proto(), q)
		if err := r.Job(q); err != nil {
			t.Fatalf("restore job %s: %v", j.UID, err)
		}
		return true
	})
	st.RangeTasks(func(x *txn.Task) bool {
		q := &omegav1.Task{}
		round("task "+x.UID.String(), x.Proto(), q)
		if err := r.Task(q, x.Version); err != nil {
			t.Fatalf("restore task %s: %v", x.UID, err)
		}
		return true
	})
	back, err := r.Finish()
	if err != nil {
		t.Fatalf("revision %d does not restore: %v", st.Revision(), err)
	}
	st.RangeTasks(func(x *txn.Task) bool {
		y, ok := back.Task(x.UID)
		if !ok || !proto.Equal(x.Proto(), y.Proto()) || !x.Claimed.Equal(y.Claimed) || x.Job != y.Job {
			t.Fatalf("task %s restores as %v, was %v", x.UID, y, x)
		}
		return true
	})
	st.RangeMachines(func(x *txn.Machine) bool {
		y, ok := back.Machine(x.UID)
		if !ok {
			t.Fatalf("machine %s not restored", x.UID)
		}
		px, py := x.Proto(), y.Proto()
		px.Status.Seq, py.Status.Seq = 0, 0
		px.Status.LastClaim, py.Status.LastClaim = 0, 0
		if !proto.Equal(px, py) {
			t.Fatalf("machine %s restores as %v, was %v", x.UID, py, px)
		}
		return true
	})
	st.RangeJobs(func(x *txn.Job) bool {
		y, ok := back.Job(x.UID)
		if !ok || !proto.Equal(x.Proto(), y.Proto()) {
			t.Fatalf("job %s restores as %v, was %v", x.UID, y, x)
		}
		return true
	})
	if !st.Capacity().Equal(back.Capacity()) || !st.Allocated().Equal(back.Allocated()) {
		t.Fatalf("totals restore as %v / %v, were %v / %v", back.Capacity(), back.Allocated(), st.Capacity(), st.Allocated())
	}
}
