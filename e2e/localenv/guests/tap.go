package guests

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fastpath-io/fastpath/bench/topology"
)

// addTap creates the tap virt-launcher makes for a guest NIC in the launcher
// namespace: multi-queue when the VMI asks networkInterfaceMultiqueue (so
// libvirt can open one queue per virtio-net queue pair; a single-queue tap
// refuses that with EINVAL, and a multi-queue one refuses a single open),
// MTU mtu, a port of bridge, up. A leftover of the same name is replaced.
func addTap(ns *topology.NetNS, tap, bridge string, mtu int, multiqueue bool) error {
	_ = deleteLink(ns, tap)
	add := []string{"ip", "tuntap", "add", "dev", tap, "mode", "tap"}
	if multiqueue {
		add = append(add, "multi_queue")
	}
	steps := [][]string{
		add,
		{"ip", "link", "set", tap, "mtu", strconv.Itoa(mtu), "master", bridge, "up"},
	}
	for _, s := range steps {
		if _, err := ns.Exec(s...); err != nil {
			_ = deleteLink(ns, tap)
			return fmt.Errorf("failed to add tap %s to %s: %w", tap, bridge, err)
		}
	}
	return nil
}

// ensureServerIP gives bridge the DHCP server address (as a /32 unless the
// bridge already holds it), as KubeVirt puts its fake server address on the
// in-pod bridge, so that replies have a source address.
func ensureServerIP(ns *topology.NetNS, bridge string, ip netip.Addr) error {
	addrs, err := ns.Addrs(bridge)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.IP.String() == ip.String() {
			return nil
		}
	}
	if _, err := ns.Exec("ip", "addr", "add", ip.String()+"/32", "dev", bridge); err != nil {
		return fmt.Errorf("failed to give %s the DHCP server address %s: %w", bridge, ip, err)
	}
	return nil
}

// deleteLink deletes a link of the namespace; a missing one is no error.
func deleteLink(ns *topology.NetNS, name string) error {
	if ns == nil {
		return nil
	}
	if _, err := ns.Link(name); err != nil {
		return nil
	}
	if out, err := ns.Exec("ip", "link", "del", name); err != nil && !strings.Contains(string(out), "Cannot find") {
		return err
	}
	return nil
}
