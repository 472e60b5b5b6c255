package linuxbridge

import (
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
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
