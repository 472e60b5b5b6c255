package datapath_test

import (
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestHostEndSetLink: one request enslaves the host end, names the
// attachment in its alias and sets it up; a missing link is an error naming
// it.
func TestHostEndSetLink(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	netns, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	g.Expect(netns.Do(func(ns.NetNS) error {
		g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "fpdpbr"}})).To(Succeed())
		g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fpdpa"}, PeerName: "fpdpb"})).To(Succeed())
		br, err := netlink.LinkByName("fpdpbr")
		g.Expect(err).NotTo(HaveOccurred())
		veth, err := netlink.LinkByName("fpdpa")
		g.Expect(err).NotTo(HaveOccurred())

		host := datapath.HostEnd{Index: veth.Attrs().Index, Name: "fpdpa", Alias: "fastpath/fp-test/c1/net1"}
		g.Expect(host.SetLink(0, false)).To(Succeed())
		veth, err = netlink.LinkByName("fpdpa")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(veth.Attrs().Alias).To(Equal("fastpath/fp-test/c1/net1"))
		g.Expect(veth.Attrs().MasterIndex).To(BeZero())
		g.Expect(veth.Attrs().Flags & net.FlagUp).To(BeZero())

		g.Expect(host.SetLink(br.Attrs().Index, true)).To(Succeed())
		veth, err = netlink.LinkByName("fpdpa")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(veth.Attrs().MasterIndex).To(Equal(br.Attrs().Index))
		g.Expect(veth.Attrs().Flags & net.FlagUp).NotTo(BeZero())

		gone := datapath.HostEnd{Index: 1 << 30, Name: "fpdpnone"}
		g.Expect(gone.SetLink(br.Attrs().Index, true)).To(MatchError(ContainSubstring("failed to set up host veth fpdpnone")))
		return nil
	})).To(Succeed())
}
