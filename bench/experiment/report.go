package experiment

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/omega-cell/omega/internal/finite"
)

// Verdicts of a finding.
const (
	Reproduced    = "reproduces"
	Partly        = "partly"
	NotReproduced = "does not reproduce"
	NotMeasured   = "not measured"
)

// Finding sets a measured result beside the published one.
type Finding struct {
	// ID names the finding for good: "EXPERIMENT/what" (arch/two-level),
	// the key of its expected results (bench/experiment/expected).
	ID string `json:"id"`
	// Published is what the paper (or the lesson) says.
	Published string `json:"published"`
	// Measured is what this sweep measured.
	Measured string `json:"measured"`
	Verdict  string `json:"verdict"`
	// Why says, where the result does not reproduce (or only partly), what
	// explains the difference.
	Why string `json:"why,omitempty"`
}

// Analysis is what an experiment's results show.
type Analysis struct {
	Findings []Finding
	Figures  []Figure
	// Columns are the metrics report.md tabulates per cell.
	Columns []string
	// Notes are said in the report after the findings.
	Notes []string
}

// Report is the experiment's summary.json.
type Report struct {
	Experiment string       `json:"experiment"`
	Title      string       `json:"title"`
	Figures    string       `json:"figures,omitempty"`
	Quick      bool         `json:"quick"`
	Seeds      []uint64     `json:"seeds"`
	Runs       int          `json:"runs"`
	Cells      []CellReport `json:"cells"`
	Findings   []Finding    `json:"findings"`
	Notes      []string     `json:"notes,omitempty"`
}

// CellReport is one cell's figures over its seeds.
type CellReport struct {
	ID      string            `json:"id"`
	Axes    map[string]string `json:"axes"`
	Flags   []string          `json:"flags"`
	Metrics map[string]Spread `json:"metrics"`
}

// Write writes the sweep's results into out: results.csv, host.csv, the
// figures, summary.json and report.md. Everything but host.csv is the same
// for the same runs.
func (res *Results) Write(out string) error {
	e := res.Sweep.Experiment
	if res.StoreCost == nil {
		c, err := loadStoreCost(out)
		if err != nil {
			return err
		}
		res.StoreCost = c
	}
	an := e.analyze(res)
	files := map[string][]byte{}
	var b bytes.Buffer
	if err := res.WriteCSV(&b); err != nil {
		return err
	}
	files["results.csv"] = slices.Clone(b.Bytes())
	b.Reset()
	if err := res.WriteHostCSV(&b); err != nil {
		return err
	}
	files["host.csv"] = slices.Clone(b.Bytes())
	for _, f := range an.Figures {
		png, err := f.Render()
		if err != nil {
			return err
		}
		files[f.File] = png
	}
	rep := res.report(an)
	js, err := finite.JSON(rep)
	if err != nil {
		return fmt.Errorf("summary.json: %w", err)
	}
	files["summary.json"] = js
	b.Reset()
	res.writeMarkdown(&b, an)
	files["report.md"] = slices.Clone(b.Bytes())
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := writeAtomic(filepath.Join(out, name), files[name]); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic writes a file under a temporary name and renames it.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (res *Results) report(an Analysis) Report {
	s := res.Sweep
	r := Report{Experiment: s.Experiment.Name, Title: s.Experiment.Title, Figures: s.Experiment.Figures, Quick: s.Size.Quick,
		Seeds: s.Seeds, Runs: len(s.Runs), Findings: an.Findings, Notes: an.Notes}
	_, cols := res.Columns()
	for _, c := range s.Cells {
		cr := CellReport{ID: c.ID, Axes: map[string]string{}, Metrics: map[string]Spread{}}
		for _, a := range c.Axes {
			cr.Axes[a.Name] = a.Value
		}
		for _, f := range c.Flags {
			cr.Flags = append(cr.Flags, "--"+f.Name+"="+f.Value)
		}
		for _, m := range cols {
			if st, ok := res.Stat(c.ID, m); ok {
				cr.Metrics[m] = st
			}
		}
		r.Cells = append(r.Cells, cr)
	}
	return r
}

func (res *Results) writeMarkdown(w io.Writer, an Analysis) {
	s := res.Sweep
	e := s.Experiment
	fmt.Fprintf(w, "# omega bench %s: %s\n\n", e.Name, e.Title)
	if e.Figures != "" {
		fmt.Fprintf(w, "Reproduces the Omega paper's %s (Schwarzkopf et al., EuroSys 2013).\n\n", e.Figures)
	}
	size := "full size"
	if s.Size.Quick {
		size = "`--quick` (a small cell and a short horizon: the figures' shape, not the paper's values)"
	}
	if e.NeedsTrace() {
		size = strings.Replace(size, "a small cell and a short horizon", "a sample of the trace's machines and a short window", 1)
	}
	fmt.Fprintf(w, "%d cells x %s (%s) = %d simulations, %s. Every cell ran:\n\n", len(s.Cells), plural(len(s.Seeds), "seed"), seedList(s.Seeds), len(s.Runs), size)
	fmt.Fprintf(w, "    omega %s %s\n\n", e.Cmd(), strings.Join(commonFlags(s.Cells), " "))
	arrivals := arrivalsUsed(s.Cells)
	if e.NeedsTrace() {
		arrivals = "the trace's own submissions, at their times"
	}
	fmt.Fprintf(w, "with, per cell, the grid below (axes: %s). Arrivals: %s. Figures are medians over the seeds,\n", strings.Join(e.Axes, ", "), arrivals)
	fmt.Fprintf(w, "with their range where it differs. `results.csv` has every run, `host.csv` the wall time of each.\n\n")

	fmt.Fprintf(w, "## Findings\n\n| published | measured | verdict |\n|---|---|---|\n")
	for _, f := range an.Findings {
		fmt.Fprintf(w, "| %s | %s | **%s** |\n", cellText(f.Published), cellText(f.Measured), f.Verdict)
	}
	fmt.Fprintln(w)
	for _, f := range an.Findings {
		if f.Why != "" {
			fmt.Fprintf(w, "- *%s*: %s\n", firstWords(f.Published), f.Why)
		}
	}
	for _, n := range an.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
	if len(an.Figures) > 0 {
		fmt.Fprintf(w, "## Figures\n\n")
		for _, f := range an.Figures {
			fmt.Fprintf(w, "![%s](%s)\n\n*%s*\n\n", f.File, f.File, f.Caption)
		}
	}
	fmt.Fprintf(w, "## Cells\n\n")
	head := append(slices.Clone(e.Axes), an.Columns...)
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, c := range s.Cells {
		var row []string
		for _, a := range e.Axes {
			row = append(row, c.Axis(a))
		}
		for _, m := range an.Columns {
			st, ok := res.Stat(c.ID, m)
			row = append(row, fmtSpread(st, ok))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// fmtSpread is a median, with its range over seeds when they differ.
func fmtSpread(s Spread, ok bool) string {
	if !ok {
		return "–"
	}
	m := fmtNum(s.Median)
	if s.Min == s.Max {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, fmtNum(s.Min), fmtNum(s.Max))
}

// fmtNum writes a figure with three significant digits.
func fmtNum(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x == float64(int64(x)) && (x < 1e6 && x > -1e6):
		return strconv.FormatInt(int64(x), 10)
	case math.Abs(x) >= 1000 && math.Abs(x) < 1e9:
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func cellText(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// firstWords is the start of a sentence, to name a finding.
func firstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 6 {
		return strings.Join(f[:6], " ") + "…"
	}
	return s
}

func seedList(seeds []uint64) string {
	var s []string
	for _, x := range seeds {
		s = append(s, strconv.FormatUint(x, 10))
	}
	return "seeds " + strings.Join(s, ", ")
}

// commonFlags are the flags every cell sets to the same value.
func commonFlags(cells []Cell) []string {
	if len(cells) == 0 {
		return nil
	}
	var out []string
	for _, f := range cells[0].Flags {
		same := true
		for _, c := range cells[1:] {
			if c.Flag(f.Name) != f.Value {
				same = false
			}
		}
		if same {
			out = append(out, "--"+f.Name+"="+f.Value)
		}
	}
	return out
}

func arrivalsUsed(cells []Cell) string {
	var seen []string
	for _, c := range cells {
		a := c.Flag("arrivals")
		if a == "" {
			a = "poisson"
		}
		if !slices.Contains(seen, a) {
			seen = append(seen, a)
		}
	}
	var out []string
	for _, a := range seen {
		switch a {
		case "empirical":
			out = append(out, "the trace's own gaps (`--arrivals empirical`, as the paper's simulator draws them)")
		default:
			out = append(out, "exponential gaps with the trace's mean (`--arrivals poisson`)")
		}
	}
	return strings.Join(out, "; ")
}
