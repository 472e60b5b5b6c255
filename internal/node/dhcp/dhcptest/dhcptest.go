// Package dhcptest builds what the root tests of the DHCP responder need: a
// Linux bridge in the test's network namespace and a "guest" network
// namespace whose interface is a veth port of it, DHCP clients in that
// namespace (one of an unbound guest, one of a bound guest renewing its
// lease), and a count of the DHCP messages the bridge carries. Everything is removed when the test ends, failed or not.
package dhcptest

import (
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// GuestIf is the guest's interface name in its namespace.
const GuestIf = "eth1"

// Guest is a network namespace with GuestIf, a veth whose other end
// (HostIf) is a port of Bridge.
type Guest struct {
	Bridge string
	HostIf string
	NS     ns.NetNS
	MAC    net.HardwareAddr
}

// NewGuest makes a bridge (up, MTU mtu, no address) and a guest namespace
// whose GuestIf has mac and mtu. The test must run as root.
func NewGuest(t *testing.T, mac net.HardwareAddr, mtu int) *Guest {
	t.Helper()
	testutil.RequireRoot(t)
	g := &Guest{Bridge: testutil.UniqueName("fpdb-"), HostIf: testutil.UniqueName("fpdh-"), MAC: mac}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: g.Bridge, MTU: mtu}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatalf("failed to add bridge %s: %v", g.Bridge, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(br) })
	guest, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("failed to make a network namespace: %v", err)
	}
	g.NS = guest
	t.Cleanup(func() {
		guest.Close()
		_ = testutils.UnmountNS(guest)
	})
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: g.HostIf, MTU: mtu, MasterIndex: 0}, PeerName: GuestIf,
		PeerHardwareAddr: mac, PeerNamespace: netlink.NsFd(int(guest.Fd()))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("failed to add veth %s: %v", g.HostIf, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(veth) })
	for _, step := range []func() error{
		func() error { return netlink.LinkSetMaster(veth, br) },
		func() error { return netlink.LinkSetUp(veth) },
		func() error { return netlink.LinkSetUp(br) },
		func() error {
			return guest.Do(func(ns.NetNS) error {
				l, err := netlink.LinkByName(GuestIf)
				if err != nil {
					return err
				}
				if err := netlink.LinkSetMTU(l, mtu); err != nil {
					return err
				}
				return netlink.LinkSetUp(l)
			})
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("failed to set up bridge %s and guest: %v", g.Bridge, err)
		}
	}
	// A link transmits only once the kernel's link watch has seen its
	// carrier (until then its queue drops): wait for all three to be up.
	deadline := time.Now().Add(10 * time.Second)
	for !g.operUp(t) {
		if time.Now().After(deadline) {
			t.Fatalf("bridge %s, %s and the guest's %s are not all operationally up after 10s", g.Bridge, g.HostIf, GuestIf)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	return g
}

// operUp reports whether the bridge, the host veth and GuestIf are all
// operationally up.
func (g *Guest) operUp(t *testing.T) bool {
	up := func(name string) bool {
		l, err := netlink.LinkByName(name)
		return err == nil && l.Attrs().OperState == netlink.OperUp
	}
	guestUp := false
	_ = g.NS.Do(func(ns.NetNS) error {
		guestUp = up(GuestIf)
		return nil
	})
	return guestUp && up(g.HostIf) && up(g.Bridge)
}

// Client returns a DHCP client on GuestIf in the guest namespace whose
// messages carry chaddr mac (the interface's MAC when nil), each try
// waiting timeout for an answer; it is closed when the test ends.
func (g *Guest) Client(t *testing.T, mac net.HardwareAddr, timeout time.Duration) *nclient4.Client {
	t.Helper()
	opts := []nclient4.ClientOpt{nclient4.WithTimeout(timeout), nclient4.WithRetry(3)}
	if mac != nil {
		opts = append(opts, nclient4.WithHWAddr(mac))
	}
	var c *nclient4.Client
	err := g.NS.Do(func(ns.NetNS) error {
		var err error
		c, err = nclient4.New(GuestIf, opts...)
		return err
	})
	if err != nil {
		t.Fatalf("failed to start a DHCP client in the guest: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
