package ovsdb

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func TestPortsAgainstOVS(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	socket := testutil.StartOVS(t)
	bridge := testutil.UniqueName("fpob")
	testutil.AddOVSBridge(t, socket, bridge, 9000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c, err := Connect(ctx, socket, testr.New(t))
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	g.Expect(c.Echo(ctx)).To(Succeed())

	mtu, err := c.BridgeMTU(ctx, bridge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mtu).To(Equal(9000))
	_, err = c.BridgeMTU(ctx, "fpob-none")
	g.Expect(err).To(MatchError(ErrBridgeNotFound))
	g.Expect(c.AddPort(ctx, "fpob-none", "x", nil, nil)).To(MatchError(ErrBridgeNotFound))

	// ovs-vswitchd cannot open a device that does not exist: AddPort says so
	// instead of leaving a dead port.
	missing := testutil.UniqueName("fpov")
	err = c.AddPort(ctx, bridge, missing, map[string]string{KeyOwner: Owner}, nil)
	g.Expect(err).To(MatchError(ContainSubstring("failed to attach " + missing + " to OVS bridge " + bridge + ": ovs-vswitchd: ")))
	g.Expect(c.DeletePort(ctx, missing)).To(Succeed())

	host := testutil.UniqueName("fpov")
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MTU: 9000}, PeerName: host + "p"}
	g.Expect(netlink.LinkAdd(veth)).To(Succeed())
	t.Cleanup(func() { _ = netlink.LinkDel(veth) })
	g.Expect(netlink.LinkSetUp(veth)).To(Succeed())
	ids := map[string]string{KeyOwner: Owner, KeyNetwork: "fp", KeyContainerID: "c1", KeyIfName: "net1"}
	g.Expect(c.AddPort(ctx, bridge, host, ids, map[string]string{KeyAttachedMAC: "02:00:00:00:00:01"})).To(Succeed())
	on, err := c.PortOnBridge(ctx, bridge, host)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeTrue())
	i, err := c.Interface(ctx, host)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*i.Ofport).To(BeNumerically(">", 0))
	g.Expect(i.ExternalIDs).To(HaveKeyWithValue(KeyAttachedMAC, "02:00:00:00:00:01"))

	// A second AddPort of the same name replaces the first.
	g.Expect(c.AddPort(ctx, bridge, host, ids, nil)).To(Succeed())
	ports, err := c.Ports(ctx, bridge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ports).To(HaveLen(1))
	g.Expect(ports[0].Name).To(Equal(host))
	g.Expect(ports[0].ExternalIDs).To(Equal(ids))

	g.Expect(c.DeletePort(ctx, host)).To(Succeed())
	g.Expect(c.DeletePort(ctx, host)).To(Succeed(), "deleting a missing port is not an error")
	g.Eventually(func() ([]Port, error) { return c.Ports(ctx, bridge) }).Should(BeEmpty())
	on, err = c.PortOnBridge(ctx, bridge, host)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on).To(BeFalse())
}
