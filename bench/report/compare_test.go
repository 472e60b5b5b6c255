package report_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/report"
)

func runOf(path, test string, sock, msg, sessions, mtu int, mbps, latUs float64) results.Run {
	r := results.Run{Path: path, Test: test, SocketBytes: sock, MessageBytes: msg, Sessions: sessions, Pairs: 1, MTU: mtu,
		Samples: []results.Sample{{Repetition: 1, ThroughputMbps: mbps, MeanLatencyUs: latUs}}}
	r.Summarize()
	return r
}

func TestSpeedupsAndRatioLines(t *testing.T) {
	g := gomega.NewWithT(t)
	runs := []results.Run{
		runOf("baseline-untuned", results.TCPStream, 262144, 65536, 1, 1500, 1000, 0),
		runOf("fastpath-linux-bridge", results.TCPStream, 262144, 65536, 1, 9000, 2500, 0),
		// The same path at a better MTU wins.
		runOf("fastpath-linux-bridge", results.TCPStream, 262144, 65536, 1, 65520, 2930, 0),
		runOf("ceiling", results.TCPStream, 262144, 65536, 1, 65535, 3000, 0),
		// A smaller point is not the headline.
		runOf("baseline-untuned", results.TCPStream, 65536, 512, 1, 1500, 100, 0),
		runOf("fastpath-linux-bridge", results.TCPStream, 65536, 512, 1, 9000, 150, 0),
		runOf("baseline-untuned", results.TCPRR, 262144, 1, 1, 1500, 0.5, 40),
		runOf("fastpath-linux-bridge", results.TCPRR, 262144, 1, 1, 9000, 0.6, 30),
	}
	g.Expect(results.Paths(runs)).To(gomega.Equal([]string{"baseline-untuned", "fastpath-linux-bridge", "ceiling"}))
	hp, ok := report.Headline(runs)
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(hp.String()).To(gomega.Equal("TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1"))

	sp := report.Speedups(runs, nil)
	g.Expect(sp).To(gomega.HaveLen(4))
	g.Expect(sp[0].Path).To(gomega.Equal("fastpath-linux-bridge"))
	g.Expect(sp[0].Reference).To(gomega.Equal("baseline-untuned"))
	g.Expect(sp[0].PathMTU).To(gomega.Equal(65520))
	g.Expect(sp[0].Ratio).To(gomega.BeNumerically("~", 2.93, 1e-9))
	g.Expect(sp[2].Point.SocketBytes).To(gomega.Equal(65536))
	g.Expect(sp[2].Ratio).To(gomega.BeNumerically("~", 1.5, 1e-9))

	g.Expect(report.RatioLines(runs, nil)).To(gomega.Equal([]string{
		"ratio fastpath-linux-bridge/baseline-untuned 2.93",
		"ratio fastpath-linux-bridge/ceiling 0.98",
	}))
	g.Expect(report.LatencyLines(runs, nil)).To(gomega.Equal([]string{
		"latency fastpath-linux-bridge/baseline-untuned 0.75",
	}))
}

func TestSpeedupsWithoutNamedReferenceUsesFirstPath(t *testing.T) {
	g := gomega.NewWithT(t)
	runs := []results.Run{
		runOf("pod", results.TCPStream, 0, 4096, 1, 0, 100, 0),
		runOf("fast", results.TCPStream, 0, 4096, 1, 0, 300, 0),
	}
	g.Expect(report.RatioLines(runs, nil)).To(gomega.Equal([]string{"ratio fast/pod 3.00"}))
}
