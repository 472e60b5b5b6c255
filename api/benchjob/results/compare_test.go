package results_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// stream is a fast-path TCP_STREAM run at one point with the repetitions'
// throughputs (and service demands, when given).
func stream(path string, mbps []float64, cpu ...float64) results.Run {
	r := results.Run{Path: path, Test: results.TCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1}
	for i, v := range mbps {
		s := results.Sample{Repetition: i + 1, ThroughputMbps: v}
		if i < len(cpu) {
			s.ServiceDemandUsPerKB = cpu[i]
		}
		r.Samples = append(r.Samples, s)
	}
	r.Summarize()
	return r
}

// The noise rule: a difference counts only when the min–max ranges of
// the two runs' repetitions do not overlap.
func TestCompareNoiseRule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		now, then []float64
		noise     string
		ratio     float64
		percent   float64
	}{
		{"ranges overlap: within noise however far the medians are", []float64{700, 900, 1000}, []float64{950, 1000, 1050}, results.WithinNoise, 0.9, 0},
		{"ranges touch: within noise", []float64{800, 850, 900}, []float64{900, 1000, 1100}, results.WithinNoise, 0.85, 0},
		{"every repetition lower: beyond noise", []float64{800, 820, 840}, []float64{950, 1000, 1050}, results.BeyondNoise, 0.82, 18},
		{"every repetition higher: beyond noise, no regression", []float64{1200, 1250, 1300}, []float64{950, 1000, 1050}, results.BeyondNoise, 1.25, 0},
		{"one repetition each: any difference is beyond noise", []float64{990}, []float64{1000}, results.BeyondNoise, 0.99, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c := results.Compare(results.Document{Runs: []results.Run{stream("fastpath", tc.now)}}, results.Document{Runs: []results.Run{stream("fastpath", tc.then)}})
			g.Expect(c.Points).To(gomega.HaveLen(1))
			p := c.Points[0]
			g.Expect(p.Noise).To(gomega.Equal(tc.noise))
			g.Expect(p.Ratio).To(gomega.BeNumerically("~", tc.ratio, 1e-9))
			percent, _ := p.Regression()
			g.Expect(percent).To(gomega.BeNumerically("~", tc.percent, 1e-9))
		})
	}
}

// CPU per byte that rose beyond the noise is a regression too, as large
// as its rise; Worst skips the reference paths and picks the largest.
func TestCompareWorst(t *testing.T) {
	g := gomega.NewWithT(t)
	now := results.Document{Runs: []results.Run{
		stream("fastpath", []float64{1000, 1000, 1000}, 1.3, 1.31, 1.32),
		stream("baseline", []float64{100, 100, 100}),
		stream("fastpath-new", []float64{5}),
	}}
	then := results.Document{Runs: []results.Run{
		stream("fastpath", []float64{990, 1000, 1010}, 0.99, 1.0, 1.01),
		stream("baseline", []float64{1000, 1000, 1000}),
	}}
	c := results.Compare(now, then)
	g.Expect(c.Points).To(gomega.HaveLen(2))
	g.Expect(c.OnlyNow).To(gomega.Equal(1))
	g.Expect(c.OnlyThen).To(gomega.Equal(0))
	p := c.Points[0]
	g.Expect(p.Noise).To(gomega.Equal(results.WithinNoise))
	g.Expect(p.HasCPU).To(gomega.BeTrue())
	g.Expect(p.CPUNoise).To(gomega.Equal(results.BeyondNoise))
	worst, percent, what, ok := c.Worst(nil)
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(worst.Path).To(gomega.Equal("fastpath"), "the baseline's 90% drop is not the fast path's regression")
	g.Expect(percent).To(gomega.BeNumerically("~", 31, 1e-6))
	g.Expect(what).To(gomega.Equal("CPU per byte 1.31x"))

	_, _, _, ok = c.Worst(func(string) bool { return false })
	g.Expect(ok).To(gomega.BeFalse())
}
