package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// Chart is one rendered chart.
type Chart struct {
	// Name is a file name stem, e.g. "throughput-tcp-stream-1-session".
	Name string
	// Title is the chart's heading.
	Title string
	// Kind is "paths" (PathChart), "throughput", "cpu", "latency" or
	// "scale-out".
	Kind string
	// SVG is a standalone SVG document.
	SVG []byte
}

// Chart sizes in points (1/72 in); HTML scales them to the page width.
const (
	chartWidth  = 10 * vg.Inch
	chartHeight = 4.6 * vg.Inch
)

// series is one line or bar colour: a path, split by MTU when a path was
// measured at several.
type series struct {
	path  string
	mtu   int
	label string
	color color.RGBA
}

// seriesOf lists the series of runs in order of first appearance.
func seriesOf(runs []results.Run) []series {
	mtus := map[string][]int{}
	for _, r := range runs {
		if !slices.Contains(mtus[r.Path], r.MTU) {
			mtus[r.Path] = append(mtus[r.Path], r.MTU)
		}
	}
	var out []series
	for _, r := range runs {
		if slices.ContainsFunc(out, func(s series) bool { return s.path == r.Path && s.mtu == r.MTU }) {
			continue
		}
		label := r.Path
		if len(mtus[r.Path]) > 1 {
			label = fmt.Sprintf("%s (MTU %d)", r.Path, r.MTU)
		}
		out = append(out, series{path: r.Path, mtu: r.MTU, label: label, color: seriesColor(len(out))})
	}
	return out
}

func (s series) has(r results.Run) bool { return r.Path == s.path && r.MTU == s.mtu }

// present returns the series of all that have a run in runs, keeping their
// colours: every chart colours a path the same way.
func present(all []series, runs []results.Run) []series {
	var out []series
	for _, s := range all {
		if slices.ContainsFunc(runs, s.has) {
			out = append(out, s)
		}
	}
	return out
}

func legendOf(ss []series, shape string) []legendItem {
	items := make([]legendItem, len(ss))
	for i, s := range ss {
		items[i] = legendItem{label: s.label, color: s.color, shape: shape}
	}
	return items
}

// distinct returns the distinct values of f over runs, ascending.
func distinct(runs []results.Run, f func(results.Run) int) []int {
	var out []int
	for _, r := range runs {
		if v := f(r); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func filter(runs []results.Run, keep func(results.Run) bool) []results.Run {
	var out []results.Run
	for _, r := range runs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// orderedTests returns the tests of runs in order of first appearance.
func orderedTests(runs []results.Run) []string {
	var out []string
	for _, r := range runs {
		if !slices.Contains(out, r.Test) {
			out = append(out, r.Test)
		}
	}
	return out
}

// rateUnit picks Gbit/s or Mbit/s for a maximum in Mbit/s and returns the
// divisor from Mbit/s.
func rateUnit(maxMbps float64) (string, float64) {
	if maxMbps >= 1000 {
		return "Gbit/s", 1000
	}
	return "Mbit/s", 1
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func slug(parts ...string) string {
	s := strings.ToLower(strings.Join(parts, "-"))
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// throughputCharts draws, per stream test and session count (single pair),
// throughput against message size with one tile per socket size.
func throughputCharts(all []series, runs []results.Run) ([]Chart, error) {
	var charts []Chart
	for _, test := range orderedTests(runs) {
		if results.IsRR(test) {
			continue
		}
		tr := filter(runs, func(r results.Run) bool { return r.Test == test && r.Pairs == 1 })
		for _, sessions := range distinct(tr, func(r results.Run) int { return r.Sessions }) {
			sr := filter(tr, func(r results.Run) bool { return r.Sessions == sessions })
			ss := present(all, sr)
			msgs := distinct(sr, func(r results.Run) int { return r.MessageBytes })
			maxMbps := 0.0
			for _, r := range sr {
				maxMbps = math.Max(maxMbps, r.ThroughputMaxMbps)
			}
			unit, div := rateUnit(maxMbps)
			labels := make([]string, len(msgs))
			for i, m := range msgs {
				labels[i] = results.FormatBytes(m)
			}
			var plots []*plot.Plot
			for _, sock := range distinct(sr, func(r results.Run) int { return r.SocketBytes }) {
				sockLabel := "socket " + results.FormatBytes(sock)
				if sock == 0 {
					sockLabel = "default socket size"
				}
				p := newPlot(sockLabel, "message size", "throughput ("+unit+")")
				for si, s := range ss {
					b := &groupBars{slot: si, slots: len(ss), color: s.color, whisker: ink}
					for _, m := range msgs {
						v, lo, hi := math.NaN(), math.NaN(), math.NaN()
						for _, r := range sr {
							if s.has(r) && r.SocketBytes == sock && r.MessageBytes == m {
								v, lo, hi = r.ThroughputMbps/div, r.ThroughputMinMbps/div, r.ThroughputMaxMbps/div
							}
						}
						b.vals, b.lo, b.hi = append(b.vals, v), append(b.lo, lo), append(b.hi, hi)
					}
					p.Add(b)
				}
				p.NominalX(labels...)
				p.Y.Max = maxMbps / div * 1.08
				plots = append(plots, p)
			}
			title := fmt.Sprintf("%s throughput vs message size, %s", test, plural(sessions, "session"))
			svg, err := renderSVG(title, "bars: median over repetitions; whiskers: min to max", append(legendOf(ss, "bar"), legendItem{"min to max", ink, "whisker"}), plots)
			if err != nil {
				return nil, err
			}
			charts = append(charts, Chart{Name: slug("throughput", test, plural(sessions, "session")), Title: title, Kind: "throughput", SVG: svg})
		}
	}
	return charts, nil
}

// latencyCharts draws, per RR test, the mean round-trip latency of every
// single-pair point per path, with P99 markers.
func latencyCharts(all []series, runs []results.Run) ([]Chart, error) {
	var charts []Chart
	for _, test := range orderedTests(runs) {
		if !results.IsRR(test) {
			continue
		}
		tr := filter(runs, func(r results.Run) bool { return r.Test == test && r.Pairs == 1 })
		ss := present(all, tr)
		points := distinctPoints(tr)
		labels := make([]string, len(points))
		for i, pt := range points {
			sock := results.FormatBytes(pt.SocketBytes) + " socket"
			if pt.SocketBytes == 0 {
				sock = "default socket"
			}
			labels[i] = fmt.Sprintf("%s msg, %s\n%s", results.FormatBytes(pt.MessageBytes), sock, plural(pt.Sessions, "session"))
		}
		p := newPlot("", "", "round-trip latency (µs)")
		maxY := 0.0
		for si, s := range ss {
			b := &groupBars{slot: si, slots: len(ss), color: s.color, whisker: ink, mark: s.color}
			for _, pt := range points {
				v, lo, hi, p99 := math.NaN(), math.NaN(), math.NaN(), math.NaN()
				for _, r := range tr {
					if s.has(r) && r.Point() == pt {
						v, lo, hi = r.MeanLatencyUs, r.MeanLatencyMinUs, r.MeanLatencyMaxUs
						if r.P99LatencyUs > 0 {
							p99 = r.P99LatencyUs
						}
					}
				}
				b.vals, b.lo, b.hi, b.marks = append(b.vals, v), append(b.lo, lo), append(b.hi, hi), append(b.marks, p99)
			}
			_, _, _, ymax := b.DataRange()
			maxY = math.Max(maxY, ymax)
			p.Add(b)
		}
		p.NominalX(labels...)
		p.Y.Max = maxY * 1.08
		title := fmt.Sprintf("%s round-trip latency", test)
		legend := append(legendOf(ss, "bar"), legendItem{"P99 (in the path's colour)", ink, "triangle"}, legendItem{"min to max of the mean", ink, "whisker"})
		svg, err := renderSVG(title, "bars: median of the mean latency over repetitions; lower is better", legend, []*plot.Plot{p})
		if err != nil {
			return nil, err
		}
		charts = append(charts, Chart{Name: slug("latency", test), Title: title, Kind: "latency", SVG: svg})
	}
	return charts, nil
}

// scaleOutCharts draws aggregate and per-pair throughput against the number
// of pairs for every stream point that was measured with more than one pair.
func scaleOutCharts(all []series, runs []results.Run) ([]Chart, error) {
	type key struct {
		test                string
		sock, msg, sessions int
	}
	var keys []key
	for _, r := range runs {
		k := key{r.Test, r.SocketBytes, r.MessageBytes, r.Sessions}
		if r.Pairs > 1 && !results.IsRR(r.Test) && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var charts []Chart
	for _, k := range keys {
		kr := filter(runs, func(r results.Run) bool {
			return r.Test == k.test && r.SocketBytes == k.sock && r.MessageBytes == k.msg && r.Sessions == k.sessions
		})
		// Only paths measured with more than one pair make a curve.
		ss := present(all, filter(kr, func(r results.Run) bool { return r.Pairs > 1 }))
		kr = filter(kr, func(r results.Run) bool { return slices.ContainsFunc(ss, func(s series) bool { return s.has(r) }) })
		pairs := distinct(kr, func(r results.Run) int { return r.Pairs })
		maxMbps := 0.0
		for _, r := range kr {
			maxMbps = math.Max(maxMbps, r.ThroughputMbps)
		}
		unit, div := rateUnit(maxMbps)
		p := newPlot("", "client/server pairs", "throughput ("+unit+")")
		var ticks []plot.Tick
		for _, n := range pairs {
			ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.X.Max = float64(pairs[0])-0.3, float64(pairs[len(pairs)-1])+0.3
		p.X.Padding = 0
		for _, s := range ss {
			var agg, per plotter.XYs
			for _, r := range kr {
				if !s.has(r) {
					continue
				}
				agg = append(agg, plotter.XY{X: float64(r.Pairs), Y: r.ThroughputMbps / div})
				// With one pair, the pair is the aggregate: no ring.
				for _, v := range r.PerPairThroughputMbps {
					per = append(per, plotter.XY{X: float64(r.Pairs), Y: v / div})
				}
			}
			slices.SortFunc(agg, func(a, b plotter.XY) int { return int(a.X - b.X) })
			line, pts, err := plotter.NewLinePoints(agg)
			if err != nil {
				return nil, fmt.Errorf("failed to draw scale-out of %s: %w", s.label, err)
			}
			line.Color, line.Width = s.color, vg.Points(2)
			pts.Color, pts.Shape, pts.Radius = s.color, draw.CircleGlyph{}, vg.Points(3)
			p.Add(line, pts)
			if len(per) > 0 {
				sc, err := plotter.NewScatter(per)
				if err != nil {
					return nil, fmt.Errorf("failed to draw per-pair throughput of %s: %w", s.label, err)
				}
				sc.Color, sc.Shape, sc.Radius = s.color, draw.RingGlyph{}, vg.Points(3)
				p.Add(sc)
			}
		}
		p.Y.Max = maxMbps / div * 1.08
		sock := "socket " + results.FormatBytes(k.sock)
		if k.sock == 0 {
			sock = "default socket"
		}
		title := fmt.Sprintf("%s scale-out, %s, message %s, %s per pair", k.test, sock, results.FormatBytes(k.msg), plural(k.sessions, "session"))
		legend := append(legendOf(ss, "line"), legendItem{"per pair", ink, "ring"})
		svg, err := renderSVG(title, "lines: aggregate throughput of all pairs (median); rings: each pair", legend, []*plot.Plot{p})
		if err != nil {
			return nil, err
		}
		charts = append(charts, Chart{Name: slug("scale-out", k.test, results.FormatBytes(k.sock), results.FormatBytes(k.msg), plural(k.sessions, "session")), Title: title, Kind: "scale-out", SVG: svg})
	}
	return charts, nil
}

// renderSVG draws a title, a subtitle, a legend strip and plots side by side
// into a standalone SVG document.
func renderSVG(title, subtitle string, legend []legendItem, plots []*plot.Plot) ([]byte, error) {
	c := vgsvg.New(chartWidth, chartHeight)
	dc := draw.New(c)
	dc.FillPolygon(color.White, []vg.Point{{X: dc.Min.X, Y: dc.Min.Y}, {X: dc.Min.X, Y: dc.Max.Y}, {X: dc.Max.X, Y: dc.Max.Y}, {X: dc.Max.X, Y: dc.Min.Y}})
	top := dc.Max.Y - 8
	ts := textStyle(13, ink)
	dc.FillText(ts, vg.Point{X: dc.Min.X + 8, Y: top}, title)
	top -= ts.Height(title) + 2
	ss := textStyle(9, muted)
	dc.FillText(ss, vg.Point{X: dc.Min.X + 8, Y: top}, subtitle)
	top -= ss.Height(subtitle) + 6
	top = drawLegend(dc, legend, top) - 4
	area := draw.Crop(dc, 0, 0, 0, top-dc.Max.Y)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(14), PadLeft: vg.Points(4), PadRight: vg.Points(10), PadBottom: vg.Points(4)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, area)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("failed to write chart %q: %w", title, err)
	}
	return buf.Bytes(), nil
}

// distinctPoints returns the points of runs, each once, in the order they
// first appear: the x categories of a per-point chart.
func distinctPoints(runs []results.Run) []results.Point {
	var points []results.Point
	for _, r := range runs {
		if !slices.Contains(points, r.Point()) {
			points = append(points, r.Point())
		}
	}
	return points
}
