package bridge

import (
	"crypto/rand"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
)

// The macvtap lower device (datapath Macvtap) is one end of a veth pair in
// the host namespace; the other end ("the peer") carries nothing and is there
// for carrier only. Why a veth: the kernels Fastpath runs on do not all have
// the dummy driver (the 6.18 development kernel has CONFIG_DUMMY unset), and
// of the link types every kernel with veth-based CNI plugins has:
//   - a veth end has carrier exactly while both ends are up, which the agent
//     controls; macvlan copies its lower device's carrier to every macvtap
//     (netif_stacked_transfer_operstate), so a lower without carrier silences
//     all of them;
//   - a Linux bridge without ports loses its carrier for good once a port has
//     come and gone (br_port_state_selection sets carrier off when no port
//     forwards), and it is the LinuxBridge datapath's own device type, so an
//     admin could mistake one for the other;
//   - a veth takes MTUs up to 65535 (ETH_MAX_MTU) and TSO up to 512 KiB
//     (tso_max_size 524280, which macvlan inherits), a bridge's TSO limit
//     is its ports' (64 KiB without ports).
//
// Frames between two macvtaps in bridge mode never reach the lower device's
// transmit path: macvlan delivers them sibling to sibling (macvlan_queue_xmit,
// drivers/net/macvlan.c). Frames to other MACs and broadcasts do, and the peer
// drops them (it has no upper device and no address): the network stays
// inside the node. The local benchmark's fastpath-macvtap path has the same
// shape (bench/localbench).

// lowerOffloads are the offloads of a macvtap lower device: all on.
var lowerOffloads = allOn()

// allOn returns every offload of wellknown.Offloads switched on.
func allOn() map[string]bool {
	out := make(map[string]bool, len(wellknown.Offloads))
	for _, row := range wellknown.Offloads {
		out[row.Name] = true
	}
	return out
}

// linkTypeVeth is netlink's Type() of a veth.
const linkTypeVeth = "veth"

// PeerMarkerKey is the prefix of the alias of a macvtap lower device's peer
// ("fastpath.io/lower-peer=<marker>"). It differs from wellknown.MarkerKey so that no
// one takes the peer for a lower device (the CNI plugin requires wellknown.MarkerKey).
const PeerMarkerKey = "fastpath.io/lower-peer"

func (m *Manager) peerAlias() string { return PeerMarkerKey + "=" + m.marker() }

// ensureMacvtap makes the lower device spec.Name exist (a marked veth whose
// marked peer is LowerPeerName), both ends up with spec.MTU.
func (m *Manager) ensureMacvtap(spec Spec) (State, error) {
	st := State{Name: spec.Name, Datapath: fastpathv1alpha1.DatapathMacvtap}
	link, err := netlink.LinkByName(spec.Name)
	if err != nil && !isLinkNotFound(err) {
		return st, fmt.Errorf("failed to look up link %s: %w", spec.Name, err)
	}
	if link == nil {
		if link, err = m.createMacvtapLower(spec.Name, spec.MTU); err != nil {
			return st, err
		}
		st.Created = true
	}
	if link.Type() != linkTypeVeth {
		st.Exists, st.MTU = true, link.Attrs().MTU
		return st, fmt.Errorf("failed to ensure macvtap lower device %s: a link of that name exists and is a %q, not the veth the agent makes; rename it or the FastPathNetwork's spec.bridge", spec.Name, link.Type())
	}
	if link.Attrs().Alias != m.linuxAlias() {
		st, _ = m.inspectMacvtap(link)
		return st, fmt.Errorf("%w: veth %s exists without the alias %s (its alias is %q): left unchanged; delete it or name another lower device in the FastPathNetwork's spec.bridge",
			ErrNotMarked, spec.Name, m.linuxAlias(), link.Attrs().Alias)
	}
	peer, err := m.lowerPeer(link)
	if err != nil {
		st, _ = m.inspectMacvtap(link)
		return st, err
	}
	for _, l := range []netlink.Link{link, peer} {
		if l.Attrs().MTU != spec.MTU {
			if err := netlink.LinkSetMTU(l, spec.MTU); err != nil {
				st, _ = m.inspectMacvtap(link)
				return st, fmt.Errorf("failed to set MTU %d on %s (macvtap lower device %s): %w", spec.MTU, l.Attrs().Name, spec.Name, err)
			}
			m.Log.Info("Set macvtap lower device MTU", "link", l.Attrs().Name, "lower", spec.Name, "from", l.Attrs().MTU, "to", spec.MTU)
		}
	}
	// Every offload on the lower: macvlan keeps TSO, GSO and TX checksum
	// offload on for each macvtap (ALWAYS_ON_OFFLOADS, drivers/net/macvlan.c)
	// and gives it the others from its lower device (GRO among them: a veth
	// starts with GRO off); the CNI plugin then checks the macvtap has all.
	if err := offload.Apply(spec.Name, lowerOffloads); err != nil {
		st, _ = m.inspectMacvtap(link)
		return st, fmt.Errorf("failed to switch the offloads of macvtap lower device %s on: %w", spec.Name, err)
	}
	// The peer first: the lower has carrier once both are up.
	for _, l := range []netlink.Link{peer, link} {
		if l.Attrs().Flags&net.FlagUp == 0 {
			if err := netlink.LinkSetUp(l); err != nil {
				st, _ = m.inspectMacvtap(link)
				return st, fmt.Errorf("failed to bring up %s (macvtap lower device %s): %w", l.Attrs().Name, spec.Name, err)
			}
		}
	}
	link, err = netlink.LinkByIndex(link.Attrs().Index)
	if err != nil {
		return st, fmt.Errorf("failed to read back macvtap lower device %s: %w", spec.Name, err)
	}
	created := st.Created
	st, err = m.inspectMacvtap(link)
	st.Created = created
	return st, err
}

// lowerPeer returns the peer of the lower device link, which must be named
// LowerPeerName and carry the peer alias.
func (m *Manager) lowerPeer(link netlink.Link) (netlink.Link, error) {
	name := link.Attrs().Name
	veth, ok := link.(*netlink.Veth)
	if !ok {
		return nil, fmt.Errorf("failed to find the peer of macvtap lower device %s: it is a %q, not a veth", name, link.Type())
	}
	idx, err := netlink.VethPeerIndex(veth)
	if err != nil {
		return nil, fmt.Errorf("failed to find the peer of macvtap lower device %s: %w", name, err)
	}
	peer, err := netlink.LinkByIndex(idx)
	if err != nil {
		return nil, fmt.Errorf("failed to find the peer of macvtap lower device %s (index %d; moved to another network namespace?): %w", name, idx, err)
	}
	if want := wellknown.LowerPeerName(name); peer.Attrs().Name != want || peer.Attrs().Alias != m.peerAlias() {
		return nil, fmt.Errorf("macvtap lower device %s has the peer %s with alias %q, not %s with alias %s: left unchanged; delete the pair so that the agent makes it again",
			name, peer.Attrs().Name, peer.Attrs().Alias, want, m.peerAlias())
	}
	return peer, nil
}

// createMacvtapLower creates the lower device name and its peer, marked and
// with MTU mtu, so that neither name ever exists unmarked: the pair is made
// under temporary names (wellknown.TempLinkName), both get their alias and MTU, and then
// the peer and the lower are renamed (links are down when new, and a down
// link may be renamed). A peer of that name left by an earlier, interrupted
// run that carries the peer alias is deleted first (with its temporary lower
// end); one without the alias is an error. An agent killed before the last
// rename leaves a marked veth named fpnew<hex>, which Managed lists.
func (m *Manager) createMacvtapLower(name string, mtu int) (netlink.Link, error) {
	peerName := wellknown.LowerPeerName(name)
	if l, err := netlinksafe.LinkByName(peerName); err == nil {
		if l.Attrs().Alias != m.peerAlias() {
			return nil, fmt.Errorf("failed to create macvtap lower device %s: its peer's name %s is taken by a %s link with alias %q, not made by the agent: left unchanged",
				name, peerName, l.Type(), l.Attrs().Alias)
		}
		if err := netlink.LinkDel(l); err != nil {
			return nil, fmt.Errorf("failed to delete the stale peer %s of macvtap lower device %s: %w", peerName, name, err)
		}
		m.Log.Info("Deleted the stale peer of a macvtap lower device", "peer", peerName, "lower", name)
	} else if !isLinkNotFound(err) {
		return nil, fmt.Errorf("failed to look up link %s: %w", peerName, err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("failed to create macvtap lower device %s: %w", name, err)
	}
	tmp, tmpPeer := wellknown.TempLinkName([4]byte(rnd[:4])), wellknown.TempLinkName([4]byte(rnd[4:]))
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: tmp, MTU: mtu}, PeerName: tmpPeer, PeerMTU: uint32(mtu)}); err != nil {
		return nil, fmt.Errorf("failed to create macvtap lower device %s (as veth %s/%s): %w", name, tmp, tmpPeer, err)
	}
	err := func() error {
		for _, step := range []struct{ link, alias, to string }{
			{tmpPeer, m.peerAlias(), peerName}, {tmp, m.linuxAlias(), name},
		} {
			l, err := netlink.LinkByName(step.link)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetAlias(l, step.alias); err != nil {
				return err
			}
			if err := netlink.LinkSetName(l, step.to); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		// Every step above leaves the lower end named tmp until the last
		// one succeeds, and deleting one end of a veth takes the pair.
		if l, lerr := netlink.LinkByName(tmp); lerr == nil {
			_ = netlink.LinkDel(l)
		}
		return nil, fmt.Errorf("failed to create macvtap lower device %s (made as veth %s/%s, marked, then renamed): %w", name, tmp, tmpPeer, err)
	}
	m.Log.Info("Created macvtap lower device", "lower", name, "peer", peerName, "mtu", mtu)
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("failed to look up macvtap lower device %s after creating it: %w", name, err)
	}
	return link, nil
}

// inspectMacvtap describes an existing lower device. Up is true when the
// lower and its peer are both up (the lower has carrier only then). Ports
// stays empty: the macvtaps live in the pods' network namespaces, where the
// host namespace cannot list them.
func (m *Manager) inspectMacvtap(link netlink.Link) (State, error) {
	a := link.Attrs()
	st := State{
		Name:     a.Name,
		Datapath: fastpathv1alpha1.DatapathMacvtap,
		Exists:   true,
		MTU:      a.MTU,
		Up:       a.Flags&net.FlagUp != 0,
		Managed:  a.Alias == m.linuxAlias(),
	}
	if !st.Managed {
		return st, nil
	}
	peer, err := m.lowerPeer(link)
	if err != nil {
		st.Up = false
		st.Message = err.Error()
		return st, nil
	}
	if peer.Attrs().Flags&net.FlagUp == 0 {
		st.Up = false
		st.Message = fmt.Sprintf("its peer %s is down, so it has no carrier", peer.Attrs().Name)
	}
	return st, nil
}

// managedMacvtap lists the marked veths: the agent's macvtap lower devices.
func (m *Manager) managedMacvtap(links []netlink.Link) ([]State, error) {
	var out []State
	for _, l := range links {
		if l.Type() != linkTypeVeth || l.Attrs().Alias != m.linuxAlias() {
			continue
		}
		st, err := m.inspectMacvtap(l)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b State) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
