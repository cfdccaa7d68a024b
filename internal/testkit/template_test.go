package testkit

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// The generic values FullTemplate gives a field added later: every field
// of TaskTemplate, cleared, is set again (whatever its kind: message,
// list, map, enum, integer).
func TestSetNonZeroSetsEveryField(t *testing.T) {
	full := FullTemplate()
	fields := full.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		m := proto.Clone(full).ProtoReflect()
		m.Clear(fd)
		setNonZero(m, fd)
		if !m.Has(fd) {
			t.Errorf("setNonZero left %s unset", fd.Name())
		}
	}
}

// recorder is a testing.TB that records the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// CheckFromTemplate reports each field a task lost, a field listed as not
// copied that the template does not have, and a template field left unset;
// a task that kept everything passes.
func TestCheckFromTemplateReports(t *testing.T) {
	tmpl := FullTemplate()
	spec := func() *omegav1.TaskSpec {
		return &omegav1.TaskSpec{Resources: tmpl.Resources, Command: tmpl.Command, Constraints: tmpl.Constraints,
			DurationMillis: tmpl.DurationMillis, RestartPolicy: tmpl.RestartPolicy, HealthCheck: tmpl.HealthCheck,
			GracePeriodMillis: tmpl.GracePeriodMillis, RestartDelayMillis: tmpl.RestartDelayMillis}
	}
	task := func(s *omegav1.TaskSpec, labels map[string]string) *omegav1.Task {
		return &omegav1.Task{Meta: &omegav1.ObjectMeta{Name: "t", Labels: labels}, Spec: s}
	}
	check := func(tmpl *omegav1.TaskTemplate, tk *omegav1.Task, notCopied map[string]string) []string {
		r := &recorder{TB: t}
		CheckFromTemplate(r, tmpl, tk, notCopied)
		return r.errs
	}
	if errs := check(tmpl, task(spec(), LabelsWith(tmpl.Labels, "job", "j")), nil); len(errs) != 0 {
		t.Fatalf("a task that kept every field: %q", errs)
	}
	lost := spec()
	lost.GracePeriodMillis = 0
	lost.HealthCheck = proto.Clone(tmpl.HealthCheck).(*omegav1.HealthCheck)
	lost.HealthCheck.PeriodMillis++
	errs := check(tmpl, task(lost, map[string]string{"team": "search"}), nil)
	if len(errs) != 3 {
		t.Fatalf("a task without the grace period, with another probe period and a label short: %d errors, want 3: %q", len(errs), errs)
	}
	if errs := check(tmpl, task(lost, tmpl.Labels), map[string]string{"grace_period_millis": "r", "health_check": "r"}); len(errs) != 0 {
		t.Fatalf("the lost fields listed as not copied: %q", errs)
	}
	if errs := check(tmpl, task(spec(), tmpl.Labels), map[string]string{"no_such_field": "r"}); len(errs) != 1 {
		t.Fatalf("a stale entry in the not-copied list: %q, want 1 error", errs)
	}
	short := proto.Clone(tmpl).(*omegav1.TaskTemplate)
	short.ProtoReflect().Clear(short.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name("restart_delay_millis")))
	if errs := check(short, task(spec(), tmpl.Labels), nil); len(errs) != 1 {
		t.Fatalf("a template with a field unset: %q, want 1 error", errs)
	}
}
