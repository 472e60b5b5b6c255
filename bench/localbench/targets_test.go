package localbench

import (
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// stream is a TCP_STREAM run with one sample per value (Mbps), in
// repetition order; its median is the median of the values.
func stream(path string, mtu int, mbps ...float64) results.Run {
	r := results.Run{Path: path, Test: results.TCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1, MTU: mtu}
	for i, v := range mbps {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: v})
	}
	r.ThroughputMbps = results.Median(mbps)
	return r
}

func rr(path string, mtu int, latUs ...float64) results.Run {
	r := results.Run{Path: path, Test: results.TCPRR, SocketBytes: 262144, MessageBytes: 1, Sessions: 1, Pairs: 1, MTU: mtu}
	var tps []float64
	for i, v := range latUs {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: 16 / v, MeanLatencyUs: v})
		tps = append(tps, 16/v)
	}
	r.ThroughputMbps, r.MeanLatencyUs = results.Median(tps), results.Median(latUs)
	return r
}

func TestCheckTargets(t *testing.T) {
	g := gomega.NewWithT(t)
	runs := []results.Run{
		stream(PathBaselineUntuned, 1500, 4000, 4000, 2000),
		stream(PathBaselineMasquerade, 1500, 9000, 9000, 9000),
		stream(PathFastPathLinuxBridge, 9000, 9500, 9500, 9500),
		stream(PathFastPathLinuxBridge, 65520, 12000, 12000, 12000), // the best MTU counts against the baselines
		stream(PathFastPathMacvtap, 9000, 9000, 9900, 10000),
		stream(PathFastPathMacvtap, 65520, 14000, 14000, 30000),
		stream(PathCeiling, 9000, 10000, 10000, 10000),
		stream(PathCeiling, 65520, 15000, 15000, 15000),
		// A smaller message size is not the headline point.
		{Path: PathBaselineUntuned, Test: results.TCPStream, SocketBytes: 262144, MessageBytes: 512, Sessions: 1, Pairs: 1, ThroughputMbps: 1},
		rr(PathBaselineMasquerade, 1500, 50, 50, 50),
		rr(PathFastPathLinuxBridge, 9000, 40, 40, 40),
		rr(PathFastPathLinuxBridge, 65520, 60, 60, 60),
	}
	ts := CheckTargets(runs, nil)
	g.Expect(ts).To(gomega.HaveLen(7))
	var lines []string
	for _, tg := range ts[:5] {
		g.Expect(tg.Measured).To(gomega.BeTrue())
		lines = append(lines, tg.String())
	}
	// No service demand in these runs: the cpu targets are skipped, never passed.
	g.Expect(ts[5].String()).To(gomega.Equal("SKIP cpu fastpath-linux-bridge/baseline-masquerade <= 0.80 (not measured: no service demand on both fastpath-linux-bridge and baseline-masquerade at TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1)"))
	g.Expect(ts[6].String()).To(gomega.HavePrefix("SKIP cpu fastpath-ovs/baseline-masquerade <= 0.80 (not measured: this run has no TCP_STREAM point on both"))
	g.Expect(lines).To(gomega.Equal([]string{
		// Paired: 12000/4000, 12000/4000, 12000/2000 -> median 3, not the ratio of medians.
		"PASS throughput fastpath-linux-bridge/baseline-untuned 3.00 >= 2.50 (TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: median of 3 paired ratios, min-max 3.00-6.00; 12.00 Gbps (MTU 65520) vs 4.00 Gbps (MTU 1500))",
		"PASS throughput fastpath-linux-bridge/baseline-masquerade 1.33 >= 1.20 (TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: median of 3 paired ratios, min-max 1.33-1.33; 12.00 Gbps (MTU 65520) vs 9.00 Gbps (MTU 1500))",
		// Against the ceiling at the same MTU: 9500/10000 beats 12000/15000.
		"PASS throughput fastpath-linux-bridge/ceiling 0.95 >= 0.85 (TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: median of 3 paired ratios, min-max 0.95-0.95; 9.50 Gbps (MTU 9000) vs 10.00 Gbps (MTU 9000); " + CeilingNote + ")",
		// macvtap@9000: 0.90, 0.99, 1.00 -> 0.99; macvtap@65520: 0.93, 0.93, 2.0 -> 0.93.
		"PASS throughput fastpath-macvtap/ceiling 0.99 >= 0.95 (TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: median of 3 paired ratios, min-max 0.90-1.00; 9.90 Gbps (MTU 9000) vs 10.00 Gbps (MTU 9000); best of [fastpath-linux-bridge 0.95 fastpath-macvtap 0.99]; " + CeilingNote + ")",
		// Best RR run by transaction rate is MTU 9000 (40 µs).
		"PASS latency fastpath-linux-bridge/baseline-masquerade 0.80 <= 1.00 (TCP_RR sock=256KiB msg=1B sessions=1 pairs=1: median of 3 paired ratios, min-max 0.80-0.80; mean latency 40.0 µs (MTU 9000) vs 50.0 µs (MTU 1500))",
	}))
	g.Expect(ts[3].Path).To(gomega.Equal(PathFastPathMacvtap))
	g.Expect(ts[3].Pairs).To(gomega.Equal(3))

	// Slower fast-path latency is a failure; a path not measured is a skip.
	ts = CheckTargets([]results.Run{stream(PathFastPathLinuxBridge, 9000, 1), rr(PathBaselineMasquerade, 1500, 50), rr(PathFastPathLinuxBridge, 9000, 55)}, nil)
	g.Expect(ts[0].Measured).To(gomega.BeFalse())
	g.Expect(ts[0].String()).To(gomega.HavePrefix("SKIP throughput fastpath-linux-bridge/baseline-untuned >= 2.50 (not measured"))
	g.Expect(ts[3].String()).To(gomega.HavePrefix("SKIP throughput <best fast path>/ceiling >= 0.95 (not measured"))
	g.Expect(ts[4].String()).To(gomega.HavePrefix("FAIL latency fastpath-linux-bridge/baseline-masquerade 1.10 <= 1.00"))
	g.Expect(ts[4].Pass).To(gomega.BeFalse())
}

// The ceiling is judged as the better of its candidates per repetition: a
// fast path above the veth pair is still below the ceiling when lo does
// better, and the target line names the candidates.
func TestCeilingIsTheBestCandidate(t *testing.T) {
	g := gomega.NewWithT(t)
	runs := []results.Run{
		stream(PathFastPathLinuxBridge, 9000, 12000, 12000, 12000),
		stream(PathCeilingVeth, 9000, 10000, 10000, 13000),
		stream(PathCeilingLoopback, 9000, 15000, 16000, 12000),
	}
	ceiling := CeilingOf(runs)
	g.Expect(ceiling).To(gomega.HaveLen(1))
	var sources []string
	for _, s := range ceiling[0].Samples {
		sources = append(sources, s.Source)
	}
	g.Expect(sources).To(gomega.Equal([]string{PathCeilingLoopback, PathCeilingLoopback, PathCeilingVeth}))
	g.Expect(ceilingSources(ceiling[0])).To(gomega.Equal("best per repetition: ceiling-loopback ceiling-loopback ceiling-veth (ceiling-veth 1 of 3, ceiling-loopback 2 of 3)"))
	ts := CheckTargets(append(runs, ceiling...), nil)
	// 12000/15000, 12000/16000, 12000/13000 -> 0.80, 0.75, 0.92: median 0.80.
	g.Expect(ts[2].String()).To(gomega.HavePrefix("FAIL throughput fastpath-linux-bridge/ceiling 0.80 >= 0.85 (TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: median of 3 paired ratios, min-max 0.75-0.92;"))
	g.Expect(ts[2].Detail).To(gomega.HaveSuffix(CeilingNote))
	// Without the derived ceiling (the candidates alone) nothing is judged against it.
	g.Expect(CheckTargets(runs, nil)[2].Measured).To(gomega.BeFalse())
}

// withSD gives r one sample per service demand, repetitions 1..n, at the
// given host-wide CPU utilisation.
func withSD(r results.Run, util float64, sds ...float64) results.Run {
	for i, sd := range sds {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: r.ThroughputMbps, ServiceDemandUsPerKB: sd, CPUUtilPercent: util,
			PerSession: []results.Session{{Pair: 1, Session: 1, CPUScope: results.CPUScopeHost}}})
	}
	r.Summarize()
	return r
}

func TestCheckCPUTargets(t *testing.T) {
	g := gomega.NewWithT(t)
	masq := withSD(stream(PathBaselineMasquerade, 1500, 9000), 60, 4, 5, 6)
	runs := []results.Run{
		masq,
		// Paired: 2/4, 3/5, 3.6/6 = 0.50, 0.60, 0.60 (the best MTU, by throughput, counts).
		withSD(stream(PathFastPathLinuxBridge, 65520, 12000), 50, 2, 3, 3.6),
		withSD(stream(PathFastPathLinuxBridge, 9000, 10000), 50, 1, 1, 1),
		// 4.4/4, 5/5, 6.6/6 = 1.10, 1.00, 1.10.
		withSD(stream(PathFastPathOVS, 9000, 9500), 50, 4.4, 5, 6.6),
	}
	ts := CheckTargets(runs, nil)
	g.Expect(ts).To(gomega.HaveLen(7))
	g.Expect(ts[5].String()).To(gomega.Equal("PASS cpu fastpath-linux-bridge/baseline-masquerade 0.60 <= 0.80 (min-max 0.50-0.60 over 3 paired repetitions; " +
		"TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: 3.000 µs/KiB (MTU 65520) vs 5.000 µs/KiB (MTU 1500), CPU 50% vs 60% of the whole host (client and server share it: measured once))"))
	g.Expect(ts[6].Pass).To(gomega.BeFalse())
	g.Expect(ts[6].String()).To(gomega.HavePrefix("FAIL cpu fastpath-ovs/baseline-masquerade 1.10 <= 0.80 (min-max 1.00-1.10 over 3 paired repetitions;"))

	// Open vSwitch on its userspace datapath: the same figure, N/A, not a
	// failure; the other cpu target is judged as before.
	why, na := ovsCPUNotApplicable("fpbl3fa9c1o20", "netdev")
	g.Expect(na).To(gomega.BeTrue())
	ts = CheckTargets(runs, map[string]string{PathFastPathOVS: why})
	g.Expect(ts[5].Judged()).To(gomega.BeTrue())
	g.Expect(ts[5].Pass).To(gomega.BeTrue())
	g.Expect(ts[6].Judged()).To(gomega.BeFalse())
	g.Expect(ts[6].Pass).To(gomega.BeFalse())
	g.Expect(ts[6].Got).To(gomega.BeNumerically("~", 1.10, 0.001), "the measured figure is kept")
	g.Expect(ts[6].String()).To(gomega.HavePrefix("N/A cpu fastpath-ovs/baseline-masquerade 1.10 <= 0.80 (not judged: Open vSwitch ran its userspace datapath in this run " +
		"(bridge fpbl3fa9c1o20 reported datapath_type=netdev): ovs-vswitchd forwarded every packet in userspace, while a node runs the kernel datapath " +
		"(datapath_type=system, the openvswitch module), so this CPU per byte says nothing about OVS on a node; measured for information: min-max 1.00-1.10 over 3 paired repetitions;"))
	// Not applicable only where it was measured: a run without fastpath-ovs still says SKIP.
	ts = CheckTargets(runs[:2], map[string]string{PathFastPathOVS: why})
	g.Expect(ts[6].String()).To(gomega.HavePrefix("SKIP cpu fastpath-ovs/baseline-masquerade"))

	// A saturated host is said so.
	sat := CheckTargets([]results.Run{withSD(stream(PathBaselineMasquerade, 1500, 9000), 100, 4), withSD(stream(PathFastPathLinuxBridge, 9000, 12000), 100, 3)}, nil)
	g.Expect(sat[5].String()).To(gomega.ContainSubstring("the host's CPUs were saturated"))
}

// Only the userspace datapath, as OVS reports it, makes the OVS cpu target
// N/A: the kernel datapath (or OVS's default, "") is judged.
func TestOVSCPUNotApplicable(t *testing.T) {
	for _, tc := range []struct {
		datapathType string
		na           bool
	}{{"netdev", true}, {"system", false}, {"", false}} {
		g := gomega.NewWithT(t)
		why, na := ovsCPUNotApplicable("br", tc.datapathType)
		g.Expect(na).To(gomega.Equal(tc.na), "datapath_type=%q", tc.datapathType)
		g.Expect(why == "").To(gomega.Equal(!tc.na))
	}
}

func TestOptionsAndNames(t *testing.T) {
	g := gomega.NewWithT(t)
	o := Options{}
	g.Expect(o.defaults()).To(gomega.MatchError(gomega.ContainSubstring("the fast paths need the fastpath CNI binary")))
	o = Options{Paths: []string{PathBaselineUntuned, PathFastPathOVS, PathCeiling}, FastPathMTUs: []int{9000, 65520}, Plugin: "/bin/true"}
	g.Expect(o.defaults()).To(gomega.Succeed())
	g.Expect(o.Prefix).To(gomega.Equal(DefaultPrefix))
	g.Expect(o.CNIPath).To(gomega.Equal([]string{DefaultCNIPath}))
	g.Expect(o.PathCount()).To(gomega.Equal(7))
	var got []string
	for _, v := range o.variants() {
		got = append(got, v.String()+" "+v.subnet().String())
	}
	g.Expect(got).To(gomega.Equal([]string{"baseline-untuned@1500 10.254.0.0/24", "fastpath-ovs@9000 10.254.1.0/24", "ceiling-veth@9000 10.254.2.0/24", "ceiling-loopback@9000 10.254.3.0/24",
		"fastpath-ovs@65520 10.254.4.0/24", "ceiling-veth@65520 10.254.5.0/24", "ceiling-loopback@65520 10.254.6.0/24"}))
	s := &Setup{ID: "fpbl3fa9c1"}
	name := s.linkName("u", variant{index: 9}, 1)
	g.Expect(name).To(gomega.Equal("fpbl3fa9c1u91"))
	g.Expect(len("abcde3fa9c1o91")).To(gomega.BeNumerically("<=", 15), "the longest prefix still fits IFNAMSIZ")

	for _, bad := range []Options{
		{Prefix: "toolong", Paths: []string{PathCeiling}},
		{Paths: []string{"fastpath-vdpa"}},
		{Paths: []string{PathCeiling, PathCeiling}},
		{Paths: []string{PathFastPathLinuxBridge}, Plugin: "/nonexistent/fastpath"},
		{Paths: []string{PathFastPathLinuxBridge}, Plugin: "/bin/true", FastPathMTUs: []int{70000}},
	} {
		g.Expect(bad.defaults()).NotTo(gomega.Succeed(), "%+v", bad)
	}
}

func TestRunIDOf(t *testing.T) {
	g := gomega.NewWithT(t)
	g.Expect(runIDOf("fpbl", "fpbl3fa9c1-ceiling-65535-client")).To(gomega.Equal("fpbl3fa9c1"))
	g.Expect(runIDOf("fpbl", "fpbl3fa9c1u01")).To(gomega.Equal("fpbl3fa9c1"))
	g.Expect(runIDOf("fpbl", "fpblzzzzzz")).To(gomega.BeEmpty())
	g.Expect(runIDOf("fpbl", "fpbl3f")).To(gomega.BeEmpty())
	g.Expect(runIDOf("fpbl", "eth0")).To(gomega.BeEmpty())
}

func TestMatrices(t *testing.T) {
	g := gomega.NewWithT(t)
	q := QuickMatrix(4 * time.Second)
	g.Expect(q.Validate()).To(gomega.Succeed())
	g.Expect(q.Points()).To(gomega.Equal([]results.Point{
		{Test: results.TCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1},
		{Test: results.TCPMaerts, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1},
		{Test: results.UDPStream, SocketBytes: 262144, MessageBytes: 1472, Sessions: 1, Pairs: 1},
		{Test: results.TCPRR, SocketBytes: 262144, MessageBytes: 1, Sessions: 1, Pairs: 1},
		{Test: results.TCPCRR, SocketBytes: 262144, MessageBytes: 1, Sessions: 1, Pairs: 1},
	}))
	f := FullMatrix(10 * time.Second)
	// 16 stream + 16 maerts + 2 sockets x 2 sessions x (UDP, RR, CRR).
	g.Expect(f.Points()).To(gomega.HaveLen(44))
	g.Expect(f.Duration).To(gomega.Equal(10 * time.Second))
}
