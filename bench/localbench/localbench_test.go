package localbench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// testPrefix names what these tests make; the benchmark itself uses "fpbl".
const testPrefix = "fpbt"

// buildPlugin compiles the fastpath CNI binaries (fastpath and, beside it,
// the fastpath-ovs-plugin it hands OVS invocations over to) into a
// temporary directory and returns the path of fastpath.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, pkg := range map[string]string{
		wellknown.PluginType:    "github.com/fastpath-io/fastpath/cni/cmd/fastpath",
		netconf.OVSPluginBinary: "github.com/fastpath-io/fastpath/cni/cmd/fastpath-ovs-plugin",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("failed to build %s: %v: %s", pkg, err, b)
		}
	}
	return filepath.Join(dir, wellknown.PluginType)
}

// build runs Build and closes the setup at cleanup, failing the test when
// anything of the run is left.
func build(t *testing.T, ctx context.Context, opts Options) *Setup {
	t.Helper()
	opts.Prefix, opts.Log = testPrefix, testr.New(t)
	s, err := Build(ctx, opts)
	if err != nil {
		t.Fatalf("failed to build: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("failed to close: %v", err)
		}
	})
	return s
}

// assertGone checks that nothing of run s is left: no namespace, link,
// bridge, temporary directory, lock file, or host veth of its CNI
// attachments.
func assertGone(g *gomega.WithT, s *Setup) {
	left, err := s.Leftovers()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(left.Empty()).To(gomega.BeTrue(), "left: %s", left)
	g.Expect(filepath.Join(LockDir, s.ID+".lock")).NotTo(gomega.BeAnExistingFile())
	links, err := netlink.LinkList()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, p := range s.Paths {
		for _, role := range []string{"client", "server"} {
			hostIf := plugin.HostIfName(s.ID+"-"+p.Name+"-"+strconv.Itoa(p.MTU)+"-"+role, PodIfName)
			for _, l := range links {
				g.Expect(l.Attrs().Name).NotTo(gomega.Equal(hostIf), "host veth of the CNI attachment")
			}
		}
	}
}

// linkIn returns ifName inside the namespace at nsPath.
func linkIn(g *gomega.WithT, nsPath, ifName string) netlink.Link {
	var l netlink.Link
	err := (&topology.NetNS{Name: filepath.Base(nsPath), Path: nsPath}).Do(func() error {
		var err error
		l, err = netlink.LinkByName(ifName)
		return err
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return l
}

func offloadsIn(nsPath, ifName string, on bool) error {
	want := map[string]bool{"tso": on, "gso": on, "gro": on, "txChecksum": on, "rxChecksum": on}
	return (&topology.NetNS{Name: filepath.Base(nsPath), Path: nsPath}).Do(func() error { return offload.Verify(ifName, want) })
}

// A short real local benchmark: five paths, the Linux bridge one wired by
// the real CNI binary, 1 s runs, one repetition. It checks the structure (paths,
// MTUs the traffic really used, offloads, targets computed, nothing left
// behind), not the speed.
func TestLocalBenchmark(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	ctx := context.Background()
	s := build(t, ctx, Options{
		Paths:        []string{PathBaselineUntuned, PathBaselineMasquerade, PathFastPathLinuxBridge, PathFastPathMacvtap, PathCeiling},
		FastPathMTUs: []int{9000},
		Plugin:       buildPlugin(t),
	})
	g.Expect(s.ID).To(gomega.HavePrefix(testPrefix))
	g.Expect(s.Skipped).To(gomega.BeEmpty())
	var got []string
	for _, p := range s.Paths {
		got = append(got, p.Name+"@"+strconv.Itoa(p.MTU))
		g.Expect(p.Endpoints).To(gomega.HaveLen(1))
		ex, ok := p.Endpoints[0].Executor.(netperf.NetNS)
		g.Expect(ok).To(gomega.BeTrue())
		g.Expect(ex.Path).To(gomega.HavePrefix(filepath.Join(topology.NetNSDir, s.ID+"-"+p.Name+"-")))
		g.Expect(ex.Path).To(gomega.BeAnExistingFile())
	}
	g.Expect(got).To(gomega.Equal([]string{"baseline-untuned@1500", "baseline-masquerade@1500", "fastpath-linux-bridge@9000", "fastpath-macvtap@9000", "ceiling-veth@9000", "ceiling-loopback@9000"}))

	// The interfaces are what the paths promise.
	nsOf := func(i int) string { return s.Paths[i].Endpoints[0].Executor.(netperf.NetNS).Path }
	untuned, fast, macvtap, ceiling, loopback := nsOf(0), nsOf(2), nsOf(3), nsOf(4), nsOf(5)
	g.Expect(linkIn(g, untuned, "eth0").Attrs().MTU).To(gomega.Equal(1500))
	g.Expect(offloadsIn(untuned, "eth0", false)).To(gomega.Succeed())
	g.Expect(linkIn(g, fast, PodIfName).Attrs().MTU).To(gomega.Equal(9000), "set by the CNI binary")
	g.Expect(offloadsIn(fast, PodIfName, true)).To(gomega.Succeed())
	g.Expect(offloadsIn(ceiling, s.linkName("c", variant{index: 4}, 0), true)).To(gomega.Succeed())
	g.Expect(linkIn(g, ceiling, s.linkName("c", variant{index: 4}, 0)).Attrs().MTU).To(gomega.Equal(9000), "the ceiling has the fast path's MTU")
	g.Expect(linkIn(g, loopback, "lo").Attrs().MTU).To(gomega.Equal(9000), "so has its loopback candidate")
	g.Expect(offloadsIn(loopback, "lo", true)).To(gomega.Succeed())
	g.Expect(strings.Replace(loopback, "-client", "-server", 1)).NotTo(gomega.BeAnExistingFile(), "loopback: one namespace")
	mv := linkIn(g, macvtap, "eth0")
	g.Expect(mv.Type()).To(gomega.Equal("macvlan"))
	g.Expect(mv.(*netlink.Macvlan).Mode).To(gomega.Equal(netlink.MACVLAN_MODE_BRIDGE))
	g.Expect(mv.Attrs().MTU).To(gomega.Equal(9000))
	g.Expect(offloadsIn(macvtap, "eth0", true)).To(gomega.Succeed())
	lower, err := netlink.LinkByName(s.linkName("v", variant{index: 3}, 0))
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the lower device stays in the host namespace")
	g.Expect(lower.Attrs().MTU).To(gomega.Equal(9000))

	m := QuickMatrix(time.Second)
	m.Repetitions = 1
	doc, err := measure(ctx, s, m, &netperf.CPUPair{Client: 0, Server: runtime.NumCPU() - 1})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Validate()).To(gomega.Succeed())
	g.Expect(doc.Machine.Emulated).To(gomega.ContainSubstring("VMs emulated as network namespaces"))
	g.Expect(doc.Machine.Emulated).NotTo(gomega.ContainSubstring("Open vSwitch"), "no fastpath-ovs in this run")
	// 5 tests on 6 paths, UDP_STREAM skipped on baseline-masquerade, and
	// the ceiling's 5 runs, each repetition from one of its candidates.
	g.Expect(doc.Runs).To(gomega.HaveLen(34))
	// The TCP MSS shows the MTU each path's traffic really had: MTU - 52
	// (20 IPv4 + 20 TCP + 12 timestamp option bytes).
	mss := map[string]int{}
	for _, r := range doc.Runs {
		g.Expect(r.Samples).To(gomega.HaveLen(1))
		g.Expect(r.Path + " " + r.Test).NotTo(gomega.Equal(PathBaselineMasquerade + " " + results.UDPStream))
		// Every run measured CPU: netperf's, once for the shared host, and
		// the benchmark's own processes'.
		g.Expect(r.ServiceDemandUsPerKB).To(gomega.BeNumerically(">", 0), "%s %s", r.Path, r.Test)
		g.Expect(r.CPUScope).To(gomega.Equal(results.CPUScopeHost))
		g.Expect(r.ProcessServiceDemandUsPerKB).To(gomega.BeNumerically(">", 0), "%s %s", r.Path, r.Test)
		switch {
		case r.Path == PathCeiling:
			g.Expect(r.Samples[0].Source).To(gomega.BeElementOf(CeilingCandidates))
			g.Expect(r.ThroughputMbps).To(gomega.Equal(max(runOf(doc.Runs, PathCeilingVeth, r.Test).ThroughputMbps, runOf(doc.Runs, PathCeilingLoopback, r.Test).ThroughputMbps)))
		case r.Test == results.TCPStream:
			mss[r.Path] = r.Samples[0].PerSession[0].MSSBytes
		case results.IsRR(r.Test):
			g.Expect(r.MeanLatencyUs).To(gomega.BeNumerically(">", 0))
		case r.Test == results.UDPStream:
			g.Expect(r.Samples[0].PerSession[0].MessagesSent).To(gomega.BeNumerically(">", 0))
		}
	}
	g.Expect(mss).To(gomega.Equal(map[string]int{PathBaselineUntuned: 1448, PathBaselineMasquerade: 1448, PathFastPathLinuxBridge: 8948, PathFastPathMacvtap: 8948, PathCeilingVeth: 8948, PathCeilingLoopback: 8948}))
	ts := CheckTargets(doc.Runs, nil)
	g.Expect(ts).To(gomega.HaveLen(7))
	for _, tg := range ts[:6] {
		g.Expect(tg.Measured).To(gomega.BeTrue(), tg.String())
		g.Expect(tg.Got).To(gomega.BeNumerically(">", 0))
	}
	g.Expect(ts[6].Measured).To(gomega.BeFalse(), "no fastpath-ovs in this run")

	g.Expect(s.Close()).To(gomega.Succeed())
	assertGone(g, s)
}

// runOf is the run of path and test in runs.
func runOf(runs []results.Run, path, test string) results.Run {
	for _, r := range runs {
		if r.Path == path && r.Test == test {
			return r
		}
	}
	return results.Run{}
}

// Ctrl-C in the middle of a measurement: the run stops and Close still
// removes everything, netservers included.
func TestCloseAfterInterruptedRun(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	s := build(t, context.Background(), Options{Paths: []string{PathCeiling}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(500*time.Millisecond, cancel) // the Ctrl-C, half a second into the run
	// Each measurement is an hour long, so a run that returns at all was
	// interrupted.
	m := QuickMatrix(time.Hour)
	ran := make(chan error, 1)
	go func() {
		_, err := bench.Document(ctx, &bench.Runner{Matrix: m, Paths: s.Paths}, s.Emulated)
		ran <- err
	}()
	// A hang guard, not a speed target: a run that ignored the interrupt
	// would take the hour.
	var err error
	g.Eventually(ran, 2*time.Minute).Should(gomega.Receive(&err))
	g.Expect(err).To(gomega.MatchError(context.Canceled))
	serverNS := strings.Replace(s.Paths[0].Endpoints[0].Executor.(netperf.NetNS).Path, "-client", "-server", 1)
	g.Expect(serverNS).To(gomega.BeAnExistingFile())
	g.Expect(s.Close()).To(gomega.Succeed())
	assertGone(g, s)
	g.Expect(serverNS).NotTo(gomega.BeAnExistingFile())
}

// CleanLeftovers removes what a killed run left (namespace with a process
// in it, link, temporary directory, lock file) and keeps a live run's.
func TestCleanLeftovers(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	dead := testPrefix + "d0d0d0"
	g.Expect(os.MkdirAll(LockDir, 0o755)).To(gomega.Succeed())
	g.Expect(os.WriteFile(filepath.Join(LockDir, dead+".lock"), []byte("pid 1\n"), 0o644)).To(gomega.Succeed())
	n, err := topology.NewNetNS(dead + "-x-client")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _, _ = topology.KillProcessesIn(n.Path); _ = n.Delete() })
	sleeper := exec.Command("sleep", "60")
	g.Expect(netperf.NetNS{Path: n.Path}.Start(sleeper)).To(gomega.Succeed())
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: dead + "b00"}}
	g.Expect(netlink.LinkAdd(br)).To(gomega.Succeed())
	t.Cleanup(func() { _ = topology.DeleteHostLink(br.Name) })
	tmp, err := os.MkdirTemp("", dead+"-")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { os.RemoveAll(tmp) })

	liveID, lock, err := newRunID(testPrefix)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = lock.release() })
	live, err := topology.NewNetNS(liveID + "-x-client")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = live.Delete() })

	removed, err := CleanLeftovers(testPrefix, testr.New(t))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed.NetNS).To(gomega.ContainElement(n.Name))
	g.Expect(removed.NetNS).NotTo(gomega.ContainElement(live.Name))
	g.Expect(removed.Links).To(gomega.ContainElement(br.Name))
	g.Expect(removed.TempDirs).To(gomega.ContainElement(tmp))
	g.Expect(n.Path).NotTo(gomega.BeAnExistingFile())
	g.Expect(tmp).NotTo(gomega.BeAnExistingFile())
	g.Expect(filepath.Join(LockDir, dead+".lock")).NotTo(gomega.BeAnExistingFile())
	_, err = netlink.LinkByName(br.Name)
	g.Expect(errors.As(err, &netlink.LinkNotFoundError{})).To(gomega.BeTrue())
	g.Eventually(exited, 5*time.Second).Should(gomega.Receive(gomega.MatchError(gomega.ContainSubstring("killed"))))
	g.Expect(live.Path).To(gomega.BeAnExistingFile())
	g.Expect(filepath.Join(LockDir, liveID+".lock")).To(gomega.BeAnExistingFile())
}

// fastpath-ovs: the CNI binary wires both namespaces to an OVS bridge with
// the userspace datapath; traffic flows (1 s TCP_STREAM) and everything,
// the OVS bridge included, is removed.
func TestFastPathOVS(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	s := build(t, context.Background(), Options{Paths: []string{PathFastPathOVS}, FastPathMTUs: []int{9000}, Plugin: buildPlugin(t)})
	g.Expect(s.Skipped).To(gomega.BeEmpty())
	g.Expect(s.Paths).To(gomega.HaveLen(1))
	m := QuickMatrix(time.Second)
	m.Tests, m.Repetitions = []string{results.TCPStream}, 1
	doc, err := bench.Document(context.Background(), &bench.Runner{Matrix: m, Paths: s.Paths}, s.Emulated)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Runs[0].Samples[0].PerSession[0].MSSBytes).To(gomega.Equal(8948))
	brs, err := listOVSBridges()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(brs).To(gomega.ContainElement(s.linkName("o", variant{index: 0}, 0)))
	g.Expect(s.Close()).To(gomega.Succeed())
	assertGone(g, s)
}
