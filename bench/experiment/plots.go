package experiment

import (
	"bytes"
	"cmp"
	"fmt"
	"image"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Figure is one PNG of the report.
type Figure struct {
	File    string // its name in the sweep's directory
	Caption string
	make    func() (*plot.Plot, error)
}

// The figure's size: the plot's, and the legend's column beside it.
const (
	figureWidth  = 16 * vg.Centimeter
	figureHeight = 11 * vg.Centimeter
	legendGap    = 8   // points between the data area and the legend, and after it
	figureDPI    = 144 // enough to tell the markers apart when zoomed
)

// Render draws the figure as PNG bytes: the plot, and its legend to the
// right of the data area, where it hides no line.
func (f Figure) Render() ([]byte, error) {
	p, err := f.make()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.File, err)
	}
	leg := p.Legend
	p.Legend = plot.NewLegend()
	lr := leg.Rectangle(draw.Canvas{})
	lw := lr.Max.X - lr.Min.X
	if lw > 0 {
		lw += 2 * vg.Points(legendGap)
	}
	img := vgimg.NewWith(vgimg.UseWH(figureWidth+lw, figureHeight), vgimg.UseDPI(figureDPI), vgimg.UseBackgroundColor(color.White))
	c := vgimg.PngCanvas{Canvas: img}
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	if lw > 0 {
		top := vg.Length(0)
		if p.Title.Text != "" {
			top = p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
		}
		leg.Top, leg.Left = true, true
		leg.Draw(draw.Crop(dc, figureWidth+vg.Points(legendGap), -vg.Points(legendGap), 0, -top))
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
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
	// dashed says the series is of the chart's second kind (a service
	// scheduler's beside a batch one's, a p90 beside a p50): drawn dashed
	// where the others are solid.
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

var lineColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// shape is a marker's outline. Series are drawn with filled markers; the
// same shape hollow marks a zero a log axis cannot show, drawn at the
// axis's floor.
type shape int

const (
	circle shape = iota
	square
	triangleUp
	diamond
	triangleDown
	pentagon
	star
	hexagon
	nShapes
	noShape shape = -1 // a reference line's
)

// dashes are the lines' patterns, in points (nil: solid).
var dashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(1), vg.Points(2.5)},
	{vg.Points(6), vg.Points(2.5), vg.Points(1), vg.Points(2.5)},
	{vg.Points(11), vg.Points(3)},
	{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2), vg.Points(1), vg.Points(2)},
	{vg.Points(3), vg.Points(2)},
	{vg.Points(11), vg.Points(2.5), vg.Points(4), vg.Points(2.5)},
}

// refDashes are the reference lines' (hline) patterns: dotted, each its
// own spacing.
var refDashes = [][]vg.Length{
	{vg.Points(1.5), vg.Points(2)},
	{vg.Points(1.5), vg.Points(5)},
	{vg.Points(4), vg.Points(2), vg.Points(1.5), vg.Points(2), vg.Points(1.5), vg.Points(2), vg.Points(1.5), vg.Points(2)},
}

// seriesStyle is how one legend entry is drawn.
type seriesStyle struct {
	label  string
	shape  shape
	dash   int // into dashes (or refDashes, for a reference line)
	ref    bool
	hollow bool // the zeros' entry
	bar    bool
	color  color.Color
	radius vg.Length
}

func (s seriesStyle) dashes() []vg.Length {
	if s.ref {
		return refDashes[s.dash%len(refDashes)]
	}
	return dashes[s.dash%len(dashes)]
}

// styleSeries gives each series of a chart its marker, dashes, colour and
// marker size: no two share both shape and dashes. Where the chart marks
// a second kind of series dashed, the dashes say the kind (solid or
// dashed) and the shapes tell the series apart; otherwise both vary. The
// markers shrink from the first series to the last, so that where lines
// coincide each earlier (larger) marker shows around the later one drawn
// over it.
func styleSeries(ss []series) []seriesStyle {
	kinds := slices.ContainsFunc(ss, func(s series) bool { return s.dashed })
	out := make([]seriesStyle, len(ss))
	for i, s := range ss {
		st := seriesStyle{label: s.label, shape: shape(i % int(nShapes)), color: lineColors[i%len(lineColors)],
			radius: vg.Points(max(2.2, 5.5-0.5*float64(i)))}
		round := i / int(nShapes)
		if kinds {
			st.dash = 2 * round
			if s.dashed {
				st.dash++
			}
		} else {
			st.dash = i + round
		}
		out[i] = st
	}
	return out
}

// glyph draws a shape, filled (with a thin white edge, to part
// overlapping markers) or hollow (its edge only, so that hollow markers
// at one point nest and all show).
type glyph struct {
	shape  shape
	hollow bool
}

func (g glyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	path := shapePath(g.shape, sty.Radius, pt)
	if g.hollow {
		c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(1.3)})
		c.Stroke(path)
		return
	}
	c.SetColor(sty.Color)
	c.Fill(path)
	c.SetLineStyle(draw.LineStyle{Color: color.White, Width: vg.Points(0.6)})
	c.Stroke(path)
}

// shapePath is the outline of a shape of radius r (sized so that the
// shapes look alike in area) around pt.
func shapePath(s shape, r vg.Length, pt vg.Point) vg.Path {
	var p vg.Path
	// star is a polygon too: n vertices from start, vertex k at radius(k).
	vertices := func(n int, start float64, radius func(k int) vg.Length) {
		for k := 0; k < n; k++ {
			a := start + 2*math.Pi*float64(k)/float64(n)
			rr := radius(k)
			q := vg.Point{X: pt.X + rr*vg.Length(math.Cos(a)), Y: pt.Y + rr*vg.Length(math.Sin(a))}
			if k == 0 {
				p.Move(q)
			} else {
				p.Line(q)
			}
		}
		p.Close()
	}
	poly := func(n int, r vg.Length, start float64) {
		vertices(n, start, func(int) vg.Length { return r })
	}
	switch s {
	case square:
		poly(4, r*1.1, math.Pi/4)
	case triangleUp:
		poly(3, r*1.2, math.Pi/2)
	case diamond:
		poly(4, r*1.2, 0)
	case triangleDown:
		poly(3, r*1.2, -math.Pi/2)
	case pentagon:
		poly(5, r*1.1, math.Pi/2)
	case hexagon:
		poly(6, r*1.05, 0)
	case star:
		vertices(10, math.Pi/2, func(k int) vg.Length {
			if k%2 == 1 {
				return r * 0.6
			}
			return r * 1.3
		})
	default:
		p.Move(vg.Point{X: pt.X + r, Y: pt.Y})
		p.Arc(pt, r, 0, 2*math.Pi)
		p.Close()
	}
	return p
}

// legendThumb is a legend entry's icon: the series' line with its
// dashes and marker (or a bar's colour with its marker).
type legendThumb struct{ st seriesStyle }

func (t legendThumb) Thumbnail(c *draw.Canvas) {
	if r, ok := c.Canvas.(*styleRecorder); ok {
		r.styles = append(r.styles, t.st)
		return
	}
	y := c.Center().Y
	if t.st.bar {
		h := (c.Max.Y - c.Min.Y) * 0.8
		c.FillPolygon(t.st.color, []vg.Point{{X: c.Min.X, Y: y - h/2}, {X: c.Max.X, Y: y - h/2}, {X: c.Max.X, Y: y + h/2}, {X: c.Min.X, Y: y + h/2}})
	} else if !t.st.hollow {
		c.StrokeLine2(draw.LineStyle{Color: t.st.color, Width: vg.Points(1.4), Dashes: t.st.dashes()}, c.Min.X, y, c.Max.X, y)
	}
	if t.st.shape != noShape {
		c.DrawGlyphNoClip(draw.GlyphStyle{Color: t.st.color, Radius: t.st.radius, Shape: glyph{t.st.shape, t.st.hollow}}, vg.Point{X: c.Center().X, Y: y})
	}
}

// styleRecorder is a canvas that draws nothing: drawing a legend on it
// collects its entries' styles (legendStyles).
type styleRecorder struct{ styles []seriesStyle }

func (*styleRecorder) SetLineWidth(vg.Length)                 {}
func (*styleRecorder) SetLineDash([]vg.Length, vg.Length)     {}
func (*styleRecorder) SetColor(color.Color)                   {}
func (*styleRecorder) Rotate(float64)                         {}
func (*styleRecorder) Translate(vg.Point)                     {}
func (*styleRecorder) Scale(float64, float64)                 {}
func (*styleRecorder) Push()                                  {}
func (*styleRecorder) Pop()                                   {}
func (*styleRecorder) Stroke(vg.Path)                         {}
func (*styleRecorder) Fill(vg.Path)                           {}
func (*styleRecorder) FillString(font.Face, vg.Point, string) {}
func (*styleRecorder) DrawImage(vg.Rectangle, image.Image)    {}

// legendStyles are the styles of a plot's legend entries drawn by this
// file's charts, in the legend's order.
func legendStyles(p *plot.Plot) []seriesStyle {
	r := &styleRecorder{}
	l := p.Legend
	l.Draw(draw.Canvas{Canvas: r, Rectangle: vg.Rectangle{Max: vg.Point{X: figureWidth, Y: figureHeight}}})
	return r.styles
}

// axisRange is an axis's extent from the values drawn on it, and, on a
// log axis, where its zeros go.
type axisRange struct {
	min, max float64
	zeroAt   float64 // a log axis's floor, where values ≤ 0 are drawn
	zeros    bool    // some value was ≤ 0 on a log axis
}

// rangeOf is the range of an axis over vals. A linear axis of values
// that cannot be negative starts at 0 when its values start near it, and
// all zeros (or one value) get a small range above 0, never one centred
// on 0. A log axis of values that include zeros reaches down to a whole
// decade below the smallest positive one, and draws the zeros there.
func rangeOf(vals []float64, log bool) axisRange {
	var pos []float64
	zeros := false
	for _, v := range vals {
		if v > 0 {
			pos = append(pos, v)
		} else if !math.IsNaN(v) {
			zeros = true
		}
	}
	if log {
		if len(pos) == 0 {
			return axisRange{min: 1e-3, max: 1, zeroAt: 1e-3, zeros: zeros}
		}
		lo, hi := slices.Min(pos), slices.Max(pos)
		r := axisRange{min: lo, max: hi, zeros: zeros}
		if zeros {
			floor := math.Pow(10, math.Floor(math.Log10(lo)))
			if lo < 2*floor {
				floor /= 10
			}
			r.min, r.zeroAt = floor, floor
		}
		if r.max <= r.min {
			r.max = r.min * 10
		}
		return r
	}
	if len(vals) == 0 {
		return axisRange{min: 0, max: 1}
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	switch {
	case lo >= 0 && hi == 0:
		return axisRange{min: 0, max: 1}
	case lo >= 0 && (lo == hi || lo <= hi/2):
		return axisRange{min: 0, max: hi * 1.05}
	case lo == hi:
		return axisRange{min: lo - math.Abs(lo)*0.1, max: hi + math.Abs(hi)*0.1}
	}
	pad := (hi - lo) * 0.05
	return axisRange{min: max(lo-pad, min(lo, 0)), max: hi + pad}
}

// at is where v is drawn on the axis.
func (r axisRange) at(v float64, log bool) float64 {
	if log && !(v > 0) {
		return r.zeroAt
	}
	return v
}

// ticks labels a log axis: at the swept values when there are few (the
// grid's own points), else at the decades (and 2 and 5 when the axis
// spans less than two), with unlabelled minor ticks between.
type logTicks struct{ at []float64 }

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	label := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	labelled := map[float64]bool{}
	if n := len(t.at); n >= 2 && n <= 10 {
		for _, v := range t.at {
			if v >= lo && v <= hi {
				labelled[v] = true
			}
		}
	}
	d0, d1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	fine := len(labelled) == 0 && d1-d0 <= 2
	for d := d0; d <= d1; d++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(d)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if len(labelled) == 0 && (m == 1 || fine && (m == 2 || m == 5)) {
				tk.Label = label(v)
			}
			ticks = append(ticks, tk)
		}
	}
	for v := range labelled {
		ticks = append(ticks, plot.Tick{Value: v, Label: label(v)})
	}
	slices.SortFunc(ticks, func(a, b plot.Tick) int {
		// by value; at one value, the labelled tick first
		return cmp.Or(cmp.Compare(a.Value, b.Value), -cmp.Compare(a.Label, b.Label))
	})
	return slices.CompactFunc(ticks, func(a, b plot.Tick) bool { return a.Value == b.Value })
}

// distinct are xs's values, each once, in order.
func distinct(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return slices.Compact(s)
}

// markEvery is how many points apart a series' markers are: every point
// for a sweep, about 20 along a long time series.
func markEvery(n int) int { return max(1, (n+19)/20) }

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.ThumbnailWidth = vg.Points(28)
	p.Legend.Padding = vg.Points(2)
	return p
}

func (c lineChart) plot() (*plot.Plot, error) {
	p := newPlot(c.title)
	p.X.Label.Text, p.Y.Label.Text = c.xlabel, c.ylabel
	var xs, ys []float64
	for _, s := range c.series {
		xs = append(xs, s.x...)
		ys = append(ys, s.y...)
		ys = append(ys, s.lo...)
		ys = append(ys, s.hi...)
	}
	for _, h := range c.hlines {
		ys = append(ys, h.y)
	}
	xr, yr := rangeOf(xs, c.logX), rangeOf(ys, c.logY)
	if c.logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{at: distinct(xs)}
	}
	if c.logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	styles := styleSeries(c.series)
	zeros := false
	for i, s := range c.series {
		st := styles[i]
		pts := make(plotter.XYs, len(s.x))
		var marks, hollow plotter.XYs
		every := markEvery(len(s.x))
		phase := (i * every) / max(1, len(c.series))
		for k := range s.x {
			pts[k] = plotter.XY{X: xr.at(s.x[k], c.logX), Y: yr.at(s.y[k], c.logY)}
			zero := c.logX && !(s.x[k] > 0) || c.logY && !(s.y[k] > 0)
			switch {
			case zero:
				hollow = append(hollow, pts[k])
			case (k+phase)%every == 0:
				marks = append(marks, pts[k])
			}
		}
		if len(pts) > 0 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width, l.Dashes = st.color, vg.Points(1.4), st.dashes()
			p.Add(l)
		}
		if s.lo != nil && len(pts) > 0 {
			eb := errBars{pts: pts}
			for k := range s.x {
				eb.lo = append(eb.lo, pts[k].Y-yr.at(s.lo[k], c.logY))
				eb.hi = append(eb.hi, yr.at(s.hi[k], c.logY)-pts[k].Y)
			}
			bars, err := plotter.NewYErrorBars(eb)
			if err != nil {
				return nil, err
			}
			bars.Color = st.color
			p.Add(bars)
		}
		for _, m := range []struct {
			pts    plotter.XYs
			hollow bool
		}{{marks, false}, {hollow, true}} {
			if len(m.pts) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(m.pts)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: st.color, Radius: st.radius, Shape: glyph{st.shape, m.hollow}}
			p.Add(sc)
		}
		zeros = zeros || len(hollow) > 0
		p.Legend.Add(s.label, legendThumb{st})
	}
	p.X.Min, p.X.Max = xr.min, xr.max
	p.Y.Min, p.Y.Max = yr.min, yr.max
	for k, h := range c.hlines {
		line, err := plotter.NewLine(plotter.XYs{{X: xr.min, Y: yr.at(h.y, c.logY)}, {X: xr.max, Y: yr.at(h.y, c.logY)}})
		if err != nil {
			return nil, err
		}
		st := seriesStyle{label: h.label, shape: noShape, dash: k, ref: true, color: color.Gray{0x50}}
		line.Color, line.Width, line.Dashes = st.color, vg.Points(1.2), st.dashes()
		p.Add(line)
		p.Legend.Add(h.label, legendThumb{st})
	}
	if zeros {
		where := "the axis floor"
		if c.logX && !c.logY {
			where = "the left edge"
		}
		p.Legend.Add("hollow: 0, drawn at "+where, legendThumb{seriesStyle{shape: circle, hollow: true, color: color.Gray{0x40}, radius: vg.Points(4)}})
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

// barChart is grouped bars: one group per category, one bar per series,
// each bar topped by its series' marker (hollow on a zero bar, which has
// no height to show).
type barChart struct {
	title, ylabel string
	categories    []string
	series        []series // y only, one value per category
}

func (c barChart) plot() (*plot.Plot, error) {
	p := newPlot(c.title)
	p.Y.Label.Text = c.ylabel
	w := vg.Points(float64(min(20, 120/max(1, len(c.series)*len(c.categories)/2+1))))
	w = max(w, vg.Points(8))
	var ys []float64
	for _, s := range c.series {
		ys = append(ys, s.y...)
	}
	yr := rangeOf(ys, false)
	styles := styleSeries(c.series)
	zeros := false
	for i, s := range c.series {
		st := styles[i]
		st.bar, st.radius = true, vg.Points(3.5)
		b, err := plotter.NewBarChart(plotter.Values(s.y), w)
		if err != nil {
			return nil, err
		}
		b.Color = st.color
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(c.series)-1)/2)
		p.Add(b, barMarks{ys: s.y, offset: b.Offset, st: st})
		zeros = zeros || slices.Contains(s.y, 0)
		p.Legend.Add(s.label, legendThumb{st})
	}
	p.NominalX(c.categories...)
	p.Y.Min, p.Y.Max = yr.min, yr.max
	if zeros {
		p.Legend.Add("hollow: a bar of 0", legendThumb{seriesStyle{shape: circle, hollow: true, color: color.Gray{0x40}, radius: vg.Points(4)}})
	}
	return p, nil
}

// barMarks are a bar series' markers, on each bar's top.
type barMarks struct {
	ys     []float64
	offset vg.Length
	st     seriesStyle
}

func (m barMarks) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	for i, y := range m.ys {
		c.DrawGlyphNoClip(draw.GlyphStyle{Color: m.st.color, Radius: m.st.radius, Shape: glyph{m.st.shape, !(y > 0)}},
			vg.Point{X: tx(float64(i)) + m.offset, Y: ty(y)})
	}
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

type colors []color.Color

func (c colors) Colors() []color.Color { return c }

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
	p := newPlot(h.title)
	p.X.Label.Text, p.Y.Label.Text = h.xlabel, h.ylabel
	// light (idle) to red (busy): the heat palette reversed, so that the
	// busy cells are the hot ones and every cell's value reads on it
	heat := slices.Clone(palette.Heat(32, 1).Colors())
	slices.Reverse(heat)
	hm := plotter.NewHeatMap(h, colors(heat))
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
