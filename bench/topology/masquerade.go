package topology

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Defaults of the masquerade shape. The guest network and interface names are
// KubeVirt's (virt-launcher's masquerade binding: k6t-eth0 at 10.0.2.1/24,
// guest 10.0.2.2); the link-local gateway is Calico's convention for routed
// pod networks (169.254.1.1, answered by the host end of the pod's veth).
const (
	// DefaultPodIfName is the pod interface of the cluster network.
	DefaultPodIfName = "eth0"
	// DefaultPodMTU in bytes: the common cluster MTU without an overlay, and
	// the baseline of docs/design.md §5.2 (baseline-masquerade).
	DefaultPodMTU = 1500
	// MasqueradeBridge is virt-launcher's in-pod bridge for the masquerade binding.
	MasqueradeBridge = "k6t-eth0"
	// MasqueradeNATTable is the nftables table (family ip) holding the rules.
	MasqueradeNATTable = "nat"
)

var (
	// DefaultGuestCIDR is KubeVirt's default masquerade guest network
	// (virtv1.DefaultVMCIDR): gateway .1 on k6t-eth0, guest .2.
	DefaultGuestCIDR = netip.MustParsePrefix("10.0.2.0/24")
	// PodGateway is the link-local next hop a pod routes to; the host end of
	// its veth answers for it (a permanent neighbour entry here).
	PodGateway = netip.MustParseAddr("169.254.1.1")
)

// MasqueradeOptions describe one endpoint's default pod-network interface.
type MasqueradeOptions struct {
	// HostIfName is the host end of the veth: 1-15 characters, unique on the host.
	HostIfName string
	// PodIfName is the interface in the namespace; default DefaultPodIfName.
	PodIfName string
	// PodIP is the endpoint's IPv4 pod IP; the host routes it (/32) to HostIfName.
	PodIP netip.Addr
	// MTU of both veth ends in bytes; default DefaultPodMTU.
	MTU int
	// GuestCIDR is the masquerade guest network (IPv4, at most /30); default
	// DefaultGuestCIDR.
	GuestCIDR netip.Prefix
	// Guest, when set, is the guest's own namespace behind the launcher (ns):
	// KubeVirt's full shape (see AddMasquerade). Nil collapses launcher and
	// guest into ns.
	Guest *NetNS
	// GuestIfName is the guest's interface with Guest set; default "eth0".
	GuestIfName string
	// ExternalGuest builds the launcher side of the full shape (only the
	// gateway on k6t-eth0, forwarding, TX checksum off) for a real guest
	// whose tap "tap0" the caller adds to k6t-eth0 and addresses by DHCP
	// (e2e/localenv/guests). Exclusive with Guest.
	ExternalGuest bool
}

// Masquerade is a wired default pod-network interface (see the package doc).
type Masquerade struct {
	// NetNS is the endpoint namespace.
	NetNS *NetNS
	// HostIfName and PodIfName are the two veth ends.
	HostIfName string
	PodIfName  string
	// PodIP is the pod IP, the address other endpoints connect to.
	PodIP netip.Addr
	// GatewayIP is k6t-eth0's address (the guest's gateway, .1 of GuestCIDR).
	GatewayIP netip.Addr
	// GuestIP is the emulated guest address (.2 of GuestCIDR), NATed to PodIP.
	GuestIP netip.Addr
	// MTU of both veth ends in bytes.
	MTU int
	// PodMAC is the MAC of PodIfName.
	PodMAC string
	// Guest and GuestIfName are the guest namespace and its interface (MAC
	// GuestMAC), nil and "" in the collapsed shape.
	Guest       *NetNS
	GuestIfName string
	GuestMAC    string
	// TapName is the launcher end of the guest's veth ("tap0"), or the real
	// guest's tap with ExternalGuest; "" in the collapsed shape.
	TapName string
	// external is MasqueradeOptions.ExternalGuest.
	external bool
}

// AddMasquerade wires the masquerade-shaped pod interface into n, the
// launcher namespace: a veth from the host, the pod IP /32 with a host route,
// forwarding on the host end, the k6t-eth0 bridge with the gateway address,
// the default route through 169.254.1.1, and KubeVirt's nftables masquerade
// rules. Everything it made is removed again when a step fails.
//
// With o.Guest set it builds KubeVirt's whole shape: the guest is its own
// namespace behind a veth whose launcher end "tap0" is a port of k6t-eth0
// (in KubeVirt a tap device to QEMU), the guest interface has 10.0.2.2 and a
// default route via 10.0.2.1, the launcher forwards (net.ipv4.ip_forward in
// its namespace), and k6t-eth0 has TX checksum offload off as virt-launcher
// sets it (pkg/network/setup/netpod, masqueradeBindingSpec: Ethtool
// TxChecksum false), so every packet routed to the guest is checksummed and
// segmented to the pod MTU in software, as on a KubeVirt node.
//
// Without o.Guest the guest is collapsed into n: 10.0.2.2 is a local address
// on k6t-eth0 and the default route prefers it as source, so connections
// still cross both NAT rules, but nothing leaves through k6t-eth0 (no
// software checksum or segmentation): an optimistic baseline.
func AddMasquerade(n *NetNS, o MasqueradeOptions) (*Masquerade, error) {
	if o.PodIfName == "" {
		o.PodIfName = DefaultPodIfName
	}
	if o.MTU == 0 {
		o.MTU = DefaultPodMTU
	}
	if !o.GuestCIDR.IsValid() {
		o.GuestCIDR = DefaultGuestCIDR
	}
	if o.Guest != nil && o.GuestIfName == "" {
		o.GuestIfName = DefaultPodIfName
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	gw := o.GuestCIDR.Masked().Addr().Next()
	m := &Masquerade{
		NetNS: n, HostIfName: o.HostIfName, PodIfName: o.PodIfName, PodIP: o.PodIP,
		GatewayIP: gw, GuestIP: gw.Next(), MTU: o.MTU, Guest: o.Guest, GuestIfName: o.GuestIfName,
		external: o.ExternalGuest,
	}
	if o.Guest != nil || o.ExternalGuest {
		m.TapName = "tap0"
	}
	success := false
	defer func() {
		if !success {
			_ = m.Remove()
		}
	}()
	if err := m.addVeth(o.GuestCIDR.Bits()); err != nil {
		return nil, err
	}
	if m.Guest != nil {
		if err := m.addGuest(o.GuestCIDR.Bits()); err != nil {
			return nil, err
		}
	}
	if m.external {
		if err := m.NetNS.Do(func() error {
			if err := setSysctl("net/ipv4/ip_forward", "1"); err != nil {
				return err
			}
			return txChecksumOff(MasqueradeBridge)
		}); err != nil {
			return nil, fmt.Errorf("failed to configure the launcher %s: %w", m.NetNS.Name, err)
		}
	}
	if err := m.addNAT(); err != nil {
		return nil, err
	}
	success = true
	return m, nil
}

func (o MasqueradeOptions) validate() error {
	if o.ExternalGuest && o.Guest != nil {
		return fmt.Errorf("failed to validate masquerade options: Guest and ExternalGuest are exclusive")
	}
	if o.HostIfName == "" || len(o.HostIfName) > 15 {
		return fmt.Errorf("failed to validate masquerade options: HostIfName %q must be 1-15 characters", o.HostIfName)
	}
	if len(o.PodIfName) > 15 {
		return fmt.Errorf("failed to validate masquerade options: PodIfName %q must be at most 15 characters", o.PodIfName)
	}
	if len(o.GuestIfName) > 15 {
		return fmt.Errorf("failed to validate masquerade options: GuestIfName %q must be at most 15 characters", o.GuestIfName)
	}
	if !o.PodIP.Is4() {
		return fmt.Errorf("failed to validate masquerade options: PodIP %s must be an IPv4 address", o.PodIP)
	}
	if o.MTU < 576 || o.MTU > 65535 {
		return fmt.Errorf("failed to validate masquerade options: MTU %d must be 576-65535", o.MTU)
	}
	if !o.GuestCIDR.Addr().Is4() || o.GuestCIDR.Bits() > 30 {
		return fmt.Errorf("failed to validate masquerade options: GuestCIDR %s must be IPv4 with room for a gateway and a guest (at most /30)", o.GuestCIDR)
	}
	return nil
}

func (m *Masquerade) addVeth(guestBits int) error {
	nsh, err := netns.GetFromPath(m.NetNS.Path)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %s: %w", m.NetNS.Path, err)
	}
	defer nsh.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: m.HostIfName, MTU: m.MTU},
		PeerName:      m.PodIfName,
		PeerNamespace: netlink.NsFd(int(nsh)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("failed to add veth %s (peer %s in %s): %w", m.HostIfName, m.PodIfName, m.NetNS.Name, err)
	}
	host, err := netlink.LinkByName(m.HostIfName)
	if err != nil {
		return fmt.Errorf("failed to find veth %s: %w", m.HostIfName, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("failed to bring up %s: %w", m.HostIfName, err)
	}
	if err := setSysctl("net/ipv4/conf/"+m.HostIfName+"/forwarding", "1"); err != nil {
		return err
	}
	if err := netlink.RouteAdd(&netlink.Route{
		LinkIndex: host.Attrs().Index,
		Dst:       prefixNet(netip.PrefixFrom(m.PodIP, 32)),
		Scope:     netlink.SCOPE_LINK,
	}); err != nil {
		return fmt.Errorf("failed to add host route %s/32 dev %s: %w", m.PodIP, m.HostIfName, err)
	}
	hostMAC := host.Attrs().HardwareAddr

	return m.NetNS.withHandle(func(h *netlink.Handle) error {
		pod, err := h.LinkByName(m.PodIfName)
		if err != nil {
			return fmt.Errorf("failed to find %s in %s: %w", m.PodIfName, m.NetNS.Name, err)
		}
		// The peer does not take the MTU of the request on every kernel: set it.
		if err := h.LinkSetMTU(pod, m.MTU); err != nil {
			return fmt.Errorf("failed to set MTU %d on %s in %s: %w", m.MTU, m.PodIfName, m.NetNS.Name, err)
		}
		m.PodMAC = pod.Attrs().HardwareAddr.String()
		if err := h.AddrAdd(pod, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(m.PodIP, 32))}); err != nil {
			return fmt.Errorf("failed to add %s/32 to %s in %s: %w", m.PodIP, m.PodIfName, m.NetNS.Name, err)
		}
		if err := h.LinkSetUp(pod); err != nil {
			return fmt.Errorf("failed to bring up %s in %s: %w", m.PodIfName, m.NetNS.Name, err)
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: MasqueradeBridge, MTU: m.MTU}}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("failed to add bridge %s in %s: %w", MasqueradeBridge, m.NetNS.Name, err)
		}
		local := []netip.Addr{m.GatewayIP, m.GuestIP}
		if m.Guest != nil || m.external {
			local = local[:1]
		}
		for _, a := range local {
			if err := h.AddrAdd(br, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(a, guestBits))}); err != nil {
				return fmt.Errorf("failed to add %s/%d to %s in %s: %w", a, guestBits, MasqueradeBridge, m.NetNS.Name, err)
			}
		}
		if err := h.LinkSetUp(br); err != nil {
			return fmt.Errorf("failed to bring up %s in %s: %w", MasqueradeBridge, m.NetNS.Name, err)
		}
		gw := net.IP(PodGateway.AsSlice())
		if err := h.RouteAdd(&netlink.Route{
			LinkIndex: pod.Attrs().Index,
			Dst:       prefixNet(netip.PrefixFrom(PodGateway, 32)),
			Scope:     netlink.SCOPE_LINK,
		}); err != nil {
			return fmt.Errorf("failed to add route %s dev %s in %s: %w", PodGateway, m.PodIfName, m.NetNS.Name, err)
		}
		if err := h.NeighAdd(&netlink.Neigh{
			LinkIndex:    pod.Attrs().Index,
			Family:       netlink.FAMILY_V4,
			State:        netlink.NUD_PERMANENT,
			IP:           gw,
			HardwareAddr: hostMAC,
		}); err != nil {
			return fmt.Errorf("failed to add neighbour %s lladdr %s on %s in %s: %w", PodGateway, hostMAC, m.PodIfName, m.NetNS.Name, err)
		}
		def := &netlink.Route{LinkIndex: pod.Attrs().Index, Gw: gw}
		if m.Guest == nil && !m.external {
			def.Src = net.IP(m.GuestIP.AsSlice())
		}
		if err := h.RouteAdd(def); err != nil {
			return fmt.Errorf("failed to add default route via %s in %s: %w", PodGateway, m.NetNS.Name, err)
		}
		return nil
	})
}

// NATRules returns the nftables script AddMasquerade loads into the
// namespace: KubeVirt virt-launcher's IPv4 masquerade rules for an interface
// without declared ports (pkg/network/setup/netpod/masquerade, setupNATByFamily).
func (m *Masquerade) NATRules() string {
	return fmt.Sprintf(`table ip %[1]s {
	chain prerouting {
		type nat hook prerouting priority -100;
		iifname %[2]q counter jump KUBEVIRT_PREINBOUND
	}
	chain input {
		type nat hook input priority 100;
	}
	chain output {
		type nat hook output priority -100;
		ip daddr { 127.0.0.1 } counter dnat to %[3]s
	}
	chain postrouting {
		type nat hook postrouting priority 100;
		ip saddr %[3]s counter masquerade
		oifname %[4]q counter jump KUBEVIRT_POSTINBOUND
	}
	chain KUBEVIRT_PREINBOUND {
		counter dnat to %[3]s
	}
	chain KUBEVIRT_POSTINBOUND {
		ip saddr { 127.0.0.1 } counter snat to %[5]s
	}
}
`, MasqueradeNATTable, m.PodIfName, m.GuestIP, MasqueradeBridge, m.GatewayIP)
}

func (m *Masquerade) addNAT() error {
	if _, err := m.NetNS.ExecInput([]byte(m.NATRules()), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("failed to load the masquerade nftables rules: %w", err)
	}
	return nil
}

// Remove deletes the host veth (its peer and the host route go with it), the
// k6t-eth0 bridge and the nftables table. Missing pieces are not errors, so
// it also cleans up after a failed AddMasquerade or a deleted namespace.
func (m *Masquerade) Remove() error {
	var errs []error
	if err := DeleteHostLink(m.HostIfName); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat(m.NetNS.Path); err == nil {
		if err := m.NetNS.withHandle(func(h *netlink.Handle) error {
			for _, name := range []string{m.TapName, MasqueradeBridge, m.PodIfName} {
				if name == "" {
					continue
				}
				if l, err := h.LinkByName(name); err == nil {
					if err := h.LinkDel(l); err != nil {
						return fmt.Errorf("failed to delete %s: %w", name, err)
					}
				}
			}
			return nil
		}); err != nil {
			errs = append(errs, fmt.Errorf("failed to clean up network namespace %s: %w", m.NetNS.Name, err))
		}
		if out, err := m.NetNS.Exec("nft", "list", "tables"); err == nil && strings.Contains(string(out), "table ip "+MasqueradeNATTable+"\n") {
			if _, err := m.NetNS.Exec("nft", "delete", "table", "ip", MasqueradeNATTable); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// DeleteHostLink deletes the link name from the host namespace; a missing
// link is success.
func DeleteHostLink(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("failed to find link %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("failed to delete link %s: %w", name, err)
	}
	return nil
}

// ListHostLinks returns the names of host links starting with prefix (for
// cleaning up leftovers of an earlier run).
func ListHostLinks(prefix string) ([]string, error) {
	links, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("failed to list host links: %w", err)
	}
	var names []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			names = append(names, l.Attrs().Name)
		}
	}
	return names, nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
