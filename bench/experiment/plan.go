package experiment

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// PlanFormat is the form a plan's runs take (`omega bench NAME --plan
// --plan-format F`). Every form runs the same command lines, each writing
// its run's directory, so `--collect` reads what any of them left.
type PlanFormat string

const (
	// PlanLines is one POSIX shell command line per run: the plan as it
	// always was, for a script or a batch system's own array.
	PlanLines PlanFormat = "lines"
	// PlanParallel is a GNU parallel job file: the same lines, each a
	// command parallel runs through the shell (`parallel -j N < FILE`);
	// a line is a run, so no argument may hold a newline.
	PlanParallel PlanFormat = "parallel"
	// PlanSlurm is a bash script of a Slurm job array (`sbatch FILE`):
	// array task K runs the K-th command line.
	PlanSlurm PlanFormat = "slurm"
	// PlanK8s is a Kubernetes ConfigMap holding the command lines and an
	// Indexed Job whose completion K runs the K-th (`kubectl apply -f
	// FILE`).
	PlanK8s PlanFormat = "k8s"
)

// PlanFormats are the formats, the default first.
var PlanFormats = []PlanFormat{PlanLines, PlanParallel, PlanSlurm, PlanK8s}

// ParsePlanFormat returns the format s names.
func ParsePlanFormat(s string) (PlanFormat, error) {
	for _, f := range PlanFormats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("want %s, %s, %s or %s", PlanFormats[0], PlanFormats[1], PlanFormats[2], PlanFormats[3])
}

const (
	// DefaultPlanTime is a Slurm run's time limit: 2 hours, four times the
	// longest run measured or projected on 2 cores (docs/BENCHMARKS.md: a
	// full-size simulation takes minutes, a replay of the whole Google 2011
	// trace is projected at 29 minutes). A larger cell or a slower node
	// needs more.
	DefaultPlanTime = "2:00:00"
	// DefaultPlanImage is the k8s container's image: one with the omega
	// binary on its PATH and a POSIX shell.
	DefaultPlanImage = "omega:latest"
	// DefaultPlanClaim is the PersistentVolumeClaim the k8s runs write to.
	DefaultPlanClaim = "omega-bench"
	// planMount is where the k8s container finds the ConfigMap's runs.
	planMount   = "/etc/omega-plan"
	planRunsKey = "runs"
)

// PlanOptions say how WritePlan writes a plan. Only Format and Out matter
// to the lines and parallel formats.
type PlanOptions struct {
	// Format is the plan's form; "" is PlanLines.
	Format PlanFormat
	// Experiment names the batch job (omega-bench-EXPERIMENT: Slurm's job
	// name, the Job's and its ConfigMap's) and the --collect the plan's
	// comment suggests; "" names it omega-bench.
	Experiment string
	// Out is the sweep's directory, as the command lines write under it:
	// Slurm's logs go to OUT/slurm/ (which sbatch does not create), and the
	// k8s container mounts the claim there, so it must be absolute.
	Out string
	// Parallel caps the runs at once, 0 for no cap (as many as the
	// cluster fits): Slurm's array throttle (--array=0-N%P), the Job's
	// parallelism (default: its completions).
	Parallel int
	// Time is each Slurm run's limit, as sbatch --time; "" is
	// DefaultPlanTime.
	Time string
	// Image is the k8s container's image; "" is DefaultPlanImage.
	Image string
	// Claim is the PersistentVolumeClaim mounted at Out in the k8s
	// container; "" is DefaultPlanClaim. It must be ReadWriteMany when the
	// runs land on several nodes.
	Claim string
}

// Validate reports every setting WritePlan would refuse.
func (o PlanOptions) Validate() error {
	var errs []error
	if o.Format != "" {
		if _, err := ParsePlanFormat(string(o.Format)); err != nil {
			errs = append(errs, fmt.Errorf("format %q: %w", o.Format, err))
		}
	}
	if o.Parallel < 0 {
		errs = append(errs, fmt.Errorf("parallel %d: want 0 (no cap) or more", o.Parallel))
	}
	switch o.Format {
	case PlanSlurm:
		if err := CheckSlurmTime(o.time()); err != nil {
			errs = append(errs, fmt.Errorf("time %q: %w", o.time(), err))
		}
		if err := CheckSlurmOut(o.Out); err != nil {
			errs = append(errs, fmt.Errorf("out %q: %w", o.Out, err))
		}
	case PlanK8s:
		if err := CheckK8sOut(o.Out); err != nil {
			errs = append(errs, fmt.Errorf("out %q: %w", o.Out, err))
		}
		if err := CheckImage(o.image()); err != nil {
			errs = append(errs, fmt.Errorf("image %q: %w", o.image(), err))
		}
		if err := CheckK8sName(o.claim()); err != nil {
			errs = append(errs, fmt.Errorf("claim %q: %w", o.claim(), err))
		}
	}
	return errors.Join(errs...)
}

func (o PlanOptions) time() string  { return orDefault(o.Time, DefaultPlanTime) }
func (o PlanOptions) image() string { return orDefault(o.Image, DefaultPlanImage) }
func (o PlanOptions) claim() string { return orDefault(o.Claim, DefaultPlanClaim) }

// jobName is the batch job's name, a DNS label (the experiments' names are).
func (o PlanOptions) jobName() string {
	if o.Experiment == "" {
		return "omega-bench"
	}
	return "omega-bench-" + o.Experiment
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

var slurmTime = regexp.MustCompile(`^(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2})$`)

// CheckSlurmTime checks a time limit as sbatch --time takes it.
func CheckSlurmTime(s string) error {
	if slurmTime.MatchString(s) || strings.EqualFold(s, "UNLIMITED") || strings.EqualFold(s, "INFINITE") {
		return nil
	}
	return errors.New("want a Slurm time limit: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS")
}

// CheckSlurmOut checks the sweep's directory for a Slurm plan: its logs'
// path in an #SBATCH line cannot hold a newline, nor a backslash (which
// would also turn off Slurm's %A and %a in --output).
func CheckSlurmOut(p string) error {
	if strings.ContainsAny(p, "\n\r\\") {
		return errors.New("a Slurm --output path cannot hold a newline or a backslash")
	}
	return nil
}

// CheckK8sOut checks the sweep's directory for a k8s plan: the claim is
// mounted there in the container, so it is an absolute path below /.
func CheckK8sOut(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
		return errors.New("the claim is mounted at the sweep's directory in the container: want an absolute path below /, such as /out")
	}
	if strings.ContainsAny(p, "\n\r") {
		return errors.New("want a path without a newline")
	}
	return nil
}

// CheckImage checks a container image reference (loosely: the registry
// has the last word).
func CheckImage(s string) error {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errors.New("want an image reference such as omega:latest or registry.example/omega:v1")
	}
	return nil
}

var k8sName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// CheckK8sName checks an object's name, as Kubernetes takes a
// PersistentVolumeClaim's (a DNS-1123 subdomain).
func CheckK8sName(s string) error {
	if len(s) > 253 || !k8sName.MatchString(s) {
		return errors.New("want a Kubernetes object name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters")
	}
	return nil
}

// Commands are the sweep's runs as command lines, in the order of its
// Runs: the binary, `sim` (or `replay`), the run's arguments, and
// --out=OUT/runs/CELL/seed-N. The caller owns the slices.
func (s *Sweep) Commands(binary, out string) [][]string {
	cmds := make([][]string, 0, len(s.Runs))
	for _, r := range s.Runs {
		args := append([]string{binary, s.Experiment.Cmd()}, r.Args()...)
		cmds = append(cmds, append(args, "--out="+filepath.Join(out, r.Dir)))
	}
	return cmds
}

// shellLine is a command line a POSIX shell runs as args.
func shellLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// WritePlan writes the runs cmds (Sweep.Commands, of one sweep or of
// several) in o's format: run them anywhere, then collect their
// directories. It writes nothing when o is invalid or a run cannot be
// put in the format (an argument with a newline, in the formats that hold
// a run a line).
func WritePlan(w io.Writer, cmds [][]string, o PlanOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	lines := make([]string, len(cmds))
	for i, c := range cmds {
		lines[i] = shellLine(c)
		if o.Format != "" && o.Format != PlanLines && strings.ContainsAny(lines[i], "\n\r") {
			return fmt.Errorf("run %d: an argument holds a newline, which a %s plan cannot hold (it reads a run a line)", i, o.Format)
		}
	}
	if len(cmds) == 0 && (o.Format == PlanSlurm || o.Format == PlanK8s) {
		return fmt.Errorf("a %s plan of no runs", o.Format)
	}
	var text string
	switch o.Format {
	case "", PlanLines, PlanParallel:
		if len(lines) > 0 {
			text = strings.Join(lines, "\n") + "\n"
		}
	case PlanSlurm:
		text = slurmScript(lines, o)
	case PlanK8s:
		var err error
		if text, err = k8sManifest(lines, o); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, text)
	return err
}

// slurmWord is s as one argument of an #SBATCH line (sbatch splits the
// line at spaces, takes quotes and a backslash escape, and starts a
// comment at #) naming a file (Slurm's %% is a literal %).
func slurmWord(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '%':
			b.WriteString("%%")
		case ' ', '\t', '"', '\'', '#':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// slurmRunsEnd ends the here-document of a Slurm script's runs (no run's
// line can be it: a line starts with the binary and its command).
const slurmRunsEnd = "OMEGA_RUNS"

// slurmRun is the end of a Slurm script: array task K evaluates the K-th
// line of cmds.
const slurmRun = slurmRunsEnd + `
i=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch: each array task runs one run}
if ! [[ $i =~ ^[0-9]+$ ]] || ((i >= ${#cmds[@]})); then
	echo "array task $i: the plan has runs 0 to $((${#cmds[@]} - 1))" >&2
	exit 1
fi
eval "exec ${cmds[i]}"
`

// slurmScript is a job array of one task per line: bash reads the lines,
// verbatim from a quoted here-document, into an array, and task K
// evaluates the K-th (a command line quoted for the shell, so eval runs
// exactly its arguments).
func slurmScript(lines []string, o PlanOptions) string {
	var b strings.Builder
	logs := filepath.Join(o.Out, "slurm")
	array := fmt.Sprintf("0-%d", len(lines)-1)
	if o.Parallel > 0 {
		array += "%" + strconv.Itoa(o.Parallel)
	}
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", o.jobName())
	fmt.Fprintf(&b, "#SBATCH --array=%s\n", array)
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", slurmWord(logs)+"/%A_%a.out")
	b.WriteString("#SBATCH --cpus-per-task=1\n")
	fmt.Fprintf(&b, "#SBATCH --time=%s\n", o.time())
	fmt.Fprintf(&b, "#\n# %s: %d runs, one an array task, each writing its own\n", o.jobName(), len(lines))
	fmt.Fprintf(&b, "# directory under %s. Slurm does not create the log directory;\n", shellQuote(o.Out))
	b.WriteString("# submit from the directory the plan was printed in (paths may be relative):\n")
	fmt.Fprintf(&b, "#   mkdir -p %s && sbatch THIS_FILE\n", shellQuote(logs))
	fmt.Fprintf(&b, "# then gather the results with omega bench %s, the flags that printed\n", orDefault(o.Experiment, "NAME"))
	fmt.Fprintf(&b, "# this plan, and --collect %s.\n", shellQuote(o.Out))
	fmt.Fprintf(&b, "set -eu\nmapfile -t cmds <<'%s'\n", slurmRunsEnd)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	b.WriteString(slurmRun)
	return b.String()
}

// The Kubernetes objects of a k8s plan, as much of each as the plan sets
// (field names as the API's: sigs.k8s.io/yaml writes them from the JSON
// tags).
type (
	k8sMeta struct {
		Name   string            `json:"name,omitempty"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	k8sConfigMap struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   k8sMeta           `json:"metadata"`
		Data       map[string]string `json:"data"`
	}
	k8sJob struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   k8sMeta    `json:"metadata"`
		Spec       k8sJobSpec `json:"spec"`
	}
	k8sJobSpec struct {
		CompletionMode string         `json:"completionMode"`
		Completions    int            `json:"completions"`
		Parallelism    int            `json:"parallelism"`
		Template       k8sPodTemplate `json:"template"`
	}
	k8sPodTemplate struct {
		Metadata k8sMeta    `json:"metadata"`
		Spec     k8sPodSpec `json:"spec"`
	}
	k8sPodSpec struct {
		RestartPolicy string         `json:"restartPolicy"`
		Containers    []k8sContainer `json:"containers"`
		Volumes       []k8sVolume    `json:"volumes"`
	}
	k8sContainer struct {
		Name         string           `json:"name"`
		Image        string           `json:"image"`
		Command      []string         `json:"command"`
		Resources    k8sResources     `json:"resources"`
		VolumeMounts []k8sVolumeMount `json:"volumeMounts"`
	}
	k8sResources struct {
		Requests map[string]string `json:"requests"`
	}
	k8sVolumeMount struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		ReadOnly  bool   `json:"readOnly,omitempty"`
	}
	k8sVolume struct {
		Name                  string              `json:"name"`
		PersistentVolumeClaim *k8sClaimSource     `json:"persistentVolumeClaim,omitempty"`
		ConfigMap             *k8sConfigMapSource `json:"configMap,omitempty"`
	}
	k8sClaimSource struct {
		ClaimName string `json:"claimName"`
	}
	k8sConfigMapSource struct {
		Name string `json:"name"`
	}
)

// k8sRun is the container's shell script: it runs the line of the
// ConfigMap's runs whose number is the pod's completion index (a command
// line quoted for the shell, so eval runs exactly its arguments).
const k8sRun = `: "${JOB_COMPLETION_INDEX:?run this as a completion of an Indexed Job}"
i=0
while IFS= read -r run; do
  if [ "$i" -eq "$JOB_COMPLETION_INDEX" ]; then eval "exec $run"; fi
  i=$((i + 1))
done < ` + planMount + "/" + planRunsKey + `
echo "completion $JOB_COMPLETION_INDEX: the plan has $i runs" >&2
exit 1
`

// k8sManifest is two YAML documents: a ConfigMap whose runs are the
// lines, and an Indexed Job of one completion per line, each mounting the
// claim at o.Out and the ConfigMap beside it.
func k8sManifest(lines []string, o PlanOptions) (string, error) {
	name := o.jobName()
	labels := map[string]string{"app.kubernetes.io/name": "omega-bench"}
	if o.Experiment != "" {
		labels["omega.io/experiment"] = o.Experiment
	}
	runs := ""
	if len(lines) > 0 {
		runs = strings.Join(lines, "\n") + "\n"
	}
	cm := k8sConfigMap{APIVersion: "v1", Kind: "ConfigMap", Metadata: k8sMeta{Name: name + "-runs", Labels: labels},
		Data: map[string]string{planRunsKey: runs}}
	parallelism := len(lines)
	if o.Parallel > 0 {
		parallelism = min(o.Parallel, len(lines))
	}
	job := k8sJob{APIVersion: "batch/v1", Kind: "Job", Metadata: k8sMeta{Name: name, Labels: labels},
		Spec: k8sJobSpec{CompletionMode: "Indexed", Completions: len(lines), Parallelism: parallelism,
			Template: k8sPodTemplate{Metadata: k8sMeta{Labels: labels}, Spec: k8sPodSpec{
				RestartPolicy: "Never",
				Containers: []k8sContainer{{
					Name: "omega", Image: o.image(), Command: []string{"/bin/sh", "-c", k8sRun},
					Resources: k8sResources{Requests: map[string]string{"cpu": "1"}},
					VolumeMounts: []k8sVolumeMount{
						{Name: "out", MountPath: filepath.Clean(o.Out)},
						{Name: "runs", MountPath: planMount, ReadOnly: true},
					},
				}},
				Volumes: []k8sVolume{
					{Name: "out", PersistentVolumeClaim: &k8sClaimSource{ClaimName: o.claim()}},
					{Name: "runs", ConfigMap: &k8sConfigMapSource{Name: cm.Metadata.Name}},
				},
			}}}}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %d runs, one a completion of an Indexed Job, each\n", name, len(lines))
	fmt.Fprintf(&b, "# writing its own directory under %s on the claim %s\n", o.Out, o.claim())
	b.WriteString("# (ReadWriteMany when the pods land on several nodes).\n")
	fmt.Fprintf(&b, "# Submit: kubectl apply -f THIS_FILE. Copy the claim's %s to a\n", o.Out)
	fmt.Fprintf(&b, "# directory DIR, then gather the results with omega bench %s, the\n", orDefault(o.Experiment, "NAME"))
	b.WriteString("# flags that printed this plan, and --collect DIR.\n")
	for i, obj := range []any{cm, job} {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.String(), nil
}
