package experiment

// Expected results, as reproducible-research repositories ship
// expected_results beside each figure: expected/NAME.yaml holds, for each
// of the experiment's findings (by its ID), what the reference simulator
// gave where it was run, and the band omega's runs are expected in — one
// for --quick runs (what the current quick run gives: quick runs are
// deterministic, so the band is tight, and a test holds them to it) and
// one for full runs (the verdicts expected, with the reason). report.md
// sets them beside the published and measured results.

import (
	"embed"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

//go:embed expected/*.yaml
var expectedFiles embed.FS

// ExpectedDir is where the expected files live, relative to the
// repository's root.
const ExpectedDir = "bench/experiment/expected"

// Expected is an experiment's expected results (expected/NAME.yaml). The
// field names sort as they read: the files are written by yaml.Marshal,
// which orders keys alphabetically.
type Expected struct {
	Experiment string            `json:"experiment"`
	Findings   []ExpectedFinding `json:"findings"`
	// ReferenceSource says which reference simulator ran, how and with
	// which seeds; ReferenceTable holds its values, a row per point.
	ReferenceSource string         `json:"reference_source,omitempty"`
	ReferenceTable  []ReferenceRow `json:"reference_table,omitempty"`
}

// ExpectedFinding is one finding's expected results.
type ExpectedFinding struct {
	// Finding is the finding's ID.
	Finding string `json:"finding"`
	// Full is the band of a full-size run, Quick that of a --quick run.
	Full      Band         `json:"full"`
	Quick     Band         `json:"quick"`
	Reference FindingsRefs `json:"reference"`
}

// FindingsRefs is what the reference simulator says on a finding: the
// reference table's rows (points) and columns (measures) that bear on it,
// or a text ("no reference run" where none is known).
type FindingsRefs struct {
	Measures []string `json:"measures,omitempty"`
	Points   []string `json:"points,omitempty"`
	Text     string   `json:"text,omitempty"`
}

// ReferenceRow is one point the reference simulator ran: its values by
// measure, one per seed.
type ReferenceRow struct {
	// Cell is omega's cell of the same point (at full size).
	Cell   string           `json:"cell"`
	Point  string           `json:"point"`
	Values []ReferenceValue `json:"values"`
}

// ReferenceValue is one measure of a reference point.
type ReferenceValue struct {
	// Measure is the reference table's column; Metric the results.csv
	// column of omega's that compares with it ("" if none does).
	Measure string `json:"measure"`
	Metric  string `json:"metric,omitempty"`
	// Note qualifies the values (what else the reference said).
	Note string `json:"note,omitempty"`
	// Seeds are the values at seeds 1, 2, ...
	Seeds []float64 `json:"seeds"`
}

// Band is where a run's finding is expected: one of the verdicts, and
// each metric in its range; Why says why in one line. A band without
// verdicts is not checked.
type Band struct {
	Metrics  []MetricBand `json:"metrics,omitempty"`
	Verdicts []string     `json:"verdicts,omitempty"`
	Why      string       `json:"why,omitempty"`
}

// MetricBand is a metric's range in one cell (the median over the seeds,
// as summary.json's cells hold it).
type MetricBand struct {
	Cell   string     `json:"cell"`
	Metric string     `json:"metric"`
	Range  [2]float64 `json:"range"`
}

var expectedCache sync.Map // name -> expectedLoad

type expectedLoad struct {
	x   *Expected
	err error
}

// ExpectedFor returns the named experiment's expected results (nil, and
// no error, if it has no file).
func ExpectedFor(name string) (*Expected, error) {
	if v, ok := expectedCache.Load(name); ok {
		l := v.(expectedLoad)
		return l.x, l.err
	}
	b, err := expectedFiles.ReadFile("expected/" + name + ".yaml")
	var x *Expected
	if err == nil {
		x, err = parseExpected(name, b)
	} else {
		err = nil
	}
	expectedCache.Store(name, expectedLoad{x, err})
	return x, err
}

func parseExpected(name string, b []byte) (*Expected, error) {
	var x Expected
	if err := yaml.UnmarshalStrict(b, &x); err != nil {
		return nil, fmt.Errorf("%s/%s.yaml: %w", ExpectedDir, name, err)
	}
	if x.Experiment != name {
		return nil, fmt.Errorf("%s/%s.yaml: experiment %q", ExpectedDir, name, x.Experiment)
	}
	seen := map[string]bool{}
	for _, f := range x.Findings {
		if seen[f.Finding] || !strings.HasPrefix(f.Finding, name+"/") {
			return nil, fmt.Errorf("%s/%s.yaml: finding %q twice or not of %s", ExpectedDir, name, f.Finding, name)
		}
		seen[f.Finding] = true
		for _, p := range f.Reference.Points {
			if x.row(p) == nil {
				return nil, fmt.Errorf("%s/%s.yaml: %s: no reference point %q", ExpectedDir, name, f.Finding, p)
			}
		}
	}
	return &x, nil
}

// MarshalExpected writes x as its file holds it.
func MarshalExpected(x *Expected) ([]byte, error) { return yaml.Marshal(x) }

// Finding returns the expected results of the finding id (nil if none).
func (x *Expected) Finding(id string) *ExpectedFinding {
	if x == nil {
		return nil
	}
	for i := range x.Findings {
		if x.Findings[i].Finding == id {
			return &x.Findings[i]
		}
	}
	return nil
}

func (x *Expected) row(point string) *ReferenceRow {
	for i := range x.ReferenceTable {
		if x.ReferenceTable[i].Point == point {
			return &x.ReferenceTable[i]
		}
	}
	return nil
}

// Band returns the band of a quick or a full run.
func (f *ExpectedFinding) Band(quick bool) *Band {
	if quick {
		return &f.Quick
	}
	return &f.Full
}

// BandCheck is a finding of a run held to its expected band.
type BandCheck struct {
	ID      string
	Quick   bool
	Verdict string
	// Band is nil when the finding has no expected results.
	Band    *Band
	Metrics []MetricCheck
	// Missing: the expected file names the finding, the run has none.
	Missing bool
}

// MetricCheck is one metric of a band, as the run measured it.
type MetricCheck struct {
	MetricBand
	Value float64
	Found bool
}

// OK reports whether the metric is in its range.
func (m MetricCheck) OK() bool {
	return m.Found && m.Value >= m.Range[0] && m.Value <= m.Range[1]
}

// Checked reports whether the finding has a band to be held to.
func (c BandCheck) Checked() bool { return c.Band != nil && len(c.Band.Verdicts) > 0 }

// VerdictOK reports whether the verdict is one the band expects.
func (c BandCheck) VerdictOK() bool {
	return c.Checked() && slices.Contains(c.Band.Verdicts, c.Verdict)
}

// OK reports whether the run's finding is in its band: its verdict one of
// the band's and every metric in its range.
func (c BandCheck) OK() bool {
	if !c.Checked() || c.Missing || !c.VerdictOK() {
		return false
	}
	for _, m := range c.Metrics {
		if !m.OK() {
			return false
		}
	}
	return true
}

// Problem says, for a check not OK, what is out of the band.
func (c BandCheck) Problem() string {
	size := "full"
	if c.Quick {
		size = "quick"
	}
	switch {
	case c.Band == nil:
		return fmt.Sprintf("%s: no expected results in %s", c.ID, ExpectedDir)
	case c.Missing:
		return fmt.Sprintf("%s: expected (%s band), but the run has no such finding", c.ID, size)
	case !c.Checked():
		return fmt.Sprintf("%s: no %s band", c.ID, size)
	}
	var p []string
	if !c.VerdictOK() {
		p = append(p, fmt.Sprintf("verdict %q, expected %s", c.Verdict, strings.Join(quoted(c.Band.Verdicts), " or ")))
	}
	for _, m := range c.Metrics {
		switch {
		case !m.Found:
			p = append(p, fmt.Sprintf("%s in %s: not in the run", m.Metric, m.Cell))
		case !m.OK():
			p = append(p, fmt.Sprintf("%s in %s = %s, expected %s", m.Metric, m.Cell, fmtNum(m.Value), m.rangeText()))
		}
	}
	return fmt.Sprintf("%s (%s band: %s): %s", c.ID, size, c.Band.Why, strings.Join(p, "; "))
}

func quoted(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, strconv.Quote(s))
	}
	return out
}

func (m MetricBand) rangeText() string {
	if m.Range[0] == m.Range[1] {
		return fmtNum(m.Range[0])
	}
	return fmtNum(m.Range[0]) + "–" + fmtNum(m.Range[1])
}

// CheckExpected holds a run's findings (its summary.json) to their
// expected bands (the quick band for a --quick run): a check per finding,
// in the run's order, then one per expected finding the run lacks. When
// the expected file does not parse, every finding's check has no band,
// and the error says why.
func CheckExpected(rep Report) ([]BandCheck, error) {
	x, err := ExpectedFor(rep.Experiment)
	if err != nil {
		x = nil
	}
	var out []BandCheck
	for _, f := range rep.Findings {
		c := BandCheck{ID: f.ID, Quick: rep.Quick, Verdict: f.Verdict}
		if ef := x.Finding(f.ID); ef != nil {
			c.Band = ef.Band(rep.Quick)
			for _, m := range c.Band.Metrics {
				mc := MetricCheck{MetricBand: m}
				if st, ok := cellMetric(rep, m.Cell, m.Metric); ok {
					mc.Value, mc.Found = st, true
				}
				c.Metrics = append(c.Metrics, mc)
			}
		}
		out = append(out, c)
	}
	if x != nil {
		for i := range x.Findings {
			ef := &x.Findings[i]
			if !slices.ContainsFunc(rep.Findings, func(f Finding) bool { return f.ID == ef.Finding }) && len(ef.Band(rep.Quick).Verdicts) > 0 {
				out = append(out, BandCheck{ID: ef.Finding, Quick: rep.Quick, Band: ef.Band(rep.Quick), Missing: true})
			}
		}
	}
	return out, err
}

func cellMetric(rep Report, cell, metric string) (float64, bool) {
	for _, c := range rep.Cells {
		if c.ID == cell {
			st, ok := c.Metrics[metric]
			return st.Median, ok
		}
	}
	return 0, false
}

// quickTolerance is the relative width of a quick band's metric range
// around the value measured when the band was written: quick runs are
// byte-identical for a seed, so any move of the engine's outcome shows;
// the margin keeps the band to what matters, not the last digit.
const quickTolerance = 0.1

// UpdateQuickBands rewrites the quick bands of the experiments' expected
// files under dir (the source tree's ExpectedDir) to what the reports (a
// --quick run's summary.json each) measured: each finding's verdict, and
// each metric its band names, within quickTolerance. A finding with no
// entry gets one, its reference "no reference run" and its full band
// empty, to be filled in by hand; an entry whose finding the run lacks
// loses its quick band. The metrics a band names, the full bands, the
// reference and the reasons are kept.
func UpdateQuickBands(dir string, reps []Report) error {
	for _, rep := range reps {
		if !rep.Quick {
			return fmt.Errorf("%s: not a --quick run", rep.Experiment)
		}
		path := filepath.Join(dir, rep.Experiment+".yaml")
		x := &Expected{Experiment: rep.Experiment}
		if b, err := os.ReadFile(path); err == nil {
			if x, err = parseExpected(rep.Experiment, b); err != nil {
				return err
			}
		} else if !os.IsNotExist(err) {
			return err
		}
		for _, f := range rep.Findings {
			ef := x.Finding(f.ID)
			if ef == nil {
				x.Findings = append(x.Findings, ExpectedFinding{Finding: f.ID, Reference: FindingsRefs{Text: "no reference run"},
					Quick: Band{Why: "what the quick run gave when the band was written"}})
				ef = &x.Findings[len(x.Findings)-1]
			}
			if !slices.Contains(ef.Quick.Verdicts, f.Verdict) {
				// A band of several verdicts, written by hand, stays
				// while the run's is one of them.
				ef.Quick.Verdicts = []string{f.Verdict}
			}
			for i := range ef.Quick.Metrics {
				m := &ef.Quick.Metrics[i]
				v, ok := cellMetric(rep, m.Cell, m.Metric)
				if !ok {
					return fmt.Errorf("%s: %s: the run has no %s in a cell %s: name another in %s by hand", rep.Experiment, f.ID, m.Metric, m.Cell, path)
				}
				m.Range = around(v, quickTolerance)
			}
		}
		for i := range x.Findings {
			if !slices.ContainsFunc(rep.Findings, func(f Finding) bool { return f.ID == x.Findings[i].Finding }) {
				x.Findings[i].Quick.Verdicts, x.Findings[i].Quick.Metrics = nil, nil
			}
		}
		b, err := MarshalExpected(x)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// around is v's range within a relative tolerance, rounded outwards to
// three significant digits (a zero stays exactly zero).
func around(v, tol float64) [2]float64 {
	if v == 0 {
		return [2]float64{0, 0}
	}
	lo, hi := v*(1-tol), v*(1+tol)
	if v < 0 {
		lo, hi = hi, lo
	}
	return [2]float64{round3(lo, math.Floor), round3(hi, math.Ceil)}
}

func round3(x float64, f func(float64) float64) float64 {
	if x == 0 {
		return 0
	}
	e := math.Pow(10, math.Floor(math.Log10(math.Abs(x)))-2)
	r := f(x/e) * e
	// Drop the binary noise of the scaling: 0.30000000000000004 is 0.3.
	r, _ = strconv.ParseFloat(strconv.FormatFloat(r, 'g', 3, 64), 64)
	return r
}

// referenceWithin reports whether omega's value is within the reference's
// values at its seeds, widened to their spread or 10% of their mean,
// whichever is larger (issue 28's figure for the arch table's rows).
func referenceWithin(v float64, seeds []float64) bool {
	if len(seeds) == 0 {
		return false
	}
	lo, hi, sum := seeds[0], seeds[0], 0.0
	for _, s := range seeds {
		lo, hi, sum = min(lo, s), max(hi, s), sum+s
	}
	mean := sum / float64(len(seeds))
	tol := max(hi-lo, 0.1*math.Abs(mean))
	return math.Abs(v-mean) <= tol+1e-9
}
