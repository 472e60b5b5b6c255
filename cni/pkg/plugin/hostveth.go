package plugin

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
)

// HostIfPrefix starts the name of every host-side veth the plugin creates
// (wellknown.HostVethPrefix).
const HostIfPrefix = wellknown.HostVethPrefix

// aliasPrefix starts the IFLA_IFALIAS of host-side veths:
// "fastpath/<network>/<containerID>/<ifname>". None of the three parts may
// contain '/' (CNI name rules), so the alias parses back unambiguously.
const aliasPrefix = "fastpath/"

// maxAliasLen is IFALIASZ-1 (Linux include/uapi/linux/if.h).
const maxAliasLen = 255

// HostIfName returns the name of the host end of the attachment
// containerID/ifName: wellknown.HostVethName, "fp" followed by the first 13
// hex digits of sha256(containerID + "\x00" + ifName), 15 characters
// (IFNAMSIZ-1), a form the NAD admission policy refuses in every tenant NAD.
func HostIfName(containerID, ifName string) string {
	return wellknown.HostVethName(containerID, ifName)
}

// hostAlias returns the alias that names the attachment on its host veth, or
// "" when it would not fit IFALIASZ.
func hostAlias(network, containerID, ifName string) string {
	a := aliasPrefix + network + "/" + containerID + "/" + ifName
	if len(a) > maxAliasLen {
		return ""
	}
	return a
}

// parseAlias is the inverse of hostAlias.
func parseAlias(alias string) (datapath.Port, bool) {
	rest, ok := strings.CutPrefix(alias, aliasPrefix)
	if !ok {
		return datapath.Port{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return datapath.Port{}, false
	}
	return datapath.Port{Network: parts[0], ContainerID: parts[1], IfName: parts[2]}, true
}

// deleteHostVeth deletes the host veth name (which takes its container peer
// with it) in the current network namespace. A missing link is not an error;
// a link of that name that is not a veth, or whose alias names another
// attachment, is left alone and reported.
func deleteHostVeth(name, alias string) error {
	link, err := netlinksafe.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return fmt.Errorf("failed to look up host veth %s: %w", name, err)
	}
	if _, ok := link.(*netlink.Veth); !ok {
		return fmt.Errorf("failed to delete host veth %s: it is a %s link, not a veth; left alone", name, link.Type())
	}
	if got := link.Attrs().Alias; alias != "" && got != "" && got != alias {
		return fmt.Errorf("failed to delete host veth %s: its alias %q names another attachment than %q; left alone", name, got, alias)
	}
	if err := netlink.LinkDel(link); err != nil {
		if errors.Is(err, unix.ENODEV) { // deleted meanwhile, e.g. with its netns
			return nil
		}
		return fmt.Errorf("failed to delete host veth %s: %w", name, err)
	}
	return nil
}

// vethPair is a veth pair setupVeth made.
type vethPair struct {
	// cont is the container end as read back in the container's namespace.
	cont netlink.Link
	// hostIndex and hostMAC are the host end's interface index (in the
	// host namespace) and MAC address.
	hostIndex int
	hostMAC   net.HardwareAddr
}

// setupVeth creates, from a thread in the container's network namespace, the
// veth pair contName (there, with contMAC, or a kernel-chosen MAC when "")
// and hostName (in hostNS, with a random locally administered MAC), both
// with mtu, in one RTM_NEWLINK, and reads the container end back. Both ends
// stay down: the datapath's Attach sets the host end up in its one request
// and ipam.ConfigureIface the container end.
//
// It does what ip.SetupVethWithName (containernetworking/plugins) does for
// CmdAdd, without the part that switched back to the host namespace (a
// further thread and two setns) to look the host end up by name and set it
// up: the host end's index is the container end's IFLA_LINK (a veth's peer),
// its MAC is chosen here as the kernel would (eth_random_addr), and Attach
// sets it up anyway. That part cost CPU on every ADD and two more holds of
// the kernel's RTNL lock, which concurrent ADDs queue on (the profile:
// docs/design.md §4.3). The host end's accept_ra
// (which SetupVethWithName clears) is cleared by the caller, from the host
// namespace. An EEXIST from the kernel is returned wrapped
// (errors.Is(err, fs.ErrExist) holds), for the caller to reclaim a leftover
// host veth.
func setupVeth(contName, hostName string, mtu int, contMAC string, hostNS ns.NetNS) (*vethPair, error) {
	hostMAC := make(net.HardwareAddr, 6)
	if _, err := rand.Read(hostMAC); err != nil {
		return nil, fmt.Errorf("failed to choose a MAC address for %s: %w", hostName, err)
	}
	hostMAC[0] = hostMAC[0]&^0x01 | 0x02 // unicast, locally administered
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = contName, mtu
	if contMAC != "" {
		m, err := net.ParseMAC(contMAC)
		if err != nil {
			return nil, fmt.Errorf("failed to create veth %s: MAC %q: %w", contName, contMAC, err)
		}
		attrs.HardwareAddr = m
	}
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: hostName, PeerHardwareAddr: hostMAC, PeerNamespace: netlink.NsFd(int(hostNS.Fd()))}
	if err := netlink.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("container veth name %q or host veth name %q already exists: %w", contName, hostName, err)
		}
		return nil, err
	}
	cont, err := netlinksafe.LinkByName(contName)
	if err != nil {
		_ = netlink.LinkDel(veth) // takes the host end with it
		return nil, fmt.Errorf("failed to look up veth %s after creating it: %w", contName, err)
	}
	return &vethPair{cont: cont, hostIndex: cont.Attrs().ParentIndex, hostMAC: hostMAC}, nil
}

// clearAcceptRA sets net.ipv6.conf.<name>.accept_ra to 0 in the calling
// thread's network namespace, as ip.SetupVethWithName does for the host
// end ("we want to own the routes for this interface"); a failure (e.g.
// IPv6 disabled) is ignored, as there.
func clearAcceptRA(name string) {
	_, _ = sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/accept_ra", name), "0")
}
