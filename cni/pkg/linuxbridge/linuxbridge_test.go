package linuxbridge

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func TestBridgeVerifyPorts(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	netns, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	g.Expect(netns.Do(func(ns.NetNS) error {
		g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "fplbbr"}})).To(Succeed())
		g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fplba"}, PeerName: "fplbb"})).To(Succeed())

		br, err := Bridge("fplbbr")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = Bridge("fplba")
		g.Expect(err).To(MatchError("failed to use bridge fplba: it is a veth link, not a Linux bridge"))
		_, err = Bridge("fplbnone")
		g.Expect(err).To(MatchError(ErrBridgeNotFound))

		g.Expect(Verify("fplba", "fplbbr")).To(MatchError(ContainSubstring("fplba: it is not a port of bridge fplbbr")))
		veth, err := netlink.LinkByName("fplba")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(netlink.LinkSetMaster(veth, br)).To(Succeed())
		g.Expect(Verify("fplba", "fplbbr")).To(Succeed())
		ports, err := Ports(br)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ports).To(HaveLen(1))
		g.Expect(ports[0].Attrs().Name).To(Equal("fplba"))
		g.Expect(Verify("fplbnone", "fplbbr")).To(MatchError(ContainSubstring("failed to look up fplbnone")))
		return nil
	})).To(Succeed())
}
