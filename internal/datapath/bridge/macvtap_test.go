package bridge_test

import (
	"errors"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func TestLowerPeerName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(wellknown.LowerPeerName("fastpath0")).To(HaveLen(15))
	g.Expect(wellknown.LowerPeerName("fastpath0")).To(HavePrefix("fpl"))
	g.Expect(wellknown.LowerPeerName("fastpath0")).To(Equal(wellknown.LowerPeerName("fastpath0")))
	g.Expect(wellknown.LowerPeerName("fastpath0")).NotTo(Equal(wellknown.LowerPeerName("fastpath1")))
}

// TestMacvtapLowerCreatedRaisedAndIdempotent: the agent makes the lower
// device as a marked veth with a marked peer, both up with the MTU, carries
// two bridge-mode macvtaps on it, changes its MTU both ways, and an agent
// restart changes nothing.
func TestMacvtapLowerCreatedRaisedAndIdempotent(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	m := linuxManager(t)
	name := testutil.UniqueName("fpbrm")
	deleteLinkAtCleanup(t, name)

	spec := bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000}
	st, err := m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeTrue())
	g.Expect(st.Managed).To(BeTrue())
	g.Expect(st.Datapath).To(Equal(fastpathv1alpha1.DatapathMacvtap))
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)

	link, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Type()).To(Equal("veth"))
	g.Expect(link.Attrs().MTU).To(Equal(9000))
	g.Expect(link.Attrs().Alias).To(Equal(wellknown.MarkerKey + "=" + m.Marker))
	g.Expect(link.Attrs().Flags & net.FlagUp).NotTo(BeZero())
	g.Expect(link.Attrs().OperState).To(Equal(netlink.LinkOperState(netlink.OperUp)), "the lower device has carrier")
	peer, err := netlink.LinkByName(wellknown.LowerPeerName(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer.Attrs().MTU).To(Equal(9000))
	g.Expect(peer.Attrs().Alias).To(Equal(bridge.PeerMarkerKey + "=" + m.Marker))
	index := link.Attrs().Index
	got, err := offload.Read(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true}), "a veth starts with GRO off")

	// Two macvtaps on it, as the CNI plugin makes them (here in the host
	// namespace): they are up with carrier, at the lower's MTU.
	for _, n := range []string{name + "a", name + "b"} {
		g.Expect(netlink.LinkAdd(&netlink.Macvtap{Macvlan: netlink.Macvlan{
			LinkAttrs: netlink.LinkAttrs{Name: n, MTU: 9000, ParentIndex: index}, Mode: netlink.MACVLAN_MODE_BRIDGE}})).To(Succeed())
		deleteLinkAtCleanup(t, n)
		l, err := netlink.LinkByName(n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(netlink.LinkSetUp(l)).To(Succeed())
		l, err = netlink.LinkByName(n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Attrs().OperState).To(Equal(netlink.LinkOperState(netlink.OperUp)), "macvtap %s has carrier", n)
		got, err := offload.Read(n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true}), "macvtap %s has the lower's GRO", n)
	}

	// An agent restart: nothing new.
	st, err = (&bridge.Manager{Marker: m.Marker}).Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeFalse())
	g.Expect(st.Ready(spec)).To(BeTrue())
	link, err = netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Attrs().Index).To(Equal(index))

	// Raised, then lowered below the macvtaps' MTU: the kernel lowers them too.
	for _, mtu := range []int{65535, 1500} {
		spec.MTU = mtu
		st, err = m.Ensure(ctx(t), spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Ready(spec)).To(BeTrue(), "MTU %d: %+v", mtu, st)
		peer, err = netlink.LinkByName(wellknown.LowerPeerName(name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(peer.Attrs().MTU).To(Equal(mtu))
	}
	mv, err := netlink.LinkByName(name + "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mv.Attrs().MTU).To(Equal(1500))

	// The peer set down (by hand): not ready, and Ensure brings it up again.
	g.Expect(netlink.LinkSetDown(peer)).To(Succeed())
	managed, err := m.Managed(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managed).To(HaveLen(1))
	g.Expect(managed[0].Name).To(Equal(name))
	g.Expect(managed[0].Datapath).To(Equal(fastpathv1alpha1.DatapathMacvtap))
	g.Expect(managed[0].Up).To(BeFalse())
	g.Expect(managed[0].Message).To(ContainSubstring("no carrier"))
	st, err = m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)
}

// TestMacvtapLowerNeverAdopted: a veth (or another link) of the lower's
// name that the agent did not make is left alone, and so is a foreign link
// holding the peer's name.
func TestMacvtapLowerNeverAdopted(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	m := linuxManager(t)

	name := testutil.UniqueName("fpbrm")
	deleteLinkAtCleanup(t, name)
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1500}, PeerName: name + "p"})).To(Succeed())
	spec := bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000}
	st, err := m.Ensure(ctx(t), spec)
	g.Expect(errors.Is(err, bridge.ErrNotMarked)).To(BeTrue(), "%v", err)
	g.Expect(st.Managed).To(BeFalse())
	link, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Attrs().MTU).To(Equal(1500), "left unchanged")

	br := testutil.UniqueName("fpbrm")
	deleteLinkAtCleanup(t, br)
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br}})).To(Succeed())
	_, err = m.Ensure(ctx(t), bridge.Spec{Name: br, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000})
	g.Expect(err).To(MatchError(ContainSubstring(`is a "bridge", not the veth`)))

	// The peer's name is taken by someone else's link: nothing is created.
	lower := testutil.UniqueName("fpbrm")
	deleteLinkAtCleanup(t, lower)
	squatter := wellknown.LowerPeerName(lower)
	deleteLinkAtCleanup(t, squatter)
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: squatter}})).To(Succeed())
	_, err = m.Ensure(ctx(t), bridge.Spec{Name: lower, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000})
	g.Expect(err).To(MatchError(ContainSubstring("not made by the agent")))
	_, err = netlink.LinkByName(lower)
	g.Expect(err).To(HaveOccurred(), "no lower device was made")
}

// TestMacvtapLowerStalePeerReclaimed: an agent killed after renaming the
// peer but before renaming the lower leaves a marked peer (and a marked
// fpnew<hex> lower end); the next Ensure replaces the pair.
func TestMacvtapLowerStalePeerReclaimed(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	m := linuxManager(t)
	lower := testutil.UniqueName("fpbrm")
	deleteLinkAtCleanup(t, lower)
	tmp := testutil.UniqueName("fpnew")
	deleteLinkAtCleanup(t, tmp)
	peer := wellknown.LowerPeerName(lower)
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: tmp}, PeerName: peer})).To(Succeed())
	p, err := netlink.LinkByName(peer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(netlink.LinkSetAlias(p, bridge.PeerMarkerKey+"="+m.Marker)).To(Succeed())

	spec := bridge.Spec{Name: lower, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000}
	st, err := m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeTrue())
	g.Expect(st.Ready(spec)).To(BeTrue())
	_, err = netlink.LinkByName(tmp)
	g.Expect(err).To(HaveOccurred(), "the interrupted pair is gone")
}
