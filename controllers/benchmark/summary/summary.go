package summary

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Status list bounds, from the FastPathBenchmark CRD (MaxItems of status.points,
// status.paths and points[].fastPathPerPairMbps).
const (
	MaxPoints       = 64
	MaxPaths        = 8
	MaxPairsInPoint = 64
)

// Summary is what status shows of a results document.
type Summary struct {
	// BestGbps is BestMbps in 10^9 bit/s with two decimals, e.g. "13.52"; ""
	// when there is no fast-path TCP_STREAM (or, with vsock tests only,
	// VSOCK_STREAM) result.
	BestGbps string
	// Speedup is BestRatio with two decimals and an x, e.g. "2.93x"; "" without
	// a baseline at the best point.
	Speedup string
	// Paths is one entry per path in the document (first MaxPaths).
	Paths []fastpathv1alpha1.PathSummary
	// Points is one entry per fast-path run in matrix order (first MaxPoints),
	// each beside the baseline run of the same point.
	Points []fastpathv1alpha1.BenchmarkPoint
	// TotalPoints is the number of fast-path runs before capping.
	TotalPoints int

	// HasBest is true when the document has a single-pair fast-path
	// TCP_STREAM run; BestPoint is the one with the highest median, BestMbps
	// its median in 10^6 bit/s and BestRatio its median over the baseline's at
	// the same point (0 when the baseline was not measured there).
	HasBest   bool
	BestPoint results.Point
	BestMbps  float64
	BestRatio float64

	// CPURatio is BestCPU.Median with two decimals, e.g. "0.62"; "" when
	// the fast path and the baseline do not both have a service demand at
	// the best point. BestCPU is the fast-path/baseline service demand
	// ratio there over paired repetitions (results.CPURatio), HasCPU whether
	// it was measured.
	CPURatio string
	BestCPU  results.Ratio
	HasCPU   bool

	// Comparison is the run compared with spec.compareTo's (Compared);
	// nil when it was not compared. The caller sets it: Summarize sees
	// one document.
	Comparison *results.Comparison
}

// Compared returns s with the comparison of doc (the run s summarises)
// with then, the run of spec.compareTo.
func (s Summary) Compared(doc, then results.Document) Summary {
	c := results.Compare(doc, then)
	s.Comparison = &c
	return s
}

// ComparedPoints renders c for status.comparison: one entry per compared
// (path, point), the first MaxPoints, in c's order.
func ComparedPoints(c results.Comparison) []fastpathv1alpha1.ComparedPoint {
	var out []fastpathv1alpha1.ComparedPoint
	for _, p := range c.Points {
		if len(out) == MaxPoints {
			break
		}
		cp := fastpathv1alpha1.ComparedPoint{Path: p.Path, Test: fastpathv1alpha1.BenchmarkTest(p.Point.Test),
			SocketBytes: int32(p.Point.SocketBytes), MessageBytes: int32(p.Point.MessageBytes), Sessions: int32(p.Point.Sessions), Pairs: int32(p.Point.Pairs),
			Mbps: mbps(p.Now.Median), ComparedMbps: mbps(p.Then.Median), ThroughputRatio: fmt.Sprintf("%.2f", p.Ratio),
			ThroughputNoise: fastpathv1alpha1.NoiseVerdict(p.Noise)}
		if p.HasCPU {
			cp.CPURatio, cp.CPUNoise = fmt.Sprintf("%.2f", p.CPURatio), fastpathv1alpha1.NoiseVerdict(p.CPUNoise)
		}
		out = append(out, cp)
	}
	return out
}

// Summarize summarises doc. Paths are named as in the runner contract:
// benchjob.PathFastPath against benchjob.PathBaseline. Throughputs are rounded
// to whole Mbps, latencies to nanoseconds. A path measured several times at a
// point (several MTUs) counts with its best run (results.Best).
func Summarize(doc results.Document) Summary {
	best := results.Best(doc.Runs)
	base := best[benchjob.PathBaseline]
	var s Summary

	// One status point per fast-path matrix point (the virtio-net path's,
	// then the vsock path's, which has no baseline), in order of first
	// appearance (document order, so ties resolve the same way every time).
	// The best point is the virtio-net path's best single-pair TCP_STREAM,
	// else, in a benchmark of vsock tests only, the best VSOCK_STREAM.
	seen := map[string]map[results.Point]bool{}
	var bestVSock results.Point
	var bestVSockMbps float64
	for _, r := range doc.Runs {
		pt := r.Point()
		if r.Path != benchjob.PathFastPath && r.Path != benchjob.PathVSock || seen[r.Path][pt] {
			continue
		}
		if seen[r.Path] == nil {
			seen[r.Path] = map[results.Point]bool{}
		}
		seen[r.Path][pt] = true
		f := best[r.Path][pt]
		switch {
		case r.Path == benchjob.PathFastPath && pt.Test == results.TCPStream && pt.Pairs == 1 && (!s.HasBest || f.ThroughputMbps > s.BestMbps):
			s.HasBest, s.BestPoint, s.BestMbps = true, pt, f.ThroughputMbps
		case r.Path == benchjob.PathVSock && pt.Test == results.VSockStream && pt.Pairs == 1 && f.ThroughputMbps > bestVSockMbps:
			bestVSock, bestVSockMbps = pt, f.ThroughputMbps
		}
		s.TotalPoints++
		if len(s.Points) < MaxPoints {
			b, hasBase := base[pt]
			s.Points = append(s.Points, point(f, b, hasBase && r.Path == benchjob.PathFastPath))
		}
	}
	if !s.HasBest && bestVSockMbps > 0 {
		s.HasBest, s.BestPoint, s.BestMbps = true, bestVSock, bestVSockMbps
	}
	if s.HasBest {
		s.BestGbps = fmt.Sprintf("%.2f", s.BestMbps/1000)
		if b, ok := base[s.BestPoint]; ok && b.ThroughputMbps > 0 {
			s.BestRatio = s.BestMbps / b.ThroughputMbps
			s.Speedup = fmt.Sprintf("%.2fx", s.BestRatio)
			if r, ok := results.CPURatio(best[benchjob.PathFastPath][s.BestPoint], b); ok {
				s.BestCPU, s.HasCPU, s.CPURatio = r, true, fmt.Sprintf("%.2f", r.Median)
			}
		}
	}
	for _, name := range results.Paths(doc.Runs) {
		if len(s.Paths) == MaxPaths {
			break
		}
		ps := pathSummary(name, best[name])
		ps.Interface, ps.Offloads = negotiated(doc.Runs, name)
		s.Paths = append(s.Paths, ps)
	}
	return s
}

func point(f, b results.Run, hasBase bool) fastpathv1alpha1.BenchmarkPoint {
	p := fastpathv1alpha1.BenchmarkPoint{
		Test:         fastpathv1alpha1.BenchmarkTest(f.Test),
		SocketBytes:  int32(f.SocketBytes),
		MessageBytes: int32(f.MessageBytes),
		Sessions:     int32(f.Sessions),
		Pairs:        int32(f.Pairs),
		FastPathMbps: mbps(f.ThroughputMbps),
	}
	for i, v := range f.PerPairThroughputMbps {
		if i == MaxPairsInPoint {
			break
		}
		p.FastPathPerPairMbps = append(p.FastPathPerPairMbps, mbps(v))
	}
	rr := results.IsRR(f.Test)
	if rr {
		p.FastPathLatency = latency(f.MeanLatencyUs)
	}
	p.FastPathServiceDemandUsPerKB = threeDecimals(f.ServiceDemandUsPerKB)
	p.FastPathHostCPUSecondsPerGB, p.FastPathGbpsPerHostCore = threeDecimals(f.HostCPUSecondsPerGB), threeDecimals(f.GbpsPerHostCore)
	p.FastPathLossPercent = loss(f)
	if !hasBase {
		return p
	}
	p.BaselineMbps = mbps(b.ThroughputMbps)
	p.BaselineServiceDemandUsPerKB = threeDecimals(b.ServiceDemandUsPerKB)
	p.BaselineHostCPUSecondsPerGB, p.BaselineGbpsPerHostCore = threeDecimals(b.HostCPUSecondsPerGB), threeDecimals(b.GbpsPerHostCore)
	p.BaselineLossPercent = loss(b)
	if r, ok := results.CPURatio(f, b); ok {
		p.CPURatio = fmt.Sprintf("%.2f", r.Median)
	}
	switch {
	case rr:
		p.BaselineLatency = latency(b.MeanLatencyUs)
		if f.MeanLatencyUs > 0 && b.MeanLatencyUs > 0 {
			p.SpeedupPercent = percent(b.MeanLatencyUs / f.MeanLatencyUs)
		}
	case b.ThroughputMbps > 0:
		p.SpeedupPercent = percent(f.ThroughputMbps / b.ThroughputMbps)
	}
	return p
}

// pathSummary gives a path's best single-pair TCP_STREAM (VSOCK_STREAM on the
// vsock path) median and its lowest single-pair TCP_RR (VSOCK_RR) mean
// latency.
func pathSummary(name string, runs map[results.Point]results.Run) fastpathv1alpha1.PathSummary {
	ps := fastpathv1alpha1.PathSummary{Path: name}
	var bestMbps, bestLat float64
	for pt, r := range runs {
		if pt.Pairs != 1 {
			continue
		}
		switch pt.Test {
		case results.TCPStream, results.VSockStream:
			bestMbps = math.Max(bestMbps, r.ThroughputMbps)
		case results.TCPRR, results.VSockRR:
			if r.MeanLatencyUs > 0 && (bestLat == 0 || r.MeanLatencyUs < bestLat) {
				bestLat = r.MeanLatencyUs
			}
		}
	}
	ps.BestThroughputMbps = mbps(bestMbps)
	if bestLat > 0 {
		ps.MeanLatency = latency(bestLat)
	}
	return ps
}

// negotiated returns the client interface of path and the offloads it
// negotiated, from the first of runs on path that reports them: each
// offload of wellknown.Offloads On or Off ("on" or "off" in results.json),
// unset when the run does not name it. nil offloads when no run reports any.
func negotiated(runs []results.Run, path string) (string, *fastpathv1alpha1.Offloads) {
	for _, r := range runs {
		if r.Path != path || len(r.Offloads) == 0 {
			continue
		}
		var o fastpathv1alpha1.Offloads
		for _, row := range wellknown.Offloads {
			switch r.Offloads[row.Name] {
			case "on":
				*o.Offload(row.Name) = fastpathv1alpha1.OffloadOn
			case "off":
				*o.Offload(row.Name) = fastpathv1alpha1.OffloadOff
			}
		}
		return r.Interface, &o
	}
	return "", nil
}

func mbps(v float64) int64 { return int64(math.Round(v)) }

// threeDecimals renders a positive figure (µs/KiB, s/GB, Gbit/s per core)
// with three decimals, "" when not measured.
func threeDecimals(v float64) string {
	if !(v > 0) {
		return ""
	}
	return fmt.Sprintf("%.3f", v)
}

// loss renders a UDP_STREAM run's median loss with two decimals ("0.00"
// when nothing was lost), "" for other tests.
func loss(r results.Run) string {
	if r.Test != results.UDPStream {
		return ""
	}
	return fmt.Sprintf("%.2f", r.LossPercent)
}

func percent(ratio float64) int32 { return int32(math.Round(ratio * 100)) }

func latency(us float64) *metav1.Duration {
	if !(us > 0) {
		return nil
	}
	return &metav1.Duration{Duration: time.Duration(math.Round(us * float64(time.Microsecond)))}
}

// Verdict is the judgement of one success criterion, in the figures the
// operator compared: what `kubectl fastpath bench run` reports per
// criterion (and in JUnit XML), and what Evaluate's message joins.
type Verdict struct {
	// Criterion is the field of spec.successCriteria: "minThroughputMbps",
	// "minSpeedupPercent", "maxCPURatio" or "maxRegressionPercent".
	Criterion string
	// Required is the threshold as the spec gives it, e.g. "10000", "150",
	// "0.80".
	Required string
	// Measured is the figure compared with Required, in Unit: whole Mbps,
	// percent with one decimal, the CPU ratio with two; "" when there was
	// nothing to compare (Why says why).
	Measured string
	// Unit is "Mbps", "%" or "" (a ratio).
	Unit string
	// Max is true for an upper bound (maxCPURatio, maxRegressionPercent),
	// false for a lower one.
	Max bool
	// Met is whether the criterion holds; a criterion that cannot be
	// checked is not met.
	Met bool
	// Why says why nothing could be compared, e.g. "no baseline at the best
	// point"; "" when Measured is set.
	Why string
	// Text is the verdict as Evaluate's message words it, e.g.
	// "minSpeedupPercent 300 not met (294.5%)".
	Text string
}

// Judge gives one Verdict per success criterion that criteria sets, in the
// order minThroughputMbps, minSpeedupPercent, maxCPURatio,
// maxRegressionPercent; none for nil criteria. The comparisons are exact
// (the unrounded medians of s), as the operator's.
//
// maxRegressionPercent is judged on s.Comparison: its Measured is the
// largest regression beyond the noise (results.PointComparison.Regression:
// a throughput drop or a CPU per byte rise, in percent, counted only where
// the two runs' repetition ranges do not overlap) over every compared point
// of every path but the references (results.IsReference), "0.0" when none
// regressed beyond the noise. Without a comparison, or without a judged
// point in common, it is not met.
func Judge(s Summary, criteria *fastpathv1alpha1.SuccessCriteria) []Verdict {
	if criteria == nil {
		return nil
	}
	var out []Verdict
	if c := criteria.MinThroughputMbps; c != nil {
		v := Verdict{Criterion: "minThroughputMbps", Required: strconv.FormatInt(*c, 10), Unit: "Mbps"}
		if s.HasBest {
			v.Measured = fmt.Sprintf("%.0f", s.BestMbps)
		}
		switch {
		case !s.HasBest:
			v.Why = "nothing to compare"
			v.Text = fmt.Sprintf("minThroughputMbps %d not met: %s", *c, v.Why)
		case s.BestMbps < float64(*c):
			v.Text = fmt.Sprintf("minThroughputMbps %d not met (%s Mbps)", *c, v.Measured)
		default:
			v.Met = true
			v.Text = fmt.Sprintf("minThroughputMbps %d met", *c)
		}
		out = append(out, v)
	}
	if c := criteria.MinSpeedupPercent; c != nil {
		v := Verdict{Criterion: "minSpeedupPercent", Required: strconv.FormatInt(int64(*c), 10), Unit: "%"}
		if s.BestRatio != 0 {
			v.Measured = fmt.Sprintf("%.1f", s.BestRatio*100)
		}
		switch {
		case s.BestRatio == 0:
			v.Why = "no baseline at the best point"
			v.Text = fmt.Sprintf("minSpeedupPercent %d not met: %s", *c, v.Why)
		case s.BestRatio*100 < float64(*c):
			v.Text = fmt.Sprintf("minSpeedupPercent %d not met (%s%%)", *c, v.Measured)
		default:
			v.Met = true
			v.Text = fmt.Sprintf("minSpeedupPercent %d met", *c)
		}
		out = append(out, v)
	}
	if c := criteria.MaxCPURatio; c != "" {
		v := Verdict{Criterion: "maxCPURatio", Required: c, Max: true}
		want, err := strconv.ParseFloat(c, 64)
		if s.HasCPU {
			v.Measured = fmt.Sprintf("%.2f", s.BestCPU.Median)
		}
		switch {
		case err != nil || !(want > 0):
			v.Measured = ""
			v.Why = "not a decimal number greater than 0"
			v.Text = fmt.Sprintf("maxCPURatio %q not met: %s", c, v.Why)
		case !s.HasCPU:
			v.Why = "no service demand of both the fast path and the baseline at the best point"
			v.Text = fmt.Sprintf("maxCPURatio %s not met: %s", c, v.Why)
		case s.BestCPU.Median > want:
			v.Text = fmt.Sprintf("maxCPURatio %s not met (%s)", c, v.Measured)
		default:
			v.Met = true
			v.Text = fmt.Sprintf("maxCPURatio %s met (%s)", c, v.Measured)
		}
		out = append(out, v)
	}
	if c := criteria.MaxRegressionPercent; c != nil {
		out = append(out, judgeRegression(*c, s.Comparison))
	}
	return out
}

func judgeRegression(max int32, c *results.Comparison) Verdict {
	v := Verdict{Criterion: "maxRegressionPercent", Required: strconv.FormatInt(int64(max), 10), Unit: "%", Max: true}
	if c == nil {
		v.Why = "not compared with spec.compareTo's run"
		v.Text = fmt.Sprintf("maxRegressionPercent %d not met: %s", max, v.Why)
		return v
	}
	worst, percent, what, ok := c.Worst(nil)
	if !ok {
		v.Why = "no matrix point of the fast path in common with the compared run"
		v.Text = fmt.Sprintf("maxRegressionPercent %d not met: %s", max, v.Why)
		return v
	}
	v.Measured = fmt.Sprintf("%.1f", percent)
	at := fmt.Sprintf("%s %s", worst.Path, worst.Point)
	switch {
	case what == "":
		judged := 0
		for _, p := range c.Points {
			if !results.IsReference(p.Path) {
				judged++
			}
		}
		v.Met = true
		v.Text = fmt.Sprintf("maxRegressionPercent %d met (no regression beyond the noise at %d compared points)", max, judged)
	case percent > float64(max):
		v.Text = fmt.Sprintf("maxRegressionPercent %d not met (%s%%: %s of the compared run's at %s, beyond the noise)", max, v.Measured, what, at)
	default:
		v.Met = true
		v.Text = fmt.Sprintf("maxRegressionPercent %d met (worst %s%%: %s at %s)", max, v.Measured, what, at)
	}
	return v
}

// Evaluate judges s against criteria (nil: nothing to meet) with Judge. met
// is false when a criterion is missed or cannot be checked (no fast-path
// TCP_STREAM result; no baseline at the best point; for maxCPURatio, no
// service demand on both paths there); message states the numbers either
// way, e.g. "best fast path 13.52 Gbps at TCP_STREAM sock=256KiB msg=64KiB
// sessions=1 pairs=1, 2.95x the baseline: minThroughputMbps 10000 met,
// minSpeedupPercent 150 met".
func Evaluate(s Summary, criteria *fastpathv1alpha1.SuccessCriteria) (met bool, message string) {
	head := "no fast-path TCP_STREAM result"
	if s.HasBest {
		head = fmt.Sprintf("best fast path %s Gbps at %s", s.BestGbps, s.BestPoint)
		if s.Speedup != "" {
			head += fmt.Sprintf(", %s the baseline", s.Speedup)
		}
	}
	if s.HasCPU {
		head += fmt.Sprintf(", CPU per byte %s of the baseline's", s.BestCPU)
	}
	verdicts := Judge(s, criteria)
	if len(verdicts) == 0 {
		return true, head + ": no success criteria"
	}
	met = true
	texts := make([]string, len(verdicts))
	for i, v := range verdicts {
		met = met && v.Met
		texts[i] = v.Text
	}
	return met, head + ": " + strings.Join(texts, ", ")
}
