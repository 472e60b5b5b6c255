package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// Marker defaults. The marker key is wellknown.MarkerKey.
const (
	// DefaultMarker is the marker value of Manager.Marker when it is empty.
	DefaultMarker = "fastpath-agent"
	// DefaultMTUTimeout bounds how long Ensure waits for ovs-vswitchd to
	// apply an OVS bridge's mtu_request.
	DefaultMTUTimeout = 10 * time.Second
)

// ErrOVSUnreachable is wrapped by Ensure and Managed when an OVS bridge is
// involved and OVSDB does not answer (or Manager.OVS is nil).
var ErrOVSUnreachable = ovsdb.ErrUnreachable

// Spec is a bridge the node should have.
type Spec struct {
	// Name of the bridge (1-15 characters, IFNAMSIZ); on datapath Macvtap the
	// lower device.
	Name string
	// Datapath is LinuxBridge, OVS or Macvtap (a macvtap lower device: a
	// marked veth whose peer wellknown.LowerPeerName provides carrier; see macvtap.go).
	Datapath fastpathv1alpha1.Datapath
	// MTU in bytes (wellknown.MinMTU-wellknown.MaxMTU from the API).
	MTU int
}

// State is what the node has for one bridge, as read back after Ensure (or by
// Managed).
type State struct {
	// Name of the bridge (of the macvtap lower device).
	Name string
	// Datapath is LinuxBridge, OVS or Macvtap.
	Datapath fastpathv1alpha1.Datapath
	// Exists is true when the bridge is there.
	Exists bool
	// MTU is the MTU in bytes the kernel (Linux bridge) or ovs-vswitchd (OVS
	// internal interface) reports; 0 when unknown.
	MTU int
	// Up is true when the bridge's interface is administratively up (for a
	// macvtap lower device: it and its peer, so that it has carrier).
	Up bool
	// Ports are the names of the ports that carry traffic: the Linux bridge's
	// enslaved links, or the OVS bridge's ports other than its internal one;
	// none for a macvtap lower device (its macvtaps are in the pods'
	// network namespaces, which the host namespace cannot list).
	Ports []string
	// Created is true when this Ensure call created the bridge.
	Created bool
	// Managed is true when the bridge carries the agent's marker.
	Managed bool
	// Message notes something an admin should know that does not make the
	// bridge unusable (e.g. a datapath_type left unchanged).
	Message string
}

// Ready reports whether s satisfies want: the bridge exists, is up and has
// exactly the wanted MTU.
func (s State) Ready(want Spec) bool {
	return s.Exists && s.Up && s.MTU == want.MTU
}

// Manager ensures Linux and OVS bridges. The zero value manages Linux bridges
// only (OVS bridges fail with ErrOVSUnreachable). Its methods are safe for
// concurrent use as long as each bridge is ensured by one caller at a time
// (the agent reconciles with one worker).
type Manager struct {
	// OVS reaches OVSDB; nil when the node has no Open vSwitch.
	OVS *ovsdb.Conn
	// OVSDatapathType is the datapath_type of OVS bridges it creates:
	// ovsdb.DatapathSystem (default) or ovsdb.DatapathNetdev.
	OVSDatapathType string
	// Marker marks the bridges it creates; empty means DefaultMarker. Tests
	// use a unique marker so that they see only their own bridges.
	Marker string
	// MTUTimeout bounds the wait for ovs-vswitchd; 0 means DefaultMTUTimeout.
	MTUTimeout time.Duration
	// Log receives a line for every change made.
	Log logr.Logger
}

func (m *Manager) marker() string {
	if m.Marker == "" {
		return DefaultMarker
	}
	return m.Marker
}

// linuxAlias is the IFLA_IFALIAS value of a Linux bridge the agent created.
func (m *Manager) linuxAlias() string { return wellknown.MarkerKey + "=" + m.marker() }

func (m *Manager) datapathType() string {
	if m.OVSDatapathType == "" {
		return ovsdb.DatapathSystem
	}
	return m.OVSDatapathType
}

func (m *Manager) mtuTimeout() time.Duration {
	if m.MTUTimeout <= 0 {
		return DefaultMTUTimeout
	}
	return m.MTUTimeout
}

// Ensure makes the bridge spec exist, up, with spec.MTU, creating it when it
// is missing, and returns its state read back afterwards. It never deletes or
// recreates a bridge, and never touches one without its marker (the error
// then wraps ErrNotMarked). The MTU is set to exactly spec.MTU (raised or lowered:
// a bridge's own MTU does not limit the frames it forwards between ports).
// It fails when a link of that name exists and is not a bridge of the wanted
// datapath, when OVSDB is unreachable (wrapping ErrOVSUnreachable), or when
// the kernel or ovs-vswitchd refuses the MTU; the returned State then holds
// what was observed.
func (m *Manager) Ensure(ctx context.Context, spec Spec) (State, error) {
	switch spec.Datapath {
	case fastpathv1alpha1.DatapathLinuxBridge:
		return m.ensureLinux(spec)
	case fastpathv1alpha1.DatapathOVS:
		return m.ensureOVS(ctx, spec)
	case fastpathv1alpha1.DatapathMacvtap:
		return m.ensureMacvtap(spec)
	default:
		return State{Name: spec.Name, Datapath: spec.Datapath}, fmt.Errorf("failed to ensure bridge %s: unknown datapath %q", spec.Name, spec.Datapath)
	}
}

// Managed returns the state of every bridge carrying the agent's marker,
// Linux bridges first, then macvtap lower devices, then OVS bridges, each
// group sorted by name. OVS bridges are listed only when Manager.OVS is set;
// an unreachable OVSDB is reported in the error (wrapping ErrOVSUnreachable)
// next to the Linux bridges and lower devices found.
func (m *Manager) Managed(ctx context.Context) ([]State, error) {
	out, err := m.managedLinux()
	if err != nil {
		return nil, err
	}
	links, err := netlinksafe.LinkList()
	if err != nil {
		return nil, fmt.Errorf("failed to list links: %w", err)
	}
	lowers, err := m.managedMacvtap(links)
	if err != nil {
		return nil, err
	}
	out = append(out, lowers...)
	if m.OVS == nil {
		return out, nil
	}
	ovs, err := m.managedOVS(ctx)
	return append(out, ovs...), err
}

// ErrNotMarked is wrapped by Ensure when a bridge of the wanted name exists
// without the agent's marker: the agent never adopts, changes or deletes it.
var ErrNotMarked = errors.New("bridge not made by fastpath-agent")

// errOVSNotConfigured is returned for OVS bridges when Manager.OVS is nil.
var errOVSNotConfigured = fmt.Errorf("no OVSDB endpoint configured: %w", ErrOVSUnreachable)

// Removed is what RemoveManaged deleted.
type Removed struct {
	// Links are the Linux bridges, macvtap lower devices and their peers
	// (and half-made lower devices, wellknown.TempLinkName) deleted, by name.
	Links []string
	// OVSBridges are the OVS bridges deleted, by name.
	OVSBridges []string
}

// RemoveManaged deletes every link carrying the agent's marker (a Linux
// bridge's or a macvtap lower device's alias wellknown.MarkerKey=<marker>,
// a lower device's peer's PeerMarkerKey=<marker>) and, when Manager.OVS is
// set, every OVS bridge whose external_ids carry it: what the agent made, for
// an uninstall (internal/node/cleanup). A link or bridge without exactly that
// marker is never touched, whatever its name. Deleting a bridge detaches
// its ports; the ports themselves are left. It goes on after a failed
// deletion and returns what it removed with the errors joined; an unreachable
// OVSDB wraps ErrOVSUnreachable.
func (m *Manager) RemoveManaged(ctx context.Context) (Removed, error) {
	var out Removed
	links, err := netlinksafe.LinkList()
	if err != nil {
		return out, fmt.Errorf("failed to list links: %w", err)
	}
	var errs []error
	for _, l := range links {
		a := l.Attrs()
		if !m.Marked(l) {
			continue
		}
		// Deleting one end of a veth deletes its peer, which may come later in links.
		if err := netlink.LinkDel(l); err != nil && !isLinkNotFound(err) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("failed to delete %s %s: %w", l.Type(), a.Name, err))
			continue
		}
		m.Log.Info("Deleted link", "link", a.Name, "type", l.Type())
		out.Links = append(out.Links, a.Name)
	}
	if m.OVS != nil {
		names, err := m.removeManagedOVS(ctx)
		out.OVSBridges = names
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// Marked reports whether link carries the agent's marker as RemoveManaged
// reads it: a Linux bridge or a veth (a macvtap lower device) whose alias is
// exactly wellknown.MarkerKey=<marker>, or a veth whose alias is exactly
// PeerMarkerKey=<marker> (a lower device's peer). It is what "made by the
// agent" means for a link, wherever the link is looked at (the harness's
// `cluster down` names such links left on a host).
func (m *Manager) Marked(link netlink.Link) bool {
	a := link.Attrs()
	return (link.Type() == linkTypeBridge || link.Type() == linkTypeVeth) && a.Alias == m.linuxAlias() ||
		link.Type() == linkTypeVeth && a.Alias == m.peerAlias()
}

// ErrInUse is wrapped by RemoveUnused when the bridge still has ports.
var ErrInUse = errors.New("bridge has ports")

// RemoveUnused deletes bridge name of datapath LinuxBridge or OVS when it
// carries the agent's marker and has no port (the state is read again
// here, not taken from an earlier Managed). A bridge without the marker is
// never touched (ErrNotMarked), one with a port neither (ErrInUse), and a
// macvtap lower device is not removed: its macvtaps live in the pods'
// network namespaces, which the host's cannot list. A missing bridge is not
// an error.
func (m *Manager) RemoveUnused(ctx context.Context, name string, datapath fastpathv1alpha1.Datapath) error {
	switch datapath {
	case fastpathv1alpha1.DatapathLinuxBridge:
		return m.removeLinux(name)
	case fastpathv1alpha1.DatapathOVS:
		return m.removeOVS(ctx, name)
	default:
		return fmt.Errorf("failed to remove bridge %s: datapath %q is not removed by the agent", name, datapath)
	}
}
