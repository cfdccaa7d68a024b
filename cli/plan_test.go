package cli

import (
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/omega-cell/omega/bench/experiment"
)

// `omega bench NAME --plan` prints the lines it always printed (each
// sweep's Sweep.Plan, one after another), also with --plan-format lines;
// the parallel format is the same lines; the slurm and k8s plans hold the
// same runs, one an array task or a completion, throttled by --parallel
// when it is given.
func TestBenchPlanFormats(t *testing.T) {
	out := t.TempDir()
	var want strings.Builder
	for _, e := range experiment.Synthetic() {
		s, err := experiment.NewSweep(e, experiment.Size{Quick: true}, nil, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Plan(&want, "omega", out+"/"+e.Name); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"bench", "all", "--quick", "--seeds", "2", "--plan", "--out", out}
	for _, extra := range [][]string{nil, {"--plan-format", "lines"}, {"--plan-format", "parallel"}} {
		got, err := run(t, append(args, extra...)...)
		if err != nil || got != want.String() {
			t.Errorf("%v: %v, printed\n%s\nwant each sweep's Plan:\n%s", extra, err, got, want.String())
		}
	}
	runs := strings.Count(want.String(), "\n")
	slurm, err := run(t, append(args, "--plan-format", "slurm", "--parallel", "3", "--plan-time", "1-0")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"--array=0-" + strconv.Itoa(runs-1) + "%3", "--time=1-0", "--job-name=omega-bench-all", "--output=" + out + "/slurm/%A_%a.out"} {
		if !strings.Contains(slurm, "\n#SBATCH "+d+"\n") {
			t.Errorf("the slurm plan has no #SBATCH %s:\n%.600s", d, slurm)
		}
	}
	if !strings.Contains(slurm, "\n"+want.String()) {
		t.Errorf("the slurm plan does not hold the runs' lines in order")
	}
	k8s, err := run(t, append(args, "--plan-format", "k8s", "--plan-image", "reg.example/omega:v2", "--plan-claim", "sweeps")...)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(k8s, "\n---\n")
	var cm struct {
		Data map[string]string `json:"data"`
	}
	var job struct {
		Kind string `json:"kind"`
		Spec struct {
			CompletionMode           string `json:"completionMode"`
			Completions, Parallelism int
			Template                 struct {
				Spec struct {
					Containers []struct{ Image string } `json:"containers"`
					Volumes    []struct {
						PersistentVolumeClaim *struct{ ClaimName string } `json:"persistentVolumeClaim"`
					} `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if len(docs) != 2 || yaml.Unmarshal([]byte(docs[0]), &cm) != nil || yaml.Unmarshal([]byte(docs[1]), &job) != nil {
		t.Fatalf("the k8s plan is not a ConfigMap and a Job:\n%s", k8s)
	}
	sp := job.Spec
	if job.Kind != "Job" || sp.CompletionMode != "Indexed" || sp.Completions != runs || sp.Parallelism != runs || cm.Data["runs"] != want.String() {
		t.Errorf("the k8s plan: %s %s, %d completions, parallelism %d (want %d, every run: --parallel not given); the ConfigMap's runs equal to the lines: %v",
			job.Kind, sp.CompletionMode, sp.Completions, sp.Parallelism, runs, cm.Data["runs"] == want.String())
	}
	if c := sp.Template.Spec.Containers; len(c) != 1 || c[0].Image != "reg.example/omega:v2" || sp.Template.Spec.Volumes[0].PersistentVolumeClaim == nil || sp.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "sweeps" {
		t.Errorf("the pod's image and claim: %+v", sp.Template.Spec)
	}
	// The replay experiment plans omega replay runs in any format.
	tr := benchTrace(t)
	replay, err := run(t, "bench", "replay", "--quick", "--format", "google2011", "--trace", tr, "--plan", "--plan-format", "slurm", "--out", out)
	if err != nil || !strings.Contains(replay, "\n#SBATCH --array=0-7\n") || strings.Count(replay, "\nomega replay ") != 8 {
		t.Errorf("omega bench replay --plan-format slurm: %v\n%s", err, replay)
	}
}

// A plan flag that would do nothing, or a value a format cannot take, is
// refused before anything is printed, naming the flag and the value (at
// most 64 bytes of it) and what it wants.
func TestBenchPlanFormatRefused(t *testing.T) {
	long := "slurm-" + strings.Repeat("é", 40)
	sweep := t.TempDir() // where the sweep would run, were a refusal missed
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--plan", "--plan-format", "pbs"}, []string{`--plan-format "pbs": want lines, parallel, slurm or k8s`}},
		{[]string{"--plan", "--plan-format", long}, []string{`--plan-format "slurm-ééééééééééééééééééééééééééééé"...: want lines`}},
		{[]string{"--plan-format", "slurm"}, []string{`--plan-format "slurm": only with --plan`}},
		{[]string{"--plan", "--plan-time", "10"}, []string{`--plan-time "10": only with --plan --plan-format slurm`}},
		{[]string{"--plan", "--plan-format", "slurm", "--plan-image", "x"}, []string{`--plan-image "x": only with --plan --plan-format k8s`}},
		{[]string{"--plan-claim", "c"}, []string{`--plan-claim "c": only with --plan --plan-format k8s`}},
		{[]string{"--plan", "--plan-format", "slurm", "--plan-time", "2h"}, []string{`--plan-time "2h": want a Slurm time limit`}},
		{[]string{"--plan", "--plan-format", "k8s", "--plan-claim", "My_Claim", "--plan-image", "a b"}, []string{`--plan-claim "My_Claim"`, `--plan-image "a b"`}},
	} {
		out, err := run(t, append([]string{"bench", "n-batch", "--quick", "--days", "0.01", "--out", sweep}, c.args...)...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want an error with %s", c.args, err, w)
			}
		}
		if strings.Contains(out, "omega sim") || strings.Contains(out, "simulated hours") {
			t.Errorf("%v: printed a plan or ran:\n%s", c.args, out)
		}
	}
	if _, err := run(t, "bench", "n-batch", "--quick", "--plan", "--plan-format", "k8s", "--out", "sweep"); err == nil || !strings.Contains(err.Error(), `--out "sweep"`) || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a k8s plan into a relative --out: %v, want one asking for an absolute path", err)
	}
}
