package sim

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/audit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// A run with the unit-bug scheduler taking a fifth of the batch jobs: its
// short claims are committed (the raw store) and end with their tasks. The
// audit of the history during the run finds them, and when the first began;
// the history file, read back, gives the same audit byte for byte, and the
// same summary as a run without one (writing it changes nothing).
func TestHistoryAudit(t *testing.T) {
	cfg := archConfig(100 * 1e6)
	cfg.Schedulers = append(cfg.Schedulers, SchedulerSpec{Kind: "faulty-units", Count: 1, TJob: cfg.Schedulers[0].TJob, TTask: cfg.Schedulers[0].TTask})
	cfg.Route = map[string]string{"batch": "faulty-units"}
	cfg.RouteShare = map[string]float64{"batch": 0.2}
	cfg.AuditHistory = true
	plain, _ := runConfig(t, cfg)
	var file bytes.Buffer
	hw := NewHistoryWriter(&file)
	cfg.History = hw
	sum, _ := runConfig(t, cfg)
	if err := hw.Flush(); err != nil {
		t.Fatal(err)
	}
	plain.Host, sum.Host = Host{}, Host{}
	if !reflect.DeepEqual(plain, sum) {
		t.Fatalf("writing the history changed the run:\n%+v\n%+v", plain, sum)
	}
	h := sum.ViolationsHistory
	if h == nil || h.Counts[audit.ClaimShort] == 0 || h.FirstSeconds[audit.ClaimShort] <= 0 || h.Revisions == 0 {
		t.Fatalf("the history audit: %+v", h)
	}
	if sum.Violations[audit.ClaimShort] >= h.Counts[audit.ClaimShort] {
		t.Errorf("the final state holds %d short claims, the history %d: the history should show the ended ones too", sum.Violations[audit.ClaimShort], h.Counts[audit.ClaimShort])
	}
	s := audit.NewStream(Epoch.UnixNano())
	records := 0
	err := ReadHistory(bytes.NewReader(file.Bytes()), func(st *txn.State, at int64) error { records++; s.Start(st, at); return nil },
		func(ws *txn.WriteSet) error { records++; s.Observe(ws); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Report(); !reflect.DeepEqual(got, *h) || records != hw.Records() {
		t.Fatalf("the file's audit (%d records of %d):\n%+v\nthe run's:\n%+v", records, hw.Records(), got, *h)
	}
	// A history cut short in a record, or with a record out of order, is an
	// error naming the record.
	cut := file.Bytes()[:file.Len()-3]
	if err := ReadHistory(bytes.NewReader(cut), func(*txn.State, int64) error { return nil }, func(*txn.WriteSet) error { return nil }); err == nil || !strings.Contains(err.Error(), "history record") {
		t.Errorf("a cut history: %v", err)
	}
	if err := ReadHistory(bytes.NewReader(nil), func(*txn.State, int64) error { return nil }, func(*txn.WriteSet) error { return nil }); err == nil {
		t.Error("an empty history read without an error")
	}
}

// The faulty agent lies every simulated minute: the raw store commits every
// report, the mediated one none (not its machine's placed tasks), and the
// run otherwise goes on.
func TestFaultyAgent(t *testing.T) {
	for _, pol := range []store.Policy{store.Raw(), store.Mediated()} {
		cfg := archConfig(100 * 1e6)
		cfg.Workload.Days = 0.05
		cfg.FaultyAgent, cfg.AuditHistory, cfg.Policy = true, true, pol
		sum, _ := runConfig(t, cfg)
		fa := sum.FaultyAgent
		minutes := int64(cfg.Workload.Days * 24 * 60)
		if fa == nil || fa.Component != "agent/m00000" || fa.Reports < minutes-1 || fa.Reports > 2*minutes {
			t.Fatalf("%s: the faulty agent %+v over %d minutes", pol.Name(), fa, minutes)
		}
		switch pol.Name() {
		case "raw":
			if fa.Committed != fa.Reports || fa.Rejected != 0 {
				t.Errorf("raw: %+v, want every report committed", fa)
			}
		default:
			if fa.Rejected != fa.Reports || fa.Committed != 0 || sum.ViolationsHistory.Total() != 0 {
				t.Errorf("mediated: %+v, %v; want every report rejected and nothing committed", fa, sum.ViolationsHistory.Counts)
			}
		}
	}
}

// stateRoundTrip follows a run's states and, at the first revision that
// has an offer outstanding, checks that StateWriteSet of the state builds
// the same state from nothing: every machine, job, task and offer, and the
// locks the offers hold (the cell's invariants, offers included, hold).
type stateRoundTrip struct {
	t       *testing.T
	st      *txn.State
	checked bool
}

func (r *stateRoundTrip) Start(st *txn.State, _ int64) error { r.st = st; return nil }

func (r *stateRoundTrip) Observe(ws *txn.WriteSet) error {
	r.st = r.st.Apply(ws)
	if r.checked || r.st.NumOffers() == 0 {
		return nil
	}
	r.checked = true
	back, err := txn.NewState().ApplyChecked(StateWriteSet(r.st, 0))
	if err != nil {
		r.t.Fatalf("revision %d: the state's write set does not apply: %v", r.st.Revision(), err)
	}
	if back.NumOffers() != r.st.NumOffers() || back.NumMachines() != r.st.NumMachines() || back.NumTasks() != r.st.NumTasks() || back.NumJobs() != r.st.NumJobs() {
		r.t.Fatalf("revision %d: rebuilt %d offers, %d machines, %d jobs, %d tasks; the state has %d, %d, %d, %d", r.st.Revision(),
			back.NumOffers(), back.NumMachines(), back.NumJobs(), back.NumTasks(), r.st.NumOffers(), r.st.NumMachines(), r.st.NumJobs(), r.st.NumTasks())
	}
	if err := txn.CheckInvariants(back); err != nil {
		r.t.Fatalf("revision %d: the rebuilt state: %v", r.st.Revision(), err)
	}
	return nil
}

// A history's first record is the whole state, offers included: a
// two-level cell's state with offers outstanding, written as a write set,
// builds the same state.
func TestStateWriteSetOffers(t *testing.T) {
	cfg, err := archConfig(5 * time.Second).WithArchitecture("two-level")
	if err != nil {
		t.Fatal(err)
	}
	r := &stateRoundTrip{t: t}
	cfg.History = r
	runConfig(t, cfg)
	if !r.checked {
		t.Fatal("no offer was ever outstanding")
	}
}

// A history's first record holds the state's leases: a state with one,
// written as a write set, builds the same lease at the same version.
func TestStateWriteSetLeases(t *testing.T) {
	st := txn.NewState()
	commit := func(op txn.Op) {
		t.Helper()
		_, ws, err := txn.Evaluate(st, &txn.Txn{ViewRevision: st.Revision(), Component: "batch-0", UnixNanos: 1, Ops: []txn.Op{op}}, st.Revision()+1, txn.DefaultLimits())
		if err != nil || ws == nil {
			t.Fatalf("%v: %v", op.Kind, err)
		}
		st = st.Apply(ws)
	}
	p := &omegav1.Lease{Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID("batch-0").String(), Name: "batch-0"},
		Spec: &omegav1.LeaseSpec{Holder: "h", Role: "scheduler", SchedulerKind: "batch", DurationMillis: 1000}}
	commit(txn.CreateLease(p))
	commit(txn.PutLease(p, st.Revision()))
	back, err := txn.NewState().ApplyChecked(StateWriteSet(st, 0))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := st.Lease(txn.LeaseUID("batch-0"))
	if got, ok := back.Lease(want.UID); !ok || got.Version != want.Version || got.CreateRev != want.CreateRev || got.Version != 2 {
		t.Fatalf("rebuilt lease %+v, want %+v", got, want)
	}
}
