package emulation

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	kubevirtv1 "kubevirt.io/api/core/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"

	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
)

// Guest kinds of Options.Guests.
const (
	// GuestsNetNS: every guest is a network namespace (the default).
	GuestsNetNS = "netns"
	// GuestsQEMU: every guest is a REAL VM booted by e2e/localenv/guests
	// (libvirt + QEMU, TCG) on real taps in the launcher namespace.
	GuestsQEMU = "qemu"
)

// RealGuestMemoryMiB is the memory of a real guest whatever the VMI asks
// (the sample VMs ask 2 GiB; the guest image needs far less under TCG).
const RealGuestMemoryMiB = 512

// bridgeBindingDHCPServer is the server address virt-launcher's DHCP uses
// on a bridge binding's in-pod bridge (KubeVirt's fake 169.254.75.1X address).
var bridgeBindingDHCPServer = netip.MustParseAddr("169.254.75.10")

func (e *Emulator) realGuests() bool { return e.opts.Guests == GuestsQEMU }

// bootRealGuest boots the real guest of a launcher whose pod network and
// Multus networks are wired (launcher side only): one NIC per VMI interface
// in spec order, each a tap on its in-pod bridge, with the address the
// binding hands the guest served by DHCP (masquerade: 10.0.2.2 with gateway
// 10.0.2.1; bridge: the pod interface's IPAM address and MAC).
func (e *Emulator) bootRealGuest(ctx context.Context, l *launcher, vmi *kubevirtv1.VirtualMachineInstance) error {
	vmiJSON, err := json.Marshal(vmi)
	if err != nil {
		return fmt.Errorf("failed to encode VMI %s for the domain hook: %w", l.key, err)
	}
	podNet := podNetwork(vmi)
	var nics []guests.NICSpec
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		switch {
		case l.masq != nil && iface.Name == podNet:
			mac := randomMAC()
			l.masq.GuestMAC = mac.String()
			nics = append(nics, guests.NICSpec{Network: iface.Name, Bridge: topology.MasqueradeBridge, Tap: l.masq.TapName, MTU: l.masq.MTU,
				Lease: guests.DHCPLease{MAC: mac, Address: netip.PrefixFrom(l.masq.GuestIP, topology.DefaultGuestCIDR.Bits()),
					Router: l.masq.GatewayIP, ServerIP: l.masq.GatewayIP, MTU: l.masq.MTU, Hostname: vmi.Name}})
		default:
			for i, a := range l.nets {
				if a.network != iface.Name || i >= len(l.bindings) {
					continue
				}
				b := l.bindings[i]
				if len(b.Addrs) == 0 {
					return fmt.Errorf("failed to boot the real guest of %s: network %s has no IPAM address to hand out by DHCP", l.key, a.network)
				}
				mac, err := net.ParseMAC(b.MAC)
				if err != nil {
					return fmt.Errorf("failed to boot the real guest of %s: MAC %q of %s: %w", l.key, b.MAC, a.podIf, err)
				}
				nics = append(nics, guests.NICSpec{Network: a.network, Bridge: b.BridgeName, Tap: b.TapName, MTU: b.MTU,
					Lease: guests.DHCPLease{MAC: mac, Address: b.Addrs[0], ServerIP: bridgeBindingDHCPServer, MTU: b.MTU, Hostname: vmi.Name}})
			}
		}
	}
	vcpus := 2
	if c := vmi.Spec.Domain.CPU; c != nil && c.Cores > 0 {
		vcpus = int(c.Cores)
	}
	o := guests.BootOptions{
		Namespace: vmi.Namespace, Name: vmi.Name, UID: string(vmi.UID), VMIJSON: vmiJSON,
		Launcher: l.netns, NICs: nics, MemoryMiB: RealGuestMemoryMiB, VCPUs: vcpus,
		Multiqueue: vmi.Spec.Domain.Devices.NetworkInterfaceMultiQueue != nil && *vmi.Spec.Domain.Devices.NetworkInterfaceMultiQueue,
		Dir:        filepath.Join(l.dir, "guest"), Bin: e.opts.GuestBin,
		Logf: func(format string, args ...any) { e.log.printf("virt-launcher", format, args...) },
	}
	if l.cid != nil {
		o.VSOCKCID, o.VSOCKDir = *l.cid, e.opts.VSOCKRoot
	}
	if sock, ok := e.siblingSocket(vmi); ok {
		o.SiblingSocketDir = e.opts.SiblingSocketDir
		e.log.printf("virt-launcher", "%s: vsock mode Sibling: the domain hook's vhost-user-vsock device connects QEMU to %s, served by the node agent's vhost-device-vsock", l.key, sock)
	}
	g, err := guests.Boot(ctx, o)
	if err != nil {
		return err
	}
	l.real = g
	for _, a := range l.nets {
		if n, ok := g.NIC(a.mac); ok {
			a.guestIf = n.Name
		}
	}
	if l.masq != nil {
		if n, ok := g.NIC(l.masq.GuestMAC); ok {
			l.masq.GuestIfName = n.Name
		}
	}
	e.log.real("%s %s: libvirt domain %s after the real domain hook; booted in %s", guests.Label, l.key,
		guests.DomainName(vmi.Namespace, vmi.Name), g.BootTime.Round(100_000_000))
	for _, n := range g.NICs {
		e.log.real("%s (read inside the guest; DHCP gave %s)", n.Line(vmi.Name), n.IP)
	}
	return nil
}

func randomMAC() net.HardwareAddr {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	b[0] = 0x02 // locally administered, unicast
	return b
}

// real prints a line about a real guest, labelled as real.
func (l *logger) real(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "REAL            "+format+"\n", args...)
}

// siblingSocket returns the vhost-user socket of a VMI the operator wired for
// vsock mode Sibling (annotation v1alpha1.VSOCKModeAnnotation) on a real
// guest: <SiblingSocketDir>/<base of v1alpha1.SiblingSocketPath>. ok is false
// for other VMIs, namespace guests and an emulation without
// SiblingSocketDir.
func (e *Emulator) siblingSocket(vmi *kubevirtv1.VirtualMachineInstance) (string, bool) {
	if !e.realGuests() || e.opts.SiblingSocketDir == "" || vmi.Annotations[fastpathv1alpha1.VSOCKModeAnnotation] != string(fastpathv1alpha1.VSOCKModeSibling) {
		return "", false
	}
	return filepath.Join(e.opts.SiblingSocketDir, filepath.Base(fastpathv1alpha1.SiblingSocketPath(vmi.Namespace, vmi.Name))), true
}

// siblingSocketReady fails while the vhost-user socket of a Sibling VMI is
// missing: QEMU would fail to connect to it, as it would in a virt-launcher
// started before the node agent's backend serves the VM (the agent declares
// a VM's slot once the operator gave it a CID). The launch is retried.
func (e *Emulator) siblingSocketReady(vmi *kubevirtv1.VirtualMachineInstance) error {
	sock, ok := e.siblingSocket(vmi)
	if !ok {
		return nil
	}
	if _, err := os.Stat(sock); err != nil {
		return fmt.Errorf("vsock mode Sibling: the node agent's vhost-device-vsock does not serve %s yet (it does once the FastPathAttachment gave the VM a CID): %w", sock, err)
	}
	return nil
}
