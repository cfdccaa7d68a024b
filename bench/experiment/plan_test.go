package experiment

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the plan goldens in testdata/ to what the code prints (review the diff: the lines format must not move)")

// golden compares got with testdata/name, or rewrites the file with
// -rewrite.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./bench/experiment -run %s -rewrite writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from what the code prints:\n%s\nwant:\n%s", path, got, want)
	}
}

// The plan's command lines, byte for byte as the first plans printed them
// (scripts and batch systems read them): a synthetic sweep with values
// that need quoting, and a replay's.
func TestPlanLinesGolden(t *testing.T) {
	e, _ := Lookup("mapreduce")
	s, err := NewSweep(e, Size{Quick: true}, []Param{{"load", "1 2"}, {"days", "0.1"}}, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.Plan(&b, "/opt/omega bin/omega", "/out dir/it's"); err != nil {
		t.Fatal(err)
	}
	r, _ := Lookup("replay")
	s, err = NewSweep(r, Size{Quick: true}, []Param{{"format", "google2011"}, {"trace", "/traces/google 2011"}, {"to", "1h"}}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Plan(&b, "omega", "out"); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-lines.txt", b.String())
}

// planCommands are n command lines whose values need quoting: the first n
// runs of the mapreduce experiment's quick sweep with a load of "1 2".
func planCommands(t *testing.T, binary, out string, n int) [][]string {
	t.Helper()
	e, _ := Lookup("mapreduce")
	s, err := NewSweep(e, Size{Quick: true}, []Param{{"load", "1 2"}, {"days", "0.1"}}, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	cmds := s.Commands(binary, out)
	if n > len(cmds) {
		t.Fatalf("%d runs, want at least %d", len(cmds), n)
	}
	return cmds[:n]
}

// Each format of a two-run plan, byte for byte (review a change of them
// in the diff of testdata/).
func TestPlanFormatsGolden(t *testing.T) {
	cmds := planCommands(t, "omega", "/out/it's", 2)
	for _, f := range PlanFormats {
		var b strings.Builder
		if err := WritePlan(&b, cmds, PlanOptions{Format: f, Experiment: "mapreduce", Out: "/out/it's"}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		golden(t, "plan-2-runs."+string(f), b.String())
	}
}

// argsPrinter is an executable, at a path that needs quoting, that prints
// its arguments one a line: a plan naming it as the binary shows what
// each run would be given.
func argsPrinter(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin dir's")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "omega")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nfor a; do printf '%s\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runScript runs a plan's script under shell with env added and returns
// its standard output.
func runScript(t *testing.T, env []string, shell ...string) (string, error) {
	t.Helper()
	c := exec.Command(shell[0], shell[1:]...)
	c.Env = append(os.Environ(), env...)
	var out, stderr strings.Builder
	c.Stdout, c.Stderr = &out, &stderr
	err := c.Run()
	if err != nil {
		return out.String() + stderr.String(), err
	}
	return out.String(), nil
}

// wantArgs is what argsPrinter prints for a command line.
func wantArgs(cmd []string) string { return strings.Join(cmd[1:], "\n") + "\n" }

// The Slurm plan is a bash job array over every run: the array's range is
// 0 to N-1 (throttled by Parallel), the #SBATCH lines come before any
// command, every run's line is in it once, bash -n accepts it, and array
// task K gives its binary exactly the K-th run's arguments (an index out
// of range, or none, fails).
func TestPlanSlurm(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on PATH")
	}
	bin := argsPrinter(t)
	out := "/sweep dir/100% it's"
	cmds := planCommands(t, bin, out, 10)
	var b strings.Builder
	if err := WritePlan(&b, cmds, PlanOptions{Format: PlanSlurm, Experiment: "mapreduce", Out: out, Parallel: 3, Time: "30"}); err != nil {
		t.Fatal(err)
	}
	script := b.String()
	lines := strings.Split(script, "\n")
	if lines[0] != "#!/bin/bash" {
		t.Errorf("first line %q", lines[0])
	}
	directives := map[string]string{}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "#") {
			break // sbatch reads #SBATCH lines up to the first command
		}
		if d, ok := strings.CutPrefix(l, "#SBATCH --"); ok {
			k, v, _ := strings.Cut(d, "=")
			directives[k] = v
		}
	}
	want := map[string]string{"job-name": "omega-bench-mapreduce", "array": "0-9%3", "cpus-per-task": "1", "time": "30",
		"output": `/sweep\ dir/100%%\ it\'s/slurm/%A_%a.out`}
	for k, v := range want {
		if directives[k] != v {
			t.Errorf("#SBATCH --%s=%q, want %q", k, directives[k], v)
		}
	}
	for k, c := range cmds {
		if n := strings.Count(script, "\n"+shellLine(c)+"\n"); n != 1 {
			t.Errorf("run %d's line is in the script %d times", k, n)
		}
	}
	path := filepath.Join(t.TempDir(), "plan.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := runScript(t, nil, bash, "-n", path); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, msg)
	}
	for k, c := range cmds {
		got, err := runScript(t, []string{"SLURM_ARRAY_TASK_ID=" + strconv.Itoa(k)}, bash, path)
		if err != nil || got != wantArgs(c) {
			t.Errorf("array task %d: %v, ran with\n%s\nwant\n%s", k, err, got, wantArgs(c))
		}
	}
	for _, env := range [][]string{{"SLURM_ARRAY_TASK_ID=10"}, {"SLURM_ARRAY_TASK_ID=x"}, nil} {
		if got, err := runScript(t, env, bash, path); err == nil {
			t.Errorf("%v: ran %q, want a failure", env, got)
		}
	}
}

// The k8s plan parses back as a ConfigMap of the runs, a line each, and a
// batch/v1 Indexed Job of one completion per run, its parallelism capped,
// the claim mounted at the sweep's directory and the ConfigMap beside it;
// the container's script given completion index K runs exactly the K-th
// run's arguments.
func TestPlanK8s(t *testing.T) {
	bin := argsPrinter(t)
	out := "/sweep dir/it's"
	cmds := planCommands(t, bin, out, 10)
	var b strings.Builder
	o := PlanOptions{Format: PlanK8s, Experiment: "mapreduce", Out: out, Parallel: 4, Image: "registry.example/omega:v1", Claim: "results"}
	if err := WritePlan(&b, cmds, o); err != nil {
		t.Fatal(err)
	}
	var cm, job map[string]any
	for _, doc := range strings.Split(b.String(), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		switch obj["kind"] {
		case "ConfigMap":
			cm = obj
		case "Job":
			job = obj
		default:
			t.Errorf("an object of kind %v", obj["kind"])
		}
	}
	if cm == nil || job == nil {
		t.Fatalf("want a ConfigMap and a Job:\n%s", b.String())
	}
	get := func(obj any, path ...any) any {
		t.Helper()
		for _, p := range path {
			switch k := p.(type) {
			case string:
				m, _ := obj.(map[string]any)
				obj = m[k]
			case int:
				l, _ := obj.([]any)
				if k >= len(l) {
					return nil
				}
				obj = l[k]
			}
		}
		return obj
	}
	if cm["apiVersion"] != "v1" || job["apiVersion"] != "batch/v1" || get(job, "metadata", "name") != "omega-bench-mapreduce" {
		t.Errorf("apiVersions %v and %v, job name %v", cm["apiVersion"], job["apiVersion"], get(job, "metadata", "name"))
	}
	spec := get(job, "spec")
	if get(spec, "completionMode") != "Indexed" || get(spec, "completions") != float64(len(cmds)) || get(spec, "parallelism") != float64(4) {
		t.Errorf("spec: completionMode %v, completions %v (want %d), parallelism %v (want 4)", get(spec, "completionMode"), get(spec, "completions"), len(cmds), get(spec, "parallelism"))
	}
	pod := get(spec, "template", "spec")
	if get(pod, "restartPolicy") != "Never" {
		t.Errorf("restartPolicy %v", get(pod, "restartPolicy"))
	}
	ctr := get(pod, "containers", 0)
	if get(ctr, "image") != o.Image || get(pod, "containers", 1) != nil {
		t.Errorf("containers: %v", get(pod, "containers"))
	}
	mounts := map[string]string{}
	for _, m := range get(ctr, "volumeMounts").([]any) {
		mounts[get(m, "name").(string)] = get(m, "mountPath").(string)
	}
	vols := map[string]any{}
	for _, v := range get(pod, "volumes").([]any) {
		vols[get(v, "name").(string)] = v
	}
	if get(vols["out"], "persistentVolumeClaim", "claimName") != "results" || mounts["out"] != out {
		t.Errorf("the out volume %v mounted at %q, want the claim results at %q", vols["out"], mounts["out"], out)
	}
	if get(vols["runs"], "configMap", "name") != get(cm, "metadata", "name") || mounts["runs"] == "" {
		t.Errorf("the runs volume %v at %q: want the ConfigMap %v", vols["runs"], mounts["runs"], get(cm, "metadata", "name"))
	}
	runs, _ := get(cm, "data", "runs").(string)
	var want []string
	for _, c := range cmds {
		want = append(want, shellLine(c))
	}
	if got := strings.Split(strings.TrimSuffix(runs, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("the ConfigMap's runs:\n%s\nwant a line per run:\n%s", runs, strings.Join(want, "\n"))
	}
	// The container's script, on the ConfigMap's file as mounted.
	command, _ := get(ctr, "command").([]any)
	if len(command) != 3 || command[0] != "/bin/sh" || command[1] != "-c" {
		t.Fatalf("command %v: want /bin/sh -c SCRIPT", command)
	}
	file := filepath.Join(t.TempDir(), "runs")
	if err := os.WriteFile(file, []byte(runs), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(command[2].(string), mounts["runs"]+"/runs", file)
	for k, c := range cmds {
		got, err := runScript(t, []string{"JOB_COMPLETION_INDEX=" + strconv.Itoa(k)}, "/bin/sh", "-c", script)
		if err != nil || got != wantArgs(c) {
			t.Errorf("completion %d: %v, ran with\n%s\nwant\n%s", k, err, got, wantArgs(c))
		}
	}
	if got, err := runScript(t, []string{"JOB_COMPLETION_INDEX=10"}, "/bin/sh", "-c", script); err == nil {
		t.Errorf("completion 10 of 10 runs: ran %q, want a failure", got)
	}
}

// The parallel format is the lines, a run a line (GNU parallel runs each
// through the shell); a run whose arguments hold a newline, which would
// make it two lines, is refused by the formats that read a run a line.
func TestPlanParallel(t *testing.T) {
	cmds := planCommands(t, "omega", "/o", 3)
	var lines, par strings.Builder
	if err := WritePlan(&lines, cmds, PlanOptions{Out: "/o"}); err != nil {
		t.Fatal(err)
	}
	if err := WritePlan(&par, cmds, PlanOptions{Format: PlanParallel, Out: "/o"}); err != nil || par.String() != lines.String() {
		t.Errorf("parallel (%v):\n%s\nwant the lines:\n%s", err, par.String(), lines.String())
	}
	bad := append(slices.Clone(cmds), []string{"omega", "sim", "--trace=/a\nb"})
	for _, f := range []PlanFormat{PlanParallel, PlanSlurm, PlanK8s} {
		var b strings.Builder
		if err := WritePlan(&b, bad, PlanOptions{Format: f, Out: "/o"}); err == nil || !strings.Contains(err.Error(), "run 3") || b.Len() > 0 {
			t.Errorf("%s with a newline in run 3: %v, wrote %d bytes", f, err, b.Len())
		}
	}
}

// Options WritePlan refuses, each named, and nothing written.
func TestPlanOptionsRefused(t *testing.T) {
	cmds := planCommands(t, "omega", "o", 1)
	for _, c := range []struct {
		o    PlanOptions
		want string
	}{
		{PlanOptions{Format: "pbs", Out: "o"}, `format "pbs": want lines, parallel, slurm or k8s`},
		{PlanOptions{Format: PlanSlurm, Out: "o", Time: "2h"}, `time "2h"`},
		{PlanOptions{Format: PlanSlurm, Out: `o\p`}, "backslash"},
		{PlanOptions{Format: PlanK8s, Out: "o"}, "absolute"},
		{PlanOptions{Format: PlanK8s, Out: "/"}, "absolute"},
		{PlanOptions{Format: PlanK8s, Out: "/o", Claim: "My_Claim"}, `claim "My_Claim"`},
		{PlanOptions{Format: PlanK8s, Out: "/o", Image: "omega latest"}, `image "omega latest"`},
		{PlanOptions{Format: PlanK8s, Out: "/o", Parallel: -1}, "parallel -1"},
	} {
		var b strings.Builder
		if err := WritePlan(&b, cmds, c.o); err == nil || !strings.Contains(err.Error(), c.want) || b.Len() > 0 {
			t.Errorf("%+v: %v, wrote %d bytes; want an error with %q", c.o, err, b.Len(), c.want)
		}
	}
	for _, ok := range []string{"30", "30:00", "2:00:00", "1-0", "1-12:00", "1-12:00:00", "UNLIMITED", "infinite"} {
		if err := CheckSlurmTime(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, f := range []PlanFormat{PlanSlurm, PlanK8s} {
		if err := WritePlan(new(strings.Builder), nil, PlanOptions{Format: f, Out: "/o"}); err == nil {
			t.Errorf("a %s plan of no runs: no error", f)
		}
	}
}
