package testkit

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Tests that a task built from its job's template keeps every field of it,
// driven by the TaskTemplate descriptor: a field added to the template later
// is set by FullTemplate and checked by CheckFromTemplate without an edit to
// either or to the tests that use them.

// FullTemplate returns a new template with every field set to a non-zero
// value the store accepts: the fields known when it was written by hand (an
// ON_FAILURE restart policy, an exec health check, a 30 s grace period, a
// command in a working directory, a constraint, labels), any other field of
// the descriptor to a generic non-zero value (a scalar 7, "x" or true, an
// enum's last value, a message present but empty, a list or map of one).
//
// Its constraint asks for machines whose attribute "zone" is "a"; it asks
// for 1000 millicores and 1 GiB, and runs 60 s.
func FullTemplate() *omegav1.TaskTemplate {
	t := &omegav1.TaskTemplate{
		Resources: &omegav1.Resources{CpuMillis: 1000, MemoryBytes: 1 << 30},
		Command: &omegav1.Command{Path: "/bin/worker", Args: []string{"--shard", "3"},
			Env: map[string]string{"MODE": "map"}, WorkingDir: "work"},
		Constraints:    []*omegav1.Constraint{{Attribute: "zone", Operator: omegav1.Constraint_OPERATOR_EQUAL, Value: "a"}},
		DurationMillis: 60_000,
		Labels:         map[string]string{"team": "search", "tier": "batch"},
		RestartPolicy:  omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE,
		HealthCheck: &omegav1.HealthCheck{
			Probe:        &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{Path: "/bin/check", Args: []string{"-q"}}},
			PeriodMillis: 5_000, TimeoutMillis: 1_000, FailureThreshold: 2, InitialDelayMillis: 100,
		},
		GracePeriodMillis:  30_000,
		RestartDelayMillis: 2_000,
	}
	m := t.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); !m.Has(fd) {
			setNonZero(m, fd)
		}
	}
	return t
}

// setNonZero sets fd of m to a generic non-zero value.
func setNonZero(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsList():
		l := m.Mutable(fd).List()
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			l.Append(l.NewElement())
		} else {
			l.Append(scalar(fd))
		}
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		k := scalar(fd.MapKey()).MapKey()
		if v := fd.MapValue(); v.Kind() == protoreflect.MessageKind {
			mp.Mutable(k)
		} else {
			mp.Set(k, scalar(v))
		}
	case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
		m.Mutable(fd) // present, empty
	default:
		m.Set(fd, scalar(fd))
	}
}

// scalar is a non-zero value of fd's scalar kind.
func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(vs.Len() - 1).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(7)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(7)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	}
	panic("testkit: no scalar of kind " + fd.Kind().String())
}

// CheckFromTemplate fails the test unless task carries every field of tmpl
// (every field of the TaskTemplate descriptor): the labels among its meta's
// labels, every other field in its spec's field of the same name, equal.
// notCopied names the fields deliberately not copied (or changed on the
// way, and checked by the caller), each with the reason; a field of the
// template that is neither copied nor listed, one whose spec counterpart
// has another type, and a listed name the template has no field of fail.
func CheckFromTemplate(t testing.TB, tmpl *omegav1.TaskTemplate, task *omegav1.Task, notCopied map[string]string) {
	t.Helper()
	tm, sm := tmpl.ProtoReflect(), task.GetSpec().ProtoReflect()
	fields := tm.Descriptor().Fields()
	for name := range notCopied {
		if fields.ByName(protoreflect.Name(name)) == nil {
			t.Errorf("%q is listed as not copied, but TaskTemplate has no such field", name)
		}
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		if !tm.Has(fd) {
			t.Errorf("template field %s is not set: the test needs a non-zero value for every field (FullTemplate)", name)
			continue
		}
		if _, ok := notCopied[name]; ok {
			continue
		}
		if name == "labels" {
			got := task.GetMeta().GetLabels()
			for k, v := range tmpl.GetLabels() {
				if got[k] != v {
					t.Errorf("task %s: template label %s=%s, the task's meta has %v", task.GetMeta().GetName(), k, v, got)
				}
			}
			continue
		}
		sfd := sm.Descriptor().Fields().ByName(fd.Name())
		if sfd == nil {
			t.Errorf("template field %s: TaskSpec has no field of that name; copy it, or list it as deliberately not copied and say why", name)
			continue
		}
		if !sameType(fd, sfd) {
			t.Errorf("template field %s: TaskSpec's field of that name has another type", name)
			continue
		}
		// Each value alone in a template, so that proto.Equal compares them.
		want, got := &omegav1.TaskTemplate{}, &omegav1.TaskTemplate{}
		want.ProtoReflect().Set(fd, tm.Get(fd))
		if sm.Has(sfd) {
			got.ProtoReflect().Set(fd, sm.Get(sfd))
		}
		if !proto.Equal(want, got) {
			has := "none"
			if sm.Has(sfd) {
				has = got.String()
			}
			t.Errorf("task %s: template field %s is %v, the task's spec has %s", task.GetMeta().GetName(), name, want, has)
		}
	}
}

func sameType(a, b protoreflect.FieldDescriptor) bool {
	if a.Kind() != b.Kind() || a.Cardinality() != b.Cardinality() || a.IsMap() != b.IsMap() {
		return false
	}
	if a.IsMap() {
		return sameType(a.MapKey(), b.MapKey()) && sameType(a.MapValue(), b.MapValue())
	}
	switch a.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return a.Message().FullName() == b.Message().FullName()
	case protoreflect.EnumKind:
		return a.Enum().FullName() == b.Enum().FullName()
	}
	return true
}

// LabelsWith returns a copy of labels with k=v added.
func LabelsWith(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}
