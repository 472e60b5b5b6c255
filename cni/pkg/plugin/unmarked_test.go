package plugin_test

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// The plugin attaches only to bridges the node agent made and marked: given a
// netconf naming any other bridge (the node's cni0, br-ex, br-int), ADD fails
// with a CNI error naming the bridge, leaves nothing behind, and the bridge's
// MTU and ports are unchanged.

func TestCNIMarkerIsTheAgents(t *testing.T) {
	NewWithT(t).Expect(cnitest.BridgeMarker).To(HavePrefix(wellknown.MarkerKey + "="))
}

func TestUnmarkedLinuxBridgeIsRefused(t *testing.T) {
	testutil.RequireRoot(t)
	testUnmarkedBridgeIsRefused(t, netconf.DatapathLinuxBridge, func(g *WithT, e *env) {
		l, err := netlink.LinkByName(e.br.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(netlink.LinkSetAlias(l, "")).To(Succeed())
		port := testutil.UniqueName("fpcp")
		g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: l.Attrs().Index}, PeerName: port + "p"})).To(Succeed())
		t.Cleanup(func() {
			if l, err := netlink.LinkByName(port); err == nil {
				_ = netlink.LinkDel(l)
			}
		})
	})
}

func TestUnmarkedOVSBridgeIsRefused(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	testUnmarkedBridgeIsRefused(t, netconf.DatapathOVS, func(g *WithT, e *env) {
		port := testutil.UniqueName("fpcp")
		out, err := exec.Command("ovs-vsctl", "--db="+e.br.OVSSocket, "--timeout=30",
			"remove", "Bridge", e.br.Name, "external_ids", wellknown.MarkerKey,
			"--", "add-port", e.br.Name, port, "--", "set", "Interface", port, "type=internal").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	})
}

func testUnmarkedBridgeIsRefused(t *testing.T, datapath string, unmark func(*WithT, *env)) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.0.0")
	unmark(g, e)
	portsBefore := e.br.Ports(t)
	g.Expect(portsBefore).To(HaveLen(1))
	mtuBefore := mtuOf(g, e.br.Name)
	conf := e.conf(cnitest.Conf{})
	netns := cnitest.NewNS(t)

	a, err := e.add(netns, conf, "")
	var cniErr *types.Error
	g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
	g.Expect(cniErr.Msg).To(And(ContainSubstring("bridge "+e.br.Name), ContainSubstring("was not made by the node agent fastpath-agent"),
		ContainSubstring("refusing to attach")))

	e.expectGone(g, a, true)
	g.Expect(cnitest.StateFiles(t, e.stateDir)).To(BeEmpty())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(BeEmpty())
	g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo"))
	g.Expect(e.br.Ports(t)).To(Equal(portsBefore), "ports unchanged")
	g.Expect(mtuOf(g, e.br.Name)).To(Equal(mtuBefore), "MTU unchanged")
}

func mtuOf(g *WithT, name string) int {
	l, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	return l.Attrs().MTU
}
