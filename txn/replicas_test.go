package txn

import (
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// TestReplicasUnsetIsOne: a job whose spec leaves replicas at 0 (protobuf's
// unset field, which the store takes) asks for one task, as the job
// controller counts it and jobs.Complete fills it in; a scheduler reading
// 0 would deem the job complete with none and never replace its lost task.
func TestReplicasUnsetIsOne(t *testing.T) {
	for _, tc := range []struct{ spec, want int32 }{{0, 1}, {1, 1}, {3, 3}} {
		j := &Job{Spec: &omegav1.JobSpec{Replicas: tc.spec}}
		if got := j.Replicas(); got != tc.want {
			t.Errorf("spec replicas %d: Replicas() = %d, want %d", tc.spec, got, tc.want)
		}
	}
	if got := (&Job{}).Replicas(); got != 1 {
		t.Errorf("no spec: Replicas() = %d, want 1", got)
	}
}
