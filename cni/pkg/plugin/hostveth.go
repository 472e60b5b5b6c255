package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
)

// HostIfPrefix starts the name of every host-side veth the plugin creates.
const HostIfPrefix = "fp"

// aliasPrefix starts the IFLA_IFALIAS of host-side veths:
// "fastpath/<network>/<containerID>/<ifname>". None of the three parts may
// contain '/' (CNI name rules), so the alias parses back unambiguously.
const aliasPrefix = "fastpath/"

// maxAliasLen is IFALIASZ-1 (Linux include/uapi/linux/if.h).
const maxAliasLen = 255

// HostIfName returns the name of the host end of the attachment
// containerID/ifName: "fp" followed by the first 13 hex digits of
// sha256(containerID + "\x00" + ifName), 15 characters (IFNAMSIZ-1). The
// hash keeps the name stable for DEL and GC without any state; NUL cannot
// occur in either part, so distinct attachments hash distinct inputs.
func HostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + ifName))
	return HostIfPrefix + hex.EncodeToString(sum[:])[:13]
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
