package sweep

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Recommendation is a node's answer: the recommended candidate (an index
// into the evidence), the margin, the MTU curve's verdict and a message.
type Recommendation struct {
	// Best is the recommended candidate.
	Best int
	// Fastest is the candidate that won by the objective (Choose); it is
	// Best unless the MTU curve is flat.
	Fastest int
	// MarginPercent is NodeTuning.marginPercent: Choose's margin of Best
	// over the runner-up, or with a flat curve how far Best's median lies
	// from Fastest's, in percent of Fastest's (0 or negative).
	MarginPercent string
	// Curve is v1alpha1.WithinNoise when the MTU curve is flat, BeyondNoise
	// when it is not, "" when it was not judged (MTUCurve).
	Curve v1alpha1.NoiseVerdict
	// Message says why Best: the winner, or the flat curve and the MTU
	// chosen in it; and how many candidates were left out for their
	// offloads.
	Message string
}

// Recommend chooses a node's recommendation from its evidence: the best by
// objective among the candidates Choose admits (not failed, the offloads
// they asked for, MTU in [minMTU, maxMTU]); then, when the MTU curve at the
// winner's offloads is flat within noise (MTUCurve), the smallest MTU of that
// curve instead: the same speed for less memory per ring (a ring of N
// descriptors holds N buffers of up to the MTU). ok is false when no
// candidate qualifies.
func Recommend(evidence []v1alpha1.TuningEvidence, objective v1alpha1.TuningObjective, minMTU, maxMTU int32) (Recommendation, bool) {
	best, margin, ok := Choose(evidence, objective, minMTU, maxMTU)
	if !ok {
		return Recommendation{}, false
	}
	r := Recommendation{Best: best, Fastest: best, MarginPercent: margin}
	curve, verdict := MTUCurve(evidence, objective, best, minMTU, maxMTU)
	r.Curve = verdict
	var msg []string
	switch verdict {
	case v1alpha1.WithinNoise:
		r.Best = curve[0]
		fast, small := evidence[best], evidence[r.Best]
		r.MarginPercent = strconv.FormatFloat(float64(small.MedianMbps-fast.MedianMbps)/float64(fast.MedianMbps)*100, 'f', 1, 64)
		ranges := make([]string, len(curve))
		for i, c := range curve {
			ranges[i] = fmt.Sprintf("%d (%d-%d)", evidence[c].MTU, evidence[c].MinMbps, evidence[c].MaxMbps)
		}
		msg = append(msg, fmt.Sprintf("MTU curve flat within noise: the TCP_STREAM ranges (Mbit/s) of MTU %s overlap, so the smallest, MTU %d, is recommended (median %d Mbit/s, %s%% from MTU %d's %d): the same speed with less memory per ring",
			strings.Join(ranges, ", "), small.MTU, small.MedianMbps, r.MarginPercent, fast.MTU, fast.MedianMbps))
	default:
		m := ""
		if margin != "" {
			m = fmt.Sprintf(", %s%% over the runner-up", margin)
		}
		msg = append(msg, fmt.Sprintf("MTU %d wins by %s%s", evidence[best].MTU, objective, m))
		if verdict == v1alpha1.BeyondNoise {
			msg = append(msg, "the MTU curve is beyond noise")
		}
	}
	if n := offloadMismatches(evidence); n > 0 {
		msg = append(msg, fmt.Sprintf("%d candidate(s) left out: their path negotiated other offloads than they asked for (evidence[].offloadMismatch)", n))
	}
	r.Message = strings.Join(msg, "; ")
	return r, true
}

// MTUCurve judges the MTU curve at the winner's offloads: the candidates
// Choose admits that have evidence[best]'s offload set, by MTU ascending,
// and whether their throughput changes with the MTU beyond the noise. The
// curve is flat (WithinNoise) when the min-max ranges of their repetitions
// all overlap, i.e. the largest minimum is at most the smallest maximum (for
// intervals on a line, all overlapping pairwise is one common point); else
// BeyondNoise. It is judged only under objective Throughput (the ranges are
// throughput ranges; a flat throughput curve says nothing of CPU per byte
// or latency) and with two or more MTUs; otherwise the verdict is "".
func MTUCurve(evidence []v1alpha1.TuningEvidence, objective v1alpha1.TuningObjective, best int, minMTU, maxMTU int32) ([]int, v1alpha1.NoiseVerdict) {
	if objective != v1alpha1.ObjectiveThroughput {
		return nil, ""
	}
	var curve []int
	for i, ev := range evidence {
		if ev.MTU < minMTU || ev.MTU > maxMTU || !equality.Semantic.DeepEqual(ev.Offloads, evidence[best].Offloads) {
			continue
		}
		if _, ok := Score(ev, objective); ok {
			curve = append(curve, i)
		}
	}
	if len(curve) < 2 {
		return nil, ""
	}
	slices.SortStableFunc(curve, func(a, b int) int { return int(evidence[a].MTU) - int(evidence[b].MTU) })
	lo, hi := evidence[curve[0]].MinMbps, evidence[curve[0]].MaxMbps
	for _, c := range curve[1:] {
		lo, hi = max(lo, evidence[c].MinMbps), min(hi, evidence[c].MaxMbps)
	}
	if lo <= hi {
		return curve, v1alpha1.WithinNoise
	}
	return curve, v1alpha1.BeyondNoise
}

// offloadMismatches counts the candidates left out for their offloads.
func offloadMismatches(evidence []v1alpha1.TuningEvidence) int {
	n := 0
	for _, ev := range evidence {
		if ev.Failed == "" && ev.OffloadMismatch != "" {
			n++
		}
	}
	return n
}
