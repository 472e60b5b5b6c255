package results

import (
	"fmt"
	"math"
)

// Noise verdicts of a comparison (PointComparison): whether the two runs'
// repetitions overlap.
const (
	// WithinNoise: the min–max ranges of the two runs' repetitions
	// overlap, so the difference of the medians may be noise.
	WithinNoise = "WithinNoise"
	// BeyondNoise: the ranges do not overlap; every repetition of one run
	// is above every repetition of the other.
	BeyondNoise = "BeyondNoise"
)

// Figure is one measured quantity of a run: its median over repetitions
// and the least and greatest repetition, in the quantity's unit.
type Figure struct {
	Median, Min, Max float64
}

// noise says whether a's and b's ranges overlap (WithinNoise) or not
// (BeyondNoise). A range not recorded (min or max 0) is the median alone.
func noise(a, b Figure) string {
	a, b = a.filled(), b.filled()
	if a.Min <= b.Max && b.Min <= a.Max {
		return WithinNoise
	}
	return BeyondNoise
}

func (f Figure) filled() Figure {
	if f.Min == 0 {
		f.Min = f.Median
	}
	if f.Max == 0 {
		f.Max = f.Median
	}
	return f
}

// PointComparison is one path at one matrix point in two runs: now (the
// run judged) and then (the run compared with).
type PointComparison struct {
	Path  string
	Point Point
	// Now and Then are the throughputs, 10^6 bit/s (RR tests: the payload
	// rate of both directions, so higher is better for every test).
	Now, Then Figure
	// Ratio is Now.Median / Then.Median; Noise WithinNoise or BeyondNoise
	// (the min–max ranges of the repetitions overlap or not).
	Ratio float64
	Noise string
	// HasCPU is true when both runs measured the service demand (CPU per
	// KiB of payload, µs/KB) at this point; NowCPU, ThenCPU, CPURatio
	// (NowCPU.Median / ThenCPU.Median; lower is better) and CPUNoise are
	// set then.
	HasCPU          bool
	NowCPU, ThenCPU Figure
	CPURatio        float64
	CPUNoise        string
}

// ThroughputDropPercent is how much lower the throughput is now, in
// percent of then's: 100 × (1 - Ratio); negative when it rose.
func (p PointComparison) ThroughputDropPercent() float64 { return 100 * (1 - p.Ratio) }

// CPURisePercent is how much more CPU per byte now costs, in percent of
// then's: 100 × (CPURatio - 1); negative when it fell, 0 without CPU.
func (p PointComparison) CPURisePercent() float64 {
	if !p.HasCPU {
		return 0
	}
	return 100 * (p.CPURatio - 1)
}

// Regression is the point's regression beyond the noise in percent: the
// larger of the throughput drop (when Noise is BeyondNoise) and the CPU per
// byte rise (when CPUNoise is BeyondNoise), at least 0. what names it,
// e.g. "throughput 0.82x" or "CPU per byte 1.31x"; "" when 0.
func (p PointComparison) Regression() (percent float64, what string) {
	if p.Noise == BeyondNoise && p.ThroughputDropPercent() > percent {
		percent, what = p.ThroughputDropPercent(), fmt.Sprintf("throughput %.2fx", p.Ratio)
	}
	if p.HasCPU && p.CPUNoise == BeyondNoise && p.CPURisePercent() > percent {
		percent, what = p.CPURisePercent(), fmt.Sprintf("CPU per byte %.2fx", p.CPURatio)
	}
	return percent, what
}

// Comparison is two runs compared point by point.
type Comparison struct {
	// Points has one entry per (path, point) measured in both runs, in
	// now's document order; a path measured at several MTUs counts with
	// its best run in each (Best).
	Points []PointComparison
	// OnlyNow and OnlyThen count the (path, point) pairs measured in one
	// run only: they are not compared.
	OnlyNow, OnlyThen int
}

// Compare compares now with then at every path and matrix point both
// measured.
func Compare(now, then Document) Comparison {
	bestNow, bestThen := Best(now.Runs), Best(then.Runs)
	var c Comparison
	seen := map[string]map[Point]bool{}
	for _, r := range now.Runs {
		pt := r.Point()
		if seen[r.Path][pt] {
			continue
		}
		if seen[r.Path] == nil {
			seen[r.Path] = map[Point]bool{}
		}
		seen[r.Path][pt] = true
		t, ok := bestThen[r.Path][pt]
		if !ok {
			c.OnlyNow++
			continue
		}
		n := bestNow[r.Path][pt]
		pc := PointComparison{Path: r.Path, Point: pt,
			Now:  Figure{n.ThroughputMbps, n.ThroughputMinMbps, n.ThroughputMaxMbps},
			Then: Figure{t.ThroughputMbps, t.ThroughputMinMbps, t.ThroughputMaxMbps}}
		pc.Ratio = n.ThroughputMbps / t.ThroughputMbps
		pc.Noise = noise(pc.Now, pc.Then)
		if n.ServiceDemandUsPerKB > 0 && t.ServiceDemandUsPerKB > 0 {
			pc.HasCPU = true
			pc.NowCPU = Figure{n.ServiceDemandUsPerKB, n.ServiceDemandMinUsPerKB, n.ServiceDemandMaxUsPerKB}
			pc.ThenCPU = Figure{t.ServiceDemandUsPerKB, t.ServiceDemandMinUsPerKB, t.ServiceDemandMaxUsPerKB}
			pc.CPURatio = n.ServiceDemandUsPerKB / t.ServiceDemandUsPerKB
			pc.CPUNoise = noise(pc.NowCPU, pc.ThenCPU)
		}
		c.Points = append(c.Points, pc)
	}
	for path, pts := range bestThen {
		for pt := range pts {
			if !seen[path][pt] {
				c.OnlyThen++
			}
		}
	}
	return c
}

// Worst is the judged point with the largest Regression (the first of
// equals), its regression in percent and what regressed; judged says which
// paths count (nil: every path but the references, IsReference). ok is
// false when no point was judged.
func (c Comparison) Worst(judged func(path string) bool) (worst PointComparison, percent float64, what string, ok bool) {
	if judged == nil {
		judged = func(path string) bool { return !IsReference(path) }
	}
	percent = math.Inf(-1)
	for _, p := range c.Points {
		if !judged(p.Path) {
			continue
		}
		if r, w := p.Regression(); r > percent {
			worst, percent, what, ok = p, r, w, true
		}
	}
	if !ok {
		return PointComparison{}, 0, "", false
	}
	return worst, percent, what, true
}
