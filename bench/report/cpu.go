package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// preferredCPUReference is the baseline CPU ratios are taken against when
// it was measured (the issue 15 target's reference), else the first
// reference path with a service demand.
var preferredCPUReference = []string{"baseline-masquerade", "baseline"}

// hasSD reports whether r carries a service demand.
func hasSD(r results.Run) bool { return r.ServiceDemandUsPerKB > 0 }

// cpuReference picks the path CPU ratios are relative to; "" when no
// reference path has a service demand.
func cpuReference(runs []results.Run, isRef func(string) bool) string {
	for _, p := range preferredCPUReference {
		if slices.ContainsFunc(runs, func(r results.Run) bool { return r.Path == p && hasSD(r) }) {
			return p
		}
	}
	for _, r := range runs {
		if isRef(r.Path) && hasSD(r) {
			return r.Path
		}
	}
	return ""
}

// direction names a stream test by the way the data flows, as the papers
// label their figures.
func direction(test string) string {
	switch test {
	case results.TCPStream:
		return "TCP_STREAM (transmit)"
	case results.TCPMaerts:
		return "TCP_MAERTS (receive)"
	}
	return test
}

// cpuCharts draws the papers' CPU figure (VMXNET3 figures 3 and 5): per
// stream test one tile (transmit and receive side by side), in it one bar
// group per (socket size, message size) point and one bar per path and MTU,
// the height the path's service demand over the reference's (the median of
// the per-repetition ratios, whiskers min to max), with a line at 1.0.
// Lower is better. Single-pair points with the fewest sessions measured
// only; no chart without service demands.
func cpuCharts(all []series, runs []results.Run, isRef func(string) bool) ([]Chart, error) {
	ref := cpuReference(runs, isRef)
	if ref == "" {
		return nil, nil
	}
	best := results.Best(runs)
	var tests []string
	for _, t := range orderedTests(runs) {
		if !results.IsRR(t) && slices.ContainsFunc(runs, func(r results.Run) bool { return r.Test == t && r.Path == ref && hasSD(r) }) {
			tests = append(tests, t)
		}
	}
	if len(tests) == 0 {
		return nil, nil
	}
	var plots []*plot.Plot
	var used []series
	maxY := 1.0
	for _, test := range tests {
		tr := filter(runs, func(r results.Run) bool { return r.Test == test && r.Pairs == 1 && hasSD(r) })
		// The papers' figure is per connection: the fewest sessions measured.
		fewest := distinct(tr, func(r results.Run) int { return r.Sessions })[0]
		tr = filter(tr, func(r results.Run) bool { return r.Sessions == fewest })
		var points []results.Point
		for _, r := range tr {
			if r.Path == ref && !slices.Contains(points, r.Point()) {
				points = append(points, r.Point())
			}
		}
		ss := present(all, filter(tr, func(r results.Run) bool { return r.Path != ref }))
		labels := make([]string, len(points))
		for i, pt := range points {
			sock := results.FormatBytes(pt.SocketBytes)
			if pt.SocketBytes == 0 {
				sock = "default"
			}
			labels[i] = fmt.Sprintf("%s\n%s", sock, results.FormatBytes(pt.MessageBytes))
		}
		p := newPlot(fmt.Sprintf("%s, %s", direction(test), plural(fewest, "session")), "socket size / message size", "CPU per byte, ratio to baseline")
		for si, s := range ss {
			b := &groupBars{slot: si, slots: len(ss), color: s.color, whisker: ink}
			for _, pt := range points {
				v, lo, hi := math.NaN(), math.NaN(), math.NaN()
				for _, r := range tr {
					if !s.has(r) || r.Point() != pt {
						continue
					}
					if ratio, ok := results.CPURatio(r, best[ref][pt]); ok {
						v, lo, hi = ratio.Median, ratio.Min, ratio.Max
					}
				}
				b.vals, b.lo, b.hi = append(b.vals, v), append(b.lo, lo), append(b.hi, hi)
			}
			_, _, _, ymax := b.DataRange()
			maxY = math.Max(maxY, ymax)
			p.Add(b)
			if !slices.ContainsFunc(used, func(u series) bool { return u == s }) {
				used = append(used, s)
			}
		}
		one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(points)) - 0.5, Y: 1}})
		if err != nil {
			return nil, fmt.Errorf("failed to draw the 1.0 line: %w", err)
		}
		one.Color, one.Width, one.Dashes = ink, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(one)
		p.NominalX(labels...)
		p.Y.Min = 0
		plots = append(plots, p)
	}
	for _, p := range plots {
		p.Y.Max = maxY * 1.08
	}
	title := "CPU per byte relative to " + ref + " (lower is better)"
	subtitle := "bars: median over repetitions of netperf service demand (µs CPU/KiB) over the baseline's in the same repetition; whiskers: min to max"
	legend := append(legendOf(slices.DeleteFunc(slices.Clone(all), func(s series) bool { return !slices.Contains(used, s) }), "bar"),
		legendItem{"min to max", ink, "whisker"}, legendItem{"1.0 = " + ref, ink, "dash"})
	svg, err := renderSVG(title, subtitle, legend, plots)
	if err != nil {
		return nil, err
	}
	return []Chart{{Name: "cpu-ratio", Title: title, Kind: "cpu", SVG: svg}}, nil
}

// cpuLines returns one line per non-reference path at the Headline point
// with its service demand over the CPU reference's, the median of the
// per-repetition ratios and their range, e.g.
// "cpu fastpath-linux-bridge/baseline-masquerade 0.62 [0.55-0.70]", and,
// where measured, the same for the CPU time of the benchmark's own
// processes ("cpu-own-processes ...").
func cpuLines(runs []results.Run, isRef func(string) bool) []string {
	hp, ok := Headline(runs)
	ref := cpuReference(runs, isRef)
	if !ok || ref == "" {
		return nil
	}
	best := results.Best(runs)
	b, ok := best[ref][hp]
	if !ok {
		return nil
	}
	var lines []string
	for _, p := range results.Paths(runs) {
		if p == ref || isRef(p) {
			continue
		}
		if r, ok := results.CPURatio(best[p][hp], b); ok {
			lines = append(lines, fmt.Sprintf("cpu %s/%s %s", p, ref, r))
		}
		if r, ok := results.ProcessCPURatio(best[p][hp], b); ok {
			lines = append(lines, fmt.Sprintf("cpu-own-processes %s/%s %s", p, ref, r))
		}
	}
	return lines
}

// directionsTable puts each path's TCP_STREAM (transmit) and TCP_MAERTS
// (receive) medians side by side, throughput and service demand, for every
// single-pair point measured both ways.
func directionsTable(runs []results.Run) table {
	t := table{Header: []string{"path", "MTU", "socket", "message", "sessions", "transmit Mbit/s", "receive Mbit/s", "transmit µs/KiB", "receive µs/KiB"}}
	type key struct {
		path                     string
		mtu, sock, msg, sessions int
	}
	rx := map[key]results.Run{}
	for _, r := range runs {
		if r.Test == results.TCPMaerts && r.Pairs == 1 {
			rx[key{r.Path, r.MTU, r.SocketBytes, r.MessageBytes, r.Sessions}] = r
		}
	}
	sd := func(r results.Run) string {
		if !hasSD(r) {
			return "–"
		}
		return fmt.Sprintf("%.3f", r.ServiceDemandUsPerKB)
	}
	for _, r := range runs {
		m, ok := rx[key{r.Path, r.MTU, r.SocketBytes, r.MessageBytes, r.Sessions}]
		if r.Test != results.TCPStream || r.Pairs != 1 || !ok {
			continue
		}
		sock := "default"
		if r.SocketBytes > 0 {
			sock = results.FormatBytes(r.SocketBytes)
		}
		t.Rows = append(t.Rows, []string{r.Path, fmt.Sprint(r.MTU), sock, results.FormatBytes(r.MessageBytes), fmt.Sprint(r.Sessions),
			num(r.ThroughputMbps), num(m.ThroughputMbps), sd(r), sd(m)})
		t.Bold = append(t.Bold, false)
	}
	return t
}

// cpuCells renders a run's CPU columns of the runs table: service demand
// with its range, CPU utilisation (and its scope), UDP loss.
func cpuCells(r results.Run) []string {
	sd, util, loss, own := "–", "–", "–", "–"
	if r.ProcessServiceDemandUsPerKB > 0 {
		own = fmt.Sprintf("%.3f [%.3f–%.3f]", r.ProcessServiceDemandUsPerKB, r.ProcessServiceDemandMinUsPerKB, r.ProcessServiceDemandMaxUsPerKB)
	}
	if hasSD(r) {
		sd = fmt.Sprintf("%.3f [%.3f–%.3f]", r.ServiceDemandUsPerKB, r.ServiceDemandMinUsPerKB, r.ServiceDemandMaxUsPerKB)
		util = fmt.Sprintf("%.0f", r.CPUUtilPercent)
		if r.CPUScope == results.CPUScopeHost {
			util += " (host)"
		}
	}
	if r.Test == results.UDPStream {
		loss = fmt.Sprintf("%.2f", r.LossPercent)
	}
	return []string{sd, util, own, loss}
}

// cpuNote explains the CPU figures of runs for the report, "" without any.
func cpuNote(runs []results.Run) string {
	if !slices.ContainsFunc(runs, hasSD) {
		return ""
	}
	note := "Service demand is netperf's (-c -C): microseconds of CPU per KiB of payload, lower is better."
	if slices.ContainsFunc(runs, func(r results.Run) bool { return r.CPUScope == results.CPUScopeHost }) {
		note += " Client and server shared one host, so the figure is the host's whole CPU (/proc/stat), measured once, including every other process on it."
	}
	if slices.ContainsFunc(runs, func(r results.Run) bool { return hasSD(r) && r.CPUUtilPercent >= 95 }) {
		note += " Where the CPU utilisation is near 100% the host was saturated: the service demand then charges all of the host's CPU time to the benchmark's bytes and mostly follows the inverse of the throughput."
	}
	if slices.ContainsFunc(runs, func(r results.Run) bool { return r.ProcessServiceDemandUsPerKB > 0 }) {
		note += " \"Own processes\" is the CPU time of the benchmark's processes alone (netperf, netserver's test processes, ovs-vswitchd on fastpath-ovs; user and system time, which includes the softirq work done in their context) per KiB: on a shared host it is the figure that belongs to the datapath."
	}
	return strings.TrimSpace(note)
}
