package results_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// session moves mbps for 1 s at service demand sd in scope.
func cpuSession(pair int, mbps, sd, util float64, scope string) results.Session {
	return results.Session{Pair: pair, Session: 1, ThroughputMbps: mbps, ElapsedSec: 1, ServiceDemandUsPerKB: sd, CPUUtilPercent: util, CPUScope: scope}
}

func TestCombineCPUCountsASharedHostOnce(t *testing.T) {
	g := gomega.NewWithT(t)
	// Two sessions on one 2-CPU host at 100% for 1 s: 2e6 µs of CPU in all.
	// Each session's netperf charged the whole host to its own bytes.
	kib := func(mbps float64) float64 { return mbps * 1e6 / 8 / 1024 }
	a, b := 1000.0, 3000.0
	sa, sb := 2e6/kib(a), 2e6/kib(b)
	sd, util := results.CombineCPU([]results.Session{
		cpuSession(1, a, sa, 100, results.CPUScopeHost),
		cpuSession(1, b, sb, 100, results.CPUScopeHost),
	})
	g.Expect(sd).To(gomega.BeNumerically("~", 2e6/kib(a+b), 1e-9))
	g.Expect(util).To(gomega.Equal(100.0))

	// Two pairs on separate machines (VM mode): their CPU adds up.
	sd, _ = results.CombineCPU([]results.Session{
		cpuSession(1, a, sa, 100, results.CPUScopeEndpoints),
		cpuSession(2, b, sb, 100, results.CPUScopeEndpoints),
	})
	g.Expect(sd).To(gomega.BeNumerically("~", 4e6/kib(a+b), 1e-9))

	// A session without a CPU figure: nothing is made up.
	sd, util = results.CombineCPU([]results.Session{cpuSession(1, a, sa, 100, results.CPUScopeHost), {Pair: 1, ThroughputMbps: b, ElapsedSec: 1}})
	g.Expect(sd).To(gomega.BeZero())
	g.Expect(util).To(gomega.BeZero())
}

func TestNewSampleAndSummarizeCarryCPUAndLoss(t *testing.T) {
	g := gomega.NewWithT(t)
	r := results.Run{Path: "p", Test: results.UDPStream, Sessions: 1, Pairs: 1}
	for rep, sd := range []float64{3, 1, 2} {
		s := cpuSession(1, 800, sd, 90, results.CPUScopeHost)
		s.MessagesSent, s.MessagesReceived = 1000, int64(1000-100*rep)
		sample, err := results.NewSample(rep+1, 1, []results.Session{s})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		r.Samples = append(r.Samples, sample)
	}
	r.Summarize()
	g.Expect(r.ServiceDemandUsPerKB).To(gomega.BeNumerically("~", 2, 1e-9))
	g.Expect(r.ServiceDemandMinUsPerKB).To(gomega.BeNumerically("~", 1, 1e-9))
	g.Expect(r.ServiceDemandMaxUsPerKB).To(gomega.BeNumerically("~", 3, 1e-9))
	g.Expect(r.CPUUtilPercent).To(gomega.Equal(90.0))
	g.Expect(r.CPUScope).To(gomega.Equal(results.CPUScopeHost))
	g.Expect(r.LossPercent).To(gomega.BeNumerically("~", 10, 1e-9))
	g.Expect(r.LossMaxPercent).To(gomega.BeNumerically("~", 20, 1e-9))
}

func TestPairedRatioPairsRepetitions(t *testing.T) {
	g := gomega.NewWithT(t)
	run := func(sds ...float64) results.Run {
		var r results.Run
		for i, sd := range sds {
			r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ServiceDemandUsPerKB: sd})
		}
		return r
	}
	// 1/2, 3/2, 2/8: median 0.5 (the ratio of medians would be 2/2 = 1).
	got, ok := results.CPURatio(run(1, 3, 2), run(2, 2, 8))
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(got).To(gomega.Equal(results.Ratio{Median: 0.5, Min: 0.25, Max: 1.5, Pairs: 3}))
	g.Expect(got.String()).To(gomega.Equal("0.50 [0.25-1.50]"))
	// A repetition missing on one side is left out.
	got, ok = results.CPURatio(run(1, 3), run(2))
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(got.Pairs).To(gomega.Equal(1))
	_, ok = results.CPURatio(run(1), results.Run{})
	g.Expect(ok).To(gomega.BeFalse())
}
