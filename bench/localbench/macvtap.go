package localbench

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/bench/topology"
)

// buildMacvtap wires the fastpath-macvtap path: the shortest kernel path a
// KubeVirt VM can have on one node (issue 13). The node-local lower device
// is one end of a veth pair <id>v<index>0/<id>v<index>1 that stays in the
// host namespace, as a node agent would own it (this kernel has macvlan and
// macvtap but no dummy driver; a veth needs its peer up for carrier, so
// both ends are up and the peer carries nothing). Each namespace gets a
// macvlan in bridge mode on that lower device as eth0, at v's MTU (the
// lower device has it too) with offloads on as the other fast paths have
// them. Frames between the two go macvlan to macvlan inside the lower
// device's macvlan port (bridge mode), never through the lower device's
// transmit path.
//
// EMULATED: a macvtap is a macvlan whose received frames go to a tap queue
// (/dev/tapN) that QEMU reads instead of an IP stack, so a namespace (which
// plays the guest) needs the macvlan; the forwarding between the two is the
// same kernel code (drivers/net/macvlan.c). It is wired by the benchmark;
// the CNI plugin's datapath Macvtap makes the same shape with macvtaps (whose
// frames reach the namespace's stack while no QEMU holds /dev/tapN) on the
// lower device the node agent makes (internal/datapath/bridge).
func (s *Setup) buildMacvtap(v variant, client, server *topology.NetNS) (string, error) {
	lower, peer := s.linkName("v", v, 0), s.linkName("v", v, 1)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: lower, MTU: v.mtu}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		return "", fmt.Errorf("failed to add the macvtap lower device, veth %s/%s: %w", lower, peer, err)
	}
	s.onClose("veth "+lower, func() error { return topology.DeleteHostLink(lower) })
	var parent netlink.Link
	for _, name := range []string{peer, lower} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return "", fmt.Errorf("failed to find %s: %w", name, err)
		}
		if err := netlink.LinkSetMTU(l, v.mtu); err != nil {
			return "", fmt.Errorf("failed to set MTU %d on %s: %w", v.mtu, name, err)
		}
		if err := setOffloads(name, true); err != nil {
			return "", err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return "", fmt.Errorf("failed to bring up %s: %w", name, err)
		}
		parent = l
	}
	ca, sa := addrs(v)
	for _, end := range []struct {
		n    *topology.NetNS
		addr netip.Prefix
	}{{client, ca}, {server, sa}} {
		if err := addMacvlan(parent, end.n, v.mtu); err != nil {
			return "", err
		}
		if err := configure(end.n, "eth0", v.mtu, end.addr, true); err != nil {
			return "", err
		}
	}
	return sa.Addr().String(), nil
}

// addMacvlan creates "eth0" in n: a bridge-mode macvlan on parent with MTU
// mtu. It goes with the namespace.
func addMacvlan(parent netlink.Link, n *topology.NetNS, mtu int) error {
	fd, err := os.Open(n.Path)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %s: %w", n.Path, err)
	}
	defer fd.Close()
	mv := &netlink.Macvlan{
		LinkAttrs: netlink.LinkAttrs{Name: "eth0", MTU: mtu, ParentIndex: parent.Attrs().Index, Namespace: netlink.NsFd(int(fd.Fd()))},
		Mode:      netlink.MACVLAN_MODE_BRIDGE,
	}
	if err := netlink.LinkAdd(mv); err != nil {
		return fmt.Errorf("failed to add bridge-mode macvlan eth0 on %s in %s (MTU %d): %w", parent.Attrs().Name, n.Name, mtu, err)
	}
	return nil
}
