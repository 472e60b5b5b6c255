package plugin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/ovs"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

var bins *cnitest.Binaries

// pluginOpts give the plugin under test every datapath, as
// bin/fastpath-ovs-plugin has them.
var pluginOpts = plugin.Options{OVS: ovs.Open}

func TestMain(m *testing.M) {
	os.Exit(cnitest.Main(m, false, &bins))
}

// TestLinuxBridge and TestOVS run the same datapath suite against a real
// Linux bridge and a real OVS bridge (userspace datapath).
func TestLinuxBridge(t *testing.T) {
	testutil.RequireRoot(t)
	runSuite(t, netconf.DatapathLinuxBridge)
}

func TestOVS(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	runSuite(t, netconf.DatapathOVS)
}

func runSuite(t *testing.T, datapath string) {
	for _, v := range netconf.SupportedVersions {
		t.Run("lifecycle/"+v, func(t *testing.T) { testLifecycle(t, datapath, v) })
		t.Run("del-after-netns-deleted/"+v, func(t *testing.T) { testDelAfterNetnsDeleted(t, datapath, v) })
		t.Run("failed-ipam-add-leaves-nothing/"+v, func(t *testing.T) { testFailedIPAMAdd(t, datapath, v) })
		t.Run("failure-after-ipam-releases-address/"+v, func(t *testing.T) { testFailureAfterIPAM(t, datapath, v) })
	}
	t.Run("mtu-larger-than-bridge", func(t *testing.T) { testMTULargerThanBridge(t, datapath) })
	t.Run("missing-bridge", func(t *testing.T) { testMissingBridge(t, datapath) })
	t.Run("mac", func(t *testing.T) { testMAC(t, datapath) })
	t.Run("offloads", func(t *testing.T) { testOffloads(t, datapath) })
	t.Run("gc", func(t *testing.T) { testGC(t, datapath) })
	t.Run("status", func(t *testing.T) { testStatus(t, datapath) })
	t.Run("traffic-mtu-9000", func(t *testing.T) { testTraffic(t, datapath) })
	if datapath == netconf.DatapathOVS {
		t.Run("del-waits-for-ovsdb", testDelWaitsForOVSDB)
		t.Run("refuses-offloads-without-userspace-tso", testRefusesOffloadsWithoutUserspaceTSO)
	}
}

// env is one test's bridge, state directory and host-local data directory.
type env struct {
	t        *testing.T
	br       *cnitest.Bridge
	version  string
	stateDir string
	ipamDir  string
}

func newEnv(t *testing.T, datapath, version string, extraPath ...string) *env {
	t.Helper()
	e := &env{t: t, br: cnitest.NewBridge(t, datapath, 9000), version: version, stateDir: t.TempDir()}
	e.ipamDir = netconf.IPAMDataDir(e.stateDir)
	// testutils.CmdAdd and friends pass PATH as CNI_PATH.
	t.Setenv("PATH", bins.CNIPath(version, extraPath...)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return e
}

func (e *env) conf(c cnitest.Conf) []byte {
	c.CNIVersion, c.StateDir = e.version, e.stateDir
	return e.br.NetConf(e.t, c)
}

// attachment is one ADD's identity and result.
type attachment struct {
	netns       ns.NetNS
	containerID string
	ifName      string
	conf        []byte
	result      *current.Result
	raw         []byte // the result as printed, in the netconf's version
}

func (a *attachment) hostIf() string { return plugin.HostIfName(a.containerID, a.ifName) }

// args are the skel arguments of a's attachment with conf, as for a pod in
// cnitest.Namespace (CNI_ARGS cnitest.PodArgs).
func (a *attachment) args(conf []byte) *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: a.containerID, Netns: a.netns.Path(), IfName: a.ifName, StdinData: conf, Args: cnitest.PodArgs}
}

func (a *attachment) ip() string { return a.result.IPs[0].Address.IP.String() }

// add runs ADD through the skel callbacks for a new attachment in netns
// with CNI_ARGS cniArgs ("": cnitest.PodArgs).
func (e *env) add(netns ns.NetNS, conf []byte, cniArgs string) (*attachment, error) {
	a := &attachment{netns: netns, containerID: testutil.UniqueName("fpcid-"), ifName: "net1", conf: conf}
	args := a.args(conf)
	if cniArgs != "" {
		args.Args = cniArgs
	}
	r, raw, err := testutils.CmdAddWithArgs(args, func() error { return plugin.Funcs(pluginOpts).Add(args) })
	if err != nil {
		return a, err
	}
	a.raw = raw
	a.result, err = current.GetResult(r)
	return a, err
}

func (e *env) mustAdd(netns ns.NetNS, conf []byte) *attachment {
	e.t.Helper()
	a, err := e.add(netns, conf, "")
	NewWithT(e.t).Expect(err).NotTo(HaveOccurred())
	return a
}

func (e *env) check(a *attachment) error {
	var prev map[string]any
	if err := json.Unmarshal(a.raw, &prev); err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(a.conf, &m); err != nil {
		return err
	}
	m["prevResult"] = prev
	conf, _ := json.Marshal(m)
	args := a.args(conf)
	return testutils.CmdCheckWithArgs(args, func() error { return plugin.Funcs(pluginOpts).Check(args) })
}

func (e *env) del(a *attachment, netnsPath string) error {
	args := a.args(a.conf)
	args.Netns = netnsPath
	return testutils.CmdDelWithArgs(args, func() error { return plugin.Funcs(pluginOpts).Del(args) })
}

func (e *env) gc(conf []byte) error {
	os.Setenv("CNI_COMMAND", "GC")
	os.Setenv("CNI_PATH", os.Getenv("PATH"))
	defer os.Unsetenv("CNI_COMMAND")
	defer os.Unsetenv("CNI_PATH")
	return plugin.Funcs(pluginOpts).GC(&skel.CmdArgs{StdinData: conf})
}

func (e *env) status(conf []byte) error {
	return testutils.CmdStatus(func() error { return plugin.Funcs(pluginOpts).Status(&skel.CmdArgs{StdinData: conf}) })
}

// expectGone asserts that nothing of a is left on the node: host veth,
// bridge port, state file, IPAM allocation, and (when its netns still
// exists) the container interface.
func (e *env) expectGone(g *WithT, a *attachment, netnsAlive bool) {
	g.Expect(cnitest.LinkExists(a.hostIf())).To(BeFalse(), "host veth %s", a.hostIf())
	g.Expect(e.br.Ports(e.t)).NotTo(ContainElement(a.hostIf()))
	g.Expect(filepath.Join(e.stateDir, a.containerID+":"+a.ifName+".json")).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join(e.stateDir, leases.Dir, a.containerID+":"+a.ifName+".json")).NotTo(BeAnExistingFile())
	if a.result != nil {
		g.Expect(cnitest.Allocations(e.t, e.ipamDir, e.br.Name)).NotTo(ContainElement(a.ip()))
	}
	if netnsAlive {
		g.Expect(cnitest.Links(e.t, a.netns)).To(ConsistOf("lo"))
	}
}

// expectNothingLeft asserts the node has no attachment at all.
func (e *env) expectNothingLeft(g *WithT, netns ns.NetNS) {
	g.Expect(e.br.Ports(e.t)).To(BeEmpty())
	g.Expect(cnitest.StateFiles(e.t, e.stateDir)).To(BeEmpty())
	g.Expect(cnitest.Allocations(e.t, e.ipamDir, e.br.Name)).To(BeEmpty())
	if netns != nil {
		g.Expect(cnitest.Links(e.t, netns)).To(ConsistOf("lo"))
	}
}

func ovsGet(g *WithT, socket, table, record, column string) string {
	out, err := exec.Command("ovs-vsctl", "--db="+socket, "get", table, record, column).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	return strings.TrimSpace(string(out))
}

func testLifecycle(t *testing.T, datapath, version string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, version)
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{}))

	g.Expect(a.result.Interfaces).To(HaveLen(2))
	g.Expect(a.result.Interfaces[0].Name).To(Equal(a.hostIf()))
	g.Expect(a.result.Interfaces[1].Name).To(Equal("net1"))
	g.Expect(a.result.Interfaces[1].Sandbox).To(Equal(netns.Path()))
	g.Expect(a.result.IPs).To(HaveLen(1))
	g.Expect(*a.result.IPs[0].Interface).To(Equal(1))
	_, subnet, _ := net.ParseCIDR(cnitest.Subnet)
	g.Expect(subnet.Contains(a.result.IPs[0].Address.IP)).To(BeTrue())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip()))

	// The container end: named CNI_IFNAME, MTU 9000, up, with the address.
	g.Expect(netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		g.Expect(link.Attrs().MTU).To(Equal(9000))
		g.Expect(link.Attrs().Flags & net.FlagUp).NotTo(BeZero())
		g.Expect(link.Attrs().HardwareAddr.String()).To(Equal(a.result.Interfaces[1].Mac))
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
		g.Expect(addrs).To(ContainElement(WithTransform(func(a netlink.Addr) string { return a.IPNet.String() }, Equal(a.result.IPs[0].Address.String()))))
		return err
	})).To(Succeed())

	// The host end: 15 characters, MTU 9000, alias naming the attachment, on the bridge.
	host, err := netlink.LinkByName(a.hostIf())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(a.hostIf())).To(Equal(15))
	g.Expect(host.Attrs().MTU).To(Equal(9000))
	g.Expect(host.Attrs().Alias).To(Equal("fastpath/fp-test/" + a.containerID + "/net1"))
	g.Expect(e.br.Ports(t)).To(ConsistOf(a.hostIf()))
	if datapath == netconf.DatapathOVS {
		// ovs-vsctl quotes a map value only when it needs to.
		ids := strings.ReplaceAll(ovsGet(g, e.br.OVSSocket, "Port", a.hostIf(), "external_ids"), `"`, "")
		g.Expect(ids).To(ContainSubstring("fastpath.io/container-id=" + a.containerID + ","))
		g.Expect(ids).To(ContainSubstring("fastpath.io/ifname=net1,"))
		g.Expect(ids).To(ContainSubstring("fastpath.io/netns=" + netns.Path() + ","))
		g.Expect(ids).To(ContainSubstring("fastpath.io/network=fp-test,"))
		g.Expect(ovsGet(g, e.br.OVSSocket, "Interface", a.hostIf(), "ofport")).NotTo(Equal("-1"))
	}
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(HaveLen(1))
	// The DHCP lease the node agent answers from: on datapath LinuxBridge only.
	ls, err := leases.List(filepath.Join(e.stateDir, leases.Dir))
	g.Expect(err).NotTo(HaveOccurred())
	if datapath == netconf.DatapathLinuxBridge {
		g.Expect(ls).To(HaveLen(1))
		g.Expect(ls[0].Address.String()).To(Equal(a.result.IPs[0].Address.String()))
		g.Expect(ls[0].MAC).To(Equal(a.result.Interfaces[1].Mac))
		g.Expect(ls[0]).To(PointTo(MatchFields(IgnoreExtras, Fields{"ContainerID": Equal(a.containerID), "IfName": Equal("net1"),
			"Network": Equal("fp-test"), "Bridge": Equal(e.br.Name), "MTU": Equal(9000),
			// The allocator the responder checks the address against.
			"IPAMType": Equal("host-local"), "IPAMNetwork": Equal(netconf.IPAMNetworkName(e.br.Name))})))
		g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ContainElement(ls[0].Address.Addr().String()))
	} else {
		g.Expect(ls).To(BeEmpty())
	}

	if testutils.SpecVersionHasCHECK(version) {
		g.Expect(e.check(a)).To(Succeed())
	}
	if testutils.SpecVersionHasSTATUS(version) {
		g.Expect(e.status(a.conf)).To(Succeed())
	}

	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns)
	g.Expect(e.del(a, netns.Path())).To(Succeed(), "a second DEL succeeds")
	e.expectNothingLeft(g, netns)
}

func testDelAfterNetnsDeleted(t *testing.T, datapath, version string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, version)
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{}))
	path := netns.Path()
	cnitest.RemoveNS(netns)
	// The kernel destroys the namespace, and the veth pair with it, asynchronously.
	g.Eventually(func() bool { return cnitest.LinkExists(a.hostIf()) }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())

	g.Expect(e.del(a, path)).To(Succeed())
	e.expectGone(g, a, false)
	e.expectNothingLeft(g, nil)
	g.Expect(e.del(a, "")).To(Succeed(), "DEL without CNI_NETNS succeeds too")
}

// writeFailingIPAM writes an IPAM plugin "fpfail" whose ADD fails and whose
// DEL succeeds, and returns its directory.
func writeFailingIPAM(t *testing.T) string {
	dir := t.TempDir()
	script := `#!/bin/sh
if [ "$CNI_COMMAND" = ADD ]; then
  echo '{"cniVersion": "1.0.0", "code": 11, "msg": "injected IPAM failure"}'
  exit 1
fi
exit 0
`
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "fpfail"), []byte(script), 0o755)).To(Succeed())
	return dir
}

func testFailedIPAMAdd(t *testing.T, datapath, version string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, version, writeFailingIPAM(t))
	netns := cnitest.NewNS(t)
	a, err := e.add(netns, e.conf(cnitest.Conf{IPAM: map[string]any{"type": "fpfail"}}), "")
	g.Expect(err).To(MatchError(ContainSubstring("failed to allocate addresses with IPAM plugin fpfail: injected IPAM failure")))
	var cniErr *types.Error
	g.Expect(errors.As(err, &cniErr)).To(BeTrue())
	g.Expect(cniErr.Code).To(BeEquivalentTo(11), "the IPAM plugin's code is kept")
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns)
}

func testFailureAfterIPAM(t *testing.T, datapath, version string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, version)
	netns := cnitest.NewNS(t)
	// host-local allocates an address, then the route through a gateway
	// that is not on the link cannot be added: ADD fails after IPAM.
	ipam := map[string]any{"type": "host-local", "subnet": cnitest.Subnet,
		"routes": []map[string]string{{"dst": "198.51.100.0/24", "gw": "192.0.2.1"}}}
	a, err := e.add(netns, e.conf(cnitest.Conf{IPAM: ipam}), "")
	g.Expect(err).To(MatchError(ContainSubstring("failed to configure addresses on net1")))
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns) // including host-local's allocation
}

func testMTULargerThanBridge(t *testing.T, datapath string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.0.0")
	netns := cnitest.NewNS(t)
	a, err := e.add(netns, e.conf(cnitest.Conf{MTU: 9216}), "")
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("mtu 9216 is larger than the MTU 9000 of bridge %s", e.br.Name))))
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns)
}

func testMissingBridge(t *testing.T, datapath string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.1.0")
	missing := *e.br
	missing.Name = testutil.UniqueName("fpcnone")
	conf := missing.NetConf(t, cnitest.Conf{CNIVersion: "1.1.0", StateDir: e.stateDir})
	netns := cnitest.NewNS(t)
	_, err := e.add(netns, conf, "")
	var cniErr *types.Error
	g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrTryAgainLater))
	g.Expect(cniErr.Msg).To(And(ContainSubstring("bridge "+missing.Name), ContainSubstring("fastpath-agent creates it"), ContainSubstring("FastPathNode")))
	g.Expect(cnitest.LinkExists(missing.Name)).To(BeFalse(), "the plugin never creates bridges")

	err = e.status(conf)
	g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrPluginNotAvailable))
	g.Expect(cniErr.Msg).To(ContainSubstring("bridge " + missing.Name))
	e.expectNothingLeft(g, netns)
}

func testMAC(t *testing.T, datapath string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.0.0")
	for _, tc := range []struct {
		extra   map[string]any
		cniArgs string
		mac     string
	}{
		{map[string]any{"runtimeConfig": map[string]any{"mac": "02:fa:57:00:00:01"}}, "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + cnitest.Namespace + ";MAC=02:fa:57:00:00:09", "02:fa:57:00:00:01"},
		{nil, "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + cnitest.Namespace + ";K8S_POD_NAME=virt-launcher-db-0;MAC=02:FA:57:00:00:02", "02:fa:57:00:00:02"},
	} {
		netns := cnitest.NewNS(t)
		a, err := e.add(netns, e.conf(cnitest.Conf{Extra: tc.extra}), tc.cniArgs)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.result.Interfaces[len(a.result.Interfaces)-1].Mac).To(Equal(tc.mac), "the container interface comes last")
		g.Expect(netns.Do(func(ns.NetNS) error {
			link, err := netlink.LinkByName("net1")
			if err == nil {
				g.Expect(link.Attrs().HardwareAddr.String()).To(Equal(tc.mac))
			}
			return err
		})).To(Succeed())
		if datapath == netconf.DatapathOVS {
			g.Expect(ovsGet(g, e.br.OVSSocket, "Interface", a.hostIf(), "external_ids:attached-mac")).To(Equal(`"` + tc.mac + `"`))
		}
		g.Expect(e.del(a, netns.Path())).To(Succeed())
		e.expectNothingLeft(g, netns)
	}
}

// ethtoolK reads the offload summaries of ifName with the ethtool command,
// in the host namespace or (netns not nil) in netns: one per row of
// wellknown.Offloads, keyed by its name.
func ethtoolK(g *WithT, netns ns.NetNS, ifName string) map[string]bool {
	cmd := exec.Command("ethtool", "-k", ifName)
	if netns != nil {
		cmd = exec.Command("nsenter", "--net="+netns.Path(), "ethtool", "-k", ifName)
	}
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	keys := map[string]string{"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
		"generic-receive-offload": "gro", "tx-checksumming": "txChecksum", "rx-checksumming": "rxChecksum"}
	got := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok && keys[name] != "" {
			got[keys[name]] = strings.HasPrefix(value, "on")
		}
	}
	g.Expect(got).To(HaveLen(len(wellknown.Offloads)), "a summary line per offload of wellknown.Offloads; ethtool -k output: %s", out)
	return got
}

func testOffloads(t *testing.T, datapath string) {
	e := newEnv(t, datapath, "1.0.0")
	allOn := map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true}
	for _, tc := range []struct {
		asked, want map[string]bool
	}{
		{allOn, allOn},
		// A NAD an operator wrote before rxChecksum existed: on by default.
		{map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true}, allOn},
		{map[string]bool{"tso": false, "gso": true, "gro": false, "txChecksum": false, "rxChecksum": false},
			map[string]bool{"tso": false, "gso": true, "gro": false, "txChecksum": false, "rxChecksum": false}},
		// rx-checksumming off alone on both ends, the rest as by default.
		{map[string]bool{"rxChecksum": false},
			map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": false}},
	} {
		g := NewWithT(t)
		want := tc.want
		netns := cnitest.NewNS(t)
		a, err := e.add(netns, e.conf(cnitest.Conf{Offloads: tc.asked}), "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ethtoolK(g, netns, "net1")).To(Equal(want), "container end")
		g.Expect(ethtoolK(g, nil, a.hostIf())).To(Equal(want), "host end")
		out, err := exec.Command("ethtool", "-k", a.hostIf()).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(string(out)).To(MatchRegexp("(?m)^rx-checksumming: %s$", map[bool]string{true: "on", false: "off"}[want["rxChecksum"]]))
		g.Expect(e.check(a)).To(Succeed())

		// CHECK notices a flag someone switched behind the plugin's back.
		flip := map[bool]string{true: "off", false: "on"}[want["gro"]]
		out, err = exec.Command("ethtool", "-K", a.hostIf(), "gro", flip).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(e.check(a)).To(MatchError(ContainSubstring(fmt.Sprintf("offloads of %s differ: gro is %s", a.hostIf(), flip))))

		g.Expect(e.del(a, netns.Path())).To(Succeed())
		e.expectNothingLeft(g, netns)
	}
}

func testGC(t *testing.T, datapath string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.1.0")
	conf := e.conf(cnitest.Conf{})
	nsA, nsB, nsC, nsD := cnitest.NewNS(t), cnitest.NewNS(t), cnitest.NewNS(t), cnitest.NewNS(t)
	keep := e.mustAdd(nsA, conf)
	stale := e.mustAdd(nsB, conf)
	rebooted := e.mustAdd(nsC, conf)
	noState := e.mustAdd(nsD, conf)
	// Another network's attachment on the same bridge is not ours to collect.
	other := e.mustAdd(cnitest.NewNS(t), e.conf(cnitest.Conf{Name: "fp-other"}))

	// "rebooted" lost its netns (and veth) but not its port or address, as
	// after a node reboot; "noState" lost its state file.
	cnitest.RemoveNS(nsC)
	g.Eventually(func() bool { return cnitest.LinkExists(rebooted.hostIf()) }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
	if datapath == netconf.DatapathOVS {
		g.Expect(e.br.Ports(t)).To(ContainElement(rebooted.hostIf()), "OVS keeps the port of a vanished veth")
	}
	g.Expect(os.Remove(filepath.Join(e.stateDir, noState.containerID+":net1.json"))).To(Succeed())

	var m map[string]any
	g.Expect(json.Unmarshal(conf, &m)).To(Succeed())
	m["cni.dev/valid-attachments"] = []types.GCAttachment{{ContainerID: keep.containerID, IfName: "net1"}}
	gcConf, _ := json.Marshal(m)
	g.Expect(e.gc(gcConf)).To(Succeed())

	g.Expect(e.br.Ports(t)).To(ConsistOf(keep.hostIf(), other.hostIf()))
	e.expectGone(g, stale, true)
	e.expectGone(g, rebooted, false)
	g.Expect(cnitest.LinkExists(noState.hostIf())).To(BeFalse())
	g.Expect(cnitest.Links(t, nsD)).To(ConsistOf("lo"))
	for _, a := range []*attachment{stale, rebooted, noState} {
		g.Expect(portsecChainExists(a.hostIf())).To(BeFalse(), "port security rules of %s", a.hostIf())
	}
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ContainElement(keep.ip()))
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(HaveLen(2), "keep and other")
	if datapath == netconf.DatapathLinuxBridge {
		// noState's lease went with its attachment though its record was lost.
		ls, err := leases.List(filepath.Join(e.stateDir, leases.Dir))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ls).To(ConsistOf(HaveField("ContainerID", keep.containerID), HaveField("ContainerID", other.containerID)))
	}
	g.Expect(e.check(keep)).To(Succeed(), "GC leaves valid attachments alone")

	g.Expect(e.del(keep, nsA.Path())).To(Succeed())
	g.Expect(e.del(other, other.netns.Path())).To(Succeed())
	g.Expect(e.br.Ports(t)).To(BeEmpty())
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(BeEmpty())
}

func testStatus(t *testing.T, datapath string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.1.0")
	conf := e.conf(cnitest.Conf{})
	g.Expect(e.status(conf)).To(Succeed())

	var cniErr *types.Error
	if datapath == netconf.DatapathLinuxBridge {
		br, err := netlink.LinkByName(e.br.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(netlink.LinkSetDown(br)).To(Succeed())
		err = e.status(conf)
		g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
		g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrLimitedConnectivity))
		g.Expect(cniErr.Msg).To(ContainSubstring("bridge " + e.br.Name + " is down"))
		g.Expect(netlink.LinkSetUp(br)).To(Succeed())
		g.Expect(e.status(conf)).To(Succeed())

		// Port security (on by default) talks netlink to nf_tables and
		// needs no nft binary: with a PATH without one, STATUS, ADD,
		// CHECK and DEL with port security succeed.
		nft, err := exec.LookPath("nft")
		g.Expect(err).NotTo(HaveOccurred(), "the test inspects the ruleset with nft")
		chainExists := func(hostIf string) bool {
			return exec.Command(nft, "list", "chain", "bridge", portsec.TableName, portsec.ChainName(hostIf)).Run() == nil
		}
		t.Setenv("PATH", bins.CNIPath("1.1.0"))
		g.Expect(e.status(conf)).To(Succeed())
		netns := cnitest.NewNS(t)
		a := e.mustAdd(netns, conf)
		t.Cleanup(func() { _ = e.del(a, netns.Path()) })
		g.Expect(e.check(a)).To(Succeed())
		g.Expect(chainExists(a.hostIf())).To(BeTrue())
		g.Expect(e.del(a, netns.Path())).To(Succeed())
		g.Expect(chainExists(a.hostIf())).To(BeFalse())
		return
	}
	bad := *e.br
	bad.OVSSocket = "unix:" + filepath.Join(t.TempDir(), "db.sock")
	err := e.status(bad.NetConf(t, cnitest.Conf{CNIVersion: "1.1.0", StateDir: e.stateDir}))
	g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrPluginNotAvailable))
	g.Expect(cniErr.Msg).To(ContainSubstring("failed to connect to OVSDB at " + bad.OVSSocket))
}
