package bridge

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// linkTypeBridge is netlink's Type() of a Linux bridge.
const linkTypeBridge = "bridge"

func (m *Manager) ensureLinux(spec Spec) (State, error) {
	st := State{Name: spec.Name, Datapath: fastpathv1alpha1.DatapathLinuxBridge}
	link, err := netlink.LinkByName(spec.Name)
	if err != nil && !isLinkNotFound(err) {
		return st, fmt.Errorf("failed to look up link %s: %w", spec.Name, err)
	}
	if link == nil {
		// Created with the default MTU and then set explicitly below: only an
		// MTU set through ndo_change_mtu is "set by user" (BROPT_MTU_SET_BY_USER,
		// net/bridge/br_device.c), which stops the kernel from lowering the
		// bridge MTU to its smallest port's MTU when ports join.
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: spec.Name}}
		if err := netlink.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return st, fmt.Errorf("failed to create Linux bridge %s: %w", spec.Name, err)
		} else if err == nil {
			st.Created = true
			m.Log.Info("Created Linux bridge", "bridge", spec.Name)
		}
		if link, err = netlink.LinkByName(spec.Name); err != nil {
			return st, fmt.Errorf("failed to look up Linux bridge %s after creating it: %w", spec.Name, err)
		}
	}
	if link.Type() != linkTypeBridge {
		st.Exists = true
		st.MTU = link.Attrs().MTU
		return st, fmt.Errorf("failed to ensure Linux bridge %s: a link of that name exists and is a %q, not a Linux bridge (an OVS bridge of the same name?); rename it or the attachment's bridge", spec.Name, link.Type())
	}
	// The kernel ignores IFLA_IFALIAS when creating a link, so the marker is
	// set afterwards; doing it on every Ensure of a bridge without an alias
	// also covers an agent killed between the two steps. A bridge whose alias
	// an admin set is used but not marked.
	if link.Attrs().Alias == "" {
		if err := netlink.LinkSetAlias(link, m.linuxAlias()); err != nil {
			return st, fmt.Errorf("failed to mark Linux bridge %s with alias %s: %w", spec.Name, m.linuxAlias(), err)
		}
	}
	if link.Attrs().MTU != spec.MTU {
		if err := netlink.LinkSetMTU(link, spec.MTU); err != nil {
			st, _ = m.inspectLinux(link)
			return st, fmt.Errorf("failed to set MTU %d on Linux bridge %s: %w", spec.MTU, spec.Name, err)
		}
		m.Log.Info("Set Linux bridge MTU", "bridge", spec.Name, "from", link.Attrs().MTU, "to", spec.MTU)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			st, _ = m.inspectLinux(link)
			return st, fmt.Errorf("failed to bring up Linux bridge %s: %w", spec.Name, err)
		}
	}
	// Read back what the kernel has now.
	link, err = netlink.LinkByIndex(link.Attrs().Index)
	if err != nil {
		return st, fmt.Errorf("failed to read back Linux bridge %s: %w", spec.Name, err)
	}
	created := st.Created
	st, err = m.inspectLinux(link)
	st.Created = created
	return st, err
}

// inspectLinux describes an existing Linux bridge link.
func (m *Manager) inspectLinux(link netlink.Link) (State, error) {
	a := link.Attrs()
	st := State{
		Name:     a.Name,
		Datapath: fastpathv1alpha1.DatapathLinuxBridge,
		Exists:   true,
		MTU:      a.MTU,
		Up:       a.Flags&net.FlagUp != 0,
		Managed:  a.Alias == m.linuxAlias(),
	}
	links, err := netlinksafe.LinkList()
	if err != nil {
		return st, fmt.Errorf("failed to list the ports of Linux bridge %s: %w", a.Name, err)
	}
	for _, l := range links {
		if l.Attrs().MasterIndex == a.Index {
			st.Ports = append(st.Ports, l.Attrs().Name)
		}
	}
	slices.Sort(st.Ports)
	return st, nil
}

func (m *Manager) managedLinux() ([]State, error) {
	links, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("failed to list links: %w", err)
	}
	var out []State
	for _, l := range links {
		if l.Type() != linkTypeBridge || l.Attrs().Alias != m.linuxAlias() {
			continue
		}
		st, err := m.inspectLinux(l)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b State) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
