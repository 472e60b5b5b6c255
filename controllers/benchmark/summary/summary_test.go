package summary_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/benchmark/summary"
)

func ptr[T any](v T) *T { return &v }

// loadFixture reads testdata/results-pod.json: a Pod-mode run of 4 TCP_STREAM
// points and 2 TCP_RR points, fast path (MTU 9000) beside the pod network.
func loadFixture(t *testing.T) results.Document {
	t.Helper()
	f, err := os.Open("testdata/results-pod.json")
	gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	doc, err := results.Decode(f)
	gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred())
	return doc
}

func stream(path string, sock, msg, pairs int, mbps float64, perPair ...float64) results.Run {
	return results.Run{Path: path, Test: results.TCPStream, SocketBytes: sock, MessageBytes: msg, Sessions: 1, Pairs: pairs,
		ThroughputMbps: mbps, PerPairThroughputMbps: perPair, Samples: []results.Sample{{Repetition: 1, ThroughputMbps: mbps}}}
}

func vsockStream(sock, msg int, mbps float64) results.Run {
	r := stream("fastpath-vsock", sock, msg, 1, mbps)
	r.Test = results.VSockStream
	return r
}

func TestSummarizeFixture(t *testing.T) {
	g := gomega.NewWithT(t)
	s := summary.Summarize(loadFixture(t))
	g.Expect(s.HasBest).To(gomega.BeTrue())
	g.Expect(s.BestGbps).To(gomega.Equal("13.52"))
	// 13520.4 / 4590.2
	g.Expect(s.Speedup).To(gomega.Equal("2.95x"))
	g.Expect(s.BestPoint).To(gomega.Equal(results.Point{Test: "TCP_STREAM", SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1}))
	g.Expect(s.TotalPoints).To(gomega.Equal(6))
	g.Expect(s.Points).To(gomega.HaveLen(6))

	best := s.Points[3]
	g.Expect(best.Test).To(gomega.Equal(fastpathv1alpha1.TestTCPStream))
	g.Expect(best.SocketBytes).To(gomega.Equal(int32(262144)))
	g.Expect(best.MessageBytes).To(gomega.Equal(int32(65536)))
	g.Expect(best.Pairs).To(gomega.Equal(int32(1)))
	g.Expect(best.FastPathMbps).To(gomega.Equal(int64(13520)))
	g.Expect(best.BaselineMbps).To(gomega.Equal(int64(4590)))
	g.Expect(best.SpeedupPercent).To(gomega.Equal(int32(295)))
	g.Expect(best.FastPathLatency).To(gomega.BeNil())

	rr := s.Points[4]
	g.Expect(rr.Test).To(gomega.Equal(fastpathv1alpha1.TestTCPRR))
	g.Expect(rr.MessageBytes).To(gomega.Equal(int32(1)))
	g.Expect(rr.FastPathLatency.Duration).To(gomega.Equal(24100 * time.Nanosecond))
	g.Expect(rr.BaselineLatency.Duration).To(gomega.Equal(41200 * time.Nanosecond))
	// Latency speed-up is baseline over fast path: 41.2 / 24.1.
	g.Expect(rr.SpeedupPercent).To(gomega.Equal(int32(171)))

	g.Expect(s.Paths).To(gomega.HaveLen(2))
	g.Expect(s.Paths[0].Path).To(gomega.Equal("fastpath"))
	g.Expect(s.Paths[0].BestThroughputMbps).To(gomega.Equal(int64(13520)))
	g.Expect(s.Paths[0].MeanLatency.Duration).To(gomega.Equal(23900*time.Nanosecond), "the lower of the two RR medians")
	g.Expect(s.Paths[1].Path).To(gomega.Equal("baseline"))
	g.Expect(s.Paths[1].BestThroughputMbps).To(gomega.Equal(int64(4590)))
	g.Expect(s.Paths[1].MeanLatency.Duration).To(gomega.Equal(41200 * time.Nanosecond))
}

func TestSummarize(t *testing.T) {
	var many []results.Run
	for i := range 70 {
		many = append(many, stream("fastpath", 65536, 512+i, 1, float64(1000+i)))
	}
	var paths []results.Run
	for i := range 10 {
		paths = append(paths, stream(fmt.Sprintf("baseline-%d", i), 65536, 512, 1, 100))
	}
	for _, tc := range []struct {
		name  string
		runs  []results.Run
		check func(g *gomega.WithT, s summary.Summary)
	}{
		{
			name: "vsock beside TCP: TCP gives the best point, vsock has points and a path entry without a baseline",
			runs: []results.Run{stream("fastpath", 65536, 512, 1, 5000), stream("baseline", 65536, 512, 1, 2500), vsockStream(0, 512, 9000)},
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.BestGbps).To(gomega.Equal("5.00"))
				g.Expect(s.Speedup).To(gomega.Equal("2.00x"))
				g.Expect(s.Points).To(gomega.HaveLen(2))
				g.Expect(s.Points[1].Test).To(gomega.Equal(fastpathv1alpha1.TestVSOCKStream))
				g.Expect(s.Points[1].FastPathMbps).To(gomega.Equal(int64(9000)))
				g.Expect(s.Points[1].BaselineMbps).To(gomega.BeZero())
				g.Expect(s.Paths).To(gomega.ContainElement(fastpathv1alpha1.PathSummary{Path: "fastpath-vsock", BestThroughputMbps: 9000}))
			},
		},
		{
			name: "vsock tests only: the best VSOCK_STREAM",
			runs: []results.Run{vsockStream(0, 512, 900), vsockStream(0, 65536, 3000)},
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.BestGbps).To(gomega.Equal("3.00"))
				g.Expect(s.Speedup).To(gomega.BeEmpty())
				g.Expect(s.BestPoint.MessageBytes).To(gomega.Equal(65536))
			},
		},
		{
			name: "no baseline: no speed-up",
			runs: []results.Run{stream("fastpath", 65536, 512, 1, 5000)},
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.BestGbps).To(gomega.Equal("5.00"))
				g.Expect(s.Speedup).To(gomega.BeEmpty())
				g.Expect(s.BestRatio).To(gomega.BeZero())
				g.Expect(s.Points[0].BaselineMbps).To(gomega.BeZero())
				g.Expect(s.Points[0].SpeedupPercent).To(gomega.BeZero())
			},
		},
		{
			name: "scale-out: best quoted at one pair, per-pair kept on the N-pair point",
			runs: []results.Run{
				stream("fastpath", 65536, 512, 1, 9000), stream("baseline", 65536, 512, 1, 3000),
				stream("fastpath", 65536, 512, 3, 21000, 7100, 6900, 7000), stream("baseline", 65536, 512, 3, 6000, 2000, 2000, 2000),
			},
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.BestGbps).To(gomega.Equal("9.00"))
				g.Expect(s.Speedup).To(gomega.Equal("3.00x"))
				g.Expect(s.Points).To(gomega.HaveLen(2))
				g.Expect(s.Points[1].Pairs).To(gomega.Equal(int32(3)))
				g.Expect(s.Points[1].FastPathMbps).To(gomega.Equal(int64(21000)))
				g.Expect(s.Points[1].FastPathPerPairMbps).To(gomega.Equal([]int64{7100, 6900, 7000}))
				g.Expect(s.Points[1].SpeedupPercent).To(gomega.Equal(int32(350)))
				g.Expect(s.Paths[0].BestThroughputMbps).To(gomega.Equal(int64(9000)))
			},
		},
		{
			name: "the best MTU of a path counts",
			runs: []results.Run{
				func() results.Run { r := stream("fastpath", 65536, 512, 1, 8000); r.MTU = 1500; return r }(),
				func() results.Run { r := stream("fastpath", 65536, 512, 1, 12000); r.MTU = 9000; return r }(),
				stream("baseline", 65536, 512, 1, 4000),
			},
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.Points).To(gomega.HaveLen(1))
				g.Expect(s.Points[0].FastPathMbps).To(gomega.Equal(int64(12000)))
				g.Expect(s.Speedup).To(gomega.Equal("3.00x"))
			},
		},
		{
			name: "points are capped at 64 in matrix order",
			runs: many,
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.TotalPoints).To(gomega.Equal(70))
				g.Expect(s.Points).To(gomega.HaveLen(summary.MaxPoints))
				g.Expect(s.Points[63].MessageBytes).To(gomega.Equal(int32(512 + 63)))
				g.Expect(s.BestGbps).To(gomega.Equal("1.07"), "the best is found among all points, not only those kept")
			},
		},
		{
			name: "paths are capped at 8",
			runs: paths,
			check: func(g *gomega.WithT, s summary.Summary) {
				g.Expect(s.Paths).To(gomega.HaveLen(summary.MaxPaths))
				g.Expect(s.HasBest).To(gomega.BeFalse())
				g.Expect(s.BestGbps).To(gomega.BeEmpty())
				g.Expect(s.Points).To(gomega.BeEmpty())
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(gomega.NewWithT(t), summary.Summarize(results.Document{Runs: tc.runs}))
		})
	}
}

func TestEvaluate(t *testing.T) {
	fixture := summary.Summarize(loadFixture(t))
	noBase := summary.Summarize(results.Document{Runs: []results.Run{stream("fastpath", 65536, 512, 1, 5000)}})
	none := summary.Summarize(results.Document{})
	for _, tc := range []struct {
		name     string
		s        summary.Summary
		criteria *fastpathv1alpha1.SuccessCriteria
		met      bool
		message  string
	}{
		{"no criteria", fixture, nil, true, "best fast path 13.52 Gbps at TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1, 2.95x the baseline: no success criteria"},
		{"both met", fixture, &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(10000)), MinSpeedupPercent: ptr(int32(150))}, true,
			"2.95x the baseline: minThroughputMbps 10000 met, minSpeedupPercent 150 met"},
		{"throughput missed", fixture, &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(20000))}, false,
			"minThroughputMbps 20000 not met (13520 Mbps)"},
		{"speed-up missed", fixture, &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(10000)), MinSpeedupPercent: ptr(int32(300))}, false,
			"minThroughputMbps 10000 met, minSpeedupPercent 300 not met (294.5%)"},
		{"speed-up without a baseline", noBase, &fastpathv1alpha1.SuccessCriteria{MinSpeedupPercent: ptr(int32(100))}, false,
			"minSpeedupPercent 100 not met: no baseline at the best point"},
		{"throughput without a stream result", none, &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(1))}, false,
			"no fast-path TCP_STREAM result: minThroughputMbps 1 not met: nothing to compare"},
		{"exactly at the threshold", noBase, &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(5000))}, true, "minThroughputMbps 5000 met"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			met, msg := summary.Evaluate(tc.s, tc.criteria)
			g.Expect(met).To(gomega.Equal(tc.met))
			g.Expect(msg).To(gomega.ContainSubstring(tc.message))
		})
	}
}

// Judge gives each criterion's figures beside the phrase Evaluate quotes:
// what the CLI reports per criterion.
func TestJudge(t *testing.T) {
	fixture := summary.Summarize(loadFixture(t))
	noBase := summary.Summarize(results.Document{Runs: []results.Run{stream("fastpath", 65536, 512, 1, 5000)}})
	cpu := summary.Summarize(results.Document{Runs: []results.Run{
		withCPU(stream("fastpath", 262144, 65536, 1, 12000), 2.0, 2.2, 1.8),
		withCPU(stream("baseline", 262144, 65536, 1, 4000), 4.0, 4.0, 3.0),
	}})
	for _, tc := range []struct {
		name     string
		s        summary.Summary
		criteria *fastpathv1alpha1.SuccessCriteria
		want     []summary.Verdict
	}{
		{"nil criteria", fixture, nil, nil},
		{"empty criteria", fixture, &fastpathv1alpha1.SuccessCriteria{}, nil},
		{"all three, in spec order", fixture, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.80", MinSpeedupPercent: ptr(int32(300)), MinThroughputMbps: ptr(int64(10000))}, []summary.Verdict{
			{Criterion: "minThroughputMbps", Required: "10000", Measured: "13520", Unit: "Mbps", Met: true, Text: "minThroughputMbps 10000 met"},
			{Criterion: "minSpeedupPercent", Required: "300", Measured: "294.5", Unit: "%", Text: "minSpeedupPercent 300 not met (294.5%)"},
			{Criterion: "maxCPURatio", Required: "0.80", Max: true, Why: "no service demand of both the fast path and the baseline at the best point",
				Text: "maxCPURatio 0.80 not met: no service demand of both the fast path and the baseline at the best point"},
		}},
		{"throughput below", noBase, &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(5001))}, []summary.Verdict{
			{Criterion: "minThroughputMbps", Required: "5001", Measured: "5000", Unit: "Mbps", Text: "minThroughputMbps 5001 not met (5000 Mbps)"},
		}},
		{"no baseline", noBase, &fastpathv1alpha1.SuccessCriteria{MinSpeedupPercent: ptr(int32(100))}, []summary.Verdict{
			{Criterion: "minSpeedupPercent", Required: "100", Unit: "%", Why: "no baseline at the best point", Text: "minSpeedupPercent 100 not met: no baseline at the best point"},
		}},
		{"nothing measured", summary.Summarize(results.Document{}), &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(1))}, []summary.Verdict{
			{Criterion: "minThroughputMbps", Required: "1", Unit: "Mbps", Why: "nothing to compare", Text: "minThroughputMbps 1 not met: nothing to compare"},
		}},
		{"cpu met", cpu, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.80"}, []summary.Verdict{
			{Criterion: "maxCPURatio", Required: "0.80", Measured: "0.55", Max: true, Met: true, Text: "maxCPURatio 0.80 met (0.55)"},
		}},
		{"cpu missed", cpu, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.5"}, []summary.Verdict{
			{Criterion: "maxCPURatio", Required: "0.5", Measured: "0.55", Max: true, Text: "maxCPURatio 0.5 not met (0.55)"},
		}},
		{"cpu threshold not a number", cpu, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "fast"}, []summary.Verdict{
			{Criterion: "maxCPURatio", Required: "fast", Max: true, Why: "not a decimal number greater than 0", Text: `maxCPURatio "fast" not met: not a decimal number greater than 0`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gomega.NewWithT(t).Expect(summary.Judge(tc.s, tc.criteria)).To(gomega.Equal(tc.want))
		})
	}
}

// withCPU gives run r one sample per service demand (repetitions 1..n), each
// with the run's throughput.
func withCPU(r results.Run, sds ...float64) results.Run {
	r.Samples = nil
	for i, sd := range sds {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: r.ThroughputMbps, ServiceDemandUsPerKB: sd, CPUUtilPercent: 100})
	}
	r.Summarize()
	return r
}

func TestSummarizeAndEvaluateCPURatio(t *testing.T) {
	g := gomega.NewWithT(t)
	// Paired per repetition: 2.0/4.0, 2.2/4.0, 1.8/3.0 = 0.50, 0.55, 0.60;
	// the ratio of the medians (2.0/4.0 = 0.50) would differ.
	doc := results.Document{Runs: []results.Run{
		withCPU(stream("fastpath", 262144, 65536, 1, 12000), 2.0, 2.2, 1.8),
		withCPU(stream("baseline", 262144, 65536, 1, 4000), 4.0, 4.0, 3.0),
	}}
	s := summary.Summarize(doc)
	g.Expect(s.HasCPU).To(gomega.BeTrue())
	g.Expect(s.CPURatio).To(gomega.Equal("0.55"))
	g.Expect(s.BestCPU.Min).To(gomega.BeNumerically("~", 0.5, 1e-9))
	g.Expect(s.BestCPU.Max).To(gomega.BeNumerically("~", 0.6, 1e-9))
	g.Expect(s.Points).To(gomega.HaveLen(1))
	g.Expect(s.Points[0].FastPathServiceDemandUsPerKB).To(gomega.Equal("2.000"))
	g.Expect(s.Points[0].BaselineServiceDemandUsPerKB).To(gomega.Equal("4.000"))
	g.Expect(s.Points[0].CPURatio).To(gomega.Equal("0.55"))

	met, msg := summary.Evaluate(s, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.80"})
	g.Expect(met).To(gomega.BeTrue())
	g.Expect(msg).To(gomega.ContainSubstring("CPU per byte 0.55 [0.50-0.60] of the baseline's: maxCPURatio 0.80 met (0.55)"))

	met, msg = summary.Evaluate(s, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.5"})
	g.Expect(met).To(gomega.BeFalse())
	g.Expect(msg).To(gomega.ContainSubstring("maxCPURatio 0.5 not met (0.55)"))

	met, msg = summary.Evaluate(s, &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "fast"})
	g.Expect(met).To(gomega.BeFalse())
	g.Expect(msg).To(gomega.ContainSubstring(`maxCPURatio "fast" not met: not a decimal number greater than 0`))

	// Without CPU figures (a runner before issue 15) the criterion cannot be met.
	met, msg = summary.Evaluate(summary.Summarize(loadFixture(t)), &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.80"})
	g.Expect(met).To(gomega.BeFalse())
	g.Expect(msg).To(gomega.ContainSubstring("maxCPURatio 0.80 not met: no service demand of both the fast path and the baseline at the best point"))
}

func TestSummarizeUDPLoss(t *testing.T) {
	g := gomega.NewWithT(t)
	udp := func(path string, loss float64) results.Run {
		r := stream(path, 262144, 1472, 1, 900)
		r.Test, r.LossPercent = results.UDPStream, loss
		return r
	}
	s := summary.Summarize(results.Document{Runs: []results.Run{udp("fastpath", 0), udp("baseline", 12.5)}})
	g.Expect(s.Points).To(gomega.HaveLen(1))
	g.Expect(s.Points[0].Test).To(gomega.Equal(fastpathv1alpha1.TestUDPStream))
	g.Expect(s.Points[0].FastPathLossPercent).To(gomega.Equal("0.00"))
	g.Expect(s.Points[0].BaselineLossPercent).To(gomega.Equal("12.50"))
}

// scaled is doc with every fast-path throughput (medians, ranges,
// repetitions) multiplied by f.
func scaled(doc results.Document, f float64) results.Document {
	out := results.Document{Machine: doc.Machine}
	for _, r := range doc.Runs {
		if r.Path == "fastpath" {
			r.ThroughputMbps, r.ThroughputMinMbps, r.ThroughputMaxMbps = r.ThroughputMbps*f, r.ThroughputMinMbps*f, r.ThroughputMaxMbps*f
		}
		out.Runs = append(out.Runs, r)
	}
	return out
}

// maxRegressionPercent: a drop beyond the noise and beyond the percent
// fails, naming the point; the same run, or one whose ranges overlap the
// compared run's, passes; no comparison or no common point fails.
func TestJudgeRegression(t *testing.T) {
	doc := loadFixture(t)
	criteria := &fastpathv1alpha1.SuccessCriteria{MaxRegressionPercent: ptr(int32(10))}
	for _, tc := range []struct {
		name     string
		sum      summary.Summary
		met      bool
		measured string
		text     string
	}{
		{"same run: nothing beyond the noise", summary.Summarize(doc).Compared(doc, doc), true, "0.0", "maxRegressionPercent 10 met (no regression beyond the noise at 6 compared points)"},
		{"30% slower: beyond the noise and the percent", summary.Summarize(scaled(doc, 0.7)).Compared(scaled(doc, 0.7), doc), false, "30.0",
			"maxRegressionPercent 10 not met (30.0%: throughput 0.70x of the compared run's at fastpath TCP_STREAM sock=64KiB msg=16KiB sessions=1 pairs=1, beyond the noise)"},
		{"5% slower: beyond the noise, within the percent", summary.Summarize(scaled(doc, 0.95)).Compared(scaled(doc, 0.95), doc), true, "5.0",
			"maxRegressionPercent 10 met (worst 5.0%: throughput 0.95x at fastpath TCP_STREAM sock=64KiB msg=16KiB sessions=1 pairs=1)"},
		{"not compared", summary.Summarize(doc), false, "", "maxRegressionPercent 10 not met: not compared with spec.compareTo's run"},
		{"no point in common", summary.Summarize(doc).Compared(doc, results.Document{Runs: []results.Run{stream("fastpath", 0, 1, 1, 100)}}), false, "",
			"maxRegressionPercent 10 not met: no matrix point of the fast path in common with the compared run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			v := summary.Judge(tc.sum, criteria)
			g.Expect(v).To(gomega.HaveLen(1))
			g.Expect(v[0].Criterion).To(gomega.Equal("maxRegressionPercent"))
			g.Expect(v[0].Met).To(gomega.Equal(tc.met))
			g.Expect(v[0].Measured).To(gomega.Equal(tc.measured))
			g.Expect(v[0].Text).To(gomega.Equal(tc.text))
			g.Expect(v[0].Max).To(gomega.BeTrue())
		})
	}
	g := gomega.NewWithT(t)
	c := summary.Summarize(scaled(doc, 0.7)).Compared(scaled(doc, 0.7), doc).Comparison
	points := summary.ComparedPoints(*c)
	g.Expect(points).To(gomega.HaveLen(len(c.Points)))
	g.Expect(points[0]).To(gomega.Equal(fastpathv1alpha1.ComparedPoint{Path: "fastpath", Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 65536, MessageBytes: 16384, Sessions: 1, Pairs: 1,
		Mbps: 5322, ComparedMbps: 7603, ThroughputRatio: "0.70", ThroughputNoise: fastpathv1alpha1.BeyondNoise}))
}

// Each path's summary carries the offloads the runner read on its client
// interface, from the first run that reports them; a path whose runs report
// none has none, and an offload a run does not name stays unset.
func TestSummarizeNegotiatedOffloads(t *testing.T) {
	g := gomega.NewWithT(t)
	fast := stream("fastpath", 262144, 65536, 1, 9000)
	fast.Interface, fast.Offloads = "net1", map[string]string{"tso": "on", "gso": "on", "gro": "off", "txChecksum": "on"}
	later := stream("fastpath", 262144, 16384, 1, 8000)
	later.Interface, later.Offloads = "net1", map[string]string{"tso": "off", "gso": "off", "gro": "off", "txChecksum": "off", "rxChecksum": "off"}
	s := summary.Summarize(results.Document{Runs: []results.Run{stream("baseline", 262144, 65536, 1, 3000), fast, later}})
	g.Expect(s.Paths).To(gomega.HaveLen(2))
	g.Expect(s.Paths[0].Path).To(gomega.Equal("baseline"))
	g.Expect(s.Paths[0].Offloads).To(gomega.BeNil())
	g.Expect(s.Paths[1].Interface).To(gomega.Equal("net1"))
	g.Expect(s.Paths[1].Offloads).To(gomega.Equal(&fastpathv1alpha1.Offloads{TSO: fastpathv1alpha1.OffloadOn, GSO: fastpathv1alpha1.OffloadOn,
		GRO: fastpathv1alpha1.OffloadOff, TXChecksum: fastpathv1alpha1.OffloadOn}))
}
