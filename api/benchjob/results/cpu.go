package results

import (
	"fmt"
	"math"
)

// kiB is netperf's KB in service demand (usec/KB): 1024 bytes.
const kiB = 1024

// PayloadKiB is the payload of all sessions in KiB (payloadKiB summed).
func PayloadKiB(sessions []Session) float64 {
	var kib float64
	for _, s := range sessions {
		kib += payloadKiB(s)
	}
	return kib
}

// payloadKiB is the payload session s moved in KiB: its throughput (both
// directions for RR tests) times its elapsed time.
func payloadKiB(s Session) float64 {
	return s.ThroughputMbps * 1e6 / 8 * s.ElapsedSec / kiB
}

// CombineCPU combines the CPU figures of sessions that ran at the same time
// into the service demand of all of them (µs of CPU per KiB of their summed
// payload) and their mean CPU utilisation (percent).
//
// A session's CPU time is its ServiceDemandUsPerKB × its payload. Sessions
// that measured the same CPUs over the same interval share one CPU figure,
// so it is counted once, as the mean over them: with CPUScope "host" all
// sessions (one host), with "endpoints" the sessions of one pair (one client
// and one server machine), summed over pairs. Sessions without a CPU figure
// make both results 0.
func CombineCPU(sessions []Session) (serviceDemandUsPerKB, cpuUtilPercent float64) {
	if len(sessions) == 0 {
		return 0, 0
	}
	type group struct {
		cpuUs float64
		n     int
	}
	groups := map[int]*group{}
	var kib, util float64
	for _, s := range sessions {
		if !(s.ServiceDemandUsPerKB > 0) || s.CPUScope == "" {
			return 0, 0
		}
		key := s.Pair
		if s.CPUScope == CPUScopeHost {
			key = 0
		}
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
		}
		k := payloadKiB(s)
		g.cpuUs += s.ServiceDemandUsPerKB * k
		g.n++
		kib += k
		util += s.CPUUtilPercent
	}
	if !(kib > 0) {
		return 0, 0
	}
	var cpuUs float64
	for _, g := range groups {
		cpuUs += g.cpuUs / float64(g.n)
	}
	return cpuUs / kib, util / float64(len(sessions))
}

// combineLoss is the UDP loss over all sessions in percent: 100 × (1 -
// received/sent); 0 when no session counted messages.
func combineLoss(sessions []Session) float64 {
	var sent, recv int64
	for _, s := range sessions {
		sent += s.MessagesSent
		recv += s.MessagesReceived
	}
	if sent <= 0 {
		return 0
	}
	return LossPercent(sent, recv)
}

// LossPercent is 100 × (1 - received/sent), at least 0 (netserver may count
// datagrams that arrived after netperf stopped counting), for sent > 0.
func LossPercent(sent, received int64) float64 {
	return math.Max(0, 100*(1-float64(received)/float64(sent)))
}

// summarizeCPU sets r's CPU and loss medians from its samples.
func (r *Run) summarizeCPU(pick func(func(Sample) float64) []float64) {
	sd := pick(func(s Sample) float64 { return s.ServiceDemandUsPerKB })
	r.ServiceDemandUsPerKB, r.ServiceDemandMinUsPerKB, r.ServiceDemandMaxUsPerKB = Median(sd), minOf(sd), maxOf(sd)
	r.CPUUtilPercent = Median(pick(func(s Sample) float64 { return s.CPUUtilPercent }))
	psd := pick(func(s Sample) float64 { return s.ProcessServiceDemandUsPerKB })
	r.ProcessServiceDemandUsPerKB, r.ProcessServiceDemandMinUsPerKB, r.ProcessServiceDemandMaxUsPerKB = Median(psd), minOf(psd), maxOf(psd)
	hpg := pick(func(s Sample) float64 { return s.HostCPUSecondsPerGB })
	r.HostCPUSecondsPerGB, r.HostCPUSecondsPerGBMin, r.HostCPUSecondsPerGBMax = Median(hpg), minOf(hpg), maxOf(hpg)
	gpc := pick(func(s Sample) float64 { return s.GbpsPerHostCore })
	r.GbpsPerHostCore, r.GbpsPerHostCoreMin, r.GbpsPerHostCoreMax = Median(gpc), minOf(gpc), maxOf(gpc)
	r.CPUScope = ""
	for _, s := range r.Samples {
		for _, ss := range s.PerSession {
			if ss.CPUScope != "" {
				r.CPUScope = ss.CPUScope
			}
		}
	}
	// No loss is a measurement too: every UDP_STREAM sample counts.
	r.LossPercent, r.LossMaxPercent = 0, 0
	if r.Test == UDPStream {
		var loss []float64
		for _, s := range r.Samples {
			loss = append(loss, s.LossPercent)
		}
		r.LossPercent, r.LossMaxPercent = Median(loss), maxOf(loss)
	}
}

// Ratio is a ratio of two runs' figures over paired repetitions.
type Ratio struct {
	// Median, Min and Max of the per-repetition ratios.
	Median, Min, Max float64
	// Pairs is the number of repetitions both runs have a figure for.
	Pairs int
}

// String renders r as "0.62 [0.55-0.70]".
func (r Ratio) String() string {
	return fmt.Sprintf("%.2f [%.2f-%.2f]", r.Median, r.Min, r.Max)
}

// PairedRatio pairs the samples of a and b by repetition number (the runner
// measures the paths of one repetition back to back, A B A B) and returns
// the median, min and max of f(a's sample)/f(b's sample). ok is false when
// no repetition has a positive figure on both.
func PairedRatio(a, b Run, f func(Sample) float64) (r Ratio, ok bool) {
	byRep := map[int]float64{}
	for _, s := range b.Samples {
		if v := f(s); v > 0 {
			byRep[s.Repetition] = v
		}
	}
	var xs []float64
	for _, s := range a.Samples {
		if d, ok := byRep[s.Repetition]; ok {
			if v := f(s); v > 0 {
				xs = append(xs, v/d)
			}
		}
	}
	if len(xs) == 0 {
		return Ratio{}, false
	}
	return Ratio{Median: Median(xs), Min: minOf(xs), Max: maxOf(xs), Pairs: len(xs)}, true
}

// CPURatio is PairedRatio of the service demands of a and b: a's CPU cost
// per byte relative to b's, lower is better.
func CPURatio(a, b Run) (Ratio, bool) {
	return PairedRatio(a, b, func(s Sample) float64 { return s.ServiceDemandUsPerKB })
}

// ProcessCPURatio is PairedRatio of the process service demands of a and b.
func ProcessCPURatio(a, b Run) (Ratio, bool) {
	return PairedRatio(a, b, func(s Sample) float64 { return s.ProcessServiceDemandUsPerKB })
}
