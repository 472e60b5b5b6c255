package results

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// NewSample combines the sessions of one repetition, which all ran at the
// same time, into a Sample: throughput and transaction rates are summed
// (overall and per pair), the mean latency is weighted by transaction rate
// and the P99 is the largest session P99 (see Sample). pairs is the number of
// pairs that ran; every session's Pair must be in 1..pairs.
func NewSample(repetition, pairs int, sessions []Session) (Sample, error) {
	if len(sessions) == 0 {
		return Sample{}, fmt.Errorf("failed to aggregate repetition %d: no sessions", repetition)
	}
	s := Sample{Repetition: repetition, PerSession: sessions}
	perPair := make([]float64, pairs)
	var weighted float64
	for _, ss := range sessions {
		if ss.Pair < 1 || ss.Pair > pairs {
			return Sample{}, fmt.Errorf("failed to aggregate repetition %d: session %d names pair %d of %d", repetition, ss.Session, ss.Pair, pairs)
		}
		s.ThroughputMbps += ss.ThroughputMbps
		perPair[ss.Pair-1] += ss.ThroughputMbps
		s.TransactionsPerSec += ss.TransactionsPerSec
		weighted += ss.MeanLatencyUs * ss.TransactionsPerSec
		s.P99LatencyUs = math.Max(s.P99LatencyUs, ss.P99LatencyUs)
	}
	if s.TransactionsPerSec > 0 {
		s.MeanLatencyUs = weighted / s.TransactionsPerSec
	}
	if pairs > 1 {
		s.PerPairThroughputMbps = perPair
	}
	s.ServiceDemandUsPerKB, s.CPUUtilPercent = CombineCPU(sessions)
	s.LossPercent = combineLoss(sessions)
	return s, nil
}

// Summarize sets r's medians, minima and maxima (and PerPairThroughputMbps)
// from r.Samples. Fields that no sample measured stay zero.
func (r *Run) Summarize() {
	pick := func(f func(Sample) float64) []float64 {
		var xs []float64
		for _, s := range r.Samples {
			if v := f(s); v != 0 {
				xs = append(xs, v)
			}
		}
		return xs
	}
	tp := pick(func(s Sample) float64 { return s.ThroughputMbps })
	r.ThroughputMbps, r.ThroughputMinMbps, r.ThroughputMaxMbps = Median(tp), minOf(tp), maxOf(tp)
	r.TransactionsPerSec = Median(pick(func(s Sample) float64 { return s.TransactionsPerSec }))
	ml := pick(func(s Sample) float64 { return s.MeanLatencyUs })
	r.MeanLatencyUs, r.MeanLatencyMinUs, r.MeanLatencyMaxUs = Median(ml), minOf(ml), maxOf(ml)
	p99 := pick(func(s Sample) float64 { return s.P99LatencyUs })
	r.P99LatencyUs, r.P99LatencyMinUs, r.P99LatencyMaxUs = Median(p99), minOf(p99), maxOf(p99)
	r.summarizeCPU(pick)
	r.PerPairThroughputMbps = nil
	if r.Pairs > 1 {
		r.PerPairThroughputMbps = make([]float64, r.Pairs)
		for i := range r.Pairs {
			r.PerPairThroughputMbps[i] = Median(pick(func(s Sample) float64 {
				if i < len(s.PerPairThroughputMbps) {
					return s.PerPairThroughputMbps[i]
				}
				return 0
			}))
		}
	}
}

// Median returns the median of xs (the mean of the middle two for an even
// count) without changing xs; 0 for an empty slice.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Min(xs)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// Point identifies one cell of the benchmark matrix, independent of path.
type Point struct {
	Test         string
	SocketBytes  int
	MessageBytes int
	Sessions     int
	Pairs        int
}

// Point returns the matrix cell r measured.
func (r Run) Point() Point {
	return Point{Test: r.Test, SocketBytes: r.SocketBytes, MessageBytes: r.MessageBytes, Sessions: r.Sessions, Pairs: r.Pairs}
}

// String renders p for tables and logs, e.g.
// "TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1".
func (p Point) String() string {
	sock := "default"
	if p.SocketBytes > 0 {
		sock = FormatBytes(p.SocketBytes)
	}
	return fmt.Sprintf("%s sock=%s msg=%s sessions=%d pairs=%d", p.Test, sock, FormatBytes(p.MessageBytes), p.Sessions, p.Pairs)
}

// FormatBytes renders a byte count in the papers' style: 512 -> "512B",
// 4096 -> "4KiB", 262144 -> "256KiB", 1048576 -> "1MiB". Sizes that are
// not whole KiB/MiB are printed in bytes.
func FormatBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// IsReference is the default rule for which paths others are compared
// against: baselines (names starting with "baseline") and the "ceiling" of
// the local node benchmark with its candidates ("ceiling-veth",
// "ceiling-loopback"; docs/design.md §5.2).
func IsReference(path string) bool {
	return strings.HasPrefix(path, "baseline") || path == "ceiling" || strings.HasPrefix(path, "ceiling-")
}

// BestOf returns, for each point and MTU that every one of candidates was
// measured at, a run named path whose repetition i is the better of the
// candidates' repetitions i (higher throughput; for RR tests the higher
// transaction rate), with Sample.Source naming the candidate it came from,
// summarised (Summarize). Repetitions that not every candidate has are left
// out. The runs come in the order of the first candidate's runs.
func BestOf(path string, runs []Run, candidates ...string) []Run {
	type key struct {
		pt  Point
		mtu int
	}
	byPath := map[string]map[key]Run{}
	for _, r := range runs {
		if slices.Contains(candidates, r.Path) {
			if byPath[r.Path] == nil {
				byPath[r.Path] = map[key]Run{}
			}
			byPath[r.Path][key{r.Point(), r.MTU}] = r
		}
	}
	score := func(test string, s Sample) float64 {
		if IsRR(test) {
			return s.TransactionsPerSec
		}
		return s.ThroughputMbps
	}
	var out []Run
	for _, first := range runs {
		if len(candidates) == 0 || first.Path != candidates[0] {
			continue
		}
		k := key{first.Point(), first.MTU}
		best := Run{Path: path, Test: first.Test, SocketBytes: first.SocketBytes, MessageBytes: first.MessageBytes,
			Sessions: first.Sessions, Pairs: first.Pairs, MTU: first.MTU}
		complete := true
		for _, c := range candidates[1:] {
			if _, ok := byPath[c][k]; !ok {
				complete = false
			}
		}
		if !complete {
			continue
		}
		for _, s := range first.Samples {
			win, winner := s, first.Path
			have := true
			for _, c := range candidates[1:] {
				i := slices.IndexFunc(byPath[c][k].Samples, func(o Sample) bool { return o.Repetition == s.Repetition })
				if i < 0 {
					have = false
					break
				}
				if o := byPath[c][k].Samples[i]; score(first.Test, o) > score(first.Test, win) {
					win, winner = o, c
				}
			}
			if have {
				win.Source = winner
				best.Samples = append(best.Samples, win)
			}
		}
		if len(best.Samples) > 0 {
			best.Summarize()
			out = append(out, best)
		}
	}
	return out
}

// Paths returns the path names of runs in order of first appearance.
func Paths(runs []Run) []string {
	var names []string
	for _, r := range runs {
		if !slices.Contains(names, r.Path) {
			names = append(names, r.Path)
		}
	}
	return names
}

// Best returns, for each (path, point), the run with the highest median
// throughput: when a path was measured at several MTUs the best MTU counts,
// as the targets of issue 6 ask ("best fast-path MTU").
func Best(runs []Run) map[string]map[Point]Run {
	best := map[string]map[Point]Run{}
	for _, r := range runs {
		m := best[r.Path]
		if m == nil {
			m = map[Point]Run{}
			best[r.Path] = m
		}
		if old, ok := m[r.Point()]; !ok || r.ThroughputMbps > old.ThroughputMbps {
			m[r.Point()] = r
		}
	}
	return best
}
