package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// ErrBridgeMissing is wrapped by Datapath.BridgeMTU when the bridge does not
// exist.
var ErrBridgeMissing = errors.New("bridge missing")

// Port is a port of the node bridge that names the attachment it belongs to.
type Port struct {
	HostIf, Network, ContainerID, IfName string
}

// Datapath is one netconf "datapath" as the plugin's verbs see it: how the
// pod interface of an attachment is made, checked, found again and removed.
// Package plugin maps netconf "datapath" to an implementation in one place:
// LinuxBridge and OVS make a veth pair whose host end becomes a port of a
// Bridge; Macvtap makes a bridge-mode macvtap on a lower device directly in
// the pod's network namespace. Its methods act in the caller's network
// namespace (the host's) unless they take the pod's.
type Datapath interface {
	// Prepare reads the device the pod interfaces hang off (the bridge, the
	// macvtap lower device) and refuses conf when that device cannot carry
	// it. A missing device is a BridgeMissingError with code
	// types.ErrTryAgainLater (11); one the node agent did not make a
	// NotMarkedError (7); an MTU (bytes) above the device's, or offloads or
	// a deviceID the datapath cannot honour, a *types.Error with code
	// types.ErrInvalidNetworkConfig (7).
	Prepare(ctx context.Context, conf *netconf.NetConf) error
	// Record fills in the fields of a that name what Create makes outside
	// the pod (state.Attachment HostIfName, OVSSocket), for DEL and GC to
	// find it; the caller saves a before Create.
	Record(a *state.Attachment)
	// Create makes the pod interface a.IfName in netns (at a.Netns) with
	// conf's MTU and offloads and the MAC a.MAC ("" lets the kernel
	// choose), joins it to the datapath and sets it up (the container
	// interface stays without addresses); pod is "<namespace>/<name>" or "".
	// It sets a.MAC to the address the interface got and returns the CNI
	// result's interfaces, the container interface last. undo removes what
	// Create made: it is not nil as soon as anything was made, also together
	// with an error, and it is what the ADD's rollback runs.
	Create(ctx context.Context, netns ns.NetNS, a *state.Attachment, conf *netconf.NetConf, pod string) (ifaces []*current.Interface, undo func(context.Context) error, err error)
	// CheckDevice is CHECK's host side of the complete attachment a: the
	// device still exists (a BridgeMissingError with code 11 when not) and
	// its MTU allows conf's, and what a has outside the pod is as Create
	// and ADD left it.
	CheckDevice(ctx context.Context, conf *netconf.NetConf, a *state.Attachment) error
	// CheckInterface is CHECK's pod side: in netns, a.IfName is the
	// interface Create made, up, with conf's MTU and offloads and, when mac
	// is not "", that MAC. Call it after CheckDevice.
	CheckInterface(netns ns.NetNS, conf *netconf.NetConf, a *state.Attachment, mac string) error
	// Exists says why the complete attachment a can no longer be handed
	// out again by a repeated ADD (its interface is gone, e.g. with its
	// netns); nil when it is still there.
	Exists(a *state.Attachment) error
	// Remove removes what the attachment a has on the node (DEL, GC and the
	// reclaim of an unfinished ADD); what is already gone is not an error.
	// On an error (e.g. OVSDB did not answer within ctx) the caller keeps
	// a's record, which names what may be left, and fails.
	Remove(ctx context.Context, a *state.Attachment) error
	// Sweep removes, for GC, what the datapath can find of attachments of
	// network that have no record and that keep does not hold valid (e.g.
	// OVS ports that survived a reboot); portSecurity says whether their
	// ports carry port security rules. The error joins every failure.
	Sweep(ctx context.Context, network string, keep func(Port) bool, portSecurity bool) error
	// Status returns nil, or a *types.Error with code ErrPluginNotAvailable
	// (50) or ErrLimitedConnectivity (51).
	Status(ctx context.Context) error
	// Close releases what the datapath holds (the OVSDB connection).
	Close()
}

// Bridge is the switch side of an attachment whose pod interface is a veth
// pair: one implementation per bridge datapath (the Linux bridge in
// package plugin, Open vSwitch in package ovs). Its methods act in the
// caller's network namespace (the host's).
type Bridge interface {
	// BridgeMTU returns the bridge MTU in bytes; the error wraps
	// ErrBridgeMissing when the bridge does not exist, and is a
	// NotMarkedError when the node agent did not make it.
	BridgeMTU(ctx context.Context) (int, error)
	// Preflight refuses configurations the bridge cannot carry (a
	// *types.Error).
	Preflight(ctx context.Context, offloads map[string]bool) error
	// Attach puts host, the host end of attachment a, on the bridge, sets
	// its alias and sets it up; pod is "<namespace>/<name>" when the runtime
	// passed them, else "".
	Attach(ctx context.Context, a *state.Attachment, host HostEnd, pod string) error
	// Detach takes hostIf off the bridge (off any bridge for OVS); a missing
	// port is not an error.
	Detach(ctx context.Context, hostIf string) error
	// Verify checks that hostIf is a port of the bridge.
	Verify(ctx context.Context, hostIf string) error
	// Ports lists the bridge ports that carry fastpath attachment
	// identities; a missing bridge has none.
	Ports(ctx context.Context) ([]Port, error)
	// Status returns nil, or a *types.Error with code ErrPluginNotAvailable
	// (50) or ErrLimitedConnectivity (51).
	Status(ctx context.Context) error
	// Close releases what the bridge holds (the OVSDB connection).
	Close()
}

// Opener opens the Bridge named bridge on a switch reached at endpoint (the
// OVSDB endpoint for OVS); ctx bounds the connection. The error of a switch
// that does not answer says so.
type Opener func(ctx context.Context, endpoint, bridge string) (Bridge, error)

// NotMarkedError refuses a bridge the node agent did not make, e.g. the
// node's own cni0 or br-ex: a tenant's pod must never join it. Code 7
// (ErrInvalidNetworkConfig): no retry makes it ours. what says why, e.g.
// "its alias is \"\", not fastpath.io/managed-by=<agent>".
func NotMarkedError(bridge, datapath, what string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
		"bridge %s (datapath %s) was not made by the node agent fastpath-agent (%s): refusing to attach to it; "+
			"node bridges come from a FastPathNetwork, which the agent creates and marks", bridge, datapath, what), "")
}

// MACTakenError refuses a pod interface MAC (the one the guest of a
// managedTap or tap binding takes too) that holder already has on device
// ("bridge br0", "macvtap lower device fpl0"): a port, the device itself,
// or another attachment's record (issue 39, item 4). Two ports with one
// MAC on one switch steal each other's frames, and port security would pin
// both to the same identity. Code 7 (ErrInvalidNetworkConfig): the same
// request fails the same way until the holder goes.
func MACTakenError(mac net.HardwareAddr, device, holder string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
		"MAC %s is already on %s (port %s): refusing to give it to a second port, where it would take the first one's frames; "+
			"give the VM interface another macAddress, or none", mac, device, holder), "")
}

// BridgeMissingError is the error for a bridge that does not exist: the
// plugin never creates bridges, the node agent does. code is
// types.ErrTryAgainLater (11) for ADD, since the agent may still be creating
// it, and types.ErrPluginNotAvailable (50) for STATUS.
func BridgeMissingError(bridge, datapath string, code uint) *types.Error {
	return types.NewError(code, fmt.Sprintf(
		"bridge %s (datapath %s) does not exist on this node: the node agent fastpath-agent creates it; "+
			"the FastPathNode status of this node shows why it has not", bridge, datapath), "")
}
