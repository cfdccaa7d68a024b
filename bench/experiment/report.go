package experiment

import (
	"bytes"
	"cmp"
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
	fmt.Fprintf(w, "with, per cell, the grid below (axes: %s). Arrivals: %s. Placement: %s. Figures are medians over the seeds,\n", strings.Join(e.Axes, ", "), arrivals, placementUsed(s.Cells))
	fmt.Fprintf(w, "with their range where it differs. `results.csv` has every run, `host.csv` the wall time of each.\n\n")

	x, xerr := ExpectedFor(e.Name)
	checks, _ := CheckExpected(res.report(an))
	fmt.Fprintf(w, "## Findings\n\n| finding | published | reference | expected | measured | verdict | in band |\n|---|---|---|---|---|---|---|\n")
	for i, f := range an.Findings {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | **%s** | %s |\n", f.ID, cellText(f.Published), cellText(x.referenceCell(f.ID)),
			cellText(expectedCell(checks[i])), cellText(f.Measured), f.Verdict, inBandCell(checks[i]))
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
	writeExpected(w, res, x, xerr, checks)
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

// placementUsed says how the cells' built-in schedulers picked machines
// (omega sim --placement).
func placementUsed(cells []Cell) string {
	return flagUsed(cells, "placement", "best-fit", map[string]string{
		"random-first-fit": "randomized first fit for every scheduler, as the paper's simulator places tasks (`--placement random-first-fit`)",
		"best-fit":         "each scheduler's own policy, the service scheduler's best fit with spreading (`--placement best-fit`)",
	})
}

func arrivalsUsed(cells []Cell) string {
	return flagUsed(cells, "arrivals", "poisson", map[string]string{
		"empirical": "the trace's own gaps (`--arrivals empirical`, as the paper's simulator draws them)",
		"poisson":   "exponential gaps with the trace's mean (`--arrivals poisson`)",
	})
}

// flagUsed says, in the words of say, the values the cells give flag (dflt
// where a cell does not set it), in the order first seen.
func flagUsed(cells []Cell, flag, dflt string, say map[string]string) string {
	var out []string
	for _, c := range cells {
		v := c.Flag(flag)
		if v == "" {
			v = dflt
		}
		if w := cmp.Or(say[v], say[dflt]); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return strings.Join(out, "; ")
}

// referenceCell is the findings table's reference column: the reference
// simulator's points that bear on the finding (their values in the
// Reference section), or its text.
func (x *Expected) referenceCell(id string) string {
	ef := x.Finding(id)
	switch {
	case ef == nil:
		return "–"
	case len(ef.Reference.Points) > 0:
		return "Reference below: " + strings.Join(ef.Reference.Points, "; ")
	}
	return ef.Reference.Text
}

// expectedCell is the findings table's expected column: the band's
// verdicts (its metrics and reason under Expected results).
func expectedCell(c BandCheck) string {
	if !c.Checked() {
		return "no band"
	}
	return strings.Join(c.Band.Verdicts, " or ")
}

// InBand says, for each of the analysis' findings in order, whether it is
// in its expected band: "yes", "**no**", or "–" where it has none (the
// column of report.md and of omega bench all's index).
func (res *Results) InBand() []string {
	an := res.Sweep.Experiment.analyze(res)
	checks, _ := CheckExpected(res.report(an))
	out := make([]string, len(an.Findings))
	for i := range out {
		out[i] = "–"
		if i < len(checks) {
			out[i] = inBandCell(checks[i])
		}
	}
	return out
}

func inBandCell(c BandCheck) string {
	switch {
	case !c.Checked():
		return "–"
	case c.OK():
		return "yes"
	}
	return "**no**"
}

// writeExpected writes report.md's expected results: each finding's band
// (the quick one for a --quick run), its metrics measured against it, and
// the reference simulator's values beside this run's.
func writeExpected(w io.Writer, res *Results, x *Expected, xerr error, checks []BandCheck) {
	size, other := "full-size", "--quick"
	if res.Sweep.Size.Quick {
		size, other = "--quick", "full-size"
	}
	fmt.Fprintf(w, "## Expected results\n\n")
	if xerr != nil || x == nil {
		fmt.Fprintf(w, "No expected results (%s/%s.yaml): %v\n\n", ExpectedDir, res.Sweep.Experiment.Name, xerr)
		return
	}
	out := 0
	for _, c := range checks {
		if c.Checked() && !c.OK() {
			out++
		}
	}
	fmt.Fprintf(w, "The %s bands of `%s/%s.yaml` (its %s bands are for the other size): a finding is in its band when its verdict is one the band expects and every metric it names, the median over the seeds in that cell, is in its range. ",
		size, ExpectedDir, res.Sweep.Experiment.Name, other)
	if out == 0 {
		fmt.Fprintf(w, "Every finding with a band is in it.\n\n")
	} else {
		fmt.Fprintf(w, "**%d out of their band.**\n\n", out)
	}
	for _, c := range checks {
		if c.Band == nil {
			fmt.Fprintf(w, "- `%s`: no expected results\n", c.ID)
			continue
		}
		state := "in its band"
		switch {
		case !c.Checked():
			state = "no " + size + " band"
		case c.Missing:
			state = "**expected, but not in this run**"
		case !c.OK():
			state = "**out of its band**"
		}
		fmt.Fprintf(w, "- `%s`: %s", c.ID, state)
		if c.Checked() {
			fmt.Fprintf(w, "; expected %s, measured %s", strings.Join(c.Band.Verdicts, " or "), cmp.Or(c.Verdict, "–"))
		}
		if c.Band.Why != "" {
			fmt.Fprintf(w, " — %s", c.Band.Why)
		}
		fmt.Fprintln(w)
		for _, m := range c.Metrics {
			v, mark := "not in this run", "✗"
			if m.Found {
				v = fmtNum(m.Value)
				if m.OK() {
					mark = "✓"
				}
			}
			fmt.Fprintf(w, "  - %s `%s` in `%s`: %s, expected %s\n", mark, m.Metric, m.Cell, v, m.rangeText())
		}
	}
	fmt.Fprintln(w)
	if len(x.ReferenceTable) == 0 {
		return
	}
	fmt.Fprintf(w, "### Reference\n\n%s\n\n", x.ReferenceSource)
	if res.Sweep.Size.Quick {
		fmt.Fprintf(w, "A --quick run's cells are not the reference's (a tenth of the machines, a quarter of the day): this run's values are shown where the cell is in the grid, not held to the reference.\n\n")
	} else {
		fmt.Fprintf(w, "Within: this run's value (the median over its seeds) is within the reference's values at its seeds, widened to their spread or 10%%, whichever is larger.\n\n")
	}
	fmt.Fprintf(w, "| point | measure | seed 1 | seed 2 | omega (metric) | within |\n|---|---|---|---|---|---|\n")
	for _, r := range x.ReferenceTable {
		for _, v := range r.Values {
			var seeds [2]string
			for i := range seeds {
				seeds[i] = "–"
				if i < len(v.Seeds) {
					seeds[i] = fmtNum(v.Seeds[i])
				}
			}
			measure := v.Measure
			if v.Note != "" {
				measure += " (" + v.Note + ")"
			}
			ours, within := "–", "–"
			if st, ok := res.Stat(r.Cell, v.Metric); ok && v.Metric != "" {
				ours = fmtSpread(st, true)
				if !res.Sweep.Size.Quick {
					within = "**no**"
					if referenceWithin(st.Median, v.Seeds) {
						within = "yes"
					}
				}
			}
			if v.Metric != "" {
				ours += " (`" + v.Metric + "`)"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Point, cellText(measure), seeds[0], seeds[1], ours, within)
		}
	}
	fmt.Fprintln(w)
}
