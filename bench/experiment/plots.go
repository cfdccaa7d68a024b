package experiment

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figure is one PNG of the report.
type Figure struct {
	File    string // its name in the sweep's directory
	Caption string
	make    func() (*plot.Plot, error)
}

// Render draws the figure as PNG bytes.
func (f Figure) Render() ([]byte, error) {
	p, err := f.make()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.File, err)
	}
	wt, err := p.WriterTo(16*vg.Centimeter, 11*vg.Centimeter, "png")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.File, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("%s: %w", f.File, err)
	}
	return b.Bytes(), nil
}

// series is one line of a chart: its points, and each point's spread
// over seeds (Lo and Hi, absolute; nil for none).
type series struct {
	label  string
	x, y   []float64
	lo, hi []float64
	dashed bool
}

// hline is a horizontal reference line (an SLO).
type hline struct {
	y     float64
	label string
}

// lineChart is the paper's kind of figure: a metric against a swept
// parameter, one line per configuration, with the seeds' spread as error
// bars.
type lineChart struct {
	title, xlabel, ylabel string
	logX, logY            bool
	series                []series
	hlines                []hline
}

// logFloor is where a log axis starts: values at or below it (a zero wait)
// are drawn at it.
const logFloor = 1e-3

var lineColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

func (c lineChart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text, p.Y.Label.Text = c.xlabel, c.ylabel
	clamp := func(v float64, log bool) float64 {
		if log && !(v > logFloor) {
			return logFloor
		}
		return v
	}
	if c.logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if c.logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Legend.Top, p.Legend.Left = true, true
	for i, s := range c.series {
		pts := make(plotter.XYs, len(s.x))
		for k := range s.x {
			pts[k] = plotter.XY{X: clamp(s.x[k], c.logX), Y: clamp(s.y[k], c.logY)}
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		col := lineColors[i%len(lineColors)]
		l.Color, sc.Color = col, col
		sc.Shape = draw.CircleGlyph{}
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, sc)
		p.Legend.Add(s.label, l, sc)
		if s.lo != nil {
			eb := errBars{pts: pts}
			for k := range s.x {
				eb.lo = append(eb.lo, pts[k].Y-clamp(s.lo[k], c.logY))
				eb.hi = append(eb.hi, clamp(s.hi[k], c.logY)-pts[k].Y)
			}
			bars, err := plotter.NewYErrorBars(eb)
			if err != nil {
				return nil, err
			}
			bars.Color = col
			p.Add(bars)
		}
	}
	for _, h := range c.hlines {
		xmin, xmax := p.X.Min, p.X.Max
		line, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: h.y}, {X: xmax, Y: h.y}})
		if err != nil {
			return nil, err
		}
		line.Color = color.Gray{0x60}
		line.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(line)
		p.Legend.Add(h.label, line)
	}
	return p, nil
}

type errBars struct {
	pts    plotter.XYs
	lo, hi []float64
}

func (e errBars) Len() int                        { return len(e.pts) }
func (e errBars) XY(i int) (float64, float64)     { return e.pts[i].X, e.pts[i].Y }
func (e errBars) YError(i int) (float64, float64) { return e.lo[i], e.hi[i] }

// barChart is grouped bars: one group per category, one bar per series.
type barChart struct {
	title, ylabel string
	categories    []string
	series        []series // y only, one value per category
}

func (c barChart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.Y.Label.Text = c.ylabel
	w := vg.Points(float64(min(20, 120/max(1, len(c.series)*len(c.categories)/2+1))))
	w = max(w, vg.Points(6))
	p.Legend.Top = true
	for i, s := range c.series {
		b, err := plotter.NewBarChart(plotter.Values(s.y), w)
		if err != nil {
			return nil, err
		}
		b.Color = lineColors[i%len(lineColors)]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(c.series)-1)/2)
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	p.NominalX(c.categories...)
	return p, nil
}

// heatMap is a metric over two swept parameters, cells marked where a
// condition held (work went unscheduled).
type heatMap struct {
	title, xlabel, ylabel string
	xs, ys                []float64 // the axes' values (drawn by index, labelled by value)
	z                     [][]float64
	marked                [][]bool
	markLabel             string
}

func (h heatMap) Dims() (int, int)   { return len(h.xs), len(h.ys) }
func (h heatMap) Z(c, r int) float64 { return h.z[c][r] }
func (h heatMap) X(c int) float64    { return float64(c) }
func (h heatMap) Y(r int) float64    { return float64(r) }
func (h heatMap) Min() float64       { return 0 }
func (h heatMap) Max() float64       { return 1 }
func (h heatMap) String() string     { return h.title }
func (h heatMap) labels(v []float64) []plot.Tick {
	var t []plot.Tick
	for i, x := range v {
		t = append(t, plot.Tick{Value: float64(i), Label: strconv.FormatFloat(x, 'g', -1, 64)})
	}
	return t
}

func (h heatMap) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = h.title
	p.X.Label.Text, p.Y.Label.Text = h.xlabel, h.ylabel
	hm := plotter.NewHeatMap(h, palette.Heat(32, 1))
	p.Add(hm)
	p.X.Tick.Marker = plot.ConstantTicks(h.labels(h.xs))
	p.Y.Tick.Marker = plot.ConstantTicks(h.labels(h.ys))
	var marks plotter.XYs
	for c := range h.xs {
		for r := range h.ys {
			if h.marked[c][r] {
				marks = append(marks, plotter.XY{X: float64(c), Y: float64(r)})
			}
		}
	}
	if len(marks) > 0 {
		sc, err := plotter.NewScatter(marks)
		if err != nil {
			return nil, err
		}
		sc.Shape = draw.CrossGlyph{}
		sc.Radius = vg.Points(6)
		sc.Color = color.Black
		p.Add(sc)
		p.Legend.Add(h.markLabel, sc)
	}
	// The values, printed in their cells.
	var lab plotter.XYLabels
	for c := range h.xs {
		for r := range h.ys {
			lab.XYs = append(lab.XYs, plotter.XY{X: float64(c), Y: float64(r) - 0.3})
			lab.Labels = append(lab.Labels, strconv.FormatFloat(math.Round(h.z[c][r]*100)/100, 'f', 2, 64))
		}
	}
	if len(lab.XYs) > 0 {
		l, err := plotter.NewLabels(lab)
		if err != nil {
			return nil, err
		}
		p.Add(l)
	}
	return p, nil
}
