package report

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// groupWidth is the share of each x slot that a group of bars fills.
const groupWidth = 0.8

// groupBars is one series of a grouped bar chart on a nominal x axis: the
// bar of group i is slot `slot` of `slots` side by side around x = i.
// Values are in data units; NaN means the series has no value there.
type groupBars struct {
	vals    []float64 // bar heights
	lo, hi  []float64 // whisker ends; nil for none
	marks   []float64 // a triangle marker per group (P99); nil for none
	slot    int
	slots   int
	color   color.Color
	whisker color.Color
	mark    color.Color // marker colour
}

var _ plot.Plotter = (*groupBars)(nil)

func (b *groupBars) span(i int) (x0, x1 float64) {
	w := groupWidth / float64(b.slots)
	x0 = float64(i) - groupWidth/2 + float64(b.slot)*w
	return x0 + 0.06*w, x0 + 0.94*w
}

func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return math.NaN()
}

// Plot implements plot.Plotter.
func (b *groupBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	ws := draw.LineStyle{Color: b.whisker, Width: vg.Points(0.8)}
	for i, v := range b.vals {
		if math.IsNaN(v) {
			continue
		}
		x0, x1 := b.span(i)
		xm := (x0 + x1) / 2
		c.FillPolygon(b.color, c.ClipPolygonXY([]vg.Point{
			{X: trX(x0), Y: trY(0)}, {X: trX(x0), Y: trY(v)}, {X: trX(x1), Y: trY(v)}, {X: trX(x1), Y: trY(0)},
		}))
		if lo, hi := at(b.lo, i), at(b.hi, i); !math.IsNaN(lo) && !math.IsNaN(hi) && hi > lo {
			cap := (trX(x1) - trX(x0)) / 4
			c.StrokeLines(ws,
				[]vg.Point{{X: trX(xm), Y: trY(lo)}, {X: trX(xm), Y: trY(hi)}},
				[]vg.Point{{X: trX(xm) - cap, Y: trY(lo)}, {X: trX(xm) + cap, Y: trY(lo)}},
				[]vg.Point{{X: trX(xm) - cap, Y: trY(hi)}, {X: trX(xm) + cap, Y: trY(hi)}},
			)
		}
		if m := at(b.marks, i); !math.IsNaN(m) {
			c.DrawGlyph(draw.GlyphStyle{Color: b.mark, Radius: vg.Points(3.5), Shape: draw.PyramidGlyph{}}, vg.Point{X: trX(xm), Y: trY(m)})
		}
	}
}

// DataRange implements plot.DataRanger: x covers every group, y starts at 0
// and reaches the highest bar, whisker or marker.
func (b *groupBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	for _, xs := range [][]float64{b.vals, b.hi, b.marks} {
		for _, v := range xs {
			if !math.IsNaN(v) {
				ymax = math.Max(ymax, v)
			}
		}
	}
	return -0.5, float64(len(b.vals)) - 0.5, 0, ymax
}

// legendItem is one entry of a chart's legend strip.
type legendItem struct {
	label string
	color color.Color
	// shape is "bar", "line", "triangle", "ring", "whisker" or "dash".
	shape string
}

// drawLegend draws items as a horizontal strip that wraps, starting at the
// top edge top, and returns the y below the last row.
func drawLegend(c draw.Canvas, items []legendItem, top vg.Length) vg.Length {
	ts := textStyle(9, ink)
	ts.YAlign = draw.YCenter
	const sw = 10
	rowH := vg.Length(14)
	x := c.Min.X + 8
	y := top - rowH/2
	for _, it := range items {
		w := vg.Length(sw+4) + ts.Width(it.label) + 14
		if x+w > c.Max.X-8 && x > c.Min.X+8 {
			x = c.Min.X + 8
			y -= rowH
		}
		switch it.shape {
		case "line":
			c.StrokeLine2(draw.LineStyle{Color: it.color, Width: vg.Points(2)}, x, y, x+sw, y)
			c.DrawGlyph(draw.GlyphStyle{Color: it.color, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}, vg.Point{X: x + sw/2, Y: y})
		case "triangle":
			c.DrawGlyph(draw.GlyphStyle{Color: it.color, Radius: vg.Points(3.5), Shape: draw.PyramidGlyph{}}, vg.Point{X: x + sw/2, Y: y})
		case "ring":
			c.DrawGlyph(draw.GlyphStyle{Color: it.color, Radius: vg.Points(3), Shape: draw.RingGlyph{}}, vg.Point{X: x + sw/2, Y: y})
		case "dash":
			c.StrokeLine2(draw.LineStyle{Color: it.color, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}, x-2, y, x+sw+2, y)
		case "whisker":
			ls := draw.LineStyle{Color: it.color, Width: vg.Points(0.8)}
			c.StrokeLine2(ls, x+sw/2, y-5, x+sw/2, y+5)
			c.StrokeLine2(ls, x+2, y-5, x+sw-2, y-5)
			c.StrokeLine2(ls, x+2, y+5, x+sw-2, y+5)
		default:
			c.FillPolygon(it.color, []vg.Point{{X: x, Y: y - sw/2}, {X: x, Y: y + sw/2}, {X: x + sw, Y: y + sw/2}, {X: x + sw, Y: y - sw/2}})
		}
		c.FillText(ts, vg.Point{X: x + sw + 4, Y: y}, it.label)
		x += w
	}
	return y - rowH/2
}
