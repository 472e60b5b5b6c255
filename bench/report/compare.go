package report

import (
	"fmt"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// Speedup compares one path with a reference path at one point.
type Speedup struct {
	results.Point
	// Path and Reference name the paths; PathMTU and ReferenceMTU the MTUs
	// of the runs compared (the best run of each path at this point).
	Path, Reference       string
	PathMTU, ReferenceMTU int
	// Ratio is Path's median throughput over Reference's. For RR tests with
	// equal message sizes that is the ratio of transaction rates, the inverse
	// of the latency ratio. Higher is better.
	Ratio float64
}

// Speedups returns, for every point measured on both, the ratio of every
// non-reference path to every reference path (isReference; nil means
// results.IsReference). When no path is a reference, the first path in runs is.
// The result is ordered by point (in order of first appearance), then path,
// then reference.
func Speedups(runs []results.Run, isReference func(string) bool) []Speedup {
	if isReference == nil {
		isReference = results.IsReference
	}
	paths := results.Paths(runs)
	var refs, cands []string
	for _, p := range paths {
		if isReference(p) {
			refs = append(refs, p)
		} else {
			cands = append(cands, p)
		}
	}
	if len(refs) == 0 && len(paths) > 1 {
		refs, cands = paths[:1], paths[1:]
	}
	best := results.Best(runs)
	var out []Speedup
	seen := map[results.Point]bool{}
	for _, r := range runs {
		pt := r.Point()
		if seen[pt] {
			continue
		}
		seen[pt] = true
		for _, c := range cands {
			cr, ok := best[c][pt]
			if !ok {
				continue
			}
			for _, ref := range refs {
				rr, ok := best[ref][pt]
				if !ok || !(rr.ThroughputMbps > 0) {
					continue
				}
				out = append(out, Speedup{Point: pt, Path: c, Reference: ref, PathMTU: cr.MTU, ReferenceMTU: rr.MTU, Ratio: cr.ThroughputMbps / rr.ThroughputMbps})
			}
		}
	}
	return out
}

// Headline returns the point the headline ratios are quoted at, the one the
// targets of issue 6 name: single session, single pair TCP_STREAM with the
// largest socket and the largest message size measured (256 KiB / 64 KiB in
// the papers' matrix). ok is false when there is no such stream run.
func Headline(runs []results.Run) (p results.Point, ok bool) {
	for _, r := range runs {
		if r.Test != results.TCPStream || r.Sessions != 1 || r.Pairs != 1 {
			continue
		}
		if !ok || r.SocketBytes > p.SocketBytes || (r.SocketBytes == p.SocketBytes && r.MessageBytes > p.MessageBytes) {
			p, ok = r.Point(), true
		}
	}
	return p, ok
}

// RatioLines returns one line per (path, reference) at the Headline point,
// e.g. "ratio fastpath-linux-bridge/baseline-untuned 2.93", in the order of
// Speedups. make bench and `fastpath-bench report` print these.
func RatioLines(runs []results.Run, isReference func(string) bool) []string {
	hp, ok := Headline(runs)
	if !ok {
		return nil
	}
	var lines []string
	for _, s := range Speedups(runs, isReference) {
		if s.Point == hp {
			lines = append(lines, fmt.Sprintf("ratio %s/%s %.2f", s.Path, s.Reference, s.Ratio))
		}
	}
	return lines
}

// LatencyHeadline returns the point latency is quoted at: single session,
// single pair TCP_RR with the smallest message (1 byte in the papers'
// matrix) and the largest socket size measured.
func LatencyHeadline(runs []results.Run) (p results.Point, ok bool) {
	for _, r := range runs {
		if r.Test != results.TCPRR || r.Sessions != 1 || r.Pairs != 1 {
			continue
		}
		if !ok || r.MessageBytes < p.MessageBytes || (r.MessageBytes == p.MessageBytes && r.SocketBytes > p.SocketBytes) {
			p, ok = r.Point(), true
		}
	}
	return p, ok
}

// LatencyLines returns one line per (path, reference) at the LatencyHeadline
// point giving the ratio of mean latencies, lower is better, e.g.
// "latency fastpath-linux-bridge/baseline-masquerade 0.81". Paths are
// compared at their best run (see Best).
func LatencyLines(runs []results.Run, isReference func(string) bool) []string {
	hp, ok := LatencyHeadline(runs)
	if !ok {
		return nil
	}
	best := results.Best(runs)
	var lines []string
	for _, s := range Speedups(runs, isReference) {
		if s.Point != hp {
			continue
		}
		a, b := best[s.Path][hp], best[s.Reference][hp]
		if a.MeanLatencyUs > 0 && b.MeanLatencyUs > 0 {
			lines = append(lines, fmt.Sprintf("latency %s/%s %.2f", s.Path, s.Reference, a.MeanLatencyUs/b.MeanLatencyUs))
		}
	}
	return lines
}
