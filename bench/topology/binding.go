package topology

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
)

// addGuest builds the guest side of the full masquerade shape: the veth
// tap0 (launcher, port of k6t-eth0) <-> GuestIfName (guest, 10.0.2.2), the
// guest's default route via 10.0.2.1, forwarding in the launcher and TX
// checksum offload off on k6t-eth0.
func (m *Masquerade) addGuest(guestBits int) error {
	mac, err := addTap(m.NetNS, m.Guest, m.TapName, m.GuestIfName, MasqueradeBridge, m.MTU, nil)
	if err != nil {
		return err
	}
	m.GuestMAC = mac
	if err := m.NetNS.Do(func() error {
		if err := setSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		return txChecksumOff(MasqueradeBridge)
	}); err != nil {
		return fmt.Errorf("failed to configure the launcher %s: %w", m.NetNS.Name, err)
	}
	return m.Guest.withHandle(func(h *netlink.Handle) error {
		l, err := h.LinkByName(m.GuestIfName)
		if err != nil {
			return fmt.Errorf("failed to find %s in %s: %w", m.GuestIfName, m.Guest.Name, err)
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(m.GuestIP, guestBits))}); err != nil {
			return fmt.Errorf("failed to add %s/%d to %s in %s: %w", m.GuestIP, guestBits, m.GuestIfName, m.Guest.Name, err)
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.IP(m.GatewayIP.AsSlice())}); err != nil {
			return fmt.Errorf("failed to add the default route via %s in %s: %w", m.GatewayIP, m.Guest.Name, err)
		}
		return nil
	})
}

// addTap creates the veth that stands in for a KubeVirt tap device: tapName in
// the launcher, enslaved to bridge, and guestIf in the guest, both with mtu
// and up; guestIf gets mac when it is set. It returns guestIf's MAC.
func addTap(launcher, guest *NetNS, tapName, guestIf, bridge string, mtu int, mac net.HardwareAddr) (string, error) {
	gh, err := netns.GetFromPath(guest.Path)
	if err != nil {
		return "", fmt.Errorf("failed to open network namespace %s: %w", guest.Path, err)
	}
	defer gh.Close()
	var guestMAC string
	err = launcher.withHandle(func(h *netlink.Handle) error {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: tapName, MTU: mtu},
			PeerName:      guestIf,
			PeerNamespace: netlink.NsFd(int(gh)),
		}
		if mac != nil {
			veth.PeerHardwareAddr = mac
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("failed to add veth %s (peer %s in %s): %w", tapName, guestIf, guest.Name, err)
		}
		tap, err := h.LinkByName(tapName)
		if err != nil {
			return err
		}
		br, err := h.LinkByName(bridge)
		if err != nil {
			return fmt.Errorf("failed to find bridge %s: %w", bridge, err)
		}
		if err := h.LinkSetMaster(tap, br); err != nil {
			return fmt.Errorf("failed to attach %s to %s: %w", tapName, bridge, err)
		}
		return h.LinkSetUp(tap)
	})
	if err != nil {
		return "", fmt.Errorf("failed to add the tap %s in %s: %w", tapName, launcher.Name, err)
	}
	err = guest.withHandle(func(h *netlink.Handle) error {
		l, err := h.LinkByName(guestIf)
		if err != nil {
			return err
		}
		if err := h.LinkSetMTU(l, mtu); err != nil {
			return err
		}
		guestMAC = l.Attrs().HardwareAddr.String()
		return h.LinkSetUp(l)
	})
	if err != nil {
		return "", fmt.Errorf("failed to bring up %s in %s: %w", guestIf, guest.Name, err)
	}
	return guestMAC, nil
}

// txChecksumOff turns off TX checksum offload of ifName in the calling
// thread's namespace (internal/datapath/offload, the plugin's own helper), as
// virt-launcher does on its in-pod bridges. Without TX checksumming the
// kernel also segments in software.
func txChecksumOff(ifName string) error {
	return offload.Apply(ifName, map[string]bool{wellknown.OffloadTXChecksum: false})
}

// setSysctl writes the sysctl name ("net/ipv4/ip_forward", slash-separated
// so that link names with dots stay intact) in the calling thread's network
// namespace, through containernetworking/plugins' sysctl package.
func setSysctl(name, value string) error {
	if _, err := sysctl.Sysctl(name, value); err != nil {
		return fmt.Errorf("failed to set %s to %s: %w", name, value, err)
	}
	return nil
}

// BridgeBindingOptions describe KubeVirt's bridge binding of one pod
// interface (the one a CNI plugin created in the launcher namespace).
type BridgeBindingOptions struct {
	// PodIfName is the pod interface in the launcher, e.g. "pod16477688c0e".
	PodIfName string
	// GuestIfName is the guest interface, e.g. "eth1".
	GuestIfName string
}

// BridgeBinding is a wired bridge binding (see AddBridgeBinding).
type BridgeBinding struct {
	Launcher, Guest *NetNS
	// PodIfName, BridgeName and TapName live in the launcher.
	PodIfName, BridgeName, TapName string
	// GuestIfName lives in the guest, with the pod interface's former MAC,
	// MTU and addresses.
	GuestIfName string
	MAC         string
	MTU         int
	Addrs       []netip.Prefix
}

// BridgeName returns virt-launcher's in-pod bridge name for a pod interface:
// "k6t-" and the name without KubeVirt's "pod" prefix (kubevirt
// pkg/network/link, GenerateBridgeName), e.g. "k6t-16477688c0e".
func BridgeName(podIfName string) string { return "k6t-" + strings.TrimPrefix(podIfName, "pod") }

// TapName returns virt-launcher's tap name for a pod interface: "tap" and the
// name without its first three characters (GenerateTapDeviceName).
func TapName(podIfName string) string {
	if len(podIfName) <= 3 {
		return "tap" + podIfName
	}
	return "tap" + podIfName[3:]
}

// AddBridgeBinding does what virt-launcher does for a `bridge: {}` interface
// (pkg/network/setup/netpod, bridgeBindingSpec): it moves the pod
// interface's addresses to the guest (KubeVirt hands them over by DHCP; here
// they are configured directly), creates the in-pod bridge k6t-<hash> with
// TX checksum offload off, makes the pod interface a port of it with the
// bridge's MAC and learning off, and connects the guest through a veth
// standing in for the tap device: tap<hash> in the launcher, GuestIfName in
// the guest with the pod interface's MAC and MTU. KubeVirt also renames the
// pod interface to <hash>-nic and leaves a dummy with its name; the emulation
// keeps the name (this kernel may lack the dummy module). It undoes what it
// did when a step fails.
//
// A nil guest builds the launcher side only, for a real guest: the caller
// adds the tap TapName to BridgeName and hands Addrs and MAC to the guest by
// DHCP (e2e/localenv/guests); GuestIfName may then be empty.
func AddBridgeBinding(launcher, guest *NetNS, o BridgeBindingOptions) (_ *BridgeBinding, err error) {
	if o.PodIfName == "" || (guest != nil && o.GuestIfName == "") || len(o.GuestIfName) > 15 {
		return nil, fmt.Errorf("failed to validate bridge binding options: PodIfName and GuestIfName (1-15 characters) are required")
	}
	b := &BridgeBinding{Launcher: launcher, Guest: guest, PodIfName: o.PodIfName, BridgeName: BridgeName(o.PodIfName), TapName: TapName(o.PodIfName), GuestIfName: o.GuestIfName}
	defer func() {
		if err != nil {
			_ = b.Remove()
		}
	}()
	var mac net.HardwareAddr
	err = launcher.withHandle(func(h *netlink.Handle) error {
		pod, err := h.LinkByName(o.PodIfName)
		if err != nil {
			return fmt.Errorf("failed to find pod interface %s: %w", o.PodIfName, err)
		}
		mac, b.MTU, b.MAC = pod.Attrs().HardwareAddr, pod.Attrs().MTU, pod.Attrs().HardwareAddr.String()
		addrs, err := h.AddrList(pod, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("failed to list the addresses of %s: %w", o.PodIfName, err)
		}
		for _, a := range addrs {
			if !a.IP.IsGlobalUnicast() {
				continue
			}
			p, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			ones, _ := a.Mask.Size()
			b.Addrs = append(b.Addrs, netip.PrefixFrom(p.Unmap(), ones))
			if err := h.AddrDel(pod, &a); err != nil {
				return fmt.Errorf("failed to remove %s from %s: %w", a.IPNet, o.PodIfName, err)
			}
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b.BridgeName, MTU: b.MTU}}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("failed to add bridge %s: %w", b.BridgeName, err)
		}
		brLink, err := h.LinkByName(b.BridgeName)
		if err != nil {
			return err
		}
		if err := h.LinkSetDown(pod); err != nil {
			return err
		}
		if err := h.LinkSetHardwareAddr(pod, brLink.Attrs().HardwareAddr); err != nil {
			return fmt.Errorf("failed to give %s the MAC of %s: %w", o.PodIfName, b.BridgeName, err)
		}
		if err := h.LinkSetMaster(pod, brLink); err != nil {
			return fmt.Errorf("failed to attach %s to %s: %w", o.PodIfName, b.BridgeName, err)
		}
		if err := h.LinkSetLearning(pod, false); err != nil {
			return fmt.Errorf("failed to turn off learning on %s: %w", o.PodIfName, err)
		}
		if err := h.LinkSetUp(pod); err != nil {
			return err
		}
		return h.LinkSetUp(brLink)
	})
	if err != nil {
		return nil, fmt.Errorf("failed to bind %s in %s: %w", o.PodIfName, launcher.Name, err)
	}
	if err := launcher.Do(func() error { return txChecksumOff(b.BridgeName) }); err != nil {
		return nil, err
	}
	if guest == nil {
		return b, nil
	}
	if _, err := addTap(launcher, guest, b.TapName, o.GuestIfName, b.BridgeName, b.MTU, mac); err != nil {
		return nil, err
	}
	err = guest.withHandle(func(h *netlink.Handle) error {
		l, err := h.LinkByName(o.GuestIfName)
		if err != nil {
			return err
		}
		for _, p := range b.Addrs {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(p)}); err != nil {
				return fmt.Errorf("failed to add %s to %s: %w", p, o.GuestIfName, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure %s in %s: %w", o.GuestIfName, guest.Name, err)
	}
	return b, nil
}

// Remove deletes the tap veth (and so the guest interface) and the in-pod
// bridge; the pod interface stays for the CNI DEL. Missing pieces are not
// errors.
func (b *BridgeBinding) Remove() error {
	if _, err := os.Stat(b.Launcher.Path); err != nil {
		return nil
	}
	var errs []error
	err := b.Launcher.withHandle(func(h *netlink.Handle) error {
		for _, name := range []string{b.TapName, b.BridgeName} {
			if l, err := h.LinkByName(name); err == nil {
				if err := h.LinkDel(l); err != nil {
					errs = append(errs, fmt.Errorf("failed to delete %s: %w", name, err))
				}
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}
