package datapath

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// HostEnd is the host end of an attachment's veth pair as ADD made it, in
// the host network namespace.
type HostEnd struct {
	// Index and Name identify the link.
	Index int
	Name  string
	// Alias names the attachment on the link (IFLA_IFALIAS,
	// "fastpath/<network>/<containerID>/<ifname>"); "" when it would not fit.
	Alias string
}

// SetLink changes the host end in one RTM_SETLINK request, that is one
// hold of the kernel's RTNL lock, which 20 concurrent ADDs queue on (each
// veth creation holds it): its alias (when not ""), its master (the bridge's
// interface index, when master > 0) and, when up is true, IFF_UP. The error
// names the link.
func (h HostEnd) SetLink(master int, up bool) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(h.Index)
	if up {
		msg.Change, msg.Flags = unix.IFF_UP, unix.IFF_UP
	}
	req.AddData(msg)
	if master > 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_MASTER, nl.Uint32Attr(uint32(master))))
	}
	if h.Alias != "" {
		req.AddData(nl.NewRtAttr(unix.IFLA_IFALIAS, []byte(h.Alias)))
	}
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("failed to set up host veth %s (index %d, master %d, alias %q): %w", h.Name, h.Index, master, h.Alias, err)
	}
	return nil
}
