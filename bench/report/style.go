package report

import (
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Palette holds the series colours in order: the Okabe–Ito colour-blind
// safe palette (Okabe and Ito, "Color Universal Design", 2008) without its
// yellow, which is too light on white.
var Palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0x00, 0x00, 0x00, 0xff}, // black
}

func seriesColor(i int) color.RGBA { return Palette[i%len(Palette)] }

var (
	ink   = color.RGBA{0x22, 0x22, 0x22, 0xff}
	muted = color.RGBA{0x66, 0x66, 0x66, 0xff}
	grid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
)

// sans is the font of all chart text. The HTML embeds the same font
// (Liberation Sans) so browsers draw text with the metrics plot laid it out
// with.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func textStyle(size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(sans, size), Handler: plot.DefaultTextHandler, XAlign: draw.XLeft, YAlign: draw.YTop}
}

// newPlot returns a plot with sans fonts, a horizontal grid and y from 0.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 11)
	p.Title.Padding = vg.Points(4)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 10)
		a.Tick.Label.Font = font.From(sans, 9)
		a.Color, a.Tick.Color = muted, muted
	}
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.Legend.TextStyle.Font = font.From(sans, 9)
	g := plotter.NewGrid()
	g.Vertical.Color = nil
	g.Horizontal.Color = grid
	p.Add(g)
	p.Y.Min = 0
	p.Y.Tick.Marker = plot.TickerFunc(niceTicks)
	return p
}

// niceTicks labels about six evenly spaced round values (steps of 1, 2, 2.5
// or 5 times a power of ten) between min and max; the grid follows them.
// Tick i is i steps from 0, not the sum of i steps, and is labelled with the
// step's decimals: 0.6, not 0.6000000000000001.
func niceTicks(min, max float64) []plot.Tick {
	if !(max > min) {
		return []plot.Tick{{Value: min, Label: strconv.FormatFloat(min, 'g', 4, 64)}}
	}
	raw := (max - min) / 6
	exp := int(math.Floor(math.Log10(raw)))
	mant := 10.0
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*math.Pow(10, float64(exp)) >= raw {
			mant = m
			break
		}
	}
	if mant == 10 {
		mant, exp = 1, exp+1
	}
	// step = mant * 10^exp has decimals digits after the point; values are
	// integers over scale = 10^decimals, which rounds them to the nearest
	// float64 of the decimal they stand for.
	decimals := -exp
	if mant == 2.5 {
		decimals++
	}
	if decimals < 0 {
		decimals = 0
	}
	scale := math.Pow(10, float64(decimals))
	step := mant * math.Pow(10, float64(exp))
	var ticks []plot.Tick
	for i := math.Ceil(min/step - 1e-9); i <= math.Floor(max/step+1e-9); i++ {
		v := math.Round(i*step*scale) / scale
		if v == 0 {
			v = 0 // not -0, which prints as "-0.0"
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return ticks
}
