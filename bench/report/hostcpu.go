package report

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// TCGLabel marks host CPU figures measured while QEMU emulated the guests'
// CPUs (results.GuestsTCG): the launchers' time is then mostly emulation.
const TCGLabel = "emulated CPU (TCG)"

// hasHostCPU reports whether r carries host CPU figures (VM mode with the
// node agent's host CPU endpoint).
func hasHostCPU(r results.Run) bool { return r.HostCPUSecondsPerGB > 0 }

// hostCPULabel is " — emulated CPU (TCG)" for TCG guests, else "".
func hostCPULabel(m results.Machine) string {
	if m.Guests == results.GuestsTCG {
		return " — " + TCGLabel
	}
	return ""
}

// hostCPUCharts draws the host's CPU per byte: per test one tile, in it a
// bar group per single-pair point and a bar per path, the height the median
// host CPU seconds per GB (the launchers' cgroups plus the node's softirq
// time), whiskers min to max. Lower is better. No chart without host CPU
// figures.
func hostCPUCharts(all []series, runs []results.Run, m results.Machine) ([]Chart, error) {
	hr := filter(runs, func(r results.Run) bool { return hasHostCPU(r) && r.Pairs == 1 })
	if len(hr) == 0 {
		return nil, nil
	}
	var plots []*plot.Plot
	var used []series
	maxY := 0.0
	for _, test := range orderedTests(hr) {
		tr := filter(hr, func(r results.Run) bool { return r.Test == test })
		points := distinctPoints(tr)
		labels := make([]string, len(points))
		for i, pt := range points {
			sock := results.FormatBytes(pt.SocketBytes)
			if pt.SocketBytes == 0 {
				sock = "default"
			}
			labels[i] = fmt.Sprintf("%s / %s\n%s", sock, results.FormatBytes(pt.MessageBytes), plural(pt.Sessions, "session"))
		}
		p := newPlot(test, "socket size / message size", "host CPU seconds per GB")
		ss := present(all, tr)
		for si, s := range ss {
			b := &groupBars{slot: si, slots: len(ss), color: s.color, whisker: ink}
			for _, pt := range points {
				v, lo, hi := math.NaN(), math.NaN(), math.NaN()
				for _, r := range tr {
					if s.has(r) && r.Point() == pt {
						v, lo, hi = r.HostCPUSecondsPerGB, r.HostCPUSecondsPerGBMin, r.HostCPUSecondsPerGBMax
					}
				}
				b.vals, b.lo, b.hi = append(b.vals, v), append(b.lo, lo), append(b.hi, hi)
			}
			_, _, _, ymax := b.DataRange()
			maxY = math.Max(maxY, ymax)
			p.Add(b)
			if !slices.Contains(used, s) {
				used = append(used, s)
			}
		}
		p.NominalX(labels...)
		p.Y.Min = 0
		plots = append(plots, p)
	}
	for _, p := range plots {
		p.Y.Max = maxY * 1.08
	}
	title := "Host CPU per byte (lower is better)" + hostCPULabel(m)
	subtitle := "bars: median over repetitions of the VMs' virt-launcher cgroups' CPU time plus the node's softirq time, per 10^9 bytes of payload; whiskers: min to max"
	legend := append(legendOf(slices.DeleteFunc(slices.Clone(all), func(s series) bool { return !slices.Contains(used, s) }), "bar"),
		legendItem{"min to max", ink, "whisker"})
	svg, err := renderSVG(title, subtitle, legend, plots)
	if err != nil {
		return nil, err
	}
	return []Chart{{Name: "host-cpu", Title: title, Kind: "cpu", SVG: svg}}, nil
}

// hostCPULines returns one line per path at the Headline point with its
// host CPU figures, e.g. "host-cpu fastpath 0.412 s/GB [0.398-0.431],
// 19.417 Gbit/s per host core", labelled TCGLabel for TCG guests.
func hostCPULines(runs []results.Run, m results.Machine) []string {
	hp, ok := Headline(runs)
	if !ok {
		return nil
	}
	best := results.Best(runs)
	var lines []string
	for _, p := range results.Paths(runs) {
		r, ok := best[p][hp]
		if !ok || !hasHostCPU(r) {
			continue
		}
		l := fmt.Sprintf("host-cpu %s %.3f s/GB [%.3f-%.3f], %.3f Gbit/s per host core", p, r.HostCPUSecondsPerGB, r.HostCPUSecondsPerGBMin, r.HostCPUSecondsPerGBMax, r.GbpsPerHostCore)
		if m.Guests == results.GuestsTCG {
			l += " (" + TCGLabel + ")"
		}
		lines = append(lines, l)
	}
	return lines
}

// hostCPUNote explains the host CPU figures, "" without any.
func hostCPUNote(runs []results.Run, m results.Machine) string {
	if !slices.ContainsFunc(runs, hasHostCPU) {
		return ""
	}
	note := "Host CPU is the node's view of the same bytes: the CPU time of the VMs' virt-launcher pods (their cgroups: vCPUs, vhost workers, QEMU's I/O threads) plus the node's softirq time, read by the node agent before and after each repetition, per 10^9 bytes of payload (s/GB, lower is better); Gbit/s per host core is the same cost inverted (higher is better)."
	if m.Guests == results.GuestsTCG {
		note += " " + TCGLabel + ": the node has no KVM, so QEMU emulates the guests' CPUs and most of the launchers' time is that emulation; compare the paths with each other, not with figures from KVM."
	}
	return note
}
