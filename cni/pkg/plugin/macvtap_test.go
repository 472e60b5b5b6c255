package plugin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/macvtap"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestMacvtap runs the Macvtap datapath's cases: a bridge-mode macvtap on a
// lower device the node agent's own code made, in a fresh netns per
// attachment, driven through the skel callbacks as a runtime would.
func TestMacvtap(t *testing.T) {
	testutil.RequireRoot(t)
	for _, v := range netconf.SupportedVersions {
		t.Run("lifecycle/"+v, func(t *testing.T) { testMacvtapLifecycle(t, v) })
		t.Run("add-twice-keeps-first/"+v, func(t *testing.T) { testMacvtapAddTwice(t, v) })
		t.Run("del-after-netns-deleted/"+v, func(t *testing.T) { testDelAfterNetnsDeleted(t, netconf.DatapathMacvtap, v) })
		t.Run("failed-ipam-add-leaves-nothing/"+v, func(t *testing.T) { testFailedIPAMAdd(t, netconf.DatapathMacvtap, v) })
		t.Run("failure-after-ipam-releases-address/"+v, func(t *testing.T) { testFailureAfterIPAM(t, netconf.DatapathMacvtap, v) })
	}
	t.Run("device-id-fixes-dev-tap", testMacvtapDeviceID)
	t.Run("mtu-larger-than-lower", testMacvtapMTULargerThanLower)
	t.Run("missing-lower", testMacvtapMissingLower)
	t.Run("unmarked-lower-and-peer-refused", testMacvtapUnmarkedLower)
	t.Run("foreign-link-of-the-name-left-alone", testMacvtapForeignLink)
	t.Run("leftover-macvtap-without-record-reclaimed", testMacvtapLeftover)
	t.Run("re-add-after-unfinished-add", testMacvtapReAddAfterUnfinishedAdd)
	t.Run("mac", func(t *testing.T) { testMAC(t, netconf.DatapathMacvtap) })
	t.Run("offloads", testMacvtapOffloads)
	t.Run("gc", testMacvtapGC)
	t.Run("status", testMacvtapStatus)
	t.Run("traffic-mtu-9000", func(t *testing.T) { testTraffic(t, netconf.DatapathMacvtap) })
}

// macvtapOf returns net1 in netns as the kernel has it.
func macvtapOf(g *WithT, netns ns.NetNS) *netlink.Macvtap {
	var mv *netlink.Macvtap
	g.Expect(netns.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		var ok bool
		mv, ok = l.(*netlink.Macvtap)
		if !ok {
			return fmt.Errorf("net1 is a %s", l.Type())
		}
		return nil
	})).To(Succeed())
	return mv
}

func lowerIndex(g *WithT, e *env) int {
	l, err := netlink.LinkByName(e.br.Name)
	g.Expect(err).NotTo(HaveOccurred())
	return l.Attrs().Index
}

func testMacvtapLifecycle(t *testing.T, version string) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, version)
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{}))

	g.Expect(a.result.Interfaces).To(HaveLen(1), "no host end")
	g.Expect(a.result.Interfaces[0].Name).To(Equal("net1"))
	g.Expect(a.result.Interfaces[0].Sandbox).To(Equal(netns.Path()))
	g.Expect(a.result.IPs).To(HaveLen(1))
	g.Expect(*a.result.IPs[0].Interface).To(Equal(0))
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip()))

	mv := macvtapOf(g, netns)
	g.Expect(mv.Mode).To(Equal(netlink.MACVLAN_MODE_BRIDGE))
	g.Expect(mv.Attrs().ParentIndex).To(Equal(lowerIndex(g, e)))
	g.Expect(mv.Attrs().MTU).To(Equal(9000))
	g.Expect(mv.Attrs().Flags & net.FlagUp).NotTo(BeZero())
	g.Expect(mv.Attrs().OperState).To(Equal(netlink.LinkOperState(netlink.OperUp)), "carrier from the lower device")
	g.Expect(mv.Attrs().HardwareAddr.String()).To(Equal(a.result.Interfaces[0].Mac))
	g.Expect(mv.Attrs().Alias).To(Equal("fastpath/fp-test/" + a.containerID + "/net1"))
	g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo", "net1"))
	g.Expect(netns.Do(func(ns.NetNS) error {
		addrs, err := netlink.AddrList(mv, netlink.FAMILY_V4)
		g.Expect(addrs).To(ContainElement(WithTransform(func(a netlink.Addr) string { return a.IPNet.String() }, Equal(a.result.IPs[0].Address.String()))))
		return err
	})).To(Succeed())
	g.Expect(cnitest.LinkExists(a.hostIf())).To(BeFalse(), "nothing in the host namespace")
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(HaveLen(1))

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

// testMacvtapAddTwice: a repeated ADD never touches the first macvtap (same
// ifindex, MAC, state and address); the same request gets the same result.
func testMacvtapAddTwice(t *testing.T, version string) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, version)
	netns := cnitest.NewNS(t)
	conf := e.conf(cnitest.Conf{})
	a := e.mustAdd(netns, conf)
	snap := func() []any {
		mv := macvtapOf(g, netns)
		st, err := os.ReadFile(filepath.Join(e.stateDir, a.containerID+":net1.json"))
		g.Expect(err).NotTo(HaveOccurred())
		return []any{mv.Attrs().Index, mv.Attrs().HardwareAddr.String(), string(st), cnitest.Allocations(t, e.ipamDir, e.br.Name)}
	}
	before := snap()
	again := func(conf []byte, netnsPath string) ([]byte, error) {
		args := a.args(conf)
		args.Netns = netnsPath
		_, raw, err := testutils.CmdAddWithArgs(args, func() error { return plugin.Funcs(pluginOpts).Add(args) })
		return raw, err
	}
	raw, err := again(conf, netns.Path())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(MatchJSON(a.raw))
	_, err = again(e.conf(cnitest.Conf{MTU: 1500}), netns.Path())
	g.Expect(err).To(MatchError(ContainSubstring("with another network configuration: left as it is; DEL it before adding it again")))
	other := cnitest.NewNS(t)
	_, err = again(conf, other.Path())
	g.Expect(err).To(MatchError(ContainSubstring("with another CNI_NETNS")))
	g.Expect(cnitest.Links(t, other)).To(ConsistOf("lo"))
	g.Expect(snap()).To(Equal(before))
	if testutils.SpecVersionHasCHECK(version) {
		g.Expect(e.check(a)).To(Succeed())
	}

	// Its netns gone: a repeated ADD says so and DEL clears the record.
	path := netns.Path()
	cnitest.RemoveNS(netns)
	_, err = again(conf, path)
	g.Expect(err).To(MatchError(ContainSubstring("but its macvtap net1 is gone")))
	g.Expect(e.del(a, path)).To(Succeed())
	e.expectNothingLeft(g, nil)
}

// testMacvtapDeviceID: a deviceID from the device plugin ("tap<N>") gives
// the macvtap interface index N, so the kernel's /dev/tap<N> (what the
// device plugin handed the compute container) is this macvtap's character
// device; DEL removes it. Two attachments get distinct indexes and nodes.
func testMacvtapDeviceID(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	base := netconf.MinTapIndex + int(time.Now().UnixNano()%1000)*100
	var atts []*attachment
	for i := range 2 {
		netns := cnitest.NewNS(t)
		id := netconf.FormatDeviceID(base + i)
		a := e.mustAdd(netns, e.conf(cnitest.Conf{Extra: map[string]any{"deviceID": id, "pciBusID": id}}))
		atts = append(atts, a)
		mv := macvtapOf(g, netns)
		g.Expect(mv.Attrs().Index).To(Equal(base + i))
		dev := fmt.Sprintf("/dev/tap%d", base+i)
		var st unix.Stat_t
		g.Expect(unix.Stat(dev, &st)).To(Succeed(), "devtmpfs made %s", dev)
		g.Expect(st.Mode & unix.S_IFMT).To(BeEquivalentTo(unix.S_IFCHR))
		sysDev, err := os.ReadFile(fmt.Sprintf("/sys/class/macvtap/tap%d/dev", base+i))
		if err == nil { // the class directory is per netns; read it from the pod's when the host's lacks it
			g.Expect(string(sysDev)).To(Equal(fmt.Sprintf("%d:%d\n", unix.Major(st.Rdev), unix.Minor(st.Rdev))))
		}
		g.Expect(e.check(a)).To(Succeed())
	}
	for _, a := range atts {
		idx := macvtapOf(g, a.netns).Attrs().Index
		g.Expect(e.del(a, a.netns.Path())).To(Succeed())
		g.Eventually(func() error { _, err := os.Stat(fmt.Sprintf("/dev/tap%d", idx)); return err }, 5*time.Second).Should(MatchError(os.ErrNotExist))
		e.expectGone(g, a, true)
	}
	e.expectNothingLeft(g, nil)

	// The same index twice in one netns cannot be: refused, nothing left.
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{Extra: map[string]any{"deviceID": netconf.FormatDeviceID(base)}}))
	b, err := e.add(netns, e.conf(cnitest.Conf{Name: "fp-other", Extra: map[string]any{"deviceID": netconf.FormatDeviceID(base)}}), "")
	g.Expect(err).To(MatchError(ContainSubstring("names another attachment")), "%s", b.containerID)
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)
}

func testMacvtapMTULargerThanLower(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	netns := cnitest.NewNS(t)
	a, err := e.add(netns, e.conf(cnitest.Conf{MTU: 9216}), "")
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("mtu 9216 is larger than the MTU 9000 of macvtap lower device %s", e.br.Name))))
	var cniErr *types.Error
	g.Expect(errors.As(err, &cniErr)).To(BeTrue())
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns)
}

func testMacvtapMissingLower(t *testing.T) {
	testMissingBridge(t, netconf.DatapathMacvtap)
}

// testMacvtapUnmarkedLower: a lower device without the agent's marker (the
// node's own NIC, say) and the agent's own carrier peer are refused.
func testMacvtapUnmarkedLower(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.1.0")
	foreign := testutil.UniqueName("fpcf")
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: foreign, MTU: 9000}, PeerName: foreign + "p"})).To(Succeed())
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(foreign); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	for _, name := range []string{foreign, wellknown.LowerPeerName(e.br.Name)} {
		other := *e.br
		other.Name = name
		conf := other.NetConf(t, cnitest.Conf{CNIVersion: "1.1.0", StateDir: e.stateDir})
		netns := cnitest.NewNS(t)
		_, err := e.add(netns, conf, "")
		var cniErr *types.Error
		g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
		g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		g.Expect(cniErr.Msg).To(ContainSubstring(fmt.Sprintf("bridge %s (datapath Macvtap) was not made by the node agent fastpath-agent", name)))
		err = e.status(conf)
		g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
		g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrPluginNotAvailable))
		e.expectNothingLeft(g, netns)
	}
}

// testMacvtapForeignLink: a link named CNI_IFNAME that is not a macvtap (or
// is another attachment's) is left alone, and the failed ADD leaves nothing.
func testMacvtapForeignLink(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	netns := cnitest.NewNS(t)
	g.Expect(netns.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "net1"}})
	})).To(Or(Succeed(), MatchError(ContainSubstring("not supported"))))
	if len(cnitest.Links(t, netns)) == 1 { // no dummy driver: a veth end
		g.Expect(netns.Do(func(ns.NetNS) error {
			return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "net1"}, PeerName: "other"})
		})).To(Succeed())
	}
	before := cnitest.Links(t, netns)
	_, err := e.add(netns, e.conf(cnitest.Conf{}), "")
	g.Expect(err).To(MatchError(ContainSubstring("not a macvtap; left alone")))
	g.Expect(cnitest.Links(t, netns)).To(ConsistOf(before))
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(BeEmpty())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(BeEmpty())
}

// testMacvtapLeftover: a macvtap named CNI_IFNAME without an alias (an
// earlier ADD killed before it set the alias, whose record is gone) is
// reclaimed by the next ADD, which makes a new one.
func testMacvtapLeftover(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	netns := cnitest.NewNS(t)
	lower, err := netlink.LinkByName(e.br.Name)
	g.Expect(err).NotTo(HaveOccurred())
	old, err := macvtap.Create(netns, lower, macvtap.Spec{Name: "net1", MTU: 9000})
	g.Expect(err).NotTo(HaveOccurred())
	a, err := e.add(netns, e.conf(cnitest.Conf{}), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo", "net1"))
	g.Expect(macvtapOf(g, netns).Attrs().Index).NotTo(Equal(old.Attrs().Index), "a new macvtap")
	g.Expect(e.check(a)).To(Succeed())
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)
}

// testMacvtapReAddAfterUnfinishedAdd: an ADD that died after creating its
// macvtap and allocating an address, before setting the alias or finishing
// (emulated: the alias cleared, the record set back to incomplete), is
// reclaimed by the next ADD of the attachment.
func testMacvtapReAddAfterUnfinishedAdd(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	netns := cnitest.NewNS(t)
	conf := e.conf(cnitest.Conf{})
	a := e.mustAdd(netns, conf)
	store, err := state.New(e.stateDir)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 5 {
		rec, err := store.Load(a.containerID, a.ifName)
		g.Expect(err).NotTo(HaveOccurred())
		rec.Complete, rec.Result = false, nil
		g.Expect(store.Save(rec)).To(Succeed())
		if i%2 == 1 {
			g.Expect(netns.Do(func(ns.NetNS) error { return netlink.LinkSetAlias(macvtapOf(g, netns), "") })).To(Succeed())
		}
		g.Expect(e.check(a)).To(MatchError(ContainSubstring("its ADD did not complete")))
		args := a.args(conf)
		_, raw, err := testutils.CmdAddWithArgs(args, func() error { return plugin.Funcs(pluginOpts).Add(args) })
		g.Expect(err).NotTo(HaveOccurred(), "round %d", i)
		a.raw = raw
		g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(HaveLen(1))
		g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo", "net1"))
		g.Expect(e.check(a)).To(Succeed(), "round %d", i)
	}
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)
}

// testMacvtapOffloads: every offload is on on the macvtap (the agent turned
// them on on the lower device; the kernel keeps TSO, GSO, TX checksum on), and
// CHECK notices GRO turned off on the lower behind the plugin's back.
func testMacvtapOffloads(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{Offloads: map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true}}))
	g.Expect(ethtoolK(g, netns, "net1")).To(Equal(map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true}))
	g.Expect(e.check(a)).To(Succeed())
	out, err := exec.Command("ethtool", "-K", e.br.Name, "gro", "off").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(e.check(a)).To(MatchError(ContainSubstring("offloads of net1 differ: gro is off, want on")))
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)

	_, err = e.add(netns, e.conf(cnitest.Conf{Offloads: map[string]bool{"gro": false}}), "")
	g.Expect(err).To(MatchError(ContainSubstring("offloads.gro false is not possible on datapath Macvtap")))
	e.expectNothingLeft(g, netns)
}

// testMacvtapGC: GC removes the attachments of its network that are not
// valid (macvtap and address of one whose netns lives, the address of one
// whose netns is gone) and keeps the valid one and another network's.
func testMacvtapGC(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.1.0")
	conf := e.conf(cnitest.Conf{})
	nsA, nsB, nsC := cnitest.NewNS(t), cnitest.NewNS(t), cnitest.NewNS(t)
	keep := e.mustAdd(nsA, conf)
	stale := e.mustAdd(nsB, conf)
	gone := e.mustAdd(nsC, conf)
	other := e.mustAdd(cnitest.NewNS(t), e.conf(cnitest.Conf{Name: "fp-other"}))
	cnitest.RemoveNS(nsC)

	var m map[string]any
	g.Expect(json.Unmarshal(conf, &m)).To(Succeed())
	m["cni.dev/valid-attachments"] = []types.GCAttachment{{ContainerID: keep.containerID, IfName: "net1"}}
	gcConf, _ := json.Marshal(m)
	g.Expect(e.gc(gcConf)).To(Succeed())

	e.expectGone(g, stale, true)
	e.expectGone(g, gone, false)
	// One allocator for the lower device: other's address sits beside keep's.
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(keep.ip(), other.ip()))
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(HaveLen(2), "keep and other")
	g.Expect(cnitest.Links(t, other.netns)).To(ConsistOf("lo", "net1"))
	g.Expect(e.check(keep)).To(Succeed())
	g.Expect(e.del(keep, nsA.Path())).To(Succeed())
	g.Expect(e.del(other, other.netns.Path())).To(Succeed())
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(BeEmpty())
}

// testMacvtapStatus: 51 while the lower device has no carrier (its peer
// down), fine again once it has.
func testMacvtapStatus(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.1.0")
	conf := e.conf(cnitest.Conf{})
	g.Expect(e.status(conf)).To(Succeed())
	peer, err := netlink.LinkByName(wellknown.LowerPeerName(e.br.Name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(netlink.LinkSetDown(peer)).To(Succeed())
	err = e.status(conf)
	var cniErr *types.Error
	g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrLimitedConnectivity))
	g.Expect(cniErr.Msg).To(ContainSubstring("macvtap lower device " + e.br.Name + " is down or has no carrier"))
	g.Expect(netlink.LinkSetUp(peer)).To(Succeed())
	g.Eventually(func() error { return e.status(conf) }, 5*time.Second, 50*time.Millisecond).Should(Succeed())
}
