package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/stdr"

	"github.com/fastpath-io/fastpath/cni/pkg/linuxbridge"
	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// errBridgeMissing is wrapped by datapath.bridgeMTU when the bridge does not exist.
var errBridgeMissing = errors.New("bridge missing")

// bridgeMarkerKey marks the bridges the node agent made: the prefix of a
// Linux bridge's alias ("fastpath.io/managed-by=<agent>") and an OVS
// bridge's external_ids key. It equals internal/datapath/bridge.MarkerKey
// (TestBridgeMarkerKeyIsTheAgents); the plugin does not import the agent.
const bridgeMarkerKey = "fastpath.io/managed-by"

// notMarkedError refuses a bridge the node agent did not make, e.g. the
// node's own cni0 or br-ex: a tenant's pod must never join it. Code 7
// (ErrInvalidNetworkConfig): no retry makes it ours.
func notMarkedError(bridge, datapath, what string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
		"bridge %s (datapath %s) was not made by the node agent fastpath-agent (%s): refusing to attach to it; "+
			"node bridges come from a FastPathNetwork, which the agent creates and marks", bridge, datapath, what), "")
}

// bridgePort is a port of the node bridge that names the attachment it belongs to.
type bridgePort struct {
	hostIf, network, containerID, ifName string
}

// datapath is the bridge side of an attachment: one implementation per
// netconf "datapath".
type datapath interface {
	// bridgeMTU returns the bridge MTU in bytes; the error wraps
	// errBridgeMissing when the bridge does not exist.
	bridgeMTU(ctx context.Context) (int, error)
	// preflight refuses configurations the bridge cannot carry.
	preflight(ctx context.Context, conf *netconf.NetConf) error
	// attach puts the host end a.HostIfName on the bridge.
	attach(ctx context.Context, a *state.Attachment, pod string) error
	// detach takes hostIf off the bridge; a missing port is not an error.
	detach(ctx context.Context, hostIf string) error
	// verify checks that hostIf is a port of the bridge.
	verify(ctx context.Context, hostIf string) error
	// ports lists the bridge ports that carry fastpath attachment identities.
	ports(ctx context.Context) ([]bridgePort, error)
	// status returns nil, or a *types.Error with code ErrPluginNotAvailable
	// (50) or ErrLimitedConnectivity (51).
	status(ctx context.Context) error
	close()
}

// openDatapath returns the datapath of conf; for OVS it connects to OVSDB.
func openDatapath(ctx context.Context, conf *netconf.NetConf) (datapath, error) {
	switch conf.Datapath {
	case netconf.DatapathLinuxBridge:
		return &linuxBridgeDatapath{bridge: conf.Bridge}, nil
	case netconf.DatapathMacvtap:
		return &macvtapDatapath{lower: conf.Bridge}, nil
	case netconf.DatapathOVS:
		c, err := connectOVS(ctx, conf.OVS.Socket)
		if err != nil {
			return nil, fmt.Errorf("%w (is Open vSwitch running? the node agent fastpath-agent reports it in the FastPathNode status)", err)
		}
		return &ovsDatapath{c: c, bridge: conf.Bridge}, nil
	}
	return nil, fmt.Errorf("failed to open datapath %q: unknown datapath", conf.Datapath)
}

// connectOVS connects to OVSDB at socket (internal/datapath/ovsdb, the
// client the node agent uses too); libovsdb logs to stderr like the plugin.
func connectOVS(ctx context.Context, socket string) (*ovsdb.Client, error) {
	return ovsdb.Connect(ctx, socket, stdr.New(logger))
}

// bridgeMissingError is the error for a bridge that does not exist: the
// plugin never creates bridges, the node agent does. Code 11 (try again
// later) because the agent may still be creating it.
func bridgeMissingError(conf *netconf.NetConf, code uint) *types.Error {
	return types.NewError(code, fmt.Sprintf(
		"bridge %s (datapath %s) does not exist on this node: the node agent fastpath-agent creates it; "+
			"the FastPathNode status of this node shows why it has not", conf.Bridge, conf.Datapath), "")
}

type linuxBridgeDatapath struct {
	bridge string
}

// bridgeMTU also refuses (notMarkedError) a bridge without the agent's alias.
func (d *linuxBridgeDatapath) bridgeMTU(context.Context) (int, error) {
	br, err := linuxbridge.Bridge(d.bridge)
	if errors.Is(err, linuxbridge.ErrBridgeNotFound) {
		return 0, fmt.Errorf("%w: %w", errBridgeMissing, err)
	}
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(br.Alias, bridgeMarkerKey+"=") {
		return 0, notMarkedError(d.bridge, netconf.DatapathLinuxBridge, fmt.Sprintf("its alias is %q, not %s=<agent>", br.Alias, bridgeMarkerKey))
	}
	return br.MTU, nil
}

func (d *linuxBridgeDatapath) preflight(context.Context, *netconf.NetConf) error { return nil }

func (d *linuxBridgeDatapath) attach(_ context.Context, a *state.Attachment, _ string) error {
	br, err := linuxbridge.Bridge(d.bridge)
	if err != nil {
		return err
	}
	return linuxbridge.Attach(a.HostIfName, br)
}

// detach is a no-op: deleting the veth takes it off the bridge.
func (d *linuxBridgeDatapath) detach(context.Context, string) error { return nil }

func (d *linuxBridgeDatapath) verify(_ context.Context, hostIf string) error {
	return linuxbridge.Verify(hostIf, d.bridge)
}

func (d *linuxBridgeDatapath) ports(context.Context) ([]bridgePort, error) {
	br, err := linuxbridge.Bridge(d.bridge)
	if errors.Is(err, linuxbridge.ErrBridgeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	links, err := linuxbridge.Ports(br)
	if err != nil {
		return nil, err
	}
	var out []bridgePort
	for _, l := range links {
		if p, ok := parseAlias(l.Attrs().Alias); ok {
			p.hostIf = l.Attrs().Name
			out = append(out, p)
		}
	}
	return out, nil
}

func (d *linuxBridgeDatapath) status(context.Context) error {
	br, err := linuxbridge.Bridge(d.bridge)
	if errors.Is(err, linuxbridge.ErrBridgeNotFound) {
		return bridgeMissingError(&netconf.NetConf{Bridge: d.bridge, Datapath: netconf.DatapathLinuxBridge}, types.ErrPluginNotAvailable)
	}
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	if br.Flags&net.FlagUp == 0 {
		return types.NewError(types.ErrLimitedConnectivity, fmt.Sprintf(
			"bridge %s is down: its ports do not forward; the node agent fastpath-agent sets it up", d.bridge), "")
	}
	return nil
}

func (d *linuxBridgeDatapath) close() {}

type ovsDatapath struct {
	c      *ovsdb.Client
	bridge string
}

// bridgeMTU also refuses (notMarkedError) a bridge without the agent's
// external_ids key.
func (d *ovsDatapath) bridgeMTU(ctx context.Context) (int, error) {
	br, err := d.c.RequireBridge(ctx, d.bridge)
	if errors.Is(err, ovsdb.ErrBridgeNotFound) {
		return 0, fmt.Errorf("%w: %w", errBridgeMissing, err)
	}
	if err != nil {
		return 0, err
	}
	if br.ExternalIDs[bridgeMarkerKey] == "" {
		return 0, notMarkedError(d.bridge, netconf.DatapathOVS, "it has no external_ids:"+bridgeMarkerKey)
	}
	mtu, err := d.c.BridgeMTU(ctx, d.bridge)
	if errors.Is(err, ovsdb.ErrBridgeNotFound) {
		return 0, fmt.Errorf("%w: %w", errBridgeMissing, err)
	}
	return mtu, err
}

// preflight refuses checksum offload and GRO on a userspace-datapath bridge
// (datapath_type=netdev) whose Open_vSwitch row lacks
// other_config:userspace-tso-enable=true. ovs-vswitchd then reads the veth
// through AF_PACKET without virtio-net headers, so it forwards frames with
// unfinished checksums (txChecksum, tso) and GRO super-frames as they are, and
// TCP stalls (measured on OVS 3.1 / Linux 6.18: 0 bytes/s with txChecksum on,
// ~2 Mbit/s with GRO on, 830 Mbit/s with both off).
func (d *ovsDatapath) preflight(ctx context.Context, conf *netconf.NetConf) error {
	if !*conf.Offloads.TXChecksum && !*conf.Offloads.TSO && !*conf.Offloads.GRO {
		return nil
	}
	br, err := d.c.RequireBridge(ctx, d.bridge)
	if err != nil {
		return err
	}
	if br.DatapathType != "netdev" {
		return nil
	}
	tso, err := d.c.UserspaceTSO(ctx)
	if err != nil {
		return err
	}
	if !tso {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
			"OVS bridge %s uses the userspace datapath (datapath_type=netdev) without Open_vSwitch other_config:userspace-tso-enable=true, "+
				"so TCP from veths with txChecksum, tso or gro on would stall: enable userspace TSO and restart ovs-vswitchd "+
				"(the node agent fastpath-agent does), or set offloads txChecksum, tso and gro false", d.bridge), "")
	}
	return nil
}

func (d *ovsDatapath) attach(ctx context.Context, a *state.Attachment, pod string) error {
	portIDs := map[string]string{
		ovsdb.KeyOwner:       ovsdb.Owner,
		ovsdb.KeyNetwork:     a.Network,
		ovsdb.KeyContainerID: a.ContainerID,
		ovsdb.KeyIfName:      a.IfName,
		ovsdb.KeyNetns:       a.Netns,
	}
	if pod != "" {
		portIDs[ovsdb.KeyPod] = pod
	}
	ifaceIDs := map[string]string{ovsdb.KeyOwner: ovsdb.Owner}
	if a.MAC != "" {
		ifaceIDs[ovsdb.KeyAttachedMAC] = a.MAC
	}
	return d.c.AddPort(ctx, d.bridge, a.HostIfName, portIDs, ifaceIDs)
}

func (d *ovsDatapath) detach(ctx context.Context, hostIf string) error {
	return d.c.DeletePort(ctx, hostIf)
}

func (d *ovsDatapath) verify(ctx context.Context, hostIf string) error {
	on, err := d.c.PortOnBridge(ctx, d.bridge, hostIf)
	if err != nil {
		return err
	}
	if !on {
		return fmt.Errorf("failed to verify %s: it is not a port of OVS bridge %s", hostIf, d.bridge)
	}
	i, err := d.c.Interface(ctx, hostIf)
	if err != nil {
		return err
	}
	if i == nil || i.Ofport == nil || *i.Ofport <= 0 {
		reason := "ovs-vswitchd has not opened it"
		if i != nil && i.Error != nil {
			reason = "ovs-vswitchd: " + *i.Error
		}
		return fmt.Errorf("failed to verify %s on OVS bridge %s: %s", hostIf, d.bridge, reason)
	}
	return nil
}

func (d *ovsDatapath) ports(ctx context.Context) ([]bridgePort, error) {
	ports, err := d.c.Ports(ctx, d.bridge)
	if errors.Is(err, ovsdb.ErrBridgeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]bridgePort, 0, len(ports))
	for _, p := range ports {
		out = append(out, bridgePort{hostIf: p.Name, network: p.ExternalIDs[ovsdb.KeyNetwork],
			containerID: p.ExternalIDs[ovsdb.KeyContainerID], ifName: p.ExternalIDs[ovsdb.KeyIfName]})
	}
	return out, nil
}

func (d *ovsDatapath) status(ctx context.Context) error {
	if err := d.c.Echo(ctx); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	if _, err := d.c.RequireBridge(ctx, d.bridge); err != nil {
		if errors.Is(err, ovsdb.ErrBridgeNotFound) {
			return bridgeMissingError(&netconf.NetConf{Bridge: d.bridge, Datapath: netconf.DatapathOVS}, types.ErrPluginNotAvailable)
		}
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	return nil
}

func (d *ovsDatapath) close() { d.c.Close() }
