package datapath

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// ErrBridgeMissing is wrapped by Datapath.BridgeMTU when the bridge does not
// exist.
var ErrBridgeMissing = errors.New("bridge missing")

// MarkerKey marks the bridges the node agent made: the prefix of a Linux
// bridge's alias ("fastpath.io/managed-by=<agent>") and an OVS bridge's
// external_ids key. It equals internal/datapath/bridge.MarkerKey
// (TestMarkerKeyIsTheAgents); the plugin does not import the agent.
const MarkerKey = "fastpath.io/managed-by"

// Port is a port of the node bridge that names the attachment it belongs to.
type Port struct {
	HostIf, Network, ContainerID, IfName string
}

// Datapath is the bridge side of an attachment: one implementation per
// netconf "datapath". Its methods act in the caller's network namespace (the
// host's).
type Datapath interface {
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
	// Close releases what the datapath holds (the OVSDB connection).
	Close()
}

// Opener opens the datapath of bridge on a switch reached at endpoint (the
// OVSDB endpoint for OVS); ctx bounds the connection. The error of a switch
// that does not answer says so.
type Opener func(ctx context.Context, endpoint, bridge string) (Datapath, error)

// NotMarkedError refuses a bridge the node agent did not make, e.g. the
// node's own cni0 or br-ex: a tenant's pod must never join it. Code 7
// (ErrInvalidNetworkConfig): no retry makes it ours. what says why, e.g.
// "its alias is \"\", not fastpath.io/managed-by=<agent>".
func NotMarkedError(bridge, datapath, what string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
		"bridge %s (datapath %s) was not made by the node agent fastpath-agent (%s): refusing to attach to it; "+
			"node bridges come from a FastPathNetwork, which the agent creates and marks", bridge, datapath, what), "")
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
