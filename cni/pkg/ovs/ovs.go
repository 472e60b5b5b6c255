package ovs

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/stdr"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// logger writes libovsdb's log lines to stderr, like the plugin's own:
// stdout carries only the CNI result.
var logger = log.New(os.Stderr, "fastpath: ", log.LstdFlags|log.Lmicroseconds)

// Open connects to OVSDB at endpoint (unix:<path>, tcp:<host>:<port>,
// ssl:<host>:<port>) and returns the datapath of the OVS bridge named bridge;
// ctx bounds the connection. Its error wraps ovsdb.ErrUnreachable and asks
// whether Open vSwitch runs. It is a datapath.Opener.
func Open(ctx context.Context, endpoint, bridge string) (datapath.Bridge, error) {
	c, err := ovsdb.Connect(ctx, endpoint, stdr.New(logger))
	if err != nil {
		return nil, fmt.Errorf("%w (is Open vSwitch running? the node agent fastpath-agent reports it in the FastPathNode status)", err)
	}
	return &Bridge{c: c, bridge: bridge}, nil
}

// Bridge is an OVS bridge reached through one OVSDB connection: the
// datapath.Bridge of datapath OVS.
type Bridge struct {
	c      *ovsdb.Client
	bridge string
}

// BridgeMTU returns the MTU of the bridge's internal interface
// (ovsdb.Client.BridgeMTU); it also refuses (datapath.NotMarkedError) a
// bridge without the agent's external_ids key.
func (d *Bridge) BridgeMTU(ctx context.Context) (int, error) {
	br, err := d.c.RequireBridge(ctx, d.bridge)
	if errors.Is(err, ovsdb.ErrBridgeNotFound) {
		return 0, fmt.Errorf("%w: %w", datapath.ErrBridgeMissing, err)
	}
	if err != nil {
		return 0, err
	}
	if br.ExternalIDs[wellknown.MarkerKey] == "" {
		return 0, datapath.NotMarkedError(d.bridge, netconf.DatapathOVS, "it has no external_ids:"+wellknown.MarkerKey)
	}
	mtu, err := d.c.BridgeMTU(ctx, d.bridge)
	if errors.Is(err, ovsdb.ErrBridgeNotFound) {
		return 0, fmt.Errorf("%w: %w", datapath.ErrBridgeMissing, err)
	}
	return mtu, err
}

// Preflight refuses checksum offload, TSO and GRO (offloads keyed as
// netconf.OffloadKeys) on a userspace-datapath bridge
// (datapath_type=netdev) whose Open_vSwitch row lacks
// other_config:userspace-tso-enable=true. ovs-vswitchd then reads the veth
// through AF_PACKET without virtio-net headers, so it forwards frames with
// unfinished checksums (txChecksum, tso) and GRO super-frames as they are,
// and TCP stalls (the measurements: docs/design.md §4.2).
func (d *Bridge) Preflight(ctx context.Context, offloads map[string]bool) error {
	if !offloads[wellknown.OffloadTXChecksum] && !offloads[wellknown.OffloadTSO] && !offloads[wellknown.OffloadGRO] {
		return nil
	}
	br, err := d.c.RequireBridge(ctx, d.bridge)
	if err != nil {
		return err
	}
	if br.DatapathType != ovsdb.DatapathNetdev {
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

// Attach sets the alias of host, adds it as a port of the bridge with the
// attachment's identity in the port's external_ids (and the MAC in the
// interface's attached-mac), waits until ovs-vswitchd has opened it
// (ovsdb.Client.AddPort), and then sets it up: ovs-vswitchd applies the
// removal of an earlier port of the same name (a reclaimed or just deleted
// attachment) asynchronously, and closing that port's netdev restores its
// interface flags by name (found by the soak, it set a new host end down);
// once the new port is open that removal is behind us.
//
// It first refuses (datapath.MACTakenError) a pod interface MAC (a.MAC)
// that another port of the bridge has as its interface's attached-mac or
// mac_in_use (ovsdb.Client.MACHolder; issue 39, item 4): the MAC learning
// of the bridge would send the first port's frames to whichever of the two
// spoke last. OVSDB is what every port of the bridge is in, whoever added
// it (another plugin, a port whose record was lost), and attached-mac is
// where OVS integrations put the MAC behind a port; the ovs-vswitchd MAC
// learning table (ovs-appctl fdb/show) is not in OVSDB and is not read.
// The caller's rollback removes the veth.
func (d *Bridge) Attach(ctx context.Context, a *state.Attachment, host datapath.HostEnd, pod string) error {
	mac, err := net.ParseMAC(a.MAC)
	if err != nil {
		return fmt.Errorf("failed to parse MAC %q of %s: %w", a.MAC, a.IfName, err)
	}
	holder, err := d.c.MACHolder(ctx, d.bridge, mac, host.Name)
	if err != nil {
		return err
	}
	if holder != "" {
		return datapath.MACTakenError(mac, "bridge "+d.bridge, holder)
	}
	if err := host.SetLink(0, false); err != nil {
		return err
	}
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
	if err := d.c.AddPort(ctx, d.bridge, host.Name, portIDs, ifaceIDs); err != nil {
		return err
	}
	return datapath.HostEnd{Index: host.Index, Name: host.Name}.SetLink(0, true)
}

// Detach removes the port hostIf from every bridge that has it.
func (d *Bridge) Detach(ctx context.Context, hostIf string) error {
	return d.c.DeletePort(ctx, hostIf)
}

// Verify checks that hostIf is a port of the bridge and that ovs-vswitchd
// opened it (ofport assigned).
func (d *Bridge) Verify(ctx context.Context, hostIf string) error {
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

// Ports lists the plugin's ports of the bridge with the attachment each
// names in its external_ids.
func (d *Bridge) Ports(ctx context.Context) ([]datapath.Port, error) {
	ports, err := d.c.Ports(ctx, d.bridge)
	if errors.Is(err, ovsdb.ErrBridgeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]datapath.Port, 0, len(ports))
	for _, p := range ports {
		out = append(out, datapath.Port{HostIf: p.Name, Network: p.ExternalIDs[ovsdb.KeyNetwork],
			ContainerID: p.ExternalIDs[ovsdb.KeyContainerID], IfName: p.ExternalIDs[ovsdb.KeyIfName]})
	}
	return out, nil
}

// Status checks that OVSDB answers and the bridge exists.
func (d *Bridge) Status(ctx context.Context) error {
	if err := d.c.Echo(ctx); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	if _, err := d.c.RequireBridge(ctx, d.bridge); err != nil {
		if errors.Is(err, ovsdb.ErrBridgeNotFound) {
			return datapath.BridgeMissingError(d.bridge, netconf.DatapathOVS, types.ErrPluginNotAvailable)
		}
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	return nil
}

// Close closes the OVSDB connection.
func (d *Bridge) Close() { d.c.Close() }
