package objfile

import (
	"errors"
	"strings"
	"testing"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

const batchJob = `# a batch job of short shell commands
meta:
  name: hello
  labels: {team: infra, env: test}
spec:
  kind: batch
  scheduler: batch
  priority: 5
  replicas: 3
  template:
    resources: {cpu: 500m, memory: 256Mi, extended: {gpu: 1}}
    command:
      path: /bin/sh
      args: ["-c", "echo hello"]
      env: {GREETING: hi}
    constraints:
      - attribute: zone
        operator: equal
        value: a
    durationMillis: 1500
`

func TestJobFile(t *testing.T) {
	j, err := Job("hello.yaml", []byte(batchJob))
	if err != nil {
		t.Fatal(err)
	}
	sp := j.GetSpec()
	r := sp.GetTemplate().GetResources()
	switch {
	case j.GetMeta().GetName() != "hello" || j.GetMeta().GetLabels()["team"] != "infra":
		t.Fatalf("meta %v", j.GetMeta())
	case sp.GetKind() != omegav1.JobKind_JOB_KIND_BATCH || sp.GetScheduler() != "batch" || sp.GetPriority() != 5 || sp.GetReplicas() != 3:
		t.Fatalf("spec %v", sp)
	case r.GetCpuMillis() != 500 || r.GetMemoryBytes() != 256<<20 || r.GetExtended()["gpu"] != 1:
		t.Fatalf("resources %v", r)
	case sp.GetTemplate().GetCommand().GetPath() != "/bin/sh" || len(sp.GetTemplate().GetCommand().GetArgs()) != 2 || sp.GetTemplate().GetCommand().GetEnv()["GREETING"] != "hi":
		t.Fatalf("command %v", sp.GetTemplate().GetCommand())
	case len(sp.GetTemplate().GetConstraints()) != 1 || sp.GetTemplate().GetConstraints()[0].GetOperator() != omegav1.Constraint_OPERATOR_EQUAL:
		t.Fatalf("constraints %v", sp.GetTemplate().GetConstraints())
	case sp.GetTemplate().GetDurationMillis() != 1500:
		t.Fatalf("duration %v", sp.GetTemplate().GetDurationMillis())
	}
	// The same job as JSON, with snake_case names and full enum names.
	js := `{"meta": {"name": "hello"}, "spec": {"kind": "JOB_KIND_SERVICE", "replicas": 2,
	  "template": {"resources": {"cpu_millis": 250, "memory_bytes": 1048576}, "duration_millis": 0}}}`
	j2, err := Job("hello.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if j2.GetSpec().GetKind() != omegav1.JobKind_JOB_KIND_SERVICE || j2.GetSpec().GetTemplate().GetResources().GetCpuMillis() != 250 {
		t.Fatalf("json: %v", j2)
	}
}

func TestQuantities(t *testing.T) {
	for _, c := range []struct {
		s    string
		unit int64
		want int64
		bad  string
	}{
		{"500m", 1000, 500, ""}, {"0.5", 1000, 500, ""}, {"2", 1000, 2000, ""}, {"1.5", 1000, 1500, ""},
		{"256Mi", 1, 256 << 20, ""}, {"1Gi", 1, 1 << 30, ""}, {"100M", 1, 100e6, ""}, {"1.5Ki", 1, 1536, ""}, {"4096", 1, 4096, ""},
		{"0.0005", 1000, 0, "thousandths"}, {"1.5", 1, 0, "whole number of bytes"}, {"12x", 1, 0, "unknown suffix"},
		{"-1", 1, 0, "-1: negative"}, {"-500m", 1000, 0, "-500m: negative"}, {"-1Gi", 1, 0, "-1Gi: negative"},
		{"--1", 1, 0, "not a quantity"}, {"-", 1, 0, "not a quantity"}, {"-x", 1, 0, "not a quantity"}, {"", 1, 0, "not a quantity"}, {"Mi", 1, 0, "not a quantity"}, {"1e3", 1, 0, "not a quantity"},
		{"100Ei", 1, 0, "too large"},
	} {
		got, err := quantity(c.s, c.unit)
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("quantity(%q, %d) = %d, %v; want %d", c.s, c.unit, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("quantity(%q, %d) = %d, %v; want an error saying %q", c.s, c.unit, got, err, c.bad)
		}
	}
}

// Every error names the file, line and column, and the field's path.
func TestJobFileErrors(t *testing.T) {
	for _, c := range []struct {
		name, src string
		line, col int
		path      string
		says      string
	}{
		{"unknown field", "meta: {name: a}\nspec:\n  replica: 3\n", 3, 3, "spec.replica", "unknown field of JobSpec"},
		{"wrong type", "spec:\n  replicas: three\n", 2, 13, "spec.replicas", "want a whole number"},
		{"bad enum", "spec:\n  kind: weekly\n", 2, 9, "spec.kind", "want one of batch, service, mapreduce"},
		{"bad quantity", "spec:\n  template:\n    resources: {cpu: 5q}\n", 3, 22, "spec.template.resources.cpu", "unknown suffix"},
		{"twice", "meta: {name: a}\nmeta: {name: b}\n", 2, 1, "meta", "given twice"},
		{"list for a map", "meta:\n  labels: [a, b]\n", 2, 11, "meta.labels", "want a mapping"},
		{"scalar for a message", "spec: 7\n", 1, 7, "spec", "want a mapping (JobSpec)"},
		{"not yaml", "spec: [unclosed\n", 0, 0, "", "not YAML"},
		{"empty", "", 0, 0, "", "empty"},
		{"int32 overflow", "spec:\n  replicas: 9999999999\n", 2, 13, "spec.replicas", "fits 32 bits"},
		{"zero replicas", "meta: {name: a}\nspec:\n  replicas: 0\n", 3, 13, "spec.replicas", "0: want at least 1"},
		{"negative cpu", "spec:\n  template:\n    resources: {cpu: -1}\n", 3, 22, "spec.template.resources.cpu", "-1: negative"},
		{"negative memory", "spec:\n  template:\n    resources: {memory: -256Mi}\n", 3, 25, "spec.template.resources.memory", "-256Mi: negative"},
		{"negative millis", "spec:\n  template:\n    resources: {cpuMillis: -5}\n", 3, 28, "spec.template.resources.cpuMillis", "-5: negative"},
	} {
		_, err := Job("job.yaml", []byte(c.src))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %v, want an *objfile.Error", c.name, err)
			continue
		}
		if e.File != "job.yaml" || e.Line != c.line || e.Col != c.col || e.Path != c.path || !strings.Contains(e.Why, c.says) {
			t.Errorf("%s: %v (line %d col %d path %q), want %d:%d %q saying %q", c.name, err, e.Line, e.Col, e.Path, c.line, c.col, c.path, c.says)
		}
	}
}

// FuzzJob: no file panics the decoder, and every refusal is an *Error.
func FuzzJob(f *testing.F) {
	f.Add(batchJob)
	f.Add(`{"meta": {"name": "x"}, "spec": {"replicas": 1}}`)
	f.Add("spec:\n  template:\n    resources: {cpu: 1.5, memory: 1Gi}\n")
	f.Add("a: &x {b: 1}\nc: *x\n")
	f.Fuzz(func(t *testing.T, src string) {
		_, err := Job("fuzz.yaml", []byte(src))
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("%q: %T %v, want an *objfile.Error", src, err, err)
		}
	})
}
