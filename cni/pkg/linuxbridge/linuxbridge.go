package linuxbridge

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
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

// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS (include/uapi/linux/
// rtnetlink.h), which neither golang.org/x/sys/unix nor netlink/nl name:
// the kernel leaves a link's statistics out of its message.
const rtextFilterSkipStats = 1 << 3

// dumpRetries bounds the dumps the kernel interrupts (NLM_F_DUMP_INTR)
// before one is returned.
const dumpRetries = 5

// Ports returns the links enslaved to br, without their statistics: one
// link dump that the kernel filters by master (IFLA_MASTER, Linux 4.15 and
// later; the result is filtered again here for older kernels), so that an
// ADD reads and decodes its bridge's ports, not every link of the node.
func Ports(br *netlink.Bridge) ([]netlink.Link, error) {
	msgs, err := dump(unix.RTM_GETLINK, unix.RTM_NEWLINK, unix.AF_UNSPEC, br.Index,
		nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(nl.RTEXT_FILTER_VF|rtextFilterSkipStats)))
	if err != nil {
		return nil, fmt.Errorf("failed to list the ports of bridge %s: %w", br.Name, err)
	}
	var out []netlink.Link
	for _, m := range msgs {
		l, err := netlink.LinkDeserialize(nil, m)
		if err != nil {
			return nil, fmt.Errorf("failed to list the ports of bridge %s: %w", br.Name, err)
		}
		if l.Attrs().MasterIndex == br.Index {
			out = append(out, l)
		}
	}
	return out, nil
}

// dump sends a dump request of type req (a struct ifinfomsg of family,
// IFLA_MASTER master and extra) and returns the answers of type resp,
// again when the kernel interrupted the dump.
func dump(req, resp uint16, family, master int, extra ...*nl.RtAttr) ([][]byte, error) {
	var err error
	for range dumpRetries {
		r := nl.NewNetlinkRequest(int(req), unix.NLM_F_DUMP)
		r.AddData(nl.NewIfInfomsg(family))
		for _, a := range extra {
			r.AddData(a)
		}
		r.AddData(nl.NewRtAttr(unix.IFLA_MASTER, nl.Uint32Attr(uint32(master))))
		var msgs [][]byte
		msgs, err = r.Execute(unix.NETLINK_ROUTE, resp)
		if !errors.Is(err, netlink.ErrDumpInterrupted) && !errors.Is(err, unix.EINTR) {
			return msgs, err
		}
	}
	return nil, err
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
	fdb, err := bridgeFDB(br)
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

// bridgeFDB dumps the FDB entries of bridge br (`bridge fdb show br
// <br>`): the kernel filters them by the IFLA_MASTER of the request, as
// iproute2 asks (an ifinfomsg, which the kernel tells from an ndmsg by its
// length), and MACHolder checks the master again.
func bridgeFDB(br *netlink.Bridge) ([]netlink.Neigh, error) {
	msgs, err := dump(unix.RTM_GETNEIGH, unix.RTM_NEWNEIGH, unix.AF_BRIDGE, br.Index)
	if err != nil {
		return nil, err
	}
	fdb := make([]netlink.Neigh, 0, len(msgs))
	for _, m := range msgs {
		n, err := netlink.NeighDeserialize(m)
		if err != nil {
			continue // as netlink.NeighList: an entry it cannot decode
		}
		fdb = append(fdb, *n)
	}
	return fdb, nil
}
