package bridge

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
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
		if link, err = m.createLinux(spec.Name); err != nil {
			return st, err
		}
		st.Created = true
	}
	if link.Type() != linkTypeBridge {
		st.Exists = true
		st.MTU = link.Attrs().MTU
		return st, fmt.Errorf("failed to ensure Linux bridge %s: a link of that name exists and is a %q, not a Linux bridge (an OVS bridge of the same name?); rename it or the FastPathNetwork's spec.bridge", spec.Name, link.Type())
	}
	// Never adopt, change or delete a bridge the agent did not make: it may
	// be the node's own (cni0, br-ex) and a tenant's VM would join it.
	if link.Attrs().Alias != m.linuxAlias() {
		st, _ = m.inspectLinux(link)
		return st, fmt.Errorf("%w: Linux bridge %s exists without the alias %s (its alias is %q): left unchanged; delete it or name another bridge in the FastPathNetwork's spec.bridge",
			ErrNotMarked, spec.Name, m.linuxAlias(), link.Attrs().Alias)
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

// createLinux creates the Linux bridge name, marked, so that the name never
// exists unmarked: the kernel ignores IFLA_IFALIAS in RTM_NEWLINK, so the
// bridge is made under a temporary name, given the alias, and renamed (a
// new link is down, and a down link may be renamed). An agent killed in
// between leaves a marked bridge named fpnew<hex>, which Managed lists.
// It is created with the default MTU, set explicitly by Ensure afterwards:
// only an MTU set through ndo_change_mtu is "set by user"
// (BROPT_MTU_SET_BY_USER, net/bridge/br_device.c), which stops the kernel
// from lowering the bridge MTU to its smallest port's MTU when ports join.
func (m *Manager) createLinux(name string) (netlink.Link, error) {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("failed to create Linux bridge %s: %w", name, err)
	}
	tmp := wellknown.TempLinkName(rnd)
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: tmp}}); err != nil {
		return nil, fmt.Errorf("failed to create Linux bridge %s (as %s): %w", name, tmp, err)
	}
	link, err := netlink.LinkByName(tmp)
	if err == nil {
		err = netlink.LinkSetAlias(link, m.linuxAlias())
	}
	if err == nil {
		err = netlink.LinkSetName(link, name)
	}
	if err != nil {
		if l, lerr := netlink.LinkByName(tmp); lerr == nil {
			_ = netlink.LinkDel(l) // ours, unused, unmarked or misnamed
		}
		return nil, fmt.Errorf("failed to create Linux bridge %s (made as %s, marked, then renamed): %w", name, tmp, err)
	}
	m.Log.Info("Created Linux bridge", "bridge", name)
	link, err = netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("failed to look up Linux bridge %s after creating it: %w", name, err)
	}
	return link, nil
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

// removeLinux deletes the marked, port-less Linux bridge name.
func (m *Manager) removeLinux(name string) error {
	link, err := netlink.LinkByName(name)
	if isLinkNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to look up Linux bridge %s: %w", name, err)
	}
	if link.Type() != linkTypeBridge || link.Attrs().Alias != m.linuxAlias() {
		return fmt.Errorf("failed to remove Linux bridge %s: %w", name, ErrNotMarked)
	}
	st, err := m.inspectLinux(link)
	if err != nil {
		return err
	}
	if len(st.Ports) > 0 {
		return fmt.Errorf("failed to remove Linux bridge %s: %w (%s)", name, ErrInUse, strings.Join(st.Ports, ", "))
	}
	if err := netlink.LinkDel(link); err != nil && !isLinkNotFound(err) {
		return fmt.Errorf("failed to delete Linux bridge %s: %w", name, err)
	}
	m.Log.Info("Deleted a Linux bridge no FastPathNetwork names and no port uses", "bridge", name)
	return nil
}
