package testkit

import (
	"strings"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func apply(t *testing.T, s *txn.State, ops ...txn.Op) *txn.State {
	t.Helper()
	r, ws, err := txn.Evaluate(s, &txn.Txn{ViewRevision: s.Revision(), Component: "test", UnixNanos: int64(s.Revision()+1) * 1e9, Ops: ops}, s.Revision()+1, txn.DefaultLimits())
	if err != nil || r.Conflicted() {
		t.Fatalf("evaluate: %+v %v", r, err)
	}
	return s.Apply(ws)
}

// DiffStates finds each kind of difference it promises to, and none
// between a state and itself; Fingerprint sees a state that moved on.
func TestDiffStatesFindsDifferences(t *testing.T) {
	m, j, a, b := UID('m', 1, 0), UID('j', 1, 0), UID('t', 1, 0), UID('t', 1, 1)
	base := apply(t, txn.NewState(),
		txn.CreateMachine(Machine(m, "m0", Res(4000, 4000))),
		txn.CreateJob(Job(j, "j", "batch")),
		txn.CreateTask(Task(a, j, "a", Res(100, 100))),
		txn.CreateTask(Task(b, j, "b", Res(100, 100))))
	if err := DiffStates(base, base, Compare{Protos: true}); err != nil {
		t.Fatalf("a state differs from itself: %v", err)
	}
	fp := FingerprintOf(base)
	claimed := apply(t, base, txn.Claim(a, m, Res(100, 100), 1))
	if err := fp.Diff(FingerprintOf(base)); err != nil {
		t.Fatalf("the base state changed under a later one: %v", err)
	}
	if fp.Diff(FingerprintOf(claimed)) == nil {
		t.Fatal("the fingerprint missed a claim")
	}
	// Same revision, other content.
	other := apply(t, base, txn.Claim(b, m, Res(100, 100), 1))
	job := func(phase omegav1.JobPhase, labels map[string]string) *txn.State {
		return apply(t, base, txn.PutJob(&omegav1.Job{
			Meta:   &omegav1.ObjectMeta{Uid: j.String(), Name: "j", Labels: labels},
			Spec:   &omegav1.JobSpec{Kind: omegav1.JobKind_JOB_KIND_BATCH, Scheduler: "batch"},
			Status: &omegav1.JobStatus{Phase: phase},
		}, 1))
	}
	pendingJob := job(omegav1.JobPhase_JOB_PHASE_PENDING, nil)
	relabelled := job(omegav1.JobPhase_JOB_PHASE_PENDING, map[string]string{"x": "y"})
	for _, c := range []struct {
		name      string
		want, got *txn.State
		o         Compare
		says      string
	}{
		{"revision", base, claimed, Compare{}, "revision"},
		{"which task is placed", claimed, other, Compare{}, "task"},
		{"a job's phase", pendingJob, job(omegav1.JobPhase_JOB_PHASE_RUNNING, nil), Compare{}, "job"},
		{"a job's labels, by wire form", pendingJob, relabelled, Compare{Protos: true}, "job"},
	} {
		err := DiffStates(c.want, c.got, c.o)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want a difference naming %q", c.name, err, c.says)
		}
	}
	// Without Protos the labels are not compared: that is what Protos is for.
	if err := DiffStates(pendingJob, relabelled, Compare{}); err != nil {
		t.Fatalf("without protos: %v", err)
	}
}
