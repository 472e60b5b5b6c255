package emulation

import (
	"fmt"
	"net/netip"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Guest describes the running emulated guest of a VMI.
type Guest struct {
	// VMI is the namespace/name of the VMI (and of its VM).
	VMI types.NamespacedName
	// UID is the VMI's UID.
	UID types.UID
	// Pod is the emulated virt-launcher pod name.
	Pod string
	// NetNS is the guest's network namespace; Launcher the virt-launcher pod's.
	NetNS, Launcher *topology.NetNS
	// PodIP is the pod-network address; GuestIP the masquerade guest address.
	PodIP, GuestIP netip.Addr
	// Networks are the Multus networks, keyed by VMI network name.
	Networks map[string]GuestNetwork
	// CID is the vsock CID, 0 when the VMI has none.
	CID uint32
	// Real is the REAL guest with Options.Guests "qemu"; then NetNS is nil.
	Real *guests.Guest
}

// GuestNetwork is one Multus network as the guest sees it.
type GuestNetwork struct {
	// PodInterface is the launcher's interface the CNI made (CNI_IFNAME);
	// Interface the guest's.
	PodInterface, Interface string
	// NAD is "<namespace>/<name>" of the NetworkAttachmentDefinition.
	NAD string
	// MAC and IPs come from the CNI result.
	MAC string
	IPs []string
}

// Guest returns the running guest of the VMI key.
func (e *Emulator) Guest(key types.NamespacedName) (Guest, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.launchers[key]
	if l == nil {
		return Guest{}, false
	}
	g := Guest{VMI: key, UID: l.uid, Pod: l.podName, NetNS: l.guest, Launcher: l.netns, PodIP: l.podIP, Networks: map[string]GuestNetwork{}}
	if l.masq != nil {
		g.GuestIP = l.masq.GuestIP
	}
	for _, a := range l.nets {
		g.Networks[a.network] = GuestNetwork{PodInterface: a.podIf, Interface: a.guestIf, NAD: a.nad, MAC: a.mac, IPs: append([]string(nil), a.ips...)}
	}
	if l.cid != nil {
		g.CID = *l.cid
	}
	g.Real = l.real
	return g, true
}

// Guests returns every running guest, sorted by namespace/name.
func (e *Emulator) Guests() []Guest {
	e.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(e.launchers))
	for k := range e.launchers {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var out []Guest
	for _, k := range keys {
		if g, ok := e.Guest(k); ok {
			out = append(out, g)
		}
	}
	return out
}

// VSOCK returns the guest's vsock transport: the EMULATED AF_VSOCK of
// internal/vsock over UNIX sockets under Options.VSOCKRoot, bound to the
// guest's CID. Listen on it to play a guest service; Dial vsock.HostCID and
// a relay port to go through the node agent's relay.
func (e *Emulator) VSOCK(key types.NamespacedName) (*vsock.UnixTransport, error) {
	g, ok := e.Guest(key)
	if !ok {
		return nil, fmt.Errorf("failed to open the vsock of %s: no running guest", key)
	}
	if g.CID == 0 || e.opts.VSOCKRoot == "" {
		return nil, fmt.Errorf("failed to open the vsock of %s: the VMI has no vsock CID (autoattachVSOCK is not set)", key)
	}
	return vsock.NewUnixTransport(e.opts.VSOCKRoot, g.CID), nil
}
