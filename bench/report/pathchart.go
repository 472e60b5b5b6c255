package report

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// PathChart asks for a chart in the shape of the VMCI socket paper's figure:
// throughput against message size on a log scale, one line per path, across
// tests (e.g. VSOCK_STREAM on the vsock paths beside TCP_STREAM on the fast
// path). Runs of the named paths with one session and one pair are drawn;
// each path's runs must share one test and socket size.
type PathChart struct {
	// Name is the chart's file name stem; empty means a slug of Title.
	Name string
	// Title heads the chart; Subtitle says what was measured and how.
	Title, Subtitle string
	// Paths are drawn in this order, each in its colour of the report.
	Paths []string
}

// pathCharts renders the PathCharts of opts. A requested path without runs
// is an error; so is a path whose runs mix tests or socket sizes, or repeat
// a message size, since one line could not show them.
func pathCharts(all []series, runs []results.Run, specs []PathChart) ([]Chart, error) {
	var charts []Chart
	for _, spec := range specs {
		p := newPlot("", "message (write) size, log scale", "")
		var legend []legendItem
		var sizes []int
		maxMbps := 0.0
		type line struct {
			s   series
			pts []results.Run
		}
		var lines []line
		for _, path := range spec.Paths {
			pr := filter(runs, func(r results.Run) bool {
				return r.Path == path && r.Sessions == 1 && r.Pairs == 1 && !results.IsRR(r.Test)
			})
			if len(pr) == 0 {
				return nil, fmt.Errorf("chart %q: no single-session stream runs of path %s", spec.Title, path)
			}
			for _, r := range pr[1:] {
				if r.Test != pr[0].Test || r.SocketBytes != pr[0].SocketBytes || r.MTU != pr[0].MTU {
					return nil, fmt.Errorf("chart %q: path %s mixes %s and %s runs (or socket sizes or MTUs)", spec.Title, path, pr[0].Test, r.Test)
				}
			}
			msgs := distinct(pr, func(r results.Run) int { return r.MessageBytes })
			if len(msgs) != len(pr) {
				return nil, fmt.Errorf("chart %q: path %s has more than one run per message size", spec.Title, path)
			}
			slices.SortFunc(pr, func(a, b results.Run) int { return a.MessageBytes - b.MessageBytes })
			for _, r := range pr {
				maxMbps = math.Max(maxMbps, r.ThroughputMaxMbps)
				if !slices.Contains(sizes, r.MessageBytes) {
					sizes = append(sizes, r.MessageBytes)
				}
			}
			i := slices.IndexFunc(all, func(s series) bool { return s.path == path && s.mtu == pr[0].MTU })
			s := all[i]
			lines = append(lines, line{s, pr})
			legend = append(legend, legendItem{label: fmt.Sprintf("%s (%s)", s.label, pr[0].Test), color: s.color, shape: "line"})
		}
		unit, div := rateUnit(maxMbps)
		p.Y.Label.Text = "throughput (" + unit + ")"
		for _, l := range lines {
			xys := make(plotter.XYs, len(l.pts))
			errs := make(plotter.YErrors, len(l.pts))
			for i, r := range l.pts {
				y := r.ThroughputMbps / div
				xys[i] = plotter.XY{X: float64(r.MessageBytes), Y: y}
				errs[i].Low, errs[i].High = y-r.ThroughputMinMbps/div, r.ThroughputMaxMbps/div-y
			}
			ln, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("chart %q: path %s: %w", spec.Title, l.s.label, err)
			}
			ln.Color, ln.Width = l.s.color, vg.Points(2)
			pts.Color, pts.Shape, pts.Radius = l.s.color, draw.CircleGlyph{}, vg.Points(3)
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{xys, errs})
			if err != nil {
				return nil, fmt.Errorf("chart %q: path %s: %w", spec.Title, l.s.label, err)
			}
			eb.Color, eb.Width, eb.CapWidth = l.s.color, vg.Points(0.8), vg.Points(6)
			p.Add(ln, pts, eb)
		}
		slices.Sort(sizes)
		ticks := make([]plot.Tick, len(sizes))
		for i, m := range sizes {
			ticks[i] = plot.Tick{Value: float64(m), Label: results.FormatBytes(m)}
		}
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.X.Min, p.X.Max = float64(sizes[0])/1.25, float64(sizes[len(sizes)-1])*1.25
		p.Y.Max = maxMbps / div * 1.08
		subtitle := spec.Subtitle
		if subtitle == "" {
			subtitle = "points: median over repetitions; whiskers: min to max"
		}
		svg, err := renderSVG(spec.Title, subtitle, append(legend, legendItem{"min to max", ink, "whisker"}), []*plot.Plot{p})
		if err != nil {
			return nil, err
		}
		name := spec.Name
		if name == "" {
			name = slug("paths", spec.Title)
		}
		charts = append(charts, Chart{Name: name, Title: spec.Title, Kind: "paths", SVG: svg})
	}
	return charts, nil
}
