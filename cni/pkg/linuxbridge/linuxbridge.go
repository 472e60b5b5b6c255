package linuxbridge

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrBridgeNotFound is wrapped by Bridge when no link of that name exists.
var ErrBridgeNotFound = errors.New("bridge not found")

// Bridge returns the Linux bridge name in the current network namespace. The
// error wraps ErrBridgeNotFound when there is no such link, and says so when
// the link exists but is not a bridge.
func Bridge(name string) (*netlink.Bridge, error) {
	link, err := netlinksafe.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil, fmt.Errorf("failed to find bridge %s: %w", name, ErrBridgeNotFound)
		}
		return nil, fmt.Errorf("failed to look up bridge %s: %w", name, err)
	}
	br, ok := link.(*netlink.Bridge)
	if !ok {
		return nil, fmt.Errorf("failed to use bridge %s: it is a %s link, not a Linux bridge", name, link.Type())
	}
	return br, nil
}

// Verify checks that hostIf is enslaved to the bridge named bridge.
func Verify(hostIf, bridge string) error {
	br, err := Bridge(bridge)
	if err != nil {
		return err
	}
	link, err := netlinksafe.LinkByName(hostIf)
	if err != nil {
		return fmt.Errorf("failed to look up %s: %w", hostIf, err)
	}
	if link.Attrs().MasterIndex != br.Index {
		return fmt.Errorf("failed to verify %s: it is not a port of bridge %s (master index %d, bridge index %d)",
			hostIf, bridge, link.Attrs().MasterIndex, br.Index)
	}
	return nil
}

// Ports returns the links enslaved to br.
func Ports(br *netlink.Bridge) ([]netlink.Link, error) {
	links, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("failed to list links: %w", err)
	}
	var out []netlink.Link
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Index {
			out = append(out, l)
		}
	}
	return out, nil
}

// MACHolder returns the name of the link on bridge br that has mac: the
// bridge itself or a port whose own address it is, or the port of the
// bridge's forwarding database (FDB) entry for it (permanent, static, or
// learned from a frame the port received). "" when none has it. A learned
// entry ages out (300 s of silence by default), so a quiet port's peer is
// found only by its link's address, not by what sits behind it.
func MACHolder(br *netlink.Bridge, mac net.HardwareAddr) (string, error) {
	ports, err := Ports(br)
	if err != nil {
		return "", err
	}
	names := map[int]string{br.Index: br.Name}
	for _, p := range ports {
		names[p.Attrs().Index] = p.Attrs().Name
		if bytes.Equal(p.Attrs().HardwareAddr, mac) {
			return p.Attrs().Name, nil
		}
	}
	// Looked at after the ports: a bridge without an address of its own
	// takes a port's.
	if bytes.Equal(br.HardwareAddr, mac) {
		return br.Name, nil
	}
	fdb, err := bridgeFDB()
	if err != nil {
		return "", fmt.Errorf("failed to read the forwarding database of bridge %s: %w", br.Name, err)
	}
	for _, n := range fdb {
		name, ok := names[n.LinkIndex]
		if (ok || n.MasterIndex == br.Index) && bytes.Equal(n.HardwareAddr, mac) {
			if !ok {
				name = fmt.Sprintf("ifindex %d", n.LinkIndex)
			}
			return name, nil
		}
	}
	return "", nil
}

// bridgeFDB dumps every bridge FDB entry of the network namespace (`bridge
// fdb show`), again when the kernel interrupted the dump.
func bridgeFDB() ([]netlink.Neigh, error) {
	var err error
	for range 5 {
		var fdb []netlink.Neigh
		fdb, err = netlink.NeighList(0, unix.AF_BRIDGE)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return fdb, err
		}
	}
	return nil, err
}
