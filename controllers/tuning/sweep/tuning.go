package sweep

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Step is one measurement of a sweep: candidate Candidate (an index into the
// candidate list), repetition Rep (0-based).
type Step struct {
	Candidate, Rep int
}

// Order returns the steps of a sweep of n candidates with reps repetitions:
// the candidates alternate within each repetition and every other
// repetition runs them backwards (A B C, C B A, A B C), so a drift of the
// machine hits every candidate alike (docs/design.md §5.2). Empty when n or
// reps is not positive.
func Order(n, reps int) []Step {
	var out []Step
	for r := 0; r < reps; r++ {
		for i := 0; i < n; i++ {
			c := i
			if r%2 == 1 {
				c = n - 1 - i
			}
			out = append(out, Step{Candidate: c, Rep: r})
		}
	}
	return out
}

// Rep is what one repetition of one candidate measured: TCP_STREAM
// throughput in Mbit/s, netperf service demand in usec/KiB (0: not
// measured), TCP_RR mean latency in usec (0: not measured), the offloads
// the path negotiated (nil: not reported), or Failed, the reason it failed.
type Rep struct {
	Mbps                 float64
	ServiceDemandUsPerKB float64
	LatencyUs            float64
	Negotiated           *v1alpha1.Offloads
	Failed               string
}

// OffloadDiffs names each offload that asked sets and negotiated does not
// have, in wellknown.Offloads order: "gro asked On, negotiated Off", or
// "negotiated unknown" when negotiated leaves it unset. Offloads asked
// leaves unset are not compared. Empty when the path has what was asked.
func OffloadDiffs(asked, negotiated v1alpha1.Offloads) []string {
	var out []string
	for _, row := range wellknown.Offloads {
		a, n := *asked.Offload(row.Name), *negotiated.Offload(row.Name)
		switch {
		case a == "":
		case n == "":
			out = append(out, fmt.Sprintf("%s asked %s, negotiated unknown", row.Name, a))
		case a != n:
			out = append(out, fmt.Sprintf("%s asked %s, negotiated %s", row.Name, a, n))
		}
	}
	return out
}

// Evidence summarises the repetitions of one candidate: the count of
// repetitions that finished, the median, minimum and maximum throughput, the
// median service demand and latency, and the offloads the path negotiated.
// A candidate with any failed repetition is failed with the first reason (a
// candidate that failed once is not trusted, so it is never recommended).
// When setting asks for offloads, a finished repetition whose path
// negotiated others (OffloadDiffs), or reported none, sets OffloadMismatch
// with the first such repetition's reason, and NegotiatedOffloads is that
// repetition's; otherwise NegotiatedOffloads is the first repetition's. Such
// a candidate measured another setting than its own, so it is never
// recommended either (Score).
func Evidence(setting v1alpha1.TuningSetting, reps []Rep) v1alpha1.TuningEvidence {
	ev := v1alpha1.TuningEvidence{MTU: setting.MTU, Offloads: setting.Offloads}
	var mbps, sd, lat []float64
	for i, r := range reps {
		if r.Failed != "" {
			if ev.Failed == "" {
				ev.Failed = fmt.Sprintf("repetition %d: %s", i+1, r.Failed)
			}
			continue
		}
		ev.Repetitions++
		if setting.Offloads != nil && ev.OffloadMismatch == "" {
			if r.Negotiated == nil {
				ev.OffloadMismatch = fmt.Sprintf("repetition %d: the benchmark reported no negotiated offloads, so the path's are unknown", i+1)
			} else if diffs := OffloadDiffs(*setting.Offloads, *r.Negotiated); len(diffs) > 0 {
				ev.OffloadMismatch = fmt.Sprintf("repetition %d: %s", i+1, strings.Join(diffs, ", "))
				ev.NegotiatedOffloads = r.Negotiated.DeepCopy()
			}
		}
		if ev.NegotiatedOffloads == nil {
			ev.NegotiatedOffloads = r.Negotiated.DeepCopy()
		}
		mbps = append(mbps, r.Mbps)
		if r.ServiceDemandUsPerKB > 0 {
			sd = append(sd, r.ServiceDemandUsPerKB)
		}
		if r.LatencyUs > 0 {
			lat = append(lat, r.LatencyUs)
		}
	}
	if len(reps) == 0 {
		ev.Failed = "no repetition ran"
	}
	if len(mbps) > 0 {
		ev.MedianMbps = int64(math.Round(results.Median(mbps)))
		ev.MinMbps = int64(math.Round(slices.Min(mbps)))
		ev.MaxMbps = int64(math.Round(slices.Max(mbps)))
	}
	if len(sd) > 0 {
		ev.ServiceDemandUsPerKB = strconv.FormatFloat(results.Median(sd), 'f', 3, 64)
	}
	if len(lat) > 0 {
		ev.MeanLatencyUs = strconv.FormatFloat(results.Median(lat), 'f', 1, 64)
	}
	return ev
}

// Score is a candidate's figure for objective, oriented so that higher is
// better: Mbit/s for Throughput, -usec/KiB for CPUPerByte, -usec for
// Latency. ok is false when the evidence lacks the figure (failed, or not
// measured) or its path did not have the offloads it asked for
// (OffloadMismatch).
func Score(ev v1alpha1.TuningEvidence, objective v1alpha1.TuningObjective) (score float64, ok bool) {
	if ev.Failed != "" || ev.OffloadMismatch != "" || ev.Repetitions == 0 {
		return 0, false
	}
	switch objective {
	case v1alpha1.ObjectiveCPUPerByte:
		v, err := strconv.ParseFloat(ev.ServiceDemandUsPerKB, 64)
		if err != nil || v <= 0 {
			return 0, false
		}
		return -v, true
	case v1alpha1.ObjectiveLatency:
		v, err := strconv.ParseFloat(ev.MeanLatencyUs, 64)
		if err != nil || v <= 0 {
			return 0, false
		}
		return -v, true
	default:
		if ev.MedianMbps <= 0 {
			return 0, false
		}
		return float64(ev.MedianMbps), true
	}
}

// Choose returns the index of the best candidate of evidence by objective
// among those that did not fail, had the offloads they asked for, and whose MTU lies in [minMTU, maxMTU] (the
// network's bounds), and the margin over the runner-up in percent of the
// runner-up's figure ("" when there is no runner-up). Ties go to the
// earlier candidate. ok is false when no candidate qualifies.
func Choose(evidence []v1alpha1.TuningEvidence, objective v1alpha1.TuningObjective, minMTU, maxMTU int32) (best int, marginPercent string, ok bool) {
	best, second := -1, -1
	var bs, ss float64
	for i, ev := range evidence {
		if ev.MTU < minMTU || ev.MTU > maxMTU {
			continue
		}
		s, valid := Score(ev, objective)
		if !valid {
			continue
		}
		switch {
		case best < 0 || s > bs:
			best, second, bs, ss = i, best, s, bs
		case second < 0 || s > ss:
			second, ss = i, s
		}
	}
	if best < 0 {
		return 0, "", false
	}
	if second >= 0 && ss != 0 {
		marginPercent = strconv.FormatFloat((bs-ss)/math.Abs(ss)*100, 'f', 1, 64)
	}
	return best, marginPercent, true
}
